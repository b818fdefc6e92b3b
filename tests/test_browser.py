"""The live monitor in a real browser: JupyterLab on loopback, a notebook that shows the monitor, opened
in headless Chromium (Debian's, driven by Playwright). The plot must render with data points and no
"Error displaying widget"; screenshots are kept in build/artifacts/ for a human to look at.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "build" / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,  # opens JupyterLab in a headless browser: `make test-slow`
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed: 'make test-slow' installs it "
                       "(scripts/ensure_browser.sh)"),
]

CELLS = [
    "import time\nfrom helpers.monitor import Monitor\n"
    "mon = Monitor(period_s=0.1, title='browser test')\nmon.start()\n"
    "for i in range(40):\n    time.sleep(0.05)\n    mon.step(images=8)\n",
    "mon.stop()",
]


def _notebook(path: Path) -> None:
    nb = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                   "source": src} for i, src in enumerate(CELLS)],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    work = tmp_path / "nb"
    work.mkdir()
    _notebook(work / "monitor.ipynb")
    port, token = _free_port(), "browser-test-token"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"), JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"))
    env.pop("DISPLAY", None)
    cmd = [sys.executable, "-m", "jupyterlab", f"--notebook-dir={work}", f"--port={port}", "--no-browser",
           "--ip=127.0.0.1", f"--IdentityProvider.token={token}", "--expose-app-in-browser", "--allow-root",
           "--ServerApp.port_retries=0"]
    log = tmp_path / "lab.log"  # a file, not a pipe: a pipe nobody reads fills up and stalls the server
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 90
    while "is running at" not in log.read_text():
        if proc.poll() is not None or time.time() > deadline:
            pytest.fail("JupyterLab did not start:\n" + log.read_text())
        time.sleep(0.2)
    try:
        yield f"http://127.0.0.1:{port}", token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


KERNEL_STATUS = "() => window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status"


def _wait_for_kernel(page, timeout_s: float = 90) -> None:
    """Wait until the notebook's kernel is idle, accepting the kernel dialog if JupyterLab asks."""
    deadline = time.time() + timeout_s
    while page.evaluate(KERNEL_STATUS) != "idle":
        if page.locator(".jp-Dialog .jp-mod-accept").count():
            page.locator(".jp-Dialog .jp-mod-accept").click()
        if time.time() > deadline:
            raise TimeoutError(f"kernel not idle after {timeout_s} s: {page.evaluate(KERNEL_STATUS)}")
        page.wait_for_timeout(250)


def _run_next_cell(page) -> None:
    # Not awaited in the page: the command's promise settles only when the cell finishes.
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-cell-and-select-next'); }")


PLOT_POINTS = """() => {
  const plots = [...document.querySelectorAll('.jp-OutputArea .js-plotly-plot')];
  // _fullData holds decoded arrays (plotly 6 sends numpy arrays base64-encoded)
  return plots.map(gd => (gd._fullData || gd.data || []).reduce((n, t) => n + (t.x ? t.x.length : 0), 0));
}"""


def test_live_monitor_renders_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright

    base, token = lab
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        try:
            page.goto(f"{base}/lab/tree/monitor.ipynb?token={token}", timeout=90_000)
            page.wait_for_function("() => window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=90_000)
            _wait_for_kernel(page)
            _run_next_cell(page)
            # The live widget: a plotly plot inside the first cell's output, holding data points.
            page.wait_for_function(f"() => ({PLOT_POINTS})().some(n => n > 0)", timeout=90_000)
            page.wait_for_timeout(1500)  # let a few more redraws arrive
            page.screenshot(path=str(ARTIFACTS / "monitor-live.png"), full_page=True)
            live_points = page.evaluate(PLOT_POINTS)
            text = page.inner_text(".jp-Notebook")
            assert "Error displaying widget" not in text, text
            assert max(live_points) > 0

            # Stopping replaces the widget by a static figure of the whole run, and prints the summary.
            _run_next_cell(page)
            page.wait_for_function("() => /memory .*peak .* samples/.test(document.querySelector('.jp-Notebook').innerText)",
                                   timeout=60_000)
            page.wait_for_function(f"() => ({PLOT_POINTS})().some(n => n > 0)", timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "monitor-final.png"), full_page=True)
            # Replaced in place: still one plot, in the first cell; the second cell shows only the summary.
            assert len(page.evaluate(PLOT_POINTS)) == 1
            text = page.inner_text(".jp-Notebook")
            assert "Error displaying widget" not in text, text
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "monitor-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
