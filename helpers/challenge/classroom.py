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
fresh process (``python -m helpers.challenge.class_children --one FILE``) started in an empty working folder of its
own that holds a copy of its file and of the session, with every cache and temporary folder inside it. That process
confines itself before the file is imported (:func:`.sandbox.confine`), imports it, and runs
:func:`.to_target.judge_training` (the function check, the rehearsal, the timed call) with a gate to this process:
this process starts its own clock when the harness there is ready and stops it when it holds the trained weights,
handed over through a pipe. It then evaluates those weights itself (a fresh reference network's forward, on
held-out images drawn here for the class), ranks the runs that passed by that time (smallest first; img/s and MFU
beside it), writes ``class.md`` and ``class.json``, and puts every run that passed on the leaderboard
(``leaderboard.table(kind="to_target")``), sealing the entries itself. No classic loop is judged for reference:
put ``examples/class/classic_loop.py`` in the folder to have it in the table.

**Refused, with the reason:** a file that does not import or defines no callable ``train``; a run the harness in
its process refuses (another function, no images from the training set, an exception: each check's reason); weights
that miss the target on the judge's own held-out images, or are not finite; a process that hands over no weights,
breaks the gate's protocol, crashes, is killed, or ends without a readable result (its exit code and last lines);
one that runs past the time limit (killed with every process it started); one that leaves a process behind after its
own ended (found because this process is a subreaper, ``setsid`` included, and ended); and one that changed the
leaderboard's file or its key, the session or another submission's file (each is put back as it was: the fallback
where the kernel has no Landlock). Whatever goes wrong with one submission is its refusal: the class is judged to
the end and its table written.

**Threat model.** What a submission's process can touch: with Landlock (Linux 5.13 and later, no root), nothing but
its working folder and device files for writing, nothing of the class's folder, the judge's folders, the leaderboard
or its key for reading, and from ABI 6 (Linux 6.12) no signal or trace of a process outside its own domain. What the
judge takes from it: the moment it is ready, the trained weights (fp32, the reference's parameters), and, as
evidence only, the harness's two checks there and the count of images handed out; the time, the held-out accuracy,
the target and the ceiling are this process's own. What this does not protect against: weights trained before the
clock (the task's images are public, so a submission can make its own at import and train on them; a task drawn
afresh per class, handed out once the clock runs, closes this once a target is measured over such draws); a forged
image count or forged function checks from a determined submission (its process is its own); a kernel without
Landlock (the judge then only hashes and puts back the files it watches, and a submission can signal it); and a
learner who edits the harness in their own copy (a class is judged with the instructor's, on the instructor's
machine). Read the files before judging them: they are short.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import tables
from . import sandbox
from .class_children import _clean_name, _printable, _write_atomic
from .isolation import Gated, Watched, reference_shapes, run_gated, run_limited

__all__ = ["judge_class", "ClassResult", "Judged", "main"]

#: Seconds a submission may run (its process: import, the function check, rehearsal, timed call, held-out
#: evaluation) by default.
TIME_LIMIT_S = {"smoke": 300.0, "full": 900.0}
#: Seconds the session's own process may take at least (the ceilings measured, the start weights made once for every
#: submission: at smoke scale a warm start trained on 4,096 images), whatever the submissions' limit.
SESSION_LIMIT_S = 600.0


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
                        str(out / "setup.json"), "--result", str(session_file)], out / "session.log",
                       max(limit, SESSION_LIMIT_S))
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
    """Each submission in a process of its own, in turn; what passed on the leaderboard (sealed here). Whatever goes
    wrong with one submission is its refusal, with the reason: the class is judged to the end."""
    from .. import leaderboard
    from .accuracy import fresh_stream
    from .rules import Rules

    key = leaderboard.key_path(board)
    # SQLite's journal beside the file: one left by a process killed mid-write would be played back over the file
    # put back
    board_files = [board, key, *(board.with_name(board.name + s) for s in ("-journal", "-wal", "-shm"))]
    hashes = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}  # read before any submission runs
    rules = Rules(**session["rules"])
    # the class's held-out images: another draw of the same classes, made here and known to no submission's process
    stream = fresh_stream()
    judged = []
    with sandbox.reaping() as reaper:
        for i, f in enumerate(files):
            t0 = time.perf_counter()
            try:
                j = _judge_one(i, f, files, out, private, board_files, session_file, session, rules, stream, limit,
                               python, hashes[f], reaper)
            except Exception as e:  # noqa: BLE001 - the judge's own trouble with one submission refuses it, no more
                j = Judged(f.name, f.stem, False, (f"the class judge could not judge it: {type(e).__name__}: "
                                                   f"{_printable(e, 300)}",), {}, {}, "", time.perf_counter() - t0)
            j = _add_to_board(j, board, session)
            judged.append(j)
            say(f"{j.name}: " + (f"reached the target in {j.time_to_target_s:.3g} s, passed" if j.passed else
                                 "REFUSED: " + "; ".join(j.reasons)) + f" ({j.wall_s:.0f} s)")
    return judged


def _child_env(work: Path) -> dict[str, str]:
    """The submission's environment: this one's, with every compiler cache and temporary folder in its own working
    folder (a compiler cache shared between submissions would let one change what the next one runs)."""
    from .. import data

    # the data cache (the start weights, generated sets) is the judge's: readable, not writable where confined
    env = {**os.environ, "HELPERS_CACHE": str(data.cache_dir())}
    for var, sub in (("HOME", "home"), ("TMPDIR", "tmp"), ("XDG_CACHE_HOME", "cache"), ("TORCHINDUCTOR_CACHE_DIR",
                     "inductor"), ("TRITON_CACHE_DIR", "triton"), ("CUDA_CACHE_PATH", "nv"), ("MPLCONFIGDIR", "mpl")):
        (work / sub).mkdir(exist_ok=True)
        env[var] = str(work / sub)
    return env


def _judge_one(i: int, f: Path, files: list[Path], out: Path, private: Path, board_files: list[Path],
               session_file: Path, session: dict, rules, stream: int, limit: float, python: str, digest: str,
               reaper: "sandbox.Reaper") -> Judged:
    """One submission: a fresh, empty working folder holding a copy of its file and of the session; its process
    confined to that folder (where the kernel offers Landlock); timed through the gate; its weights judged here."""
    from .. import leaderboard

    configuration = leaderboard.configuration_of({"file": f.name, "sha256": digest})
    work = private / f"work-{i}"
    work.mkdir()
    try:
        copy = work / f.name
        shutil.copyfile(f, copy)
        _write_atomic(session_file, session)  # the class's copy, as measured, whatever an earlier submission did
        _write_atomic(work / "session.json", session)  # the submission's own copy
        result = work / "result.json"
        copies = private / f"copies-{i}"
        copies.mkdir()
        watch = Watched(board_files + [session_file] + [g for g in files if g != f], copies)
        hide = [f.parent, out, private, *board_files]
        cmd = [python, "-m", "helpers.challenge.class_children", "--one", str(copy), "--session",
               str(work / "session.json"), "--result", str(result), "--confine", str(work)]
        cmd += [a for h in hide for a in ("--hide", str(h))]
        reaper.before()
        t0 = time.perf_counter()
        gated = run_gated(cmd, out / f"{f.stem}.log", limit, expect_bytes=4 * sum(s.numel() for _, s in
                                                                                  reference_shapes(rules.image_size)),
                          cwd=work, env=_child_env(work))
        left = reaper.leftovers(gated.pid)
        sandbox.kill([pid for pid, _ in left])
        wall = time.perf_counter() - t0
        changed = watch.restore_changed()
        j = _verdict(f, gated, result, session, rules, stream, configuration, wall)
        j = _refuse_changes(j, changed, board_files)
        if left:
            pids = ", ".join(str(p) for p, _ in left)
            outside = ", outside its process group" if any(e for _, e in left) else ""
            j = dataclasses.replace(j, passed=False, reasons=(
                f"it left {len(left)} process{'es' * (len(left) > 1)} running after its own ended (pid {pids}{outside})"
                ": they were ended; a submission's work ends with its process",) + j.reasons)
        return j
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _figure(v: Any) -> float | None:
    """A figure read from a child's result: a finite number, or None."""
    x = None if v is None or isinstance(v, bool) else float(v)
    return x if x is None or math.isfinite(x) else None


def _evidence(result: Path) -> tuple[dict | None, str]:
    """The child's result file, read as evidence: (its content, "") or (None, what was wrong with it). Never raises."""
    try:
        data = json.loads(result.read_text())
        if not isinstance(data, dict):
            return None, f"its result is a JSON {type(data).__name__}, not the harness's verdict"
        name, reasons, figures, checks = data["name"], data["reasons"], data["figures"], data["checks"]
        if not isinstance(reasons, list) or not isinstance(figures, dict) or not isinstance(checks, dict):
            return None, "its result does not have the harness's shape (reasons, figures, checks)"
        if not all(isinstance(v, bool) for v in checks.values()) or not isinstance(data.get("passed"), bool):
            return None, "its result's checks are not each true or false"
        return {"name": name, "passed": data["passed"], "reasons": [_printable(r, 1500) for r in reasons],
                "figures": {str(k): _figure(v) for k, v in figures.items()},
                "checks": {str(k): v for k, v in checks.items()}}, ""
    except FileNotFoundError:
        return None, "its process ended without a readable verdict (it wrote none)"
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError) as e:
        return None, f"its result could not be read ({type(e).__name__})"


def _judge_weights(weights: bytes, rules, stream: int) -> float:
    """The held-out accuracy of the weights a submission handed over: loaded into a fresh reference network here, its
    own forward, on the class's held-out images (``stream``: drawn by this process). NaN where a weight is not
    finite."""
    import numpy as np
    import torch

    from .. import env
    from ..models import ReferenceCNN
    from .accuracy import heldout_accuracy

    flat = np.frombuffer(weights, dtype=np.float32)
    if not np.isfinite(flat).all():
        return math.nan
    net = ReferenceCNN(rules.image_size)
    off = 0
    with torch.no_grad():
        for _, p in net.named_parameters():
            p.copy_(torch.from_numpy(flat[off:off + p.numel()].copy()).view(p.shape))
            off += p.numel()
    return heldout_accuracy(net.to(env.device()), image_size=rules.image_size, precision="fp32",
                            n=rules.to_target_heldout, seed=rules.seed, task=rules.task, stream=stream)


def _verdict(f: Path, gated: Gated, result: Path, session: dict, rules, stream: int, configuration: str,
             wall: float) -> Judged:
    """What this process concludes: the time is its own clock's (go to the weights in hand), the accuracy its own
    evaluation of those weights, the target and the ceiling its own copies; from the child's result it takes only the
    harness's two checks there (the function and the images) and the images handed out, as evidence."""
    from .. import leaderboard

    proc = gated.proc

    def refused(*why: str, name: str = f.stem, figures: dict | None = None, checks: dict | None = None) -> Judged:
        return Judged(f.name, name, False, tuple(why), figures or {}, checks or {}, configuration, wall)

    if gated.broke:  # first: the judge ended the process for it, so its end says nothing more
        return refused(gated.broke + ": the harness in its process talks to the judge, not the submission")
    if proc.outcome != "done":
        lines = [line for line in proc.tail.splitlines() if line.strip()]
        last = f"; its last output: {_printable(lines[-1], 160)}" if lines else ""
        return refused(proc.why + last)
    data, why = _evidence(result)
    if data is None:
        return refused(why)
    name = _clean_name(data["name"], f.stem)
    checks = {k: v for k, v in data["checks"].items() if k in ("same_function", "images_seen")}
    harness_refused = [r for r in data["reasons"] if not r.startswith("accuracy_target")]
    if not checks or not all(checks.values()) or harness_refused:
        return refused(*(harness_refused or ["its verdict did not pass"]), name=name, checks=checks)
    if gated.weights is None or gated.train_s is None:
        return refused("it handed the judge no trained weights (the harness hands them over when the training "
                       "function returns)", name=name, checks=checks)
    images = data["figures"].get("images")
    if images is None or images < 1 or images != round(images):
        return refused(f"its process reported {images!r} images handed out: the harness reports a whole number",
                       name=name, checks=checks)
    accuracy = _judge_weights(gated.weights, rules, stream)
    threshold = session["target"]["threshold"]
    train_s = gated.train_s
    img = images / train_s
    bounded = session["ceilings"].get("bounds", True)
    figures = {"time_to_target_s": train_s, "train_s": train_s, "images": float(images), "img_per_s": img,
               "accuracy": accuracy, "target_accuracy": threshold, "ceiling_img_per_s": session["ceiling_img_per_s"],
               # from the rate as printed (images over the time to three figures), as judge_training computes it
               "mfu_pct": (100 * tables.rate_as_shown(images, train_s) / session["ceiling_img_per_s"]
                           if bounded else None),
               **{k: data["figures"].get(k) for k in ("peak_mem_gib", "nvml_util_pct", "gpm_sm_pct")}}
    if not math.isfinite(accuracy):
        return refused("the weights it handed over are not all finite (the run diverged)", name=name,
                       figures={**figures, "accuracy": None}, checks={**checks, "accuracy_target": False})
    checks["accuracy_target"] = accuracy >= threshold
    if not checks["accuracy_target"]:
        return refused(f"accuracy_target: held-out accuracy {accuracy:.1%} (the judge's own images, the reference "
                       f"network's forward on the weights handed over); the target is {threshold:.1%}, missed after "
                       f"{train_s:.3g} s", name=name, figures=figures, checks=checks)
    try:
        leaderboard.Entry.of(name, figures, checks, session["header"], configuration=configuration,
                             kind="to_target", challenge=rules.challenge(threshold)).validate()
    except leaderboard.EntryRefused as e:
        return refused(f"its figures do not hold together: {e}", name=name, figures=figures, checks=checks)
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
    from .rules import Rules

    if not j.passed:
        return dataclasses.replace(j, leaderboard="not added: refused")
    try:
        # the challenge: the judge's own rules and target (the same for every submission of the class)
        challenge = Rules(**session["rules"]).challenge(session["target"]["threshold"])
        entry = leaderboard._seal(leaderboard.Entry.of(j.name, j.figures, j.checks, session["header"],
                                                       configuration=j.configuration, kind="to_target",
                                                       challenge=challenge), path=board)
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
