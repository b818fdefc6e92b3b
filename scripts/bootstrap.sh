#!/usr/bin/env bash
# Create the project's virtual environment on first use, install the helpers
# with their test extra, and register the Jupyter kernel. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    echo "error: gpu-perf-lab needs Python 3.10 or newer; '$PYTHON' is $("$PYTHON" --version 2>&1 || echo missing)." >&2
    echo "       Run again with PYTHON=/path/to/python3.11 make ..." >&2
    exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
    echo "==> creating $VENV with $("$PYTHON" --version)"
    "$PYTHON" -m venv "$VENV"
fi
echo "==> installing gpu-perf-lab and its dependencies into $VENV (the first time takes a minute or more: PyTorch is large)"
# uv installs what pip would choose, from pip's own settings, in parallel (scripts/uv_install.py); pip where it cannot
if ! { "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check uv \
       && "$VENV/bin/python" scripts/uv_install.py -e ".[test]"; }; then
    echo "==> uv could not install them: pip instead (a few minutes)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[test]"
fi
echo "==> registering the Jupyter kernel 'gpu-perf-lab'"
"$VENV/bin/python" -m ipykernel install --user --name gpu-perf-lab --display-name "Python (gpu-perf-lab)" >/dev/null
"$VENV/bin/python" -c 'import helpers, torch; print(f"==> ready: torch {torch.__version__}, GPU: {torch.cuda.is_available()}")'
touch "$VENV/.installed"
