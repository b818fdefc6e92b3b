"""Judge a whole class in one command: a folder of submission files, each run in a fresh process with a time limit,
all against one baseline and one set of ceilings measured at the start; a ranked table, and the leaderboard.

    python -m helpers.challenge.classroom submissions/                  # every *.py in the folder
    python -m helpers.challenge.classroom submissions/ --time-limit 600 --out class-results/

A submission is a Python file that defines ``config`` (a :class:`helpers.train.TrainConfig`) and, for a changed
network, ``build_model(model)`` (takes the reference network, returns the one to train), and optionally ``NAME``
(the leaderboard name; the file's name otherwise)::

    # submissions/ada.py
    import dataclasses
    from helpers.challenge import ladder
    ref = ladder.reference_solution()
    config = dataclasses.replace(ref.config, batch_size=128)
    build_model = ref.build_model

From Python: ``result = judge_class("submissions/")``; ``print(result)`` shows the ranked table.

**What one command does.** A first process measures this machine's ceilings and judges the baseline; its figures
are written to ``session.json`` in the output folder. Then each submission runs alone in a process of its own
(``python -m helpers.challenge.classroom --one FILE``), which imports the file, judges it with the harness against
that session and writes its verdict to a JSON file; what the process prints goes to its log, never into a result.
This process ranks the verdicts that passed by img/s (MFU ranks them the same: one session, one ceiling), writes
``class.md`` and ``class.json``, and puts every verdict on the leaderboard, sealing the entries itself (the
submissions' processes never see a sealed entry).

**Refused, with the reason:** a file that does not import or defines no ``config``; a configuration the rules do
not allow; a run the harness refuses (another function, fewer images, less accuracy: :func:`.harness.judge`); a
process that crashes, is killed, or ends without a verdict (its exit code and the last lines it printed); one that
runs past the time limit (killed with everything it started); and one that changed the leaderboard's file or its key
while it ran (the file is put back as it was before that submission).

**Threat model.** The harness protects against a network that computes another function (or less of it) in
training, fewer training images, a learning rate that loses accuracy, figures typed by hand, a crash or a hang, and
a submission that writes the leaderboard. It does not protect against code that patches the harness from inside its
own process as the file is imported (a submission is Python, run with the judge's rights; read them: they are
short), nor against a learner who edits the harness in their own copy: a class is judged with the instructor's copy.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["judge_class", "ClassResult", "Judged", "main"]

#: Seconds a submission may run (its process: import, checks, training, held-out evaluation) by default.
TIME_LIMIT_S = {"smoke": 300.0, "full": 900.0}
_TAIL_LINES = 6


@dataclasses.dataclass(frozen=True)
class Judged:
    """One submission's outcome: its verdict's figures and checks, or why it has none."""

    file: str
    name: str
    passed: bool
    reasons: tuple[str, ...]
    figures: dict[str, float | None]
    checks: dict[str, bool]
    configuration: str
    wall_s: float
    leaderboard: str = ""  # what the leaderboard did with it (or why it refused it)

    @property
    def img_per_s(self) -> float:
        v = self.figures.get("img_per_s")
        return math.nan if v is None else float(v)


@dataclasses.dataclass(frozen=True)
class ClassResult:
    """A class judged in one session: the baseline, each submission (ranked: passed first, fastest first)."""

    baseline_img_per_s: float
    baseline_accuracy: float
    device: str
    judged: tuple[Judged, ...]
    wall_s: float
    out_dir: str

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for rank, j in enumerate(self.judged, 1):
            f = j.figures
            rows.append({"rank": rank if j.passed else None, "name": j.name, "file": j.file,
                         "img/s": f.get("img_per_s"), "speed-up": f.get("speedup"), "MFU %": f.get("mfu_pct"),
                         "accuracy %": None if f.get("accuracy") is None else 100 * f["accuracy"],
                         "verdict": "passed" if j.passed else "REFUSED: " + "; ".join(j.reasons),
                         "wall s": j.wall_s})
        return rows

    def markdown(self) -> str:
        def num(v, fmt):
            return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

        head = (f"Class judged on {self.device}: baseline {self.baseline_img_per_s:,.0f} img/s, held-out accuracy "
                f"{self.baseline_accuracy:.1%}; {len(self.judged)} submissions in {self.wall_s:,.0f} s.\n\n")
        lines = ["| rank | name | img/s | speed-up × | MFU % | accuracy % | verdict | wall s |",
                 "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in self.rows():
            verdict = r["verdict"].replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {r['rank'] or '—'} | {r['name'].replace('|', '/')} | {num(r['img/s'], ',.0f')} | "
                         f"{num(r['speed-up'], '.1f')} | {num(r['MFU %'], '.1f')} | {num(r['accuracy %'], '.1f')} | "
                         f"{verdict} | {r['wall s']:.0f} |")
        return head + "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.markdown()


# -- the parent: one session, one process per submission ----------------------------------------------------------
def judge_class(folder: Path | str, *, out_dir: Path | str | None = None, time_limit_s: float | None = None,
                leaderboard_path: Path | str | None = None, python: str | None = None, rules=None, ceilings=None,
                say=print) -> ClassResult:
    """Judge every ``*.py`` in ``folder`` (files starting with ``_`` are left out), each in a fresh process, against
    one baseline and one set of ceilings; rank them; add them to the leaderboard (``leaderboard_path``, its default
    file by default). ``rules``/``ceilings``: this machine's (:meth:`Rules.at_scale`, measured) by default; tests
    give small ones. ``say`` gets one line per submission as it is judged."""
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
             "ceilings": dataclasses.asdict(ceilings) if ceilings is not None else None}
    (out / "setup.json").write_text(json.dumps(setup))
    say(f"measuring this machine's ceilings and judging the baseline (once, for all {len(files)} submissions) ...")
    proc = _run([python, "-m", "helpers.challenge.classroom", "--baseline", str(out / "setup.json"),
                 "--result", str(session_file)], out / "baseline.log", limit)
    if proc.outcome != "done" or not session_file.exists():
        raise RuntimeError(f"the baseline did not run ({proc.why}); its log: {out / 'baseline.log'}\n{proc.tail}")
    session = json.loads(session_file.read_text())
    say(f"baseline: {session['baseline']['img_per_s']:,.0f} img/s, held-out accuracy "
        f"{session['baseline']['accuracy']:.1%}, on {session['device']}")

    # the copies of the leaderboard (and its key) to put back lie in a folder of this user's only, removed at the
    # end: never beside the class's logs, which an instructor may share
    private = Path(tempfile.mkdtemp(prefix="class-judge-"))
    try:
        judged = _judge_each(files, out, private, board, session_file, session, limit, python, say)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    ranked = sorted(judged, key=lambda j: (not j.passed, -(j.img_per_s if j.passed else 0.0), j.name))
    res = ClassResult(session["baseline"]["img_per_s"], session["baseline"]["accuracy"], session["device"],
                      tuple(ranked), time.perf_counter() - start, str(out))
    (out / "class.md").write_text(res.markdown())
    (out / "class.json").write_text(json.dumps({"device": res.device, "wall_s": res.wall_s, "rows": res.rows(),
                                                "baseline": session["baseline"]}, indent=1, default=str) + "\n")
    return res


def _judge_each(files: list[Path], out: Path, private: Path, board: Path, session_file: Path, session: dict,
                limit: float, python: str, say) -> list[Judged]:
    """Each submission in a process of its own, in turn; its verdict on the leaderboard (sealed here)."""
    judged = []
    for f in files:
        result = out / f"{f.stem}.json"
        result.unlink(missing_ok=True)
        before, copies = _snapshot(board), _backup(board, private)
        t0 = time.perf_counter()
        proc = _run([python, "-m", "helpers.challenge.classroom", "--one", str(f), "--session", str(session_file),
                     "--result", str(result)], out / f"{f.stem}.log", limit)
        wall = time.perf_counter() - t0
        touched = _restore_if_changed(board, before, copies)
        j = _read_result(f, result, proc, wall, touched)
        j = _add_to_board(j, board, session)
        judged.append(j)
        say(f"{j.name}: " + (f"{j.img_per_s:,.0f} img/s, passed" if j.passed else "REFUSED: " + "; ".join(j.reasons))
            + f" ({wall:.0f} s)")
    return judged


@dataclasses.dataclass(frozen=True)
class _Proc:
    outcome: str  # "done", "crashed", "timeout"
    code: int | None
    tail: str
    why: str


def _run(cmd: list[str], log: Path, limit: float) -> _Proc:
    """Run ``cmd`` in a new process group, its output into ``log``; kill the whole group at ``limit`` seconds."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        try:
            code = p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            return _Proc("timeout", None, _tail(log), f"it ran past the time limit of {limit:,.0f} s and was stopped")
        finally:
            _kill_group(p)  # whatever it left running (loader workers, a child of its own)
    if code != 0:
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return _Proc("crashed", code, _tail(log), f"its process ended without a verdict ({how})")
    return _Proc("done", 0, _tail(log), "")


def _kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(line[:200] for line in lines[-_TAIL_LINES:])


def _snapshot(board: Path) -> dict[str, str | None]:
    """A hash of the leaderboard's file and its key (None where absent)."""
    from .. import leaderboard

    out = {}
    for p in (board, leaderboard.key_path(board)):
        try:
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        except FileNotFoundError:
            out[str(p)] = None
    return out


def _backup(board: Path, folder: Path) -> dict[str, Path]:
    """Copies of the leaderboard's file and key as they are now (to put back what a submission changes)."""
    from .. import leaderboard

    copies = {}
    for p in (board, leaderboard.key_path(board)):
        if p.exists():
            copies[str(p)] = folder / f"before-submission.{p.name}"
            shutil.copy2(p, copies[str(p)])
    return copies


def _restore_if_changed(board: Path, before: dict[str, str | None], copies: dict[str, Path]) -> list[str]:
    """The leaderboard's files a submission's process changed, each put back as it was (or removed, where it did
    not exist before)."""
    changed = [p for p, h in _snapshot(board).items() if h != before[p]]
    for p in changed:
        if before[p] is None:
            Path(p).unlink(missing_ok=True)
        else:
            shutil.copy2(copies[p], p)
    return [Path(p).name for p in changed]


def _read_result(f: Path, result: Path, proc: _Proc, wall: float, touched: list[str]) -> Judged:
    name = f.stem
    refused = []
    data = None
    if proc.outcome == "done":
        try:
            data = json.loads(result.read_text())
            name = str(data["name"])
        except (OSError, ValueError, KeyError, TypeError):
            refused.append("its process ended without a readable verdict")
    else:
        refused.append(proc.why + (f"; its last output: {proc.tail.splitlines()[-1][:160]}" if proc.tail else ""))
    if touched:
        refused.append(f"it changed the leaderboard's files itself ({', '.join(touched)}): only the harness writes "
                       "them (they were put back as they were)")
    if data is None or refused:
        return Judged(f.name, name, False, tuple(refused + (data or {}).get("reasons", [])),
                      dict((data or {}).get("figures", {})), dict((data or {}).get("checks", {})),
                      str((data or {}).get("configuration", "")), wall)
    return Judged(f.name, name, bool(data["passed"]), tuple(data["reasons"]), dict(data["figures"]),
                  {k: bool(v) for k, v in data["checks"].items()}, str(data.get("configuration", "")), wall)


def _add_to_board(j: Judged, board: Path, session: dict) -> Judged:
    """Seal ``j``'s verdict here (never in the submission's process) and add it; refused runs are refused by the
    leaderboard too, with its reason."""
    from .. import leaderboard

    if not j.figures or not j.checks:
        return dataclasses.replace(j, leaderboard="not added: no verdict")
    if not j.passed:  # the harness's refusals, and the class judge's own (a leaderboard written by the submission)
        return dataclasses.replace(j, leaderboard="not added: refused")
    try:
        entry = leaderboard._seal(leaderboard.Entry.of(j.name, j.figures, j.checks, configuration=j.configuration),
                                  path=board)
        return dataclasses.replace(j, leaderboard=str(leaderboard.add(entry, path=board)))
    except (leaderboard.EntryRefused, leaderboard.LeaderboardFileError) as e:
        return dataclasses.replace(j, leaderboard=f"not added: {e}")


# -- the children: the baseline once, then one submission each -----------------------------------------------------
def _session_from(setup: dict):
    from .. import bench
    from .harness import Session
    from .rules import Rules

    rules = Rules(**setup["rules"]) if setup.get("rules") else None
    ceilings = bench.Ceilings(**setup["ceilings"]) if setup.get("ceilings") else None
    return Session.start(rules, ceilings=ceilings)


def _baseline_child(setup_file: Path, result: Path) -> int:
    from .harness import judge
    from .ladder import ladder

    session = _session_from(json.loads(setup_file.read_text()))
    base = judge(ladder(rules=session.rules)[0].submission, session)
    if base.refused:
        print(f"the baseline was refused: {'; '.join(base.reasons)}", file=sys.stderr)
        return 3
    data = {"rules": dataclasses.asdict(session.rules), "ceilings": dataclasses.asdict(session.ceilings),
            "flops_per_image": session.flops_per_image, "device": session.ceilings.device_name,
            "baseline": {"img_per_s": base.img_per_s, "accuracy": base.accuracy, "name": base.name}}
    _write_atomic(result, data)
    print(base)
    return 0


@dataclasses.dataclass(frozen=True)
class _Baseline:
    """What a judged run needs of the session's baseline: its img/s and accuracy."""

    name: str
    img_per_s: float
    accuracy: float


def _one_child(file: Path, session_file: Path, result: Path) -> int:
    from .. import bench, leaderboard
    from ..train import TrainConfig
    from .harness import Session, Submission, judge
    from .rules import RuleBroken, Rules

    s = json.loads(session_file.read_text())
    session = Session(Rules(**s["rules"]), bench.Ceilings(**s["ceilings"]), s["flops_per_image"], s["device"])
    baseline = _Baseline(**s["baseline"])
    name = file.stem

    def refuse(why: str) -> int:  # refused before the harness made a verdict: no figures, nothing to rank
        _write_atomic(result, {"name": name, "passed": False, "reasons": [why], "figures": {}, "checks": {},
                               "configuration": ""})
        return 0

    try:
        spec = importlib.util.spec_from_file_location(f"submission_{file.stem}", file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from a submission included
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return refuse(f"the file did not import: {last[:300]}")
    name = str(getattr(module, "NAME", file.stem))[:80] or file.stem
    config = getattr(module, "config", None)
    if not isinstance(config, TrainConfig):
        return refuse(f"it defines no config = TrainConfig(...) (found {type(config).__name__}); define one at "
                      "the top level of the file")
    build = getattr(module, "build_model", None)
    if build is not None and not callable(build):
        return refuse(f"build_model is a {type(build).__name__}; it must be a function that takes the reference "
                      "network and returns the network to train")
    try:
        v = judge(Submission(name, config, build_model=build), session, baseline=baseline)
    except RuleBroken as e:
        return refuse(f"the rules: {e}")
    except Exception as e:  # noqa: BLE001 - out of memory (explained), or anything judge lets through
        return refuse(f"judging raised {type(e).__name__}: {str(e)[:300]}")
    figures = {k: (None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x))
               for k, x in v.figures().items()}
    _write_atomic(result, {"name": name, "passed": not v.refused, "reasons": v.reasons, "figures": figures,
                           "checks": {k: ok for k, (ok, _) in v.checks.items()},
                           "configuration": leaderboard.configuration_of(v.config)})
    print(v)
    return 0


def _write_atomic(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, default=str))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.challenge.classroom",
                                 description="Judge every submission file in a folder, one fresh process each, "
                                             "against one baseline; print the ranked table and add it to the "
                                             "leaderboard.")
    ap.add_argument("folder", nargs="?", help="the folder of submission files (*.py)")
    ap.add_argument("--out", default=None, help="where the logs, session.json, class.md and class.json go "
                                                "(default: FOLDER/judged)")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per submission (default: 900 on a "
                                                                   "GPU, 300 at smoke scale)")
    ap.add_argument("--leaderboard", default=None, help="the leaderboard file (default: the course's)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--baseline", help=argparse.SUPPRESS)
    ap.add_argument("--session", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        return _one_child(Path(args.one), Path(args.session), Path(args.result))
    if args.baseline:
        return _baseline_child(Path(args.baseline), Path(args.result))
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
