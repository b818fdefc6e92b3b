#!/usr/bin/env bash
# Start JupyterLab at notebooks/. On a machine with no browser (a remote GPU
# node over ssh), it prints the URL and how to tunnel to it instead.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PORT=${PORT:-8888}
args=(--notebook-dir=notebooks --port="$PORT" --ServerApp.port_retries=20)
if "$VENV/bin/python" -c "import socket, sys; s = socket.socket(); sys.exit(s.connect_ex(('127.0.0.1', $PORT)) != 0)"; then
    echo "Port $PORT is in use (another JupyterLab?): JupyterLab will take the next free port and print its URL below."
    echo "To choose one yourself: PORT=9999 make lab"
fi
if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ "$(uname)" != "Darwin" ]; then
    args+=(--no-browser)
    echo "No display here: open the http://127.0.0.1:... URL that JupyterLab prints below."
    echo "From your laptop, tunnel first:  ssh -N -L $PORT:127.0.0.1:$PORT $(whoami)@$(hostname -f 2>/dev/null || hostname)"
    echo "(use the port in the printed URL if it differs from $PORT)"
fi
if [ "$(id -u)" = "0" ]; then
    # Containers and cloud notebooks often run as root; Jupyter refuses that unless told.
    args+=(--allow-root)
fi
exec "$VENV/bin/jupyter" lab "${args[@]}"
