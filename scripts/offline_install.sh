#!/usr/bin/env bash
# Install the wheels from scripts/wheelhouse.sh on an offline node, without
# touching the node's own PyTorch:  source <(scripts/offline_install.sh .whl)
set -euo pipefail
SRC=${1:-.whl}
TARGET=${TARGET:-/tmp/site}
ls "$SRC"/*.whl >/dev/null 2>&1 || { echo "echo 'error: no wheels in $SRC: build them with scripts/wheelhouse.sh on a machine with internet' >&2; false"; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check --upgrade --target "$TARGET" "$SRC"/*.whl >&2
echo "export PYTHONPATH=$TARGET:$(cd "$(dirname "$0")/.." && pwd)\${PYTHONPATH:+:\$PYTHONPATH}"
