"""Concurrent writers, measured: :func:`concurrent_writes_check` starts ``writers`` processes that write into one
file at the same moment, and one more that dies inside its transaction, then reads every row back and compares it
with what was written (:class:`ConcurrentWrites`).

    print(concurrent_writes_check(writers=4, each=25))  # "... 100 found, 0 lost, 0 half-written; ..."

The processes are started by the spawn method (a fresh interpreter each, as separate notebook runs are), so what
they run, ``_write_many`` and ``_die_mid_write``, stays a module-level function that a new process can import.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import tempfile
import time
from pathlib import Path
from typing import Callable

from .. import env
from .entry import CHECKS, REQUIRED, Entry
from .seal import _seal
from .store import _connect, _layout, add, entries

__all__ = ["ConcurrentWrites", "concurrent_writes_check"]


@dataclasses.dataclass(frozen=True)
class ConcurrentWrites:
    """What came back after ``writers`` processes each wrote ``each`` entries at once."""

    writers: int
    each: int
    found: int  # the written entries' rows read back
    whole: int  # of those, rows whose every field reads back as it was written
    killed_mid_write: int  # writers killed inside their transaction
    ghosts: int  # rows of killed writers that appeared anyway (must be 0)
    seconds: float

    @property
    def expected(self) -> int:
        return self.writers * self.each

    @property
    def lost(self) -> int:
        """Entries written and committed but not found."""
        return self.expected - self.found

    @property
    def half_written(self) -> int:
        """Rows found that are not whole, plus rows of killed writers that appeared."""
        return self.found - self.whole + self.ghosts

    def __str__(self) -> str:
        return (f"{self.writers} processes wrote {self.each} entries each at once ({self.expected}): {self.found} "
                f"found, {self.lost} lost, {self.half_written} half-written; {self.killed_mid_write} writer(s) "
                f"killed inside a transaction left nothing ({self.seconds:.1f} s)")


def _test_entry(writer: int, i: int) -> Entry:
    figures = {"img_per_s": 1000.0 + writer * 1000 + i, "speedup": 1.0 + i / 100, "mfu_pct": float(writer + 1),
               "accuracy": 0.5, "peak_mem_gb": float(i), "nvml_util_pct": None, "gpm_sm_pct": None}
    header = {"device": "concurrency test", "driver": None, "torch": "test", "cuda": None, "host_cpu": None,
              "date": env.today()}
    return Entry(f"writer {writer} entry {i}", figures, {k: True for k in CHECKS}, header, "concurrency test",
                 challenge="the concurrency check's")


def _write_many(path: str, writer: int, each: int, start: float) -> None:
    while time.time() < start:  # every writer starts at the same moment
        time.sleep(0.001)
    for i in range(each):
        add(_seal(_test_entry(writer, i), path=path), path=path)  # sealed here: each writer stands for a harness


def _die_mid_write(path: str) -> None:
    """Begin a transaction, insert a row, and die before committing, as a killed kernel would."""
    con = _connect(Path(path))
    con.execute("BEGIN IMMEDIATE")
    _layout(con, Path(path), make=True)
    con.execute("INSERT INTO entries (name, configuration, device, img_per_s, speedup, mfu_pct, accuracy, "
                "peak_mem_gb, checks, written_at) VALUES ('killed mid-write', 'concurrency test', 'concurrency test', "
                "1, 1, 1, 0.5, 1, '{}', 0)")
    os._exit(1)  # no commit, no rollback, no clean-up: the process is simply gone


def concurrent_writes_check(*, writers: int = 4, each: int = 25, path: Path | str | None = None,
                            on_progress: Callable[[str], None] | None = None,
                            start_method: str | None = None) -> ConcurrentWrites:
    """``writers`` processes write ``each`` entries into one file at the same moment, and one more process dies
    inside its transaction; then every row is read back and compared with what was written.

    ``path``: the file to test (a new temporary one by default; the real leaderboard is never touched).
    ``start_method``: how the processes start (multiprocessing's; by default "forkserver" where the platform has
    it, else "spawn").
    """
    if writers < 1 or each < 1:
        raise ValueError(f"concurrent_writes_check needs writers ≥ 1 and each ≥ 1 (got {writers}, {each}).")
    # Never forked from this process (it may hold CUDA and the monitor's threads): each writer comes from a fresh
    # interpreter, as separate notebook runs do. A fork server is one fresh interpreter that imports this module
    # once and forks the writers from it: on two cores, five interpreters each importing PyTorch took most of the
    # check's time (the t4 profile, one H100, 2026-11-26: 10.5 s with "spawn", 3.7 s with a fork server, of which 2 s
    # is the start delay below; scripts/probes/judging_costs.py --writes).
    method = start_method or ("forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload([__name__])
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(path) if path is not None else Path(tmp) / "leaderboard.sqlite"
        t0 = time.perf_counter()
        start = time.time() + 2.0  # time for every process to start before any writes
        procs = [ctx.Process(target=_write_many, args=(str(target), w, each, start)) for w in range(writers)]
        procs.append(ctx.Process(target=_die_mid_write, args=(str(target),)))
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=300)
        stuck = [p for p in procs if p.is_alive()]
        for p in stuck:
            p.kill()
        if any(p.exitcode != 0 for p in procs[:-1]):
            raise RuntimeError(f"a writer failed (exit codes {[p.exitcode for p in procs[:-1]]}): see its error "
                               "above.")
        df = entries(path=target)
        wanted = {e.name: e for e in (_test_entry(w, i) for w in range(writers) for i in range(each))}
        whole = 0
        for _, r in df.iterrows():
            e = wanted.get(r["name"])
            if e is not None and all(r[k] == e.figures[k] for k in REQUIRED) and json.loads(r["checks"]) == e.checks:
                whole += 1
        found = int(df["name"].isin(list(wanted)).sum())
        ghosts = int((df["name"] == "killed mid-write").sum())
        res = ConcurrentWrites(writers, each, found, whole, 1, ghosts, time.perf_counter() - t0)
    if on_progress is not None:
        on_progress(str(res))
    return res
