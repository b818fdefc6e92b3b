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
import math
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["Proc", "run_limited", "Gated", "run_gated", "reference_shapes", "Watched"]

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


def reference_shapes(image_size: int) -> list[tuple[str, "torch.Size"]]:  # noqa: F821
    """The reference network's parameters at ``image_size``, in order: what the trained weights are handed over as."""
    import torch

    from ..models import ReferenceCNN

    with torch.device("meta"):
        return [(n, p.shape) for n, p in ReferenceCNN(image_size).named_parameters()]


@dataclasses.dataclass(frozen=True)
class Gated:
    """A submission's process, timed by the judge: how it ended (``proc``), the seconds from the judge's go to the
    moment it held the trained weights (None: it never got there), the weights as bytes (fp32, the reference's
    parameter order), and what broke the judge's protocol ("" when nothing did)."""

    proc: Proc
    train_s: float | None
    weights: bytes | None
    broke: str = ""
    pid: int = 0


def run_gated(cmd: list[str], log: Path, limit_s: float, *, expect_bytes: int, cwd: Path | None = None,
              env: dict | None = None) -> Gated:
    """Run ``cmd`` as :func:`run_limited` does, with two pipes to it (``--gate R,W`` is appended): it says ``R`` when
    ready, this process starts its clock and answers ``G``; it then sends ``D``, the byte count (8 bytes, little
    endian) and ``expect_bytes`` of weights, and the clock stops when the last byte has arrived. Anything else on the
    pipe, or a count other than ``expect_bytes``, ends the process and says so in ``broke``."""
    to_child, from_parent = os.pipe()
    to_parent, from_child = os.pipe()
    env = {**(env if env is not None else os.environ), "PYTHONUNBUFFERED": "1"}
    t_go = t_done = None
    weights: bytearray | None = None
    broke = ""
    with open(log, "wb") as out:
        p = subprocess.Popen([*cmd, "--gate", f"{to_child},{from_child}"], stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True,
                             pass_fds=(to_child, from_child))
        os.close(to_child)
        os.close(from_child)
        deadline = time.monotonic() + limit_s

        def read(n: int, into: memoryview | None = None) -> bytes | int:
            """``n`` bytes (or into ``into``) before the deadline; fewer where the pipe closed."""
            got, chunks = 0, []
            while got < n:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([to_parent], [], [], left)[0]:
                    raise TimeoutError
                if into is not None:
                    k = os.readv(to_parent, [into[got:min(n, got + (1 << 20))]])
                else:
                    chunk = os.read(to_parent, n - got)
                    chunks.append(chunk)
                    k = len(chunk)
                if k == 0:
                    break
                got += k
            return got if into is not None else b"".join(chunks)

        try:
            try:
                first = read(1)
                if first == b"R":
                    t_go = time.perf_counter()
                    os.write(from_parent, b"G")
                    head = read(9)
                    if head[:1] == b"D" and len(head) == 9:
                        count = int.from_bytes(head[1:], "little")
                        if count != expect_bytes:
                            broke = f"it handed over {count:,} bytes of weights where the network has {expect_bytes:,}"
                        else:
                            weights = bytearray(count)
                            if read(count, memoryview(weights)) == count:
                                t_done = time.perf_counter()
                            else:
                                weights = None
                    elif head:
                        broke = "it wrote to the judge's pipe what the harness never writes"
                elif first:
                    broke = "it wrote to the judge's pipe what the harness never writes"
            except TimeoutError:
                _kill_group(p)
                return Gated(Proc("timeout", None, _tail(log), f"it ran past the time limit of {limit_s:,.0f} s and "
                                  "was stopped, with every process it started"), None, None, pid=p.pid)
            except OSError as e:  # the pipe broke: the process ended mid-protocol
                broke = broke or f"the pipe to the judge broke ({e.strerror})"
            if broke:
                _kill_group(p)
            try:
                code = p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_group(p)
                return Gated(Proc("timeout", None, _tail(log), f"it ran past the time limit of {limit_s:,.0f} s and "
                                  "was stopped, with every process it started"), None, None, broke, p.pid)
        finally:
            os.close(from_parent)
            os.close(to_parent)
            _kill_group(p)
    if code != 0:
        how = f"killed by signal {-code} ({_signal_name(-code)})" if code < 0 else f"exit code {code}"
        proc = Proc("crashed", code, _tail(log), f"its process ended without a verdict ({how})")
    else:
        proc = Proc("done", 0, _tail(log), "")
    train_s = t_done - t_go if t_done is not None and t_go is not None else None
    return Gated(proc, train_s if train_s is None or math.isfinite(train_s) else None,
                 bytes(weights) if weights is not None and t_done is not None else None, broke, p.pid)


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
