#!/usr/bin/env bash
# Install the wheels from scripts/wheelhouse.sh on an offline node, beside the
# node's own PyTorch and packages (wheels of packages the node already has are
# skipped, so its pandas, torch and friends keep the versions they were built with;
# FORCE=1 installs every wheel):
#   source <(scripts/offline_install.sh .whl)
set -euo pipefail
SRC=${1:-.whl}
TARGET=${TARGET:-/tmp/site}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if ! ls "$SRC"/*.whl >/dev/null 2>&1; then
    echo "echo 'error: no wheels in $SRC: build them with scripts/wheelhouse.sh on a machine with internet' >&2; false"
    exit 1
fi
mapfile -t wheels < <(FORCE=${FORCE:-0} python3 - "$SRC" <<'PY'
import importlib.metadata as md, os, pathlib, re, sys
for whl in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    name = re.sub(r"[-_.]+", "-", whl.name.split("-")[0]).lower()
    try:
        md.version(name)
        if os.environ["FORCE"] != "1":
            print(f"skip {whl.name}: already installed", file=sys.stderr)
            continue
    except md.PackageNotFoundError:
        pass
    print(whl)
PY
)
if [ ${#wheels[@]} -gt 0 ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check --upgrade \
        --target "$TARGET" "${wheels[@]}" >&2
fi
echo "installed ${#wheels[@]} wheels into $TARGET" >&2
echo "export PYTHONPATH=$TARGET:$ROOT\${PYTHONPATH:+:\$PYTHONPATH}"
