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
# pip download keeps every version its resolver fetched while it backtracked (two platformdirs, 2026-11-30), and
# offline_install.sh cannot install a folder holding two versions of one project: keep the newest of each
python3 - "$DEST" <<'PY'
import re
import sys
from pathlib import Path

try:
    from packaging.version import Version
except ImportError:  # a bare python3 with pip: pip carries its own copy
    from pip._vendor.packaging.version import Version

found: dict[str, list] = {}
for wheel in Path(sys.argv[1]).glob("*.whl"):
    name, version = wheel.name.split("-")[:2]
    found.setdefault(re.sub(r"[-_.]+", "_", name).lower(), []).append((Version(version), wheel))
for name, versions in found.items():
    for _, wheel in sorted(versions)[:-1]:
        print(f"wheelhouse: {wheel.name} dropped: a newer {name} is here")
        wheel.unlink()
PY
echo "$(ls "$DEST" | wc -l) wheels, $(du -sh "$DEST" | cut -f1) in $DEST"
