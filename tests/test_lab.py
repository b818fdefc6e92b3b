"""The first README command: scripts/lab.sh starts JupyterLab at notebooks/ and tells a remote user how to reach it."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(port: int, tmp_path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(VENV=str(Path(sys.executable).parents[1]), PORT=str(port),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / "config"))
    return subprocess.Popen([str(ROOT / "scripts" / "lab.sh")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _wait_for_url(proc: subprocess.Popen, seen: list[str], timeout: float = 90) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        m = re.search(r"(http://127\.0\.0\.1:\d+/lab\?token=\w+)", line)
        if m:
            return m.group(1)
    pytest.fail("JupyterLab printed no URL:\n" + "".join(seen))


def _get(url: str, timeout: float = 30) -> str:
    # The URL can be printed a moment before the server accepts connections: retry briefly.
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return r.read().decode()
        except urllib.error.URLError:
            if time.time() > deadline:
                raise
            time.sleep(0.3)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow  # starts JupyterLab's server: `make test-slow`
def test_lab_serves_the_notebooks_and_explains_the_tunnel(tmp_path):
    port = _free_port()
    blocker = socket.socket()  # the port is taken: JupyterLab must move to a free one and say which
    blocker.bind(("127.0.0.1", port))
    blocker.listen()
    proc = _start(port, tmp_path)
    seen: list[str] = []
    try:
        url = _wait_for_url(proc, seen)
        assert f":{port}/" not in url
        assert any("ssh -N -L" in line for line in seen)
        assert any(f"Port {port} is in use" in line for line in seen)
        base, token = url.split("/lab?token=")
        listing = _get(f"{base}/api/contents?token={token}")
        assert "00_setup.ipynb" in listing and "01_baseline.ipynb" in listing
    finally:
        _stop(proc)
        blocker.close()
