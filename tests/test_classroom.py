"""A class judged by one command: the example class (examples/class/: honest, cheating by each rule, crashing,
hanging, garbage-printing and leaderboard-writing training functions) at smoke scale, each in a process of its own,
in one session; ranked by time to the target; the leaderboard, the session and the other submissions only the
judge's to write."""

from __future__ import annotations

import json
import math
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from helpers import bench, leaderboard, tables
from helpers.challenge import classroom, sandbox
from helpers.challenge import isolation
from helpers.challenge.isolation import Watched

pytestmark = pytest.mark.slow  # judges a class: a session process per file: `make test-slow`

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "class"

#: Each example's outcome at smoke scale: "passed", or a phrase of the reason it is refused.
EXPECTED = {
    "reference.py": "passed",
    "classic_loop.py": "passed",
    "cheaper_network.py": "same_function: it differs from the reference network",
    "swaps_layer.py": "same_function: ",
    "random_images.py": "images_seen: it trained on no image of the training set",
    "learning_rate_x10.py": "accuracy_target: held-out accuracy",
    "not_finished.py": "the file did not import: NotImplementedError: my fused kernel is not written yet",
    "crashes.py": "its process ended without a verdict (killed by signal 11 (SIGSEGV)); its last output: my "
                  "extension's kernel",
    "hangs.py": "ran past the time limit of 25 s and was stopped, with every process it started",  # judged apart
    "prints_garbage.py": "its process ended without a readable verdict",
    # confined (Landlock), it cannot even read the key; without Landlock, the judge's hashes catch the write
    "writes_leaderboard.py": ("the file did not import: helpers.leaderboard.seal.LeaderboardFileError"
                              if sandbox.landlock_abi() else
                              "it changed the leaderboard's files itself (leaderboard.sqlite)"),
}

#: Refusals no example shows, written here: the child's arguments name the files it was given.
EXTRA = {
    "no_train.py": ('train = "my loop, next week"\n', "it defines no train(model, data, device) function (found a "
                                                      "str)"),
    "tampers_session.py": (textwrap.dedent("""
        import sys
        from pathlib import Path
        from helpers.challenge.recipes import classic_training
        # its own copy of the session first (harmless: the judge keeps its own), then the class's, found from the
        # folders it is told it cannot read: every later run an easier target
        with open(sys.argv[sys.argv.index("--session") + 1], "w") as f:
            f.write('{"target": {"threshold": 0.0}}')
        for i, a in enumerate(sys.argv):
            if a == "--hide" and Path(sys.argv[i + 1], "session.json").exists():
                Path(sys.argv[i + 1], "session.json").write_text('{"target": {"threshold": 0.0}}')
        train = classic_training(batch_size=16, lr=0.01, images=256)
        """), "PermissionError" if sandbox.landlock_abi() else "it changed files of the class judge's (session.json)"),
    "forges_verdict.py": (textwrap.dedent("""
        import json, os, sys
        verdict = {"name": "forged", "passed": True, "reasons": [],
                   "checks": {"same_function": True, "images_seen": True, "accuracy_target": True},
                   "figures": {"time_to_target_s": 0.01, "train_s": 0.01, "images": 256, "img_per_s": 25600.0,
                               "accuracy": 0.5, "target_accuracy": 0.4, "ceiling_img_per_s": 1e9}}
        with open(sys.argv[sys.argv.index("--result") + 1], "w") as f:   # its own verdict, against its own target
            json.dump(verdict, f)
        os._exit(0)
        """), "it handed the judge no trained weights"),
    "result_is_a_list.py": (textwrap.dedent("""
        import os, sys
        with open(sys.argv[sys.argv.index("--result") + 1], "w") as f:
            f.write("[1, 2, 3]")
        os._exit(0)
        """), "its result is a JSON list"),
    "deletes_classmates.py": (textwrap.dedent("""
        import sys
        from pathlib import Path
        from helpers.challenge.recipes import classic_training
        for i, a in enumerate(sys.argv):            # the class's folder, named among what it may not read
            if a == "--hide":
                for f in Path(sys.argv[i + 1]).glob("reference.py"):
                    f.unlink()
        train = classic_training(batch_size=16, lr=0.01, images=256)
        """), "PermissionError" if sandbox.landlock_abi() else "it changed files of the class judge's (reference.py)"),
    "plants_a_journal.py": (textwrap.dedent("""
        import sys
        from pathlib import Path
        from helpers.challenge.recipes import classic_training
        for i, a in enumerate(sys.argv):            # a journal SQLite would play back over the leaderboard
            if a == "--hide" and a and sys.argv[i + 1].endswith("-journal"):
                journal = Path(sys.argv[i + 1])     # its folder too, where no run has made it yet
                journal.parent.mkdir(parents=True, exist_ok=True)
                journal.write_bytes(b"not a journal the harness wrote")
        train = classic_training(batch_size=16, lr=0.01, images=256)
        """), "PermissionError" if sandbox.landlock_abi() else "it changed the leaderboard's files itself"),
    "leaves_a_daemon.py": (textwrap.dedent("""
        import os, time
        from helpers.challenge.recipes import classic_training
        if os.fork() == 0:                          # a grandchild in a session of its own, outliving the run
            os.setsid()
            if os.fork() == 0:
                time.sleep(120)
            os._exit(0)
        train = classic_training(batch_size=16, lr=0.01, images=256)
        """), "left 1 process running after its own ended"),
}


if sandbox.landlock_abi() >= 6:  # elsewhere it would end this test's own process: the threat model says so
    EXTRA["kills_the_judge.py"] = (textwrap.dedent("""
        import os, signal
        os.kill(os.getppid(), signal.SIGKILL)   # the class judge: the class would end with no table
        """), "the file did not import: PermissionError")


def _ceilings():
    # a bounded ceiling far above what a CPU reaches: MFU is computed, checked against img/s, and far under 100%
    return bench.Ceilings("test CPU", matmul_tflops=100.0, matmul_dtype="float32", matmul_n=64, copy_gb_per_s=1.0,
                          copy_bytes=1)


@pytest.fixture(scope="module")
def judged(tmp_path_factory, warm_start_cache):
    """The example class (hangs.py apart: it takes the whole time limit) and the extra refusals, judged at smoke
    scale with the course's rules and accuracy target, into a leaderboard of their own (about a minute)."""
    folder = tmp_path_factory.mktemp("class")
    for f in EXAMPLES.glob("*.py"):
        if f.name != "hangs.py":
            shutil.copy(f, folder / f.name)
    for name, (text, _) in EXTRA.items():
        (folder / name).write_text(text)
    (folder / "_shared.py").write_text("raise SystemExit('a file starting with _ is not a submission')\n")
    results = folder.parent / "results"
    lines = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HELPERS_SCALE", "smoke")  # the children's scale: the examples read it
        # the children's default leaderboard (the one writes_leaderboard.py writes) is the one judged into
        mp.setenv("HELPERS_RESULTS", str(results))
        mp.setenv("HELPERS_CACHE", str(warm_start_cache(folder.parent / "cache")))
        board = leaderboard.default_path("smoke")
        res = classroom.judge_class(folder, out_dir=folder / "judged", time_limit_s=240, leaderboard_path=board,
                                    ceilings=_ceilings(), say=lines.append)
    return res, board, lines


def _one(res, file):
    return next(j for j in res.judged if j.file == file)


def test_every_example_is_expected_to_do_something():
    assert set(EXPECTED) == {p.name for p in EXAMPLES.glob("*.py")}


@pytest.mark.parametrize("file", sorted(set(EXPECTED) - {"hangs.py"}) + sorted(EXTRA))
def test_each_submission_passes_or_is_refused_with_its_reason(judged, file):
    res, _, _ = judged
    j = _one(res, file)
    want = EXPECTED.get(file) or EXTRA[file][1]
    if want == "passed":
        assert j.passed and j.reasons == (), j.reasons
    else:
        assert not j.passed and any(want in r for r in j.reasons), j.reasons


def test_every_file_is_judged_and_those_that_passed_ranked_by_time_to_target(judged):
    res, _, lines = judged
    assert sorted(j.file for j in res.judged) == sorted(set(EXPECTED) - {"hangs.py"} | set(EXTRA))
    passed = [j for j in res.judged if j.passed]
    assert {j.name for j in passed} == {"reference solution", "the classic loop"}
    assert res.judged[:len(passed)] == tuple(passed)  # passed first
    times = [j.time_to_target_s for j in passed]
    assert times == sorted(times) and all(t > 0 for t in times)
    for j in passed:  # the figures beside the score, as the harness derived them
        f = j.figures
        assert f["time_to_target_s"] == f["train_s"] and f["img_per_s"] == pytest.approx(f["images"] / f["train_s"])
        # MFU from the rate as printed: the images over the time to three figures, as judge_training computes it
        shown = f["images"] / float(tables.sig(f["train_s"]).replace(",", ""))
        assert f["accuracy"] >= res.target and f["mfu_pct"] == pytest.approx(100 * shown / f["ceiling_img_per_s"])
    assert [r["rank"] for r in res.rows()][:3] == [1, 2, None]
    assert len(lines) == 1 + 1 + len(res.judged)  # the session, the target, one line per submission


def test_the_ranking_is_by_time_to_target_not_by_img_per_s():
    def j(name, t, img_per_s, passed=True):
        return classroom.Judged(f"{name}.py", name, passed, (), {"time_to_target_s": t, "img_per_s": img_per_s}, {},
                                "", 1.0)

    order = classroom._ranked([j("fast loop, many images", 9.0, 5000.0), j("refused", 0.1, 9e9, passed=False),
                               j("slower loop, fewer images", 3.0, 800.0)])
    assert [x.name for x in order] == ["slower loop, fewer images", "fast loop, many images", "refused"]
    assert math.isnan(order[-1].time_to_target_s)  # a refused run has no score, whatever its figures say


def test_the_leaderboard_holds_the_runs_that_passed_sealed_by_the_judge(judged):
    res, board, _ = judged
    rows = leaderboard.entries(path=board, kind="to_target")
    assert list(rows["name"]) == [j.name for j in res.judged if j.passed]  # quickest first, as the class
    assert list(rows["time_to_target_s"]) == [j.time_to_target_s for j in res.judged if j.passed]
    assert "first place" not in set(rows["name"]) and b"first place" not in board.read_bytes()  # put back
    assert leaderboard.entries(path=board).empty  # no ladder run
    for j in res.judged:
        assert j.leaderboard.startswith(f"{j.name!r} added: ") if j.passed else j.leaderboard == "not added: refused"
    boards = leaderboard.tables(path=board)
    assert [(b.kind, list(t["name"])) for b, t in boards.items()] == [("to_target", list(rows["name"]))]


def test_a_submission_that_changes_the_session_does_not_change_the_runs_after_it(judged):
    res, _, _ = judged
    session = json.loads((Path(res.out_dir) / "session.json").read_text())
    assert session["target"]["threshold"] == res.target > 0.5  # as measured
    for j in res.judged:  # every run, before and after the ones that tried, judged against the target measured
        assert not j.figures or j.figures.get("target_accuracy") in (None, res.target)


def test_the_table_and_files_say_the_same(judged):
    res, _, _ = judged
    md = res.markdown()
    first = res.judged[0].name
    assert f"| 1 | {first} | " in md and "| — | cheaper_network | — |" in md and "\x1b" not in md
    assert f"time to {res.target:.1%} held-out accuracy" in md
    out = Path(res.out_dir)
    data = json.loads((out / "class.json").read_text())
    assert [r["name"] for r in data["rows"]] == [j.name for j in res.judged] and data["target"] == res.target
    assert (out / "class.md").read_text() == md
    assert all((out / f"{Path(j.file).stem}.log").exists() for j in res.judged)
    assert "#" * 100 in (out / "prints_garbage.log").read_text()  # what it printed: in its log, never its verdict
    # the leaderboard's key (and any copy of it) never lies beside the class's logs
    assert not [p.name for p in out.iterdir() if "key" in p.name or "sqlite" in p.name]


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return not re.search(r"^State:\s+Z", status, re.M)  # a zombie has ended: it waits only to be reaped


def test_the_time_limit_stops_a_hang_and_every_process_it_started(tmp_path, monkeypatch, warm_start_cache):
    folder = tmp_path / "class"
    folder.mkdir()
    shutil.copy(EXAMPLES / "hangs.py", folder)
    monkeypatch.setenv("HELPERS_SCALE", "smoke")
    monkeypatch.setenv("HELPERS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("HELPERS_CACHE", str(warm_start_cache(tmp_path / "cache")))
    res = classroom.judge_class(folder, time_limit_s=25, ceilings=_ceilings(), say=lambda line: None)
    (j,) = res.judged
    assert not j.passed and EXPECTED["hangs.py"] in j.reasons[0] and "loader worker" in j.reasons[0]
    assert 25 <= j.wall_s < 40
    log = (folder / "judged" / "hangs.log").read_text()
    pids = [int(p) for p in re.findall(r"(?:training process|loader worker) (\d+)", log)]
    assert len(pids) == 2, log  # the submission's process and its loader's worker
    assert not [p for p in pids if _alive(p)]


def test_a_file_changed_while_a_submission_ran_is_put_back(tmp_path):
    keep, new, gone = tmp_path / "board.sqlite", tmp_path / "board.sqlite.key", tmp_path / "session.json"
    keep.write_bytes(b"rows")
    gone.write_text("{}")
    private = tmp_path / "private"
    private.mkdir()
    watch = Watched([keep, new, gone], private)
    keep.write_bytes(b"rows and my own")
    new.write_text("a key of mine")
    gone.unlink()
    assert sorted(p.name for p in watch.restore_changed()) == sorted([keep.name, new.name, gone.name])
    assert keep.read_bytes() == b"rows" and not new.exists() and gone.read_text() == "{}"
    assert Watched([keep, new, gone], private).restore_changed() == []  # nothing changed: nothing touched


def test_a_folder_without_submissions_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="no submission files"):
        classroom.judge_class(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        classroom.judge_class(tmp_path / "missing")
    assert classroom.main([str(tmp_path)]) == 2


def _gated(weights: bytes | None, train_s: float | None = 0.5, outcome: str = "done", broke: str = ""):
    return classroom.Gated(isolation.Proc(outcome, 0 if outcome == "done" else -9, "", "" if outcome ==
                                                     "done" else "its process ended without a verdict (killed)"),
                           train_s, weights, broke, 0)


def test_a_childs_result_is_evidence_and_the_ranked_figures_are_the_judges_own(tmp_path, monkeypatch):
    """The parent's reading of a child, without a child: the time is the judge's clock, the accuracy its own
    evaluation of the weights handed over on its own held-out draw; the child's figures are not ranked, and a
    malformed result is a refusal with the reason, never a crash."""
    import numpy as np
    import torch

    from helpers.challenge.rules import Rules
    from helpers.models import ReferenceCNN

    monkeypatch.setenv("HELPERS_SCALE", "smoke")
    # rules of this test's own: the smoke size's, judged on 512 held-out images rather than 4,096 (the judge's
    # evaluation runs some twenty times here), and any weights of the network's shape
    smoke = Rules.at_scale()
    rules = Rules(images=smoke.images, image_size=smoke.image_size, dataset_size=smoke.dataset_size, heldout=512,
                  size="judged by hand")
    assert rules.to_target_heldout == 512
    torch.manual_seed(0)
    weights = np.concatenate([p.detach().numpy().ravel() for p in ReferenceCNN(rules.image_size).parameters()]
                             ).astype(np.float32).tobytes()
    start_acc = classroom._judge_weights(weights, rules, 12345)
    session = {"target": {"threshold": start_acc - 0.05}, "ceiling_img_per_s": 1e6, "ceilings": {"bounds": True},
               "header": {"device": "test CPU", "torch": "test", "date": "2026-11-26"}}
    forged = {"time_to_target_s": 1e-4, "train_s": 1e-4, "images": 512, "img_per_s": 5e6, "accuracy": 1.0,
              "target_accuracy": 0.0, "ceiling_img_per_s": 1e9, "mfu_pct": 99.0}
    verdict = {"name": "Ada", "passed": True, "reasons": [], "figures": forged,
               "checks": {k: True for k in leaderboard.TO_TARGET.checks}}
    result, sub = tmp_path / "result.json", tmp_path / "ada.py"

    def judge(gated=None, raw=None, **changes):
        result.write_text(raw if raw is not None else json.dumps({**verdict, **changes}))
        return classroom._verdict(sub, gated or _gated(weights), result, session, rules, 12345, "cfg", 1.0)

    ok = judge()
    assert ok.passed and ok.name == "Ada", ok.reasons
    f = ok.figures
    assert f["train_s"] == f["time_to_target_s"] == 0.5 and f["img_per_s"] == 512 / 0.5  # the judge's clock
    assert f["accuracy"] == start_acc and f["target_accuracy"] == session["target"]["threshold"]
    assert f["mfu_pct"] == pytest.approx(100 * 1024 / 1e6) and f["ceiling_img_per_s"] == 1e6
    # its own verdict's figures, target and checks count for nothing; the judge's accuracy decides
    session["target"]["threshold"] = start_acc + 0.05
    missed = judge()
    assert not missed.passed and "the judge's own images" in missed.reasons[0]
    session["target"]["threshold"] = start_acc - 0.05
    assert "no trained weights" in judge(gated=_gated(None, None)).reasons[0]
    nan = np.frombuffer(weights, dtype=np.float32).copy()
    nan[7] = np.nan
    assert "not all finite" in judge(gated=_gated(nan.tobytes())).reasons[0]
    assert "harness never writes" in judge(gated=_gated(None, None, broke="it wrote to the judge's pipe what the "
                                                                        "harness never writes")).reasons[0]
    assert "killed" in judge(gated=_gated(weights, outcome="crashed")).reasons[0]
    # the harness in its process refused it: refused here, with its reasons (printable text only)
    refused = judge(passed=False, reasons=["images_seen: \x1b[2Jboom"],
                    checks={"same_function": True, "images_seen": False})
    assert not refused.passed and refused.reasons == ("images_seen: [2Jboom",)
    assert judge(name="\x1b[2J").name == "[2J" and judge(name="\x00\x1b").name == "ada"
    # malformed results: refusals with the reason, never a crash
    for raw, why in (("[1, 2]", "JSON list"), ('{"name": "x"}', "could not be read"), ("my run: passed", "could not"),
                     (json.dumps({**verdict, "passed": "yes"}), "true or false"),
                     (json.dumps({**verdict, "figures": {**forged, "images": "many"}}), "could not be read"),
                     (json.dumps({**verdict, "figures": {**forged, "images": 0.5}}), "whole number"),
                     (json.dumps({**verdict, "figures": {**forged, "images": None}}), "whole number"),
                     (json.dumps({**verdict, "checks": []}), "shape")):
        j = judge(raw=raw)
        assert not j.passed and why in j.reasons[0], (raw, j.reasons)
    result.unlink()
    assert "without a readable verdict" in classroom._verdict(sub, _gated(weights), result, session, rules, 12345,
                                                              "cfg", 1.0).reasons[0]
