"""A class judged by one command: honest, cheating, crashing, hanging, garbage-printing and leaderboard-writing
submission files, each in a process of its own, against one baseline; ranked; the leaderboard only the harness's."""

from __future__ import annotations

import json
import textwrap

import pytest

from helpers import bench, leaderboard
from helpers.challenge import classroom
from helpers.challenge.rules import Rules

CONFIG = 'from helpers.train import TrainConfig\nconfig = TrainConfig(batch_size=16, data="gpu", image_size=16, ' \
         'dataset_size=256)\n'

SUBMISSIONS = {
    "honest.py": CONFIG,
    "named.py": CONFIG.replace("batch_size=16", "batch_size=32") + 'NAME = "Ada: batch 32"\n',
    "cheaper.py": CONFIG + textwrap.dedent("""
        import torch
        def build_model(model):   # conv3 as a 1x1 convolution: nine times fewer FLOPs in that layer
            old = model.conv3
            model.conv3 = torch.nn.Conv2d(old.in_channels, old.out_channels, 1)
            return model
        """),
    "crashes.py": "raise RuntimeError('my code is not finished')\n",
    "hangs.py": CONFIG + "import time\ndef build_model(model):\n    time.sleep(3600)\n",
    "garbage.py": "import os, sys\nprint('\\x1b[2J' + 'x' * 5000)\nsys.stdout.flush()\nos._exit(0)\n",
    "no_config.py": "answer = 42\n",
    "bad_batch.py": CONFIG.replace("batch_size=16", "batch_size=24"),
    "_helper_module.py": "raise SystemExit('a file starting with _ is not a submission')\n",
}


def _rules_and_ceilings():
    rules = Rules(images=64, image_size=16, dataset_size=256, heldout=64, size="tiny")
    # a ceiling far above what the tiny runs reach: their MFU stays far below 100% on any machine
    ceil = bench.Ceilings("test CPU", matmul_tflops=100.0, matmul_dtype="float32", matmul_n=64, copy_gb_per_s=1.0,
                          copy_bytes=1)
    return rules, ceil


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    board = folder.parent / "board" / "leaderboard.sqlite"
    for name, text in SUBMISSIONS.items():
        (folder / name).write_text(text)
    (folder / "writes_board.py").write_text(CONFIG + textwrap.dedent(f"""
        import pathlib
        board = pathlib.Path({str(board)!r})
        board.parent.mkdir(parents=True, exist_ok=True)
        with open(board, "ab") as f:   # ranks itself by writing the file directly
            f.write(b"my own row")
        """))
    rules, ceil = _rules_and_ceilings()
    lines = []
    res = classroom.judge_class(folder, time_limit_s=45, leaderboard_path=board, rules=rules, ceilings=ceil,
                                say=lines.append)
    return res, board, lines


def test_every_submission_is_judged_in_its_own_process_and_ranked(judged):
    res, board, lines = judged
    by = {j.file: j for j in res.judged}
    assert set(by) == {n for n in SUBMISSIONS if not n.startswith("_")} | {"writes_board.py"}
    assert {f for f, j in by.items() if j.passed} == {"honest.py", "named.py"}
    assert [j.passed for j in res.judged] == sorted((j.passed for j in res.judged), reverse=True)  # passed first
    passed = [j for j in res.judged if j.passed]
    assert passed[0].img_per_s >= passed[1].img_per_s
    assert by["named.py"].name == "Ada: batch 32" and by["honest.py"].name == "honest"
    assert len(lines) == 1 + 1 + len(by)  # the session, the baseline, one line per submission


@pytest.mark.parametrize("file,reason", [
    ("cheaper.py", "same_function:"),
    ("crashes.py", "the file did not import: RuntimeError: my code is not finished"),
    ("hangs.py", "ran past the time limit of 45 s"),
    ("garbage.py", "ended without a readable verdict"),
    ("no_config.py", "defines no config = TrainConfig"),
    ("bad_batch.py", "the rules: batch_size=24"),
    ("writes_board.py", "changed the leaderboard's files itself"),
])
def test_each_wrong_submission_is_refused_with_its_reason(judged, file, reason):
    res, _, _ = judged
    j = next(j for j in res.judged if j.file == file)
    assert not j.passed and any(reason in r for r in j.reasons), j.reasons


def test_the_leaderboard_holds_the_harness_entries_only(judged):
    res, board, _ = judged
    rows = leaderboard.entries(path=board)
    assert [j.leaderboard for j in res.judged if j.passed and "added" not in j.leaderboard] == []
    assert sorted(rows["name"]) == ["Ada: batch 32", "honest"]
    assert all(j.leaderboard.startswith("not added") for j in res.judged if not j.passed)
    assert b"my own row" not in board.read_bytes()  # put back as it was


def test_the_table_and_files_say_the_same(judged):
    res, _, _ = judged
    md = res.markdown()
    assert "| 1 | " in md and "| — | cheaper |" in md and "REFUSED" in md and "\x1b" not in md
    data = json.loads((classroom.Path(res.out_dir) / "class.json").read_text())
    assert [r["name"] for r in data["rows"]] == [j.name for j in res.judged]
    assert (classroom.Path(res.out_dir) / "hangs.log").exists()
    # the leaderboard's key (and any copy of it) never lies beside the class's logs
    assert not [p.name for p in classroom.Path(res.out_dir).iterdir() if "key" in p.name or "sqlite" in p.name]


def test_a_folder_without_submissions_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="no submission files"):
        classroom.judge_class(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        classroom.judge_class(tmp_path / "missing")
    assert classroom.main([str(tmp_path)]) == 2
