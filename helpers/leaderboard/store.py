"""The leaderboard's SQLite file: its layout (a table per kind of run, :data:`.entry.KINDS`: ``entries`` for the
ladder's runs, ``to_target`` for the learner's training; one row per name, configuration and device in each;
``PRAGMA user_version`` says which layout), errors that name the file and what to do, :func:`add` (an entry's content
and seal checked, then one transaction; :class:`Added` says what it did) and the file read back (:func:`entries`,
:func:`table` for one device and kind, :func:`tables` for every device and kind, each ranked by its own score).

    print(add(verdict.entry("my fused pool", path=db), path=db))  # added / replaced your best / kept your best
    table(path=db)                                                 # this device's ladder runs, fastest first
    table(path=db, kind="to_target")                               # its runs to the target, quickest first

A file of the layout before the learner's training was ranked (version 2: the ladder's table alone) is read as it
is, and gains the second table at its first write (:func:`_layout`). A file it cannot read (damaged, of an earlier
version, another program's) is never written, overwritten or removed.
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
from ..tables import sig as _sig  # the module's own tables() is the boards
from .entry import KINDS, LADDER, NAME_MAX, TO_TARGET, Entry, EntryRefused, Kind
from .seal import LeaderboardFileError, _check_seal, default_path

__all__ = ["Added", "Board", "add", "entries", "table", "tables", "WHY_MISSING"]

_HEADER = ("device", "driver", "torch", "cuda", "host_cpu", "date")
# PRAGMA user_version of this layout: 2 sealed the ladder's entries, one row per name, configuration and device;
# 3 added the learner's training, ranked by its time to the target, in a table of its own; 4 named the challenge each
# run was judged on (Rules.challenge), and ranks a run only beside runs of the same challenge; 5 keeps MFU over the GPU
# data sheet's peak beside MFU over the measured ceiling (datasheet_mfu_pct: none in the rows written before)
_VERSION = 5
_OLDER = (2, 3, 4)  # the layouts read as they are, and brought to this one at their first write
#: The challenge of a row written before challenges were named (a file of layout 2 or 3)
UNNAMED = "judged before the leaderboard named the challenge"
_COURSE = "the course's"  # how the name of each of the course's own challenges begins (Rules.challenge)
_TABLE = {"ladder": "entries", "to_target": "to_target"}  # the ladder's keeps its name: files of version 2 hold it


def _schema(kind: Kind) -> str:
    return f"""
CREATE TABLE {_TABLE[kind.name]} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND {NAME_MAX}),
    configuration TEXT NOT NULL,
    device TEXT NOT NULL, {", ".join(f"{h} TEXT" for h in _HEADER[1:])},
    {", ".join(f"{f} REAL NOT NULL" for f in kind.required)},
    {", ".join(f"{f} REAL" for f in kind.optional)},
    checks TEXT NOT NULL,
    written_at REAL NOT NULL,
    challenge TEXT NOT NULL,
    UNIQUE (name, configuration, device, challenge)
)"""


def _columns(kind: Kind) -> list[str]:
    return ["name", "configuration", *_HEADER, *kind.required, *kind.optional, "checks", "written_at", "challenge"]


_COLUMNS = _columns(LADDER)  # the ladder's (concurrency's check reads them)
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
    """Whether the file holds this leaderboard's tables (made in a new, empty file when ``make``). A file of an older
    layout (:data:`_OLDER`: 2, the ladder's table alone; 3, no challenge named; 4, no MFU over the data sheet) is read
    as it is and, when ``make``, is brought to this one: the table of the learner's training made, each table's rows
    copied with the challenge :data:`UNNAMED` where they had none and no value for a figure they did not keep. Inside the writer's transaction, so the migration and the row it was made for land together or
    not at all. A file of another layout raises, and is left as it is."""
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
    version = con.execute("PRAGMA user_version").fetchone()[0]
    p = results.shown(path)
    if "entries" in tables and (version in _OLDER or version == _VERSION):
        if make and version != _VERSION:
            for kind in KINDS.values():
                _migrate(con, kind, has=_TABLE[kind.name] in tables)
            con.execute(f"PRAGMA user_version = {_VERSION}")
        return True
    if "entries" in tables and version > _VERSION:
        raise LeaderboardFileError(f"the leaderboard {p} was written by a later version of the course (layout "
                                   f"{version}); it was left as it is: update the course, or {_ELSEWHERE}.")
    if "entries" in tables:
        raise LeaderboardFileError(f"the leaderboard {p} was written by an earlier version of the course (its rows "
                                   "carry no seal and cannot be checked); it was left as it is. Move it aside (mv "
                                   f"{p} {p}.old), then add your runs again from the harness's verdicts.")
    if tables - {"sqlite_sequence"}:
        raise LeaderboardFileError(f"{p} is a SQLite file but not a leaderboard (it holds {', '.join(sorted(tables))}"
                                   f"); it was left as it is: {_ELSEWHERE}.")
    if make:
        for kind in KINDS.values():
            con.execute(_schema(kind))
        con.execute(f"PRAGMA user_version = {_VERSION}")
    return make


def _migrate(con: sqlite3.Connection, kind: Kind, *, has: bool) -> None:
    """``kind``'s table in this layout: made, or (``has``: a table of an older layout) made anew with every row
    copied, its id kept, its challenge :data:`UNNAMED` where it had none and a figure it did not keep empty (SQLite
    cannot change a table's UNIQUE constraint in place)."""
    table = _TABLE[kind.name]
    if not has:
        con.execute(_schema(kind))
        return
    selected = _selected(con, kind, ["id", *_columns(kind)])
    old = f"{table}_before_v{_VERSION}"
    con.execute(f"ALTER TABLE {table} RENAME TO {old}")
    con.execute(_schema(kind))
    con.execute(f"INSERT INTO {table} ({', '.join(['id', *_columns(kind)])}) SELECT {', '.join(selected)} FROM {old}")
    con.execute(f"DROP TABLE {old}")


def _selected(con: sqlite3.Connection, kind: Kind, columns: list[str]) -> list[str]:
    """What to select for each of ``columns`` in ``kind``'s table: the column, or in a table of an older layout
    :data:`UNNAMED` for a challenge it did not name and NULL for a figure it did not keep."""
    names = {r[1] for r in con.execute(f"PRAGMA table_info({_TABLE[kind.name]})").fetchall()}
    return [c if c in names else f"'{UNNAMED}' AS challenge" if c == "challenge" else f"NULL AS {c}"
            for c in columns]


def _has(con: sqlite3.Connection, kind: Kind) -> bool:
    """Whether the file holds ``kind``'s table (a file of version 2 has no table of the learner's training)."""
    return con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                       (_TABLE[kind.name],)).fetchone() is not None


def _rate(img_per_s: float) -> str:
    return f"{img_per_s:,.0f}" if img_per_s >= 100 else f"{img_per_s:.3g}"


def _score(kind: str, x: float) -> str:
    """A score as a person reads it: "1,000 img/s" for the ladder, "9.59 s" to the target."""
    # tables.sig keeps a trailing zero, as the board's table prints the time ("1.6 s" had read beside its 1.60)
    return f"{_rate(x)} img/s" if kind == "ladder" else f"{_sig(x)} s"


@dataclasses.dataclass(frozen=True)
class Added:
    """What :func:`add` did with an entry; ``str()`` says it in one line."""

    outcome: Literal["added", "replaced", "kept"]
    name: str
    device: str
    score: float  # this run's: img/s (the ladder) or seconds to the target
    best: float  # of the row kept for this name, configuration and device
    previous: tuple[float, str] | None  # (score, date) of the row it replaced or that kept it out
    rank: int  # of the row kept, among its kind's rows of its challenge on its device
    of: int  # its kind's rows of that challenge on that device
    row_id: int
    path: str  # the file, as printed
    kind: str = "ladder"
    challenge: str = ""  # the challenge it was judged on, and is ranked in (Entry.challenge)

    @property
    def written(self) -> bool:
        return self.outcome != "kept"

    def __str__(self) -> str:
        to_target = self.kind == "to_target"
        # the course's challenges are what a learner expects; any other is named, for it ranks apart
        apart = "" if self.challenge.startswith(_COURSE) else f" among runs of {self.challenge}"
        where = (f"rank {self.rank} of {self.of}{' to the target' if to_target else ''}{apart} on {self.device} "
                 f"({self.path})")
        score = _score(self.kind, self.score) + (" to the target" if to_target else "")
        if self.previous is None:
            return f"{self.name!r} added: {score}, {where}."
        old, date = self.previous
        if self.outcome == "replaced":
            better = "quicker" if to_target else "faster"
            return (f"{self.name!r} replaced its earlier run ({_score(self.kind, old)}, {date}) with this {better} "
                    f"one: {score}, {where}.")
        return (f"kept your best: {self.name!r} stays at {_score(self.kind, old)} ({date}); this run's "
                f"{_score(self.kind, self.score)} was not added (one row per name, configuration and device), {where}.")


@dataclasses.dataclass(frozen=True)
class Board:
    """One of :func:`tables`' keys: a device, a kind of run (:data:`.entry.KINDS`) and the challenge its runs were
    judged on (:attr:`.entry.Entry.challenge`); ``str()`` is its heading."""

    device: str
    kind: str
    challenge: str = ""

    def __str__(self) -> str:
        return f"{self.device}: {KINDS[self.kind].title}" + (f"; {self.challenge}" if self.challenge else "")


def add(entry: Entry, *, path: Path | str | None = None) -> Added:
    """Check ``entry`` (``verdict.entry(name)``) and write it in one transaction, in its kind's table: a new row, or
    in place of the row of the same name, configuration, device and challenge when this run scores better (faster on
    the ladder, quicker to the target); a worse one is kept out. It is ranked among the runs of its kind, device and
    challenge only (a run judged on rules or a target of its own never ranks beside the course's).

    ``path``: the database (:func:`default_path` by default; give ``verdict.entry`` the same). Returns what was
    done (:class:`Added`: print it). Raises :class:`EntryRefused` (the reason, in one line) or
    :class:`LeaderboardFileError` (the file, and what to do); either way nothing is written.
    """
    if not isinstance(entry, Entry):
        raise EntryRefused(f"leaderboard.add takes an Entry made by verdict.entry(name), not a "
                           f"{type(entry).__name__}.")
    figures = entry._figures()
    kind = entry.kind_spec
    path = Path(path) if path is not None else default_path()
    _check_seal(entry, path)
    header = {h: None if entry.header.get(h) is None else str(entry.header[h]) for h in _HEADER}
    columns, table_name = _columns(kind), _TABLE[kind.name]
    row = [entry.name, entry.configuration, *header.values(),
           *(figures[f] for f in (*kind.required, *kind.optional)),
           json.dumps({k: bool(v) for k, v in entry.checks.items()}, sort_keys=True), time.time(), entry.challenge]
    score, device, challenge = figures[kind.score], header["device"], entry.challenge
    beats = ">" if kind.higher_is_better else "<"
    with _open(path) as con:
        # BEGIN IMMEDIATE takes the write lock before anything is read or written: a second writer waits here,
        # and the table is created (or migrated), the stored best read and the row written as one unit.
        con.execute("BEGIN IMMEDIATE")
        try:
            _layout(con, path, make=True)
            old = con.execute(f"SELECT id, {kind.score}, date FROM {table_name} WHERE name = ? AND configuration = ? "
                              "AND device = ? AND challenge = ?",
                              (entry.name, entry.configuration, device, challenge)).fetchone()
            if old is None:
                outcome, best = "added", score
                row_id = con.execute(f"INSERT INTO {table_name} ({', '.join(columns)}) VALUES "
                                     f"({', '.join('?' * len(columns))})", row).lastrowid
            elif score > old[1] if kind.higher_is_better else score < old[1]:
                outcome, best, row_id = "replaced", score, old[0]
                con.execute(f"UPDATE {table_name} SET {', '.join(f'{c} = ?' for c in columns)} WHERE id = ?",
                            [*row, row_id])
            else:
                outcome, best, row_id = "kept", old[1], old[0]
            rank = con.execute(f"SELECT COUNT(*) FROM {table_name} WHERE device = ? AND challenge = ? AND "
                               f"{kind.score} {beats} ?", (device, challenge, best)).fetchone()[0] + 1
            of = con.execute(f"SELECT COUNT(*) FROM {table_name} WHERE device = ? AND challenge = ?",
                             (device, challenge)).fetchone()[0]
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            raise
    return Added(outcome, entry.name, device, score, best, None if old is None else (old[1], old[2]), int(rank),
                 int(of), int(row_id), results.shown(path), kind=kind.name, challenge=challenge)


def entries(*, path: Path | str | None = None, device: str | None = None,
            kind: str = "ladder") -> "pandas.DataFrame":  # noqa: F821
    """Every entry of one kind (``"ladder"`` or ``"to_target"``; of one device, if given), best first (the
    fastest on the ladder, the quickest to the target), with its rank among the runs of its device and challenge."""
    import pandas as pd

    board = _kind(kind)
    path = Path(path) if path is not None else default_path()
    columns = ["id", *_columns(board)]
    if not path.exists():
        return pd.DataFrame(columns=["rank", *columns])
    with _open(path) as con:
        # a file whose first write never committed (its writer was killed), or one of version 2 read for the
        # learner's training: nothing of that kind yet
        if not _layout(con, path, make=False) or not _has(con, board):
            return pd.DataFrame(columns=["rank", *columns])
        selected = _selected(con, board, columns)
        query, args = f"SELECT {', '.join(selected)} FROM {_TABLE[board.name]}", ()
        if device is not None:
            query, args = query + " WHERE device = ?", (device,)
        rows = con.execute(query, args).fetchall()
    df = pd.DataFrame(rows, columns=columns)
    # the course's challenges first on each device (what a learner looks for), then any other, each best first
    df = df.assign(_other=~df["challenge"].str.startswith(_COURSE))
    df = df.sort_values(["device", "_other", "challenge", board.score],
                        ascending=[True, True, True, not board.higher_is_better], kind="stable").drop(columns="_other")
    df.insert(0, "rank", df.groupby(["device", "challenge"]).cumcount() + 1)
    return df.reset_index(drop=True)


def _kind(kind: str) -> Kind:
    if kind not in KINDS:
        raise ValueError(f"no kind of run {kind!r}; the leaderboard ranks {', '.join(KINDS)}.")
    return KINDS[kind]


#: Why an entry has no value for an optional figure (``tables.readable`` shows it under the table): the ladder's.
WHY_MISSING = {"peak_mem_gb": "no GPU allocator on a CPU", "nvml_util_pct": "no NVIDIA driver on a CPU",
               "gpm_sm_pct": "no GPM on this GPU (it needs Hopper or newer) or no NVIDIA driver",
               "speedup_bound": "the entry was ranked without it", "baseline_img_per_s": "the entry was ranked without it",
               "datasheet_mfu_pct": "no data sheet figure known for this GPU, or ranked before the leaderboard kept "
                                    "it (layout 4 and earlier)"}
#: The same for the learner's training to the target.
WHY_MISSING_TO_TARGET = {"mfu_pct": "MFU is not meaningful on a CPU (its measured ceiling bounds nothing)",
                         "datasheet_mfu_pct": WHY_MISSING["datasheet_mfu_pct"],
                         "peak_mem_gib": WHY_MISSING["peak_mem_gb"], "nvml_util_pct": WHY_MISSING["nvml_util_pct"],
                         "gpm_sm_pct": WHY_MISSING["gpm_sm_pct"]}


def _board(df, kind: str = "ladder") -> "pandas.DataFrame":  # noqa: F821
    """The rows as a table to read; with a ``challenge`` column where they come from more than one challenge (each
    ranked within its own)."""
    import pandas as pd

    several = "challenge" in df and df["challenge"].nunique() > 1
    out = _board_of_one(df, kind)
    out.attrs["notes"] = _sm_above_util_note(out)
    if several:
        out.insert(1, "challenge", df["challenge"].to_numpy())
    return out


def _sm_above_util_note(out) -> list[str]:
    """A note where a row's GPM SM activity reads above its NVML utilisation (06's reference solution on one H200:
    87.4% against 86.7%), which 00 teaches cannot happen at one moment: the two means are not of one moment."""
    import pandas as pd

    nvml = pd.to_numeric(out["nvml_util_pct"], errors="coerce")
    gpm = pd.to_numeric(out["gpm_sm_pct"], errors="coerce")
    above = out.index[(gpm > nvml).to_numpy()]
    if len(above) == 0:
        return []
    names = ", ".join(str(out.loc[r, "name"]) for r in above)
    # the gap as the rows show it: "by a point or so" stood beside 95.2 against 91.7
    gap = max(round(float(gpm[r]), 1) - round(float(nvml[r]), 1) for r in above)
    return [f"GPM's SM activity reads above NVML's utilisation for {names} (by up to {gap:.1f} points): at one "
            "moment it cannot (a busy SM means a kernel is running), but the two are means of different windows "
            "(NVML's over the driver's own sample period before each read, GPM's between two of the monitor's "
            "reads), and over a run of a second or two the windows each mean covers differ at its start and end"]


def _board_of_one(df, kind: str) -> "pandas.DataFrame":  # noqa: F821
    import pandas as pd

    if kind == "to_target":
        out = df[["rank", "name", "date", "time_to_target_s", "accuracy", "target_accuracy", "images", "img_per_s",
                  "mfu_pct", "datasheet_mfu_pct", "peak_mem_gib", "nvml_util_pct", "gpm_sm_pct",
                  "torch"]].set_index("rank")
        out = out.assign(images=pd.to_numeric(out["images"]).round().astype("Int64"))  # counted, shown whole
        out.attrs["missing"] = dict(WHY_MISSING_TO_TARGET)
        # img/s shown as the images over the seconds as the row shows them, so a reader's division agrees with it
        # ("36,864 · 1.62 · 22,694" had read beside each other); the column keeps the measured rate
        out.attrs["ratio_of"] = {"img_per_s": ("images", "time_to_target_s", "column/column")}
        return out
    # MFU over the data sheet's peak stands beside MFU over the measured ceiling: the same run over both
    order = [c for c in (*LADDER.required, *LADDER.optional) if c != "datasheet_mfu_pct"]
    order.insert(order.index("mfu_pct") + 1, "datasheet_mfu_pct")
    out = df[["rank", "name", "date", *order, "torch"]].set_index("rank")
    # shown in GiB, as every notebook gives memory (the entries keep GB: their seal covers the figure as sealed)
    gib = pd.to_numeric(out["peak_mem_gb"], errors="coerce") * 1e9 / 2**30
    out.insert(list(out.columns).index("peak_mem_gb"), "peak_mem_gib", gib)
    out = out.drop(columns="peak_mem_gb")
    # the speed-up shown as the img/s over the baseline's as the row shows them, as each rung's line prints it: the
    # board read 50.2 beside 21,516 and 428 (50.27) where the ladder read 50.3; the column keeps the ranked ratio
    out.attrs["ratio_of"] = {"speedup": ("img_per_s", "baseline_img_per_s", "column/column")}
    out.attrs["missing"] = {("peak_mem_gib" if k == "peak_mem_gb" else k): v for k, v in WHY_MISSING.items()}
    on_cpu = (df["device"] == "cpu").to_numpy()
    if on_cpu.any():  # kept in the entry (its seal covers it), not shown: a CPU's ceiling bounds nothing
        out["mfu_pct"] = pd.to_numeric(out["mfu_pct"], errors="coerce").where(~on_cpu)
        out.attrs["missing"]["mfu_pct"] = WHY_MISSING_TO_TARGET["mfu_pct"]
        out["datasheet_mfu_pct"] = pd.to_numeric(out["datasheet_mfu_pct"], errors="coerce").where(~on_cpu)
    return out


def table(device: str | None = None, *, path: Path | str | None = None, kind: str = "ladder",
          challenge: str | None = None) -> "pandas.DataFrame":  # noqa: F821
    """One device's leaderboard of one kind (this machine's, the ladder's by default): rank, name, date and the
    figures, full precision (``tables.readable(df)`` shows it to read). ``challenge``: that challenge's runs only
    (``rules.challenge(...)``); by default every challenge's, each ranked within its own, with a column naming it
    where there is more than one."""
    device = device or results.device_header()["device"]
    df = entries(path=path, device=device, kind=kind)
    if challenge is not None:
        df = df[df["challenge"] == challenge]
    return _board(df, kind)


def tables(*, path: Path | str | None = None, kind: str | None = None) -> dict[Board, "pandas.DataFrame"]:  # noqa: F821
    """Every leaderboard in the file, each ranked by its own score: ``{Board(device, kind, challenge): table}`` for
    each device, kind of run (or only ``kind``) and challenge, the ladder's before the training to the target on each
    device, the course's challenges before any other. ``str(key)`` is the table's heading::

        for board, t in leaderboard.tables().items():
            print(board)               # "NVIDIA H100 80GB HBM3: training to the accuracy target, quickest first ..."
            display(readable(t))
    """
    out = {}
    for name in KINDS if kind is None else [_kind(kind).name]:
        df = entries(path=path, kind=name)
        out.update({Board(d, name, c): _board(g, name) for (d, c), g in df.groupby(["device", "challenge"], sort=True)})
    return dict(sorted(out.items(), key=lambda kv: (kv[0].device, list(KINDS).index(kv[0].kind),
                                                    not kv[0].challenge.startswith(_COURSE), kv[0].challenge)))
