#!/usr/bin/env bash
# Download the notebook stack as wheels for an offline GPU node (Python 3.12,
# x86_64, PyTorch already installed there). Run on a machine with internet:
#   scripts/wheelhouse.sh .whl        # then copy .whl/ to the node
# On the node:
#   scripts/offline_install.sh .whl   # installs into /tmp/site and prints the PYTHONPATH to export
set -euo pipefail
DEST=${1:-.whl}
PYVER=${PYVER:-3.12}
mkdir -p "$DEST"
python3 -m pip download --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_34_x86_64 -d "$DEST" \
    nbval ipywidgets plotly anywidget ipykernel nbclient nbformat jupyter_client nvidia-ml-py ninja
# Holistic Trace Analysis (05_ddp) without its dependencies: it asks for JupyterLab, which a node
# running notebooks through nbval does not need; what it imports (pandas, plotly, networkx) is there.
python3 -m pip download --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$DEST" holistictraceanalysis pydot pyparsing pyyaml
# torchao's float8 training for 07_transformer's FP8 rung (a GPU with FP8: Hopper and newer). The release that
# follows the node's PyTorch (0.17 for 2.11); its own dependencies are PyTorch alone.
python3 -m pip download --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 -d "$DEST" "torchao==${TORCHAO:-0.17.0}"
echo "$(ls "$DEST" | wc -l) wheels, $(du -sh "$DEST" | cut -f1) in $DEST"
