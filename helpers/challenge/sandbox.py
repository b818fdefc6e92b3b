"""Least privilege for a judged submission's process, with what Linux offers an ordinary user: Landlock and a
subreaper.

    conf = confine(writable=[workdir], hidden=[class_folder, board_folder, judge_private])   # in the child, first
    conf.describe()          # "Landlock ABI 7: writes only in its folder, ..., cannot signal the judge"

    with reaping() as reaper:                         # in the judge: orphans of its children come back to it
        proc = subprocess.Popen(...); proc.wait()
        left = reaper.leftovers(proc.pid)             # processes the submission left behind, setsid included
        kill(left)

:func:`confine` restricts the calling process and every process it starts, for good (Landlock, Linux 5.13 and
later, no root needed): files can be written only under ``writable`` (and the device files a GPU needs); everything
is readable except ``hidden`` (the judge's folders: the class, the leaderboard and its key, the judge's private
copies); and from ABI 6 on (Linux 6.12) it cannot signal or ptrace a process outside its domain, so it cannot stop the
judge. Where the kernel has no Landlock it changes nothing and says so (``Confinement.abi == 0``): the judge then
falls back on its watched files and process groups (:mod:`.isolation`).

:func:`reaping` makes the judge a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): a process the submission
started and left behind (double fork and ``setsid`` included) is re-parented to the judge when its parents end,
instead of to init, so the judge finds it, ends it, and refuses the submission.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import signal
import time
from pathlib import Path
from typing import Iterator

__all__ = ["Confinement", "confine", "landlock_abi", "reaping", "Reaper", "kill"]

# Linux's generic syscall numbers (x86_64 and arm64 alike) and Landlock's constants (include/uapi/linux/landlock.h)
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446
_PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 38, 36
_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_DIR_ONLY = sum(1 << i for i in range(3, 14) if i != 13) | (1 << 13)  # READ_DIR … MAKE_SYM, REFER: directories only
_TRUNCATE, _IOCTL_DEV = 1 << 14, 1 << 15
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


def _fs_rights(abi: int) -> int:
    """Every filesystem right the kernel's Landlock ``abi`` knows (what a ruleset handles: denied unless granted)."""
    rights = (1 << 13) - 1  # ABI 1: EXECUTE … MAKE_SYM
    if abi >= 2:
        rights |= 1 << 13  # REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # the rights a rule on a file may hold


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers (0: none, or not Linux)."""
    try:
        # flag 1: LANDLOCK_CREATE_RULESET_VERSION (returns the ABI, creates nothing)
        v = _libc().syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    return max(0, int(v))


@dataclasses.dataclass(frozen=True)
class Confinement:
    """What :func:`confine` put in place: the Landlock ABI (0: nothing), the folders it may write, the paths it cannot
    read, and whether it can signal processes outside its domain."""

    abi: int
    writable: tuple[str, ...]
    hidden: tuple[str, ...]
    signals_scoped: bool

    def describe(self) -> str:
        if not self.abi:
            return ("no Landlock on this kernel: the submission ran with the judge's rights (its files watched, its "
                    "process group ended)")
        signals = ("cannot signal or trace a process outside its own" if self.signals_scoped else
                   "can still signal the judge (Landlock's signal scoping needs ABI 6, Linux 6.12)")
        return (f"Landlock ABI {self.abi}: writes only in its own folder and device files, cannot read the judge's "
                f"{len(self.hidden)} folders, {signals}")


def _readable(hidden: list[Path]) -> list[tuple[Path, bool]]:
    """(path, whole) pairs to grant reading: whole subtrees that hold no hidden path, and, for the folders above a
    hidden path, the folder itself for listing only (``whole`` False) while its other entries are walked."""
    hidden = [h.resolve() for h in hidden]
    grants: list[tuple[Path, bool]] = []

    def walk(folder: Path) -> None:
        grants.append((folder, False))
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for e in entries:
            p = Path(e.path)
            try:
                real = p.resolve()
            except OSError:
                continue
            if real in hidden:
                continue
            if any(real in h.parents for h in hidden):
                if not e.is_symlink():  # a link that leads above a hidden path is left out
                    walk(p)
                continue
            grants.append((p, True))

    walk(Path("/"))
    return grants


def confine(*, writable: list[Path], hidden: list[Path]) -> Confinement:
    """Restrict this process, and every process it starts, for good: writes only under ``writable`` (and device
    files, for a GPU), no reading under ``hidden``, no signals outside (ABI 6 and later). Where the kernel has no
    Landlock, nothing changes (``abi`` 0). Call it before any of the submission's code runs."""
    abi = landlock_abi()
    writable = [Path(w).resolve() for w in writable]
    hidden = [Path(h).resolve() for h in hidden]
    if not abi:
        return Confinement(0, tuple(map(str, writable)), tuple(map(str, hidden)), False)
    libc = _libc()
    fs = _fs_rights(abi)
    attr = _RulesetAttr(fs, 0, (_SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else ctypes.sizeof(ctypes.c_uint64) * (2 if abi >= 4 else 1)
    ruleset = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    read = _READ_FILE | _READ_DIR | _EXECUTE
    device = _READ_FILE | _WRITE_FILE | _READ_DIR | (_IOCTL_DEV if abi >= 5 else 0) | (_TRUNCATE if abi >= 3 else 0)
    try:
        for path, whole in _readable(hidden):
            _grant(libc, ruleset, path, read if whole else _READ_DIR, fs)
        for dev in (Path("/dev"),):
            _grant(libc, ruleset, dev, device, fs)
        for w in [*writable, Path("/dev/shm")]:  # /dev/shm: torch's shared memory between a loader's workers
            _grant(libc, ruleset, w, fs, fs)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return Confinement(abi, tuple(map(str, writable)), tuple(map(str, hidden)), abi >= 6)


def _grant(libc, ruleset: int, path: Path, rights: int, handled: int) -> None:
    """Allow ``rights`` (those the ruleset handles) beneath ``path``; a file takes only a file's rights. A path that
    vanished or cannot be opened is skipped (nothing is granted)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            rights &= _FILE_RIGHTS
        rule = _PathBeneath(rights & handled, fd)
        if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                        ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            if err not in (22,):  # EINVAL: a special file that takes no such right; nothing granted there
                raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


# -- the judge's side: every process a submission starts comes back to it --------------------------------------------

def _ppid_and_group(pid: int) -> tuple[int, int, str] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[2]), fields[0]


def processes() -> dict[int, tuple[int, int, str]]:
    """Every process /proc shows: pid → (parent pid, process group, state letter)."""
    out = {}
    for p in Path("/proc").glob("[0-9]*"):
        info = _ppid_and_group(int(p.name))
        if info is not None:
            out[int(p.name)] = info
    return out


class Reaper:
    """The judge as a subreaper: :meth:`leftovers` lists what a finished child left behind."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._mine_before: set[int] = set()

    def before(self) -> None:
        """Note the judge's own children now (a test's helpers, a resource tracker): they are not leftovers."""
        me = os.getpid()
        self._mine_before = {pid for pid, (ppid, _, _) in processes().items() if ppid == me}

    def leftovers(self, child: int) -> list[tuple[int, bool]]:
        """Processes still running that descend from ``child`` (which has ended) or were re-parented to the judge
        since :meth:`before`, each with whether it left ``child``'s process group (``setsid``, ``setpgid``)."""
        me, procs = os.getpid(), processes()
        roots = {pid for pid, (ppid, _, state) in procs.items()
                 if state != "Z" and ((ppid == me and pid not in self._mine_before and pid != child) or ppid == child)}
        found, frontier = set(roots), list(roots)
        while frontier:
            parent = frontier.pop()
            for pid, (ppid, _, state) in procs.items():
                if ppid == parent and pid not in found and state != "Z":
                    found.add(pid)
                    frontier.append(pid)
        return sorted((pid, procs[pid][1] != child) for pid in found if pid in procs)


@contextlib.contextmanager
def reaping() -> Iterator[Reaper]:
    """Make this process a child subreaper while the block runs (where Linux offers it) and reap what ends."""
    libc = None
    with contextlib.suppress(OSError, AttributeError):
        libc = _libc()
    enabled = libc is not None and libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        yield Reaper(enabled)
    finally:
        if enabled:
            libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def kill(pids: list[int]) -> None:
    """SIGKILL each of ``pids`` and reap those that were the caller's children (re-parented ones included)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not ours to reap: wait until it has gone
                info = _ppid_and_group(pid)
                if info is None or info[2] == "Z":
                    break
                time.sleep(0.01)
                continue
            if done:
                break
            time.sleep(0.01)
