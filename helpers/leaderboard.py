"""The final challenge's leaderboard: one SQLite file, one row per judged run, shown as a table per device.

    from helpers import leaderboard
    entry = leaderboard.Entry.of("my fused pool", figures, checks)    # figures and rule checks from the harness
    leaderboard.add(entry)                                            # refused, with the reason, if anything is off
    leaderboard.table()                                               # this device's runs, fastest first
    leaderboard.tables()                                              # {device: table} for every device in the file

The file is ``results/leaderboard.sqlite`` at full scale and ``results/local/leaderboard.sqlite`` at smoke
scale (ignored by git: a CPU's runs never mix with a GPU's). Each entry is written in one transaction, so
two runs that finish at once both land, whole, one after the other; a process killed mid-write leaves
nothing behind. :func:`concurrent_writes_check` shows it: several processes write at once, then every row is
counted and read back.

An entry carries where it ran (device, driver, torch, CUDA, host CPU, date), the harness's rule checks
(all must have passed: a refused run is not ranked) and its figures. The figures in :data:`REQUIRED` must be
there, numbers, finite and in range; those in :data:`OPTIONAL` may be None where the device cannot measure
them (no GPM on a T4, no NVML and no GPU memory on a CPU).
"""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from . import env, results

__all__ = ["REQUIRED", "OPTIONAL", "CHECKS", "Entry", "EntryRefused", "default_path", "add", "entries", "table",
           "tables", "ConcurrentWrites", "concurrent_writes_check"]

#: Figures every entry must carry, with the range a real run falls in (name → (lowest, highest, what it is)).
REQUIRED: dict[str, tuple[float, float, str]] = {
    "img_per_s": (0.0, math.inf, "training images per second in steady state"),
    "speedup": (0.0, math.inf, "img/s over the same session's baseline"),
    "mfu_pct": (0.0, 100.0, "model FLOPs per second over the measured bf16 matmul ceiling, in %"),
    "accuracy": (0.0, 1.0, "held-out accuracy, a fraction"),
}
#: Figures an entry may leave as None where this device cannot measure them.
OPTIONAL: dict[str, tuple[float, float, str]] = {
    "peak_mem_gb": (0.0, math.inf, "peak GPU memory allocated by PyTorch, GB (none on a CPU)"),
    "nvml_util_pct": (0.0, 100.0, "NVML's GPU utilisation in steady state, in %"),
    "gpm_sm_pct": (0.0, 100.0, "GPM's SM activity in steady state, in %"),
    "speedup_bound": (0.0, math.inf, "the most a speed-up can be on this node: the ceiling over the baseline"),
    "baseline_img_per_s": (0.0, math.inf, "the same session's baseline"),
}
_POSITIVE = {"img_per_s", "speedup", "mfu_pct"}  # a run that trained has more than zero of these

#: The rules the harness checks; an entry must carry each, passed.
CHECKS: dict[str, str] = {
    "same_function": "the model's outputs match the reference network's on the same weights",
    "images_seen": "it trained on as many images as the baseline",
    "accuracy_not_worse": "its held-out accuracy is no worse than the baseline's",
}

_HEADER = ("device", "driver", "torch", "cuda", "host_cpu", "date")
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 80),
    {", ".join(f"{h} TEXT" for h in _HEADER)},
    {", ".join(f"{f} REAL NOT NULL" for f in REQUIRED)},
    {", ".join(f"{f} REAL" for f in OPTIONAL)},
    checks TEXT NOT NULL,
    written_at REAL NOT NULL
)"""


class EntryRefused(ValueError):
    """An entry the leaderboard will not take; the message says what to change."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One judged run: its name, where it ran, the harness's rule checks and its figures."""

    name: str
    figures: Mapping[str, float | None]
    checks: Mapping[str, bool]
    header: Mapping[str, Any]  # device, driver, torch, cuda, host_cpu, date (results.device_header())

    @classmethod
    def of(cls, name: str, figures: Mapping[str, float | None], checks: Mapping[str, bool],
           header: Mapping[str, Any] | None = None) -> "Entry":
        """An entry for a run on this machine (its device, versions and today's date)."""
        return cls(name, dict(figures), dict(checks), dict(header or results.device_header()))

    def validate(self) -> None:
        """Raise :class:`EntryRefused` saying what is wrong; return quietly when the entry can be ranked."""
        if not isinstance(self.name, str) or not 1 <= len(self.name.strip()) <= 80:
            raise EntryRefused(f"name {self.name!r}: give the run a name of 1 to 80 characters (what you changed).")
        failed = [k for k in CHECKS if self.checks.get(k) is not True]
        if failed:
            why = "; ".join(f"{k}: {CHECKS[k]}" if k in self.checks else f"{k}: not checked" for k in failed)
            raise EntryRefused(f"{self.name!r} was not ranked: the harness did not pass it ({why}). Fix the run and "
                               "judge it again; a refused run never enters the leaderboard.")
        unknown = set(self.figures) - set(REQUIRED) - set(OPTIONAL)
        if unknown:
            raise EntryRefused(f"{self.name!r}: unknown figures {sorted(unknown)}; the leaderboard keeps "
                               f"{sorted(REQUIRED)} and, where measured, {sorted(OPTIONAL)}.")
        for name, (lo, hi, what) in {**REQUIRED, **OPTIONAL}.items():
            value = self.figures.get(name)
            if value is None:
                if name in REQUIRED:
                    raise EntryRefused(f"{self.name!r}: the figure {name!r} ({what}) is missing; every entry needs "
                                       f"{', '.join(REQUIRED)}.")
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise EntryRefused(f"{self.name!r}: {name}={value!r} is a {type(value).__name__}; it must be a "
                                   f"number ({what}).")
            if not math.isfinite(value) or not lo <= value <= hi or (name in _POSITIVE and value <= 0):
                raise EntryRefused(f"{self.name!r}: {name}={value!r} is outside what a run can measure ({what}: "
                                   f"{lo:g} to {hi:g}). Judge the run with the harness rather than typing figures.")
        missing = [h for h in ("device", "torch", "date") if not self.header.get(h)]
        if missing:
            raise EntryRefused(f"{self.name!r}: where it ran is missing ({', '.join(missing)}); make the entry with "
                               "Entry.of(...), which reads them from this machine.")


def default_path(scale: env.Scale | None = None) -> Path:
    """``results/leaderboard.sqlite`` at full scale; ``results/local/leaderboard.sqlite`` at smoke scale."""
    full = (scale or env.scale()) == "full"
    return (results.results_dir() if full else results.results_dir() / "local") / "leaderboard.sqlite"


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    # isolation_level=None: transactions are begun and ended here, explicitly. The timeout makes a writer wait
    # for another's transaction to end instead of failing ("database is locked").
    con = sqlite3.connect(path, timeout=60, isolation_level=None)
    con.execute("PRAGMA busy_timeout = 60000")
    return con


def add(entry: Entry, *, path: Path | str | None = None) -> int:
    """Validate ``entry`` and write it in one transaction; return its row id. Refused entries raise
    :class:`EntryRefused`, and nothing is written."""
    entry.validate()
    path = Path(path) if path is not None else default_path()
    cols = ["name", *_HEADER, *REQUIRED, *OPTIONAL, "checks", "written_at"]
    row = [entry.name.strip(), *(None if entry.header.get(h) is None else str(entry.header[h]) for h in _HEADER),
           *(float(entry.figures[f]) for f in REQUIRED),
           *(None if entry.figures.get(f) is None else float(entry.figures[f]) for f in OPTIONAL),
           json.dumps({k: bool(v) for k, v in entry.checks.items()}, sort_keys=True), time.time()]
    con = _connect(path)
    try:
        # BEGIN IMMEDIATE takes the write lock before anything is read or written: a second writer waits here,
        # and the table is created and the row inserted as one unit (all of it lands, or none).
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute(_SCHEMA)
            cur = con.execute(f"INSERT INTO entries ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", row)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return int(cur.lastrowid)
    finally:
        con.close()


def entries(*, path: Path | str | None = None, device: str | None = None) -> "pandas.DataFrame":  # noqa: F821
    """Every entry (or one device's), fastest first, with its rank on its device."""
    import pandas as pd

    path = Path(path) if path is not None else default_path()
    empty = pd.DataFrame(columns=["rank", "name", *_HEADER, *REQUIRED, *OPTIONAL, "checks"])
    if not path.exists():
        return empty
    con = _connect(path)
    try:
        if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'entries'").fetchone() is None:
            return empty  # a file whose first write never committed (its writer was killed): nothing in it
        query, args = "SELECT * FROM entries", ()
        if device is not None:
            query, args = query + " WHERE device = ?", (device,)
        df = pd.read_sql_query(query, con, params=args)
    finally:
        con.close()
    df = df.sort_values(["device", "img_per_s"], ascending=[True, False], kind="stable")
    df.insert(0, "rank", df.groupby("device").cumcount() + 1)
    return df.reset_index(drop=True)


#: Why an entry has no value for an optional figure (``tables.readable`` shows it under the table).
WHY_MISSING = {"peak_mem_gb": "no GPU allocator on a CPU", "nvml_util_pct": "no NVIDIA driver on a CPU",
               "gpm_sm_pct": "no GPM on this GPU (it needs Hopper or newer) or no NVIDIA driver",
               "speedup_bound": "the entry was ranked without it", "baseline_img_per_s": "the entry was ranked without it"}


def _board(df) -> "pandas.DataFrame":  # noqa: F821
    out = df[["rank", "name", "date", *REQUIRED, *OPTIONAL, "torch"]].set_index("rank")
    out.attrs["missing"] = dict(WHY_MISSING)
    return out


def table(device: str | None = None, *, path: Path | str | None = None) -> "pandas.DataFrame":  # noqa: F821
    """One device's leaderboard (this machine's by default): rank, name, date and the figures, full precision
    (``tables.readable(df)`` shows it to read)."""
    device = device or results.device_header()["device"]
    return _board(entries(path=path, device=device))


def tables(*, path: Path | str | None = None) -> dict[str, "pandas.DataFrame"]:  # noqa: F821
    """``{device: its leaderboard}`` for every device in the file."""
    df = entries(path=path)
    return {d: _board(g) for d, g in df.groupby("device", sort=True)}


# -- concurrent writers ---------------------------------------------------------------------------------

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
    return Entry(f"writer {writer} entry {i}", figures, {k: True for k in CHECKS}, header)


def _write_many(path: str, writer: int, each: int, start: float) -> None:
    while time.time() < start:  # every writer starts at the same moment
        time.sleep(0.001)
    for i in range(each):
        add(_test_entry(writer, i), path=path)


def _die_mid_write(path: str) -> None:
    """Begin a transaction, insert a row, and die before committing, as a killed kernel would."""
    con = _connect(Path(path))
    con.execute("BEGIN IMMEDIATE")
    con.execute(_SCHEMA)
    con.execute("INSERT INTO entries (name, device, img_per_s, speedup, mfu_pct, accuracy, peak_mem_gb, checks, "
                "written_at) VALUES ('killed mid-write', 'concurrency test', 1, 1, 1, 0.5, 1, '{}', 0)")
    os._exit(1)  # no commit, no rollback, no clean-up: the process is simply gone


def concurrent_writes_check(*, writers: int = 4, each: int = 25, path: Path | str | None = None,
                            on_progress: Callable[[str], None] | None = None) -> ConcurrentWrites:
    """``writers`` processes write ``each`` entries into one file at the same moment, and one more process dies
    inside its transaction; then every row is read back and compared with what was written.

    ``path``: the file to test (a new temporary one by default; the real leaderboard is never touched).
    """
    if writers < 1 or each < 1:
        raise ValueError(f"concurrent_writes_check needs writers ≥ 1 and each ≥ 1 (got {writers}, {each}).")
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter per writer, as separate notebook runs are
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
