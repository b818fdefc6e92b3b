"""The class judge's confinement (helpers.challenge.sandbox), tried from a confined process as a hostile submission
would: it writes only in its own folder, cannot read the judge's folders, cannot signal the judge; and the judge, a
subreaper, finds a process it left behind in a session of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from helpers.challenge import sandbox

pytestmark = pytest.mark.slow  # starts sandboxed child processes: `make test-slow`

LANDLOCK = sandbox.landlock_abi()
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason="this kernel has no Landlock (the judge falls back on hashes)")


def _confined(tmp_path, body: str) -> subprocess.CompletedProcess:
    """Run ``body`` in a fresh Python confined to tmp_path/work, with tmp_path/secret hidden; its output parsed by
    the caller."""
    (tmp_path / "work").mkdir(exist_ok=True)
    (tmp_path / "secret").mkdir(exist_ok=True)
    (tmp_path / "secret" / "key").write_text("the leaderboard's key")
    (tmp_path / "outside.txt").write_text("a classmate's file")
    code = textwrap.dedent(f"""
        import os, signal, sys
        from pathlib import Path
        from helpers.challenge.sandbox import confine
        c = confine(writable=[Path({str(tmp_path / "work")!r})], hidden=[Path({str(tmp_path / "secret")!r})])
        print("ABI", c.abi, flush=True)
        def attempt(what, fn):
            try:
                fn()
                print(what, "ALLOWED", flush=True)
            except OSError as e:
                print(what, "denied", type(e).__name__, flush=True)
        T = Path({str(tmp_path)!r})
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def _outcome(out: str) -> dict[str, str]:
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in out.splitlines() if " " in line}


@needs_landlock
def test_a_confined_process_writes_only_in_its_own_folder_and_reads_none_of_the_judges(tmp_path):
    r = _confined(tmp_path, """
        attempt("write_own", lambda: (T / "work" / "mine.txt").write_text("ok"))
        attempt("read_key", lambda: (T / "secret" / "key").read_text())
        attempt("write_key", lambda: (T / "secret" / "key").write_text("mine"))
        attempt("plant_journal", lambda: (T / "secret" / "board.sqlite-journal").write_bytes(b"x"))
        attempt("delete_classmate", lambda: (T / "outside.txt").unlink())
        attempt("write_beside", lambda: (T / "new.txt").write_text("x"))
        attempt("read_code", lambda: Path(os.__file__).read_text())
    """)
    got = _outcome(r.stdout)
    assert got["ABI"] == str(LANDLOCK), r.stderr
    assert got["write_own"] == "ALLOWED" and got["read_code"] == "ALLOWED"
    for what in ("read_key", "write_key", "plant_journal", "delete_classmate", "write_beside"):
        assert got[what].startswith("denied"), (what, got)
    assert (tmp_path / "secret" / "key").read_text() == "the leaderboard's key" and (tmp_path / "outside.txt").exists()
    assert not (tmp_path / "secret" / "board.sqlite-journal").exists()


@needs_landlock
def test_what_a_confined_process_starts_is_confined_too(tmp_path):
    r = _confined(tmp_path, """
        import subprocess
        p = subprocess.run(["sh", "-c", f"echo x > {T}/by_a_child.txt"], capture_output=True, text=True)
        print("child_write", "ALLOWED" if p.returncode == 0 else "denied", flush=True)
    """)
    assert _outcome(r.stdout)["child_write"] == "denied", r.stdout + r.stderr
    assert not (tmp_path / "by_a_child.txt").exists()


@pytest.mark.skipif(LANDLOCK < 6, reason="signal scoping needs Landlock ABI 6 (Linux 6.12)")
def test_a_confined_process_cannot_signal_the_judge(tmp_path):
    r = _confined(tmp_path, """
        attempt("kill_parent", lambda: os.kill(os.getppid(), signal.SIGKILL))
        attempt("stop_parent", lambda: os.kill(os.getppid(), signal.SIGSTOP))
        attempt("signal_itself", lambda: os.kill(os.getpid(), 0))
    """)
    got = _outcome(r.stdout)
    assert got["kill_parent"].startswith("denied") and got["stop_parent"].startswith("denied"), got
    assert got["signal_itself"] == "ALLOWED"


def test_the_description_says_what_was_put_in_place():
    none = sandbox.Confinement(0, ("/w",), ("/s",), False)
    assert "no Landlock" in none.describe() and "judge's rights" in none.describe()
    old = sandbox.Confinement(5, ("/w",), ("/s", "/t"), False)
    assert "ABI 5" in old.describe() and "can still signal the judge" in old.describe()
    assert "cannot signal" in sandbox.Confinement(7, ("/w",), ("/s",), True).describe()


def test_the_subreaper_finds_a_process_left_in_a_session_of_its_own(tmp_path):
    script = textwrap.dedent("""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open(sys.argv[1], "w").write(str(os.getpid()))
                time.sleep(60)
            os._exit(0)
        time.sleep(0.5)
    """)
    pidfile = tmp_path / "pid"
    with sandbox.reaping() as reaper:
        if not reaper.enabled:
            pytest.skip("this platform has no child subreaper")
        reaper.before()
        p = subprocess.Popen([sys.executable, "-c", script, str(pidfile)], start_new_session=True)
        p.wait(timeout=30)
        deadline = time.monotonic() + 10
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        escaped = int(pidfile.read_text())
        left = reaper.leftovers(p.pid)
        assert [pid for pid, _ in left] == [escaped] and left[0][1]  # outside the child's process group
        sandbox.kill([escaped])
    assert not os.path.exists(f"/proc/{escaped}") or "Z" in open(f"/proc/{escaped}/stat").read().split(")")[1][:3]
    assert reaper.leftovers(p.pid) == []
