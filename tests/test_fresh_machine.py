"""The fresh-machine check follows the README: its commands are read from there, so the two cannot drift."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import fresh_machine_check as check  # noqa: E402


def test_the_cpu_route_runs_the_readmes_two_commands():
    assert [c for c, _ in check.readme_block("## Start here")] == ["make lab", "make test"]


def test_the_offline_route_runs_the_lines_the_readme_gives_the_node():
    block = check.readme_block("**Offline GPU nodes**")
    on_node = [c for c, comment in block if "on the node" in comment]
    assert on_node[0] == "source <(scripts/offline_install.sh .whl)" and on_node[-1].startswith("python3 scripts/gpu_test.py")
    assert [c for c, comment in block if "connected machine" in comment] == ["make wheelhouse"]


def test_a_readme_without_the_block_stops_the_check(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Start here\n\nno commands\n")
    with pytest.raises(SystemExit, match="no ```bash block"):
        check.readme_block("## Start here", readme)
    with pytest.raises(SystemExit, match="no longer has"):
        check.readme_block("**Offline GPU nodes**", readme)


def test_an_unreachable_host_reads_as_offline():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: a connection is refused
        assert not check.internet_reachable("127.0.0.1", port, timeout_s=2)


def test_each_route_keeps_its_latest_run_and_the_guide_says_it(tmp_path):
    path = tmp_path / "fresh-machine.json"
    check.record_route("offline-gpu", [("source <(scripts/offline_install.sh .whl)", True, 2.3),
                                       ("python3 scripts/gpu_test.py", False, 120.0)],
                       where="NVIDIA H100", path=path, internet_reachable=False)
    check.record_route("conda", [], where="a laptop", path=path, skipped="no conda or mamba on PATH")
    block = check.guide_block(path)
    assert block.startswith(check.BEGIN) and block.endswith(check.END)
    assert "FAILED on NVIDIA H100, with no internet" in block and "`python3 scripts/gpu_test.py` FAILED in 120 s" in block
    assert "not run on a laptop" in block and "test_dependencies.py" in block
    assert "A new CPU machine, the README's two commands**: not run yet." in block
    check.record_route("offline-gpu", [("python3 scripts/gpu_test.py", True, 900.0)], where="NVIDIA H100", path=path,
                       internet_reachable=False)
    assert "passed on NVIDIA H100" in check.guide_block(path) and "a laptop" in check.guide_block(path)


def test_the_guide_shows_the_latest_recorded_runs():
    assert check.update_guide(check=True), "run scripts/fresh_machine_check.py guide"


def test_a_server_that_starts_listening_late_is_waited_for():
    import http.server
    import threading

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    class Listing(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'["00_setup.ipynb"]')

        def log_message(self, *args):
            pass

    def serve_later():
        import time

        time.sleep(1.5)  # the URL is printed, the port is not open yet
        server = http.server.HTTPServer(("127.0.0.1", port), Listing)
        server.handle_request()
        server.server_close()

    threading.Thread(target=serve_later, daemon=True).start()
    assert b"00_setup.ipynb" in check._get_when_listening(f"http://127.0.0.1:{port}/api/contents", timeout_s=20)
