#!/usr/bin/env bash
# Start JupyterLab at notebooks/. On a machine with no browser (a remote GPU
# node over ssh), it prints the URL and how to tunnel to it instead.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PORT=${PORT:-8888}
args=(--notebook-dir=notebooks --port="$PORT" --ServerApp.port_retries=20)
if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ "$(uname)" != "Darwin" ]; then
    args+=(--no-browser)
    echo "No display here: open the http://127.0.0.1:... URL that JupyterLab prints below."
    echo "From your laptop, tunnel first:  ssh -N -L $PORT:127.0.0.1:$PORT $(whoami)@$(hostname -f 2>/dev/null || hostname)"
    echo "(If port $PORT is taken, JupyterLab picks the next free one and prints it; tunnel that one.)"
fi
exec "$VENV/bin/jupyter" lab "${args[@]}"
