"""The final challenge's leaderboard: one SQLite file that only the harness writes, with a table for each kind of
run it ranks, each by its own score: the ladder's runs by img/s, the learner's own training by its time to the
accuracy target (quickest first, img/s and MFU beside it). One row per name, configuration and device (the best
run), shown as a table per device and kind.

    from helpers import leaderboard
    print(leaderboard.add(verdict.entry("my fused pool")))  # a ladder run: added / replaced your best / kept your best
    print(leaderboard.add(my_run.entry("Ada", session=session)))  # the learner's training, judged to the target
    leaderboard.table()                                     # this device's ladder runs, fastest first
    leaderboard.table(kind="to_target")                     # this device's runs to the target, quickest first
    leaderboard.tables()                                    # {Board(device, kind, challenge): table} for each one

The file is ``results/leaderboard.sqlite`` at full scale and ``results/local/leaderboard.sqlite`` at smoke
scale (ignored by git: a CPU's runs never mix with a GPU's). Each add is one transaction, so two runs that finish
at once both land, whole, one after the other; a process killed mid-write leaves nothing behind
(:func:`concurrent_writes_check` shows it).

**What an entry is.** ``verdict.entry(name)`` (:class:`helpers.challenge.harness.Verdict`) makes it: the name,
the run's training configuration, where it ran (device, driver, torch, CUDA, host CPU, date), the harness's rule
checks and the figures of :data:`REQUIRED` and :data:`OPTIONAL`. The learner's training judged to the target
(:class:`helpers.challenge.to_target.TrainingVerdict`) makes one of the kind ``"to_target"`` with
``entry(name, session=session)``: its time to the target, timed training, images handed out, img/s, MFU (where the
session's ceiling bounds it), held-out accuracy and the target, the session's ceiling, and the checks of
:data:`TO_TARGET`. Either is *sealed*: an HMAC-SHA256 over a canonical
JSON of all of those, with a random key kept beside the database (``<file>.key``, made with mode 0600 on first
use, ignored by git). :func:`add` refuses, each with one reason: an entry without the seal or not matching it, a
name that is not 1 to 80 printable characters without a space at either end (stored exactly as given otherwise),
an unknown, missing or failed check, a missing, non-numeric, non-finite or out-of-range figure (any real number
type is taken: int, float, numpy scalars), and figures that disagree with one another (on the ladder the speed-up
must be img/s over the baseline's img/s and MFU 100 × speed-up over its bound; to the target the time must be the
timed training's, img/s the images over that time, MFU 100 × img/s over the session's ceiling, and the accuracy at
least the target). Every entry names the challenge it was judged on (``Entry.challenge``: the rules, and for the
learner's training the target, in words: ``Rules.challenge``), and is ranked only beside runs of the same challenge,
on a board whose heading names it: a run judged on rules or a target of its own never ranks beside the course's.
One row is kept per name, configuration, device and challenge: a better run (faster on the ladder, quicker
to the target) replaces it, a worse one is kept out, and the result says which. A file of the layout before the
learner's training was ranked gains its table at the first write, its ladder rows kept as they are.
A file the leaderboard cannot read (damaged, of an earlier version, another program's) is never written,
overwritten or removed: the error names the file and what to do, as every file error here does.

**Threat model.** The leaderboard protects against figures typed by hand (an ``Entry`` built by hand, every check
set True: no seal), an entry edited after the harness sealed it (the seal no longer matches), a verdict edited
before its entry was made (any figure, its accuracy, its checks: ``entry()`` ranks the judge's own record of the
run, ``harness._RECORDED`` or ``to_target._RECORDED``, not the verdict object), a run judged on rules or a target of
its own (ranked apart, under its own challenge), figures that contradict each other, duplicate rows, junk names and
numbers, and damaged files. It does
not protect against a learner who reads the key file (it sits beside the database, readable by its owner), calls
the sealing function, edits the harness in their own copy, changes the judge's records from code running in the
same process, or edits the SQLite file directly: the seal is an honesty check within one copy of the course, not a
security boundary. To judge a class, run
``python -m helpers.challenge.classroom FOLDER``: each learner's training function in a process of its own, the
entries sealed outside it, and any change a submission makes to the database or its key undone and refused.

**The package.** One job a module, each importing only the ones before it: :mod:`.entry` (what an entry is and
every check of its content), :mod:`.seal` (where the database and its key lie; the seal), :mod:`.store` (the SQLite
file: add, read, tables), :mod:`.concurrency` (concurrent writers, measured). Everything is used from here
(``leaderboard.add``, ``leaderboard.Entry``, ...).
"""

from __future__ import annotations

from .entry import CHALLENGE_MAX, CHECKS, KINDS, LADDER, NAME_MAX, OPTIONAL, REQUIRED, TO_TARGET, Entry, EntryRefused, \
    Kind, configuration_of
from .seal import LeaderboardFileError, _seal, default_path, key_path
from .store import WHY_MISSING, WHY_MISSING_TO_TARGET, Added, Board, _board, _connect, add, entries, table, tables
from .concurrency import ConcurrentWrites, _die_mid_write, concurrent_writes_check

# Also reached as leaderboard.<name> from outside the package, so kept here beside the public names: _board
# (tests/test_tables.py), _seal (the harness's Verdict.entry; the tests), _connect and _die_mid_write
# (the tests). Patch a name in the module that looks it up (leaderboard.store._connect), not here.

__all__ = ["REQUIRED", "OPTIONAL", "CHECKS", "NAME_MAX", "CHALLENGE_MAX", "Kind", "KINDS", "LADDER", "TO_TARGET", "Entry",
           "EntryRefused", "LeaderboardFileError", "Added", "Board", "configuration_of", "default_path", "key_path",
           "add", "entries", "table", "tables", "WHY_MISSING", "WHY_MISSING_TO_TARGET", "ConcurrentWrites",
           "concurrent_writes_check"]
