"""The final challenge's leaderboard: one SQLite file that only the harness writes, one row per name, configuration
and device (the best run), shown as a table per device.

    from helpers import leaderboard
    print(leaderboard.add(verdict.entry("my fused pool")))  # added / replaced your best / kept your best
    leaderboard.table()                                     # this device's runs, fastest first
    leaderboard.tables()                                    # {device: table} for every device in the file

The file is ``results/leaderboard.sqlite`` at full scale and ``results/local/leaderboard.sqlite`` at smoke
scale (ignored by git: a CPU's runs never mix with a GPU's). Each add is one transaction, so two runs that finish
at once both land, whole, one after the other; a process killed mid-write leaves nothing behind
(:func:`concurrent_writes_check` shows it).

**What an entry is.** ``verdict.entry(name)`` (:class:`helpers.challenge.harness.Verdict`) makes it: the name,
the run's training configuration, where it ran (device, driver, torch, CUDA, host CPU, date), the harness's rule
checks and the figures of :data:`REQUIRED` and :data:`OPTIONAL`. It is *sealed*: an HMAC-SHA256 over a canonical
JSON of all of those, with a random key kept beside the database (``<file>.key``, made with mode 0600 on first
use, ignored by git). :func:`add` refuses, each with one reason: an entry without the seal or not matching it, a
name that is not 1 to 80 printable characters without a space at either end (stored exactly as given otherwise),
an unknown, missing or failed check, a missing, non-numeric, non-finite or out-of-range figure (any real number
type is taken: int, float, numpy scalars), and figures that disagree with one another (the speed-up must be
img/s over the baseline's img/s, MFU must be 100 × speed-up over its bound). One row is kept per name,
configuration and device: a faster run replaces it, a slower one is kept out, and the result says which.
A file the leaderboard cannot read (damaged, of an earlier version, another program's) is never written,
overwritten or removed: the error names the file and what to do, as every file error here does.

**Threat model.** The leaderboard protects against figures typed by hand (an ``Entry`` built by hand, every check
set True: no seal), an entry edited after the harness sealed it (the seal no longer matches), a verdict's img/s
or step time edited before its entry was made (``Verdict.entry`` compares them with the training run recorded
with them), figures that contradict each other, duplicate rows, junk names and numbers, and damaged files. It does
not protect against a learner who reads the key file (it sits beside the database, readable by its owner), calls
the sealing function, edits the harness in their own copy, edits a verdict's accuracy or checks in Python before
``verdict.entry``, builds a fake training record to match, or edits the SQLite file directly: the seal is an
honesty check within one copy of the course, not a security boundary. To judge a class, run
``python -m helpers.challenge.classroom FOLDER``: each submission in a process of its own, the entries sealed
outside it, and any change a submission makes to the database or its key undone and refused.

**The package.** One job a module, each importing only the ones before it: :mod:`.entry` (what an entry is and
every check of its content), :mod:`.seal` (where the database and its key lie; the seal), :mod:`.store` (the SQLite
file: add, read, tables), :mod:`.concurrency` (concurrent writers, measured). Everything is used from here
(``leaderboard.add``, ``leaderboard.Entry``, ...).
"""

from __future__ import annotations

from .entry import CHECKS, NAME_MAX, OPTIONAL, REQUIRED, Entry, EntryRefused, configuration_of
from .seal import LeaderboardFileError, _seal, default_path, key_path
from .store import WHY_MISSING, Added, _board, _connect, add, entries, table, tables
from .concurrency import ConcurrentWrites, _die_mid_write, concurrent_writes_check

# Also reached as leaderboard.<name> from outside the package, so kept here beside the public names: WHY_MISSING
# and _board (tests/test_tables.py), _seal (the harness's Verdict.entry; the tests), _connect and _die_mid_write
# (the tests). Patch a name in the module that looks it up (leaderboard.store._connect), not here.

__all__ = ["REQUIRED", "OPTIONAL", "CHECKS", "NAME_MAX", "Entry", "EntryRefused", "LeaderboardFileError", "Added",
           "configuration_of", "default_path", "key_path", "add", "entries", "table", "tables", "ConcurrentWrites",
           "concurrent_writes_check"]
