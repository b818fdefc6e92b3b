"""What keeps one judged submission's process apart from the class judge: a process group with a time limit, and the
judge's own files watched while it runs.

    proc = run_limited([sys.executable, "-m", "helpers.challenge.classroom", "--one", "ada.py", ...], log, 900)
    proc.outcome, proc.why, proc.tail       # "done" / "crashed" / "timeout", the reason in words, its last lines

    watch = Watched([board, key, session_file], private_dir)   # hashes and copies, before the submission runs
    changed = watch.restore_changed()                          # after: what it changed, each put back as it was

A submission is Python run with the judge's rights, so neither is a sandbox: they bound what one process can do
unseen (run for ever, leave children behind, rewrite the leaderboard or the session every later run is judged
against), and say so when it tried.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["Proc", "run_limited", "Watched"]

_TAIL_LINES = 6


@dataclasses.dataclass(frozen=True)
class Proc:
    """How a process ended: ``outcome`` ("done": exit code 0; "crashed"; "timeout"), its exit code, the last lines
    it printed, and why it has no result, in words ("" when done)."""

    outcome: str
    code: int | None
    tail: str
    why: str


def run_limited(cmd: list[str], log: Path, limit_s: float) -> Proc:
    """Run ``cmd`` in a new process group, its output (stdout and stderr) into ``log``; past ``limit_s`` seconds
    kill the whole group. Whatever the process left running when it ended (a loader's workers, a child of its own)
    is killed too."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        try:
            code = p.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            return Proc("timeout", None, _tail(log),
                        f"it ran past the time limit of {limit_s:,.0f} s and was stopped, with every process it "
                        "started")
        finally:
            _kill_group(p)
    if code != 0:
        how = f"killed by signal {-code} ({_signal_name(-code)})" if code < 0 else f"exit code {code}"
        return Proc("crashed", code, _tail(log), f"its process ended without a verdict ({how})")
    return Proc("done", 0, _tail(log), "")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def _kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)  # the group's id is the first process's (start_new_session)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    # a killed process ends a moment after the signal: wait until none of the group is left running, so that
    # "stopped, with every process it started" is true when this returns
    deadline = time.monotonic() + 10
    while _group_running(p.pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def _group_running(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (a zombie has ended: it only waits to be reaped)."""
    proc = Path("/proc")
    if not proc.is_dir():  # not Linux: the group exists while any member, a zombie too, does
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _tail(log: Path) -> str:
    """The last lines a process printed, each cut to 200 characters."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(line[:200] for line in lines[-_TAIL_LINES:])


def _digest(p: Path) -> str | None:
    try:
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


class Watched:
    """Files a submission's process must not change: hashed and copied (into ``private``, a folder of the judge's)
    when made, compared and put back by :meth:`restore_changed`."""

    def __init__(self, files: list[Path], private: Path) -> None:
        self._before = {Path(f): _digest(Path(f)) for f in files}
        self._copies: dict[Path, Path] = {}
        for i, (f, digest) in enumerate(self._before.items()):
            if digest is not None:
                self._copies[f] = private / f"{i}.{f.name}"
                shutil.copy2(f, self._copies[f])

    def restore_changed(self) -> list[Path]:
        """The files changed since this was made, each put back as it was (or removed, where it did not exist)."""
        changed = [f for f, digest in self._before.items() if _digest(f) != digest]
        for f in changed:
            if self._before[f] is None:
                f.unlink(missing_ok=True)
            else:
                shutil.copy2(self._copies[f], f)
        return changed
