"""Judge a whole class in one command: a folder of training functions, each judged to the accuracy target in a fresh
process with a time limit, all in one session measured at the start; ranked by the time to the target, and put on
the leaderboard.

    python -m helpers.challenge.classroom submissions/                  # every *.py in the folder
    python -m helpers.challenge.classroom submissions/ --time-limit 600 --out class-results/

A submission is a Python file that defines ``train(model, data, device)``, the learner's training function (it
trains the network it is given on the data the harness hands it and returns it: :mod:`.to_target`), and
optionally ``build_model(model)`` (takes the reference network, returns one that computes the same function: fused
kernels, a padded first convolution) and ``NAME`` (the leaderboard's name; the file's name otherwise)::

    # submissions/ada.py
    from helpers.challenge.recipes import reference_build, reference_training
    from helpers.challenge.rules import Rules
    NAME = "Ada"
    train = reference_training(Rules.at_scale())    # or: def train(model, data, device): ... return model
    build_model = reference_build

From Python: ``result = judge_class("submissions/")``; ``print(result)`` shows the ranked table.

**What one command does.** A first process measures this machine's ceilings and reads the accuracy target
(:func:`.accuracy.time_target`) and where the entries are made (device, driver, versions); it is written to
``session.json`` in the output folder, and this process keeps its own copy. Then each submission runs alone in a
process of its own (``python -m helpers.challenge.class_children --one FILE``), which imports the file and judges
its function with :func:`.to_target.judge_training` (the rehearsal, the timed call, the held-out accuracy on the
reference network's forward), and writes its verdict to a JSON file; what the process prints goes to its log, never
into a result. This process ranks the runs that passed by their time to the target (smallest first; img/s and MFU
beside it), writes ``class.md`` and ``class.json``, and puts every run that passed on the leaderboard
(``leaderboard.table(kind="to_target")``), sealing the entries itself. No classic loop is judged for reference:
the ranking needs none, and on a GPU the classic loop costs minutes (put ``examples/class/classic_loop.py`` in the
folder to have it in the table).

**Refused, with the reason:** a file that does not import or defines no callable ``train``; a run the harness
refuses (another function, no images from the training set, the target missed, an exception: each check's
reason); a process that crashes, is killed, or ends without a verdict (its exit code and the last lines it
printed); one that runs past the time limit (killed with every process it started); one whose verdict does not
hold together (figures that disagree, a target or ceiling other than this session's); and one that changed the
leaderboard's file or its key, the session, or another submission's file while it ran (each is put back as it was
before that submission). So nothing else may write that leaderboard while a class is judged (a notebook's run, a
second class): a change made while a submission runs is put back, and blamed on it.

**Threat model.** A submission is Python, and the class judge runs it: the learner's code runs inside the process
that judges it (a child of this one, one per submission), with the rights of whoever runs the judge. It can reach
everything that process can: its memory, which holds the harness's own objects (the clock, the counter of images
handed out, the spot check, the verdict before it is written), the helpers' code (which can draw the held-out
images too), and every file the user can write, the leaderboard's key included.

Inside that process the harness refuses, each with its reason: a network that computes another function (before
training, at a spot check while it trains, and as returned), a run that takes no image from the training set it
hands out or returns another network, a held-out accuracy below the target (measured with the reference network's
own forward on the returned weights), and an exception.

This command does not take the child's word for its verdict: the child writes it, this process reads it as
evidence. A verdict whose figures disagree is refused (the time to the target must be the timed call's, img/s the
images over it, MFU img/s over this session's ceiling, the accuracy at least this session's target: this process's
copies of the target and the ceiling, not the child's); the leaderboard entry is sealed here, never in the child;
the leaderboard's file and key, the session and the other submissions' files are hashed before and after each
child, and any change is put back and refused; a time limit ends a child that hangs, with every process in its
group.

It does not protect against code that patches the harness from inside its own process (as the file is imported,
or from the training function: the clock, the counter, the accuracy, the check), trains on images it draws itself
(the held-out set included) once it has taken one batch from the training set, or writes a consistent verdict of
its own in place of the harness's; against a process that leaves its group (``setsid``) and outlives the time
limit; against a submission that copies the key and seals entries later; nor against a learner who edits the
harness in their own copy (a class is judged with the instructor's). Read the files before judging them: they are
short. A judge that trusts nothing the submission's process computes (the training run as another user, in a
sandbox, with the data handed out, the clock read and the returned weights evaluated by a process the learner's
code cannot reach) is future work.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .class_children import _clean_name, _printable, _write_atomic
from .isolation import Proc, Watched, run_limited

__all__ = ["judge_class", "ClassResult", "Judged", "main"]

#: Seconds a submission may run (its process: import, the function check, rehearsal, timed call, held-out
#: evaluation) by default.
TIME_LIMIT_S = {"smoke": 300.0, "full": 900.0}


@dataclasses.dataclass(frozen=True)
class Judged:
    """One submission's outcome: its verdict's figures and checks, or why it has none."""

    file: str
    name: str
    passed: bool
    reasons: tuple[str, ...]
    figures: dict[str, float | None]  # the leaderboard's (leaderboard.TO_TARGET), as this process checked them
    checks: dict[str, bool]
    configuration: str  # the submission file's hash: one leaderboard row per name, file and device
    wall_s: float  # its process, from start to end, measured here
    leaderboard: str = ""  # what the leaderboard did with it (or why it refused it)

    @property
    def time_to_target_s(self) -> float:
        """The score (NaN for a run that did not pass)."""
        v = self.figures.get("time_to_target_s")
        return math.nan if v is None or not self.passed else float(v)

    @property
    def img_per_s(self) -> float:
        v = self.figures.get("img_per_s")
        return math.nan if v is None else float(v)


@dataclasses.dataclass(frozen=True)
class ClassResult:
    """A class judged in one session: the accuracy target, each submission (ranked: passed first, quickest to the
    target first)."""

    target: float  # the held-out accuracy each run had to reach
    device: str
    judged: tuple[Judged, ...]
    wall_s: float
    out_dir: str

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for rank, j in enumerate(self.judged, 1):
            f = j.figures
            rows.append({"rank": rank if j.passed else None, "name": j.name, "file": j.file,
                         "time to target s": f.get("time_to_target_s") if j.passed else None,
                         "img/s": f.get("img_per_s"), "MFU %": f.get("mfu_pct"),
                         "accuracy %": None if f.get("accuracy") is None else 100 * f["accuracy"],
                         "images": None if f.get("images") is None else int(f["images"]),
                         "verdict": "passed" if j.passed else "REFUSED: " + "; ".join(j.reasons),
                         "wall s": j.wall_s})
        return rows

    def markdown(self) -> str:
        def num(v, fmt):
            return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

        head = (f"Class judged on {self.device}: each training function's time to {self.target:.1%} held-out "
                f"accuracy; {_count(len(self.judged))} in {self.wall_s:,.0f} s.\n\n")
        lines = ["| rank | name | time to target s | img/s | MFU % | accuracy % | images | verdict | wall s |",
                 "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in self.rows():
            verdict = r["verdict"].replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {r['rank'] or '—'} | {r['name'].replace('|', '/')} | {num(r['time to target s'], '.3g')}"
                         f" | {num(r['img/s'], ',.0f')} | {num(r['MFU %'], '.1f')} | {num(r['accuracy %'], '.1f')} | "
                         f"{num(r['images'], ',')} | {verdict} | {r['wall s']:.0f} |")
        notes = []
        if any(j.figures.get("mfu_pct") is None and j.figures.get("img_per_s") is not None for j in self.judged):
            notes.append("MFU: not meaningful where the session's ceiling bounds nothing (a CPU)")
        return head + "\n".join(lines) + "\n" + "".join(f"\n— {n}.\n" for n in notes)

    def __str__(self) -> str:
        return self.markdown()


def _count(n: int) -> str:
    return f"{n} submission" if n == 1 else f"{n} submissions"


# -- the parent: one session, one process per submission ----------------------------------------------------------
def judge_class(folder: Path | str, *, out_dir: Path | str | None = None, time_limit_s: float | None = None,
                leaderboard_path: Path | str | None = None, python: str | None = None, rules=None, ceilings=None,
                target=None, say=print) -> ClassResult:
    """Judge every ``*.py`` in ``folder`` (files starting with ``_`` are left out), each in a fresh process, in one
    session; rank them by their time to the target; add those that passed to the leaderboard (``leaderboard_path``,
    its default file by default). ``rules``/``ceilings``/``target``: this machine's (:meth:`Rules.at_scale`,
    measured, :func:`.accuracy.time_target`) by default; tests give small ones. ``say`` gets one line per
    submission as it is judged."""
    from .. import env, leaderboard

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder; give the folder that holds the submission files.")
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise FileNotFoundError(f"{folder}: no submission files (*.py) in it.")
    out = Path(out_dir) if out_dir is not None else folder / "judged"
    out.mkdir(parents=True, exist_ok=True)
    limit = time_limit_s or TIME_LIMIT_S[env.scale()]
    board = Path(leaderboard_path) if leaderboard_path is not None else leaderboard.default_path()
    python = python or sys.executable
    start = time.perf_counter()

    session_file = out / "session.json"
    setup = {"rules": dataclasses.asdict(rules) if rules is not None else None,
             "ceilings": dataclasses.asdict(ceilings) if ceilings is not None else None,
             "target": dataclasses.asdict(target) if target is not None else None}
    (out / "setup.json").write_text(json.dumps(setup))
    say(f"measuring this machine's ceilings and reading the accuracy target (once, for {_count(len(files))}) ...")
    proc = run_limited([python, "-m", "helpers.challenge.class_children", "--session-setup",
                        str(out / "setup.json"), "--result", str(session_file)], out / "session.log", limit)
    if proc.outcome != "done" or not session_file.exists():
        raise RuntimeError(f"the session did not start ({proc.why}); its log: {out / 'session.log'}\n{proc.tail}")
    session = json.loads(session_file.read_text())  # this process's copy: what every run is checked against
    say(f"target: {session['target']['threshold']:.1%} held-out accuracy, on {session['device']}")

    # the copies of the files to put back lie in a folder of this user's only, removed at the end: never beside the
    # class's logs, which an instructor may share
    private = Path(tempfile.mkdtemp(prefix="class-judge-"))
    try:
        judged = _judge_each(files, out, private, board, session_file, session, limit, python, say)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    ranked = _ranked(judged)
    res = ClassResult(session["target"]["threshold"], session["device"], tuple(ranked), time.perf_counter() - start,
                      str(out))
    (out / "class.md").write_text(res.markdown())
    (out / "class.json").write_text(json.dumps({"device": res.device, "wall_s": res.wall_s, "target": res.target,
                                                "rows": res.rows()}, indent=1, default=str) + "\n")
    return res


def _ranked(judged: list[Judged]) -> list[Judged]:
    """Passed first, the quickest to the target first (not the highest img/s: a run that trains fewer images at a
    lower rate can reach the target sooner); then the refused, by name."""
    return sorted(judged, key=lambda j: (not j.passed, j.time_to_target_s if j.passed else 0.0, j.name))


def _judge_each(files: list[Path], out: Path, private: Path, board: Path, session_file: Path, session: dict,
                limit: float, python: str, say) -> list[Judged]:
    """Each submission in a process of its own, in turn; what passed on the leaderboard (sealed here)."""
    from .. import leaderboard

    key = leaderboard.key_path(board)
    # SQLite's journal beside the file: one left by a process killed mid-write would be played back over the file
    # put back
    board_files = [board, key, *(board.with_name(board.name + s) for s in ("-journal", "-wal", "-shm"))]
    hashes = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}  # read before any submission runs
    judged = []
    for f in files:
        result = out / f"{f.stem}.json"
        result.unlink(missing_ok=True)
        _write_atomic(session_file, session)  # as measured, whatever an earlier submission did to it
        watch = Watched(board_files + [session_file] + [g for g in files if g != f], private)
        t0 = time.perf_counter()
        proc = run_limited([python, "-m", "helpers.challenge.class_children", "--one", str(f), "--session",
                            str(session_file), "--result", str(result)], out / f"{f.stem}.log", limit)
        wall = time.perf_counter() - t0
        changed = watch.restore_changed()
        j = _read_result(f, result, proc, wall, session, hashes[f])
        j = _refuse_changes(j, changed, board_files)
        j = _add_to_board(j, board, session)
        judged.append(j)
        say(f"{j.name}: " + (f"reached the target in {j.time_to_target_s:.3g} s, passed" if j.passed else
                             "REFUSED: " + "; ".join(j.reasons)) + f" ({wall:.0f} s)")
    return judged


def _figure(v: Any) -> float | None:
    """A figure read from a child's result: a finite number, or None."""
    x = None if v is None else float(v)
    return x if x is None or math.isfinite(x) else None


def _read_result(f: Path, result: Path, proc: Proc, wall: float, session: dict, digest: str) -> Judged:
    """The child's result, read as evidence: its checks must all pass and its figures hold together with this
    session's target and ceiling (this process's copies), or the run is refused with what was wrong."""
    from .. import leaderboard

    configuration = leaderboard.configuration_of({"file": f.name, "sha256": digest})
    if proc.outcome != "done":
        lines = [line for line in proc.tail.splitlines() if line.strip()]
        last = f"; its last output: {_printable(lines[-1], 160)}" if lines else ""
        return Judged(f.name, f.stem, False, (proc.why + last,), {}, {}, configuration, wall)
    try:
        data = json.loads(result.read_text())
        name = _clean_name(data["name"], f.stem)
        reasons = tuple(_printable(r, 1500) for r in data["reasons"])  # an exception's text is the learner's
        figures = {str(k): _figure(v) for k, v in data["figures"].items()}
        checks = {str(k): v for k, v in data["checks"].items()}
        if not all(isinstance(v, bool) for v in checks.values()):
            raise TypeError("checks")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return Judged(f.name, f.stem, False, ("its process ended without a readable verdict",), {}, {},
                      configuration, wall)
    if not data.get("passed") or not checks or not all(checks.values()):
        return Judged(f.name, name, False, reasons or ("its verdict did not pass",), figures, checks, configuration,
                      wall)
    # this session's, not the child's: a verdict judged against another target or ceiling disagrees below
    figures = {**figures, "target_accuracy": session["target"]["threshold"],
               "ceiling_img_per_s": session["ceiling_img_per_s"]}
    try:
        leaderboard.Entry.of(name, figures, checks, session["header"], configuration=configuration,
                             kind="to_target").validate()
    except leaderboard.EntryRefused as e:
        return Judged(f.name, name, False, (f"its verdict does not hold together: {e}",), figures, checks,
                      configuration, wall)
    return Judged(f.name, name, True, (), figures, checks, configuration, wall)


def _refuse_changes(j: Judged, changed: list[Path], board_files: list[Path]) -> Judged:
    if not changed:
        return j
    mine = [p.name for p in changed if p in board_files]
    others = [p.name for p in changed if p not in board_files]
    why = []
    if mine:
        why.append(f"it changed the leaderboard's files itself ({', '.join(mine)}): only the class judge writes them "
                   "(they were put back as they were)")
    if others:
        why.append(f"it changed files of the class judge's ({', '.join(others)}): the session and the other "
                   "submissions are not a submission's to write (they were put back as they were)")
    return dataclasses.replace(j, passed=False, reasons=tuple(why) + j.reasons)


def _add_to_board(j: Judged, board: Path, session: dict) -> Judged:
    """Seal ``j``'s entry here (never in the submission's process) and add it; a refused run is not added."""
    from .. import leaderboard

    if not j.passed:
        return dataclasses.replace(j, leaderboard="not added: refused")
    try:
        entry = leaderboard._seal(leaderboard.Entry.of(j.name, j.figures, j.checks, session["header"],
                                                       configuration=j.configuration, kind="to_target"), path=board)
        return dataclasses.replace(j, leaderboard=str(leaderboard.add(entry, path=board)))
    except (leaderboard.EntryRefused, leaderboard.LeaderboardFileError) as e:
        return dataclasses.replace(j, leaderboard=f"not added: {e}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.challenge.classroom",
                                 description="Judge every training function (a submission file: train(model, data, "
                                             "device)) in a folder to the accuracy target, one fresh process each; "
                                             "print the class ranked by time to the target and add it to the "
                                             "leaderboard.")
    ap.add_argument("folder", nargs="?", help="the folder of submission files (*.py)")
    ap.add_argument("--out", default=None, help="where the logs, session.json, class.md and class.json go "
                                                "(default: FOLDER/judged)")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per submission (default: 900 on a "
                                                                   "GPU, 300 at smoke scale)")
    ap.add_argument("--leaderboard", default=None, help="the leaderboard file (default: the course's)")
    args = ap.parse_args(argv)
    if not args.folder:
        ap.error("give the folder of submission files")
    try:
        res = judge_class(args.folder, out_dir=args.out, time_limit_s=args.time_limit,
                          leaderboard_path=args.leaderboard)
    except (FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print()
    print(res)
    print(f"written: {Path(res.out_dir) / 'class.md'}, {Path(res.out_dir) / 'class.json'}; logs beside them")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
