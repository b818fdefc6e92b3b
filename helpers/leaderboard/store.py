"""The leaderboard's SQLite file: its layout (one row per name, configuration and device; ``PRAGMA user_version``
says which), errors that name the file and what to do, :func:`add` (an entry's content and seal checked, then one
transaction; :class:`Added` says what it did) and the file read back (:func:`entries`, :func:`table` for one device,
:func:`tables` for every device).

    print(add(verdict.entry("my fused pool", path=db), path=db))  # added / replaced your best / kept your best
    table(path=db)                                                 # this device's runs, fastest first

A file it cannot read (damaged, of an earlier version, another program's) is never written, overwritten or removed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import time
from pathlib import Path
from typing import Literal

from .. import results
from .entry import NAME_MAX, OPTIONAL, REQUIRED, Entry, EntryRefused
from .seal import LeaderboardFileError, _check_seal, default_path

__all__ = ["Added", "add", "entries", "table", "tables", "WHY_MISSING"]

_HEADER = ("device", "driver", "torch", "cuda", "host_cpu", "date")
_VERSION = 2  # PRAGMA user_version of this layout (sealed entries, one row per name, configuration and device)
_SCHEMA = f"""
CREATE TABLE entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND {NAME_MAX}),
    configuration TEXT NOT NULL,
    device TEXT NOT NULL, {", ".join(f"{h} TEXT" for h in _HEADER[1:])},
    {", ".join(f"{f} REAL NOT NULL" for f in REQUIRED)},
    {", ".join(f"{f} REAL" for f in OPTIONAL)},
    checks TEXT NOT NULL,
    written_at REAL NOT NULL,
    UNIQUE (name, configuration, device)
)"""
_COLUMNS = ["name", "configuration", *_HEADER, *REQUIRED, *OPTIONAL, "checks", "written_at"]
_TIMEOUT_S = 60


# -- the file -----------------------------------------------------------------------------------------------

_ELSEWHERE = "give another file: verdict.entry(name, path=...) and leaderboard.add(entry, path=...)"


def _file_error(path: Path, e: BaseException) -> LeaderboardFileError:
    """``e`` (SQLite's or the OS's, about ``path``) as an error that names the file and what to do."""
    p, what = results.shown(path), str(e) or type(e).__name__
    if path.is_dir():
        msg = f"the leaderboard {p} is a folder, not a file: {_ELSEWHERE}."
    elif isinstance(e, sqlite3.DatabaseError) and any(w in what for w in ("not a database", "malformed", "encrypt")):
        msg = (f"the leaderboard {p} cannot be read ({what}); it was left as it is. Move it aside (mv {p} "
               f"{p}.broken) to start a new one there, or {_ELSEWHERE}.")
    elif "readonly" in what or isinstance(e, PermissionError):
        msg = (f"the leaderboard {p} cannot be written ({what}): make the file and its folder writable (chmod u+w "
               f"{p} {results.shown(path.parent)}; SQLite writes a journal beside the file), or {_ELSEWHERE}.")
    elif "unable to open" in what or isinstance(e, (FileNotFoundError, NotADirectoryError, FileExistsError)):
        msg = (f"the leaderboard {p} cannot be opened ({what}): its folder {results.shown(path.parent)} must be a "
               f"folder you can write to, or {_ELSEWHERE}.")
    elif "locked" in what or "busy" in what:
        msg = (f"the leaderboard {p} stayed locked by another process for over {_TIMEOUT_S} s ({what}): let that run "
               "finish (or stop it), then try again; nothing was written.")
    elif "disk" in what or "I/O" in what:
        msg = (f"the leaderboard {p} could not be written ({what}): check that its disk has free space and is "
               "writable, then try again; nothing was written.")
    else:
        msg = (f"the leaderboard {p} failed ({type(e).__name__}: {what}); nothing was written: move the file aside "
               f"or {_ELSEWHERE}.")
    return LeaderboardFileError(msg)


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    # isolation_level=None: transactions are begun and ended here, explicitly. The timeout makes a writer wait
    # for another's transaction to end instead of failing ("database is locked").
    con = sqlite3.connect(path, timeout=_TIMEOUT_S, isolation_level=None)
    con.execute(f"PRAGMA busy_timeout = {_TIMEOUT_S * 1000}")
    return con


@contextlib.contextmanager
def _open(path: Path):
    """A connection to ``path``; what SQLite or the OS raise comes out as :class:`LeaderboardFileError`."""
    try:
        con = _connect(path)
    except LeaderboardFileError:
        raise
    except (sqlite3.Error, OSError) as e:
        raise _file_error(path, e) from e
    try:
        yield con
    except LeaderboardFileError:
        raise
    except (sqlite3.Error, OSError) as e:
        raise _file_error(path, e) from e
    finally:
        con.close()


def _layout(con: sqlite3.Connection, path: Path, *, make: bool) -> bool:
    """Whether the file holds this leaderboard's table (made in a new, empty file when ``make``). A file of another
    layout raises, and is left as it is."""
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
    version = con.execute("PRAGMA user_version").fetchone()[0]
    p = results.shown(path)
    if "entries" in tables and version == _VERSION:
        return True
    if "entries" in tables:
        raise LeaderboardFileError(f"the leaderboard {p} was written by an earlier version of the course (its rows "
                                   "carry no seal and cannot be checked); it was left as it is. Move it aside (mv "
                                   f"{p} {p}.old), then add your runs again from the harness's verdicts.")
    if tables - {"sqlite_sequence"}:
        raise LeaderboardFileError(f"{p} is a SQLite file but not a leaderboard (it holds {', '.join(sorted(tables))}"
                                   f"); it was left as it is: {_ELSEWHERE}.")
    if make:
        con.execute(_SCHEMA)
        con.execute(f"PRAGMA user_version = {_VERSION}")
    return make


def _rate(img_per_s: float) -> str:
    return f"{img_per_s:,.0f}" if img_per_s >= 100 else f"{img_per_s:.3g}"


@dataclasses.dataclass(frozen=True)
class Added:
    """What :func:`add` did with an entry; ``str()`` says it in one line."""

    outcome: Literal["added", "replaced", "kept"]
    name: str
    device: str
    img_per_s: float  # this run's
    best_img_per_s: float  # the row kept for this name, configuration and device
    previous: tuple[float, str] | None  # (img/s, date) of the row it replaced or that kept it out
    rank: int  # of the row kept, on its device
    of: int  # rows on that device
    row_id: int
    path: str  # the file, as printed

    @property
    def written(self) -> bool:
        return self.outcome != "kept"

    def __str__(self) -> str:
        where = f"rank {self.rank} of {self.of} on {self.device} ({self.path})"
        if self.previous is None:
            return f"{self.name!r} added: {_rate(self.img_per_s)} img/s, {where}."
        old, date = self.previous
        if self.outcome == "replaced":
            return (f"{self.name!r} replaced its earlier run ({_rate(old)} img/s, {date}) with this faster one: "
                    f"{_rate(self.img_per_s)} img/s, {where}.")
        return (f"kept your best: {self.name!r} stays at {_rate(old)} img/s ({date}); this run's "
                f"{_rate(self.img_per_s)} img/s was not added (one row per name, configuration and device), {where}.")


def add(entry: Entry, *, path: Path | str | None = None) -> Added:
    """Check ``entry`` (``verdict.entry(name)``) and write it in one transaction: a new row, or in place of the row
    of the same name, configuration and device when this run is faster; a slower one is kept out.

    ``path``: the database (:func:`default_path` by default; give ``verdict.entry`` the same). Returns what was
    done (:class:`Added`: print it). Raises :class:`EntryRefused` (the reason, in one line) or
    :class:`LeaderboardFileError` (the file, and what to do); either way nothing is written.
    """
    if not isinstance(entry, Entry):
        raise EntryRefused(f"leaderboard.add takes an Entry made by verdict.entry(name), not a "
                           f"{type(entry).__name__}.")
    figures = entry._figures()
    path = Path(path) if path is not None else default_path()
    _check_seal(entry, path)
    header = {h: None if entry.header.get(h) is None else str(entry.header[h]) for h in _HEADER}
    row = [entry.name, entry.configuration, *header.values(), *(figures[f] for f in (*REQUIRED, *OPTIONAL)),
           json.dumps({k: bool(v) for k, v in entry.checks.items()}, sort_keys=True), time.time()]
    img, device = figures["img_per_s"], header["device"]
    with _open(path) as con:
        # BEGIN IMMEDIATE takes the write lock before anything is read or written: a second writer waits here,
        # and the table is created, the stored best read and the row written as one unit (all of it, or none).
        con.execute("BEGIN IMMEDIATE")
        try:
            _layout(con, path, make=True)
            old = con.execute("SELECT id, img_per_s, date FROM entries WHERE name = ? AND configuration = ? AND "
                              "device = ?", (entry.name, entry.configuration, device)).fetchone()
            if old is None:
                outcome, best = "added", img
                row_id = con.execute(f"INSERT INTO entries ({', '.join(_COLUMNS)}) VALUES "
                                     f"({', '.join('?' * len(_COLUMNS))})", row).lastrowid
            elif img > old[1]:
                outcome, best, row_id = "replaced", img, old[0]
                con.execute(f"UPDATE entries SET {', '.join(f'{c} = ?' for c in _COLUMNS)} WHERE id = ?",
                            [*row, row_id])
            else:
                outcome, best, row_id = "kept", old[1], old[0]
            rank = con.execute("SELECT COUNT(*) FROM entries WHERE device = ? AND img_per_s > ?",
                               (device, best)).fetchone()[0] + 1
            of = con.execute("SELECT COUNT(*) FROM entries WHERE device = ?", (device,)).fetchone()[0]
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            raise
    return Added(outcome, entry.name, device, img, best, None if old is None else (old[1], old[2]), int(rank),
                 int(of), int(row_id), results.shown(path))


def entries(*, path: Path | str | None = None, device: str | None = None) -> "pandas.DataFrame":  # noqa: F821
    """Every entry (or one device's), fastest first, with its rank on its device."""
    import pandas as pd

    path = Path(path) if path is not None else default_path()
    columns = ["id", *_COLUMNS]
    if not path.exists():
        return pd.DataFrame(columns=["rank", *columns])
    with _open(path) as con:
        if not _layout(con, path, make=False):  # a file whose first write never committed (its writer was killed)
            return pd.DataFrame(columns=["rank", *columns])
        query, args = f"SELECT {', '.join(columns)} FROM entries", ()
        if device is not None:
            query, args = query + " WHERE device = ?", (device,)
        rows = con.execute(query, args).fetchall()
    df = pd.DataFrame(rows, columns=columns)
    df = df.sort_values(["device", "img_per_s"], ascending=[True, False], kind="stable")
    df.insert(0, "rank", df.groupby("device").cumcount() + 1)
    return df.reset_index(drop=True)


#: Why an entry has no value for an optional figure (``tables.readable`` shows it under the table).
WHY_MISSING = {"peak_mem_gb": "no GPU allocator on a CPU", "nvml_util_pct": "no NVIDIA driver on a CPU",
               "gpm_sm_pct": "no GPM on this GPU (it needs Hopper or newer) or no NVIDIA driver",
               "speedup_bound": "the entry was ranked without it", "baseline_img_per_s": "the entry was ranked without it"}


def _board(df) -> "pandas.DataFrame":  # noqa: F821
    out = df[["rank", "name", "date", *REQUIRED, *OPTIONAL, "torch"]].set_index("rank")
    # shown in GiB, as every notebook gives memory (the entries keep GB: their seal covers the figure as sealed)
    import pandas as pd

    gib = pd.to_numeric(out["peak_mem_gb"], errors="coerce") * 1e9 / 2**30
    out.insert(list(out.columns).index("peak_mem_gb"), "peak_mem_gib", gib)
    out = out.drop(columns="peak_mem_gb")
    out.attrs["missing"] = {("peak_mem_gib" if k == "peak_mem_gb" else k): v for k, v in WHY_MISSING.items()}
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
