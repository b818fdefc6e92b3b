"""The final challenge's leaderboard: only entries the harness sealed are taken; every wrong entry is refused with
its reason in one short line; one row per name, configuration and device (the best, said so); the ladder's runs
ranked by img/s and the learner's training by its time to the target, each in a table of its own in one file (a
file of the earlier layout migrated at its first write); names stored as given; any real number type taken; database
errors that name the file and what to do, never overwriting a file the leaderboard cannot read; concurrent writers
losing nothing and leaving nothing half-written."""

from __future__ import annotations

import dataclasses
import re
import shutil
import sqlite3
import subprocess
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import leaderboard as lb
from helpers import results, tables

ROOT = Path(__file__).resolve().parents[1]
HEADER = {"device": "NVIDIA H100 80GB HBM3", "driver": "580", "torch": "2.11.0", "cuda": "13.0",
          "host_cpu": "Xeon (16 usable cores)", "date": "2026-11-23"}
CONFIG = lb.configuration_of({"batch_size": 512, "dtype": "bf16", "compile": True})
PASSED = {k: True for k in lb.CHECKS}
CHALLENGE = "the course's gpu challenge: 24,576 images at 224² from 50,000 (seed 0), judged on 4,096 held-out"
BASE, CEILING = 500.0, 30_000.0  # the session's baseline and compute ceiling, img/s


def _figures(img_per_s: float = 9000.0) -> dict:
    """Figures that agree with one another, as the harness derives them."""
    return {"img_per_s": img_per_s, "speedup": img_per_s / BASE, "mfu_pct": 100 * img_per_s / CEILING,
            "accuracy": 0.61, "peak_mem_gb": 30.2, "nvml_util_pct": 99.0, "gpm_sm_pct": None,
            "speedup_bound": CEILING / BASE, "baseline_img_per_s": BASE}


def _entry(name="fused pool", figures=None, checks=None, header=None, configuration=CONFIG):
    """An entry as the harness builds it, before the seal."""
    return lb.Entry(name, {**_figures(), **(figures or {})}, {**PASSED, **(checks or {})},
                    {**HEADER, **(header or {})}, configuration, challenge=CHALLENGE)


def _sealed(db, *args, **kwargs):
    """What ``verdict.entry(name, path=db)`` returns: the entry sealed with the key beside ``db``."""
    return lb._seal(_entry(*args, **kwargs), path=db)


def _refused(excinfo, pattern):
    """The reason is the one expected, in one short line."""
    msg = str(excinfo.value)
    assert re.search(pattern, msg), msg
    assert "\n" not in msg and len(msg) < 320, msg


# -- the honest path ------------------------------------------------------------------------------------

class _FailingInserts:
    """A connection whose INSERTs fail inside the transaction, as a full disk's would."""

    def __init__(self, con):
        self.con = con

    def execute(self, sql, *a):
        if sql.startswith("INSERT"):
            raise sqlite3.OperationalError("disk I/O error")
        return self.con.execute(sql, *a)

    def close(self):
        self.con.close()


def test_sealed_entries_are_written_whole_and_ranked_per_device(tmp_path):
    db = tmp_path / "lb.sqlite"
    assert str(lb.add(_sealed(db, "slow", _figures(1000.0)), path=db)).startswith("'slow' added: 1,000 img/s, rank 1")
    lb.add(_sealed(db, "fast", _figures(5000.0)), path=db)
    lb.add(_sealed(db, "other gpu", _figures(3000.0), header={"device": "NVIDIA H200"}), path=db)
    t = lb.table("NVIDIA H100 80GB HBM3", path=db)
    assert list(t["name"]) == ["fast", "slow"] and list(t.index) == [1, 2]
    assert t.loc[1, "mfu_pct"] == pytest.approx(100 * 5000 / CEILING) and pd.isna(t.loc[1, "gpm_sm_pct"])
    per_device = lb.tables(path=db)
    assert set(per_device) == {lb.Board("NVIDIA H100 80GB HBM3", "ladder", CHALLENGE),
                               lb.Board("NVIDIA H200", "ladder", CHALLENGE)}
    assert list(per_device[lb.Board("NVIDIA H200", "ladder", CHALLENGE)]["name"]) == ["other gpu"]
    assert str(lb.Board("NVIDIA H200", "ladder")) == "NVIDIA H200: the ladder's runs, fastest first (img/s)"
    assert str(lb.Board("NVIDIA H200", "ladder", CHALLENGE)).endswith("(img/s); " + CHALLENGE)
    assert set(lb.entries(path=db)["configuration"]) == {CONFIG}
    assert lb.entries(path=db, kind="to_target").empty and lb.tables(path=db, kind="to_target") == {}


def test_a_cpus_ladder_rows_show_no_mfu_and_say_why(tmp_path):
    """A CPU's leaderboard showed MFU 19.2% beside the note that MFU means nothing on a CPU: the entry keeps the
    figure it was sealed with, and the table shows a dash with the reason."""
    from helpers.tables import readable

    db = tmp_path / "lb.sqlite"
    lb.add(_sealed(db, "on a cpu", _figures(1000.0), header={"device": "cpu"}), path=db)
    t = lb.table("cpu", path=db)
    assert pd.isna(t.loc[1, "mfu_pct"]) and "not meaningful on a CPU" in t.attrs["missing"]["mfu_pct"]
    assert lb.entries(path=db, device="cpu")["mfu_pct"].iloc[0] == pytest.approx(100 * 1000 / CEILING)
    assert any("not meaningful on a CPU" in n for n in readable(t).notes)
    gpu = tmp_path / "gpu.sqlite"
    lb.add(_sealed(gpu, "on a gpu", _figures(1000.0)), path=gpu)
    assert lb.table("NVIDIA H100 80GB HBM3", path=gpu).loc[1, "mfu_pct"] == pytest.approx(100 * 1000 / CEILING)


def test_a_row_whose_sm_activity_reads_above_its_utilisation_says_why(tmp_path):
    """06's leaderboard showed the reference solution at GPM SM 87.4% beside NVML 86.7%, which 00 teaches cannot be
    at one moment: the table now says the two are means over different windows."""
    from helpers.tables import readable

    db = tmp_path / "lb.sqlite"
    lb.add(_sealed(db, "reference", {"nvml_util_pct": 86.7, "gpm_sm_pct": 87.4}), path=db)
    lb.add(_sealed(db, "other", {**_figures(5000.0), "nvml_util_pct": 95.0, "gpm_sm_pct": 80.0}), path=db)
    notes = readable(lb.table("NVIDIA H100 80GB HBM3", path=db)).notes
    (said,) = [n for n in notes if "GPM's SM activity reads above" in n]
    assert "utilisation for reference (by up to 0.7 points):" in said and "for other" not in said and "different windows" in said
    plain = tmp_path / "plain.sqlite"
    lb.add(_sealed(plain, "other", {"nvml_util_pct": 95.0, "gpm_sm_pct": 80.0}), path=plain)
    assert not [n for n in readable(lb.table("NVIDIA H100 80GB HBM3", path=plain)).notes if "GPM's SM" in n]


def test_the_key_is_made_once_beside_the_database_private_and_ignored_by_git(tmp_path):
    db = tmp_path / "lb.sqlite"
    _sealed(db)
    key = lb.key_path(db)
    assert key == tmp_path / "lb.sqlite.key" and key.stat().st_mode & 0o777 == 0o600
    first = key.read_bytes()
    _sealed(db, "another")
    assert key.read_bytes() == first and len(first.strip()) == 64  # never replaced
    assert [p.name for p in tmp_path.iterdir()] == ["lb.sqlite.key"]  # no temporary file left behind
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: whether git ignores the key cannot be asked")
    rc = subprocess.run(["git", "check-ignore", "-q", "results/leaderboard.sqlite.key"], cwd=ROOT).returncode
    assert rc == 0, "the key beside the committed database must be ignored by git (.gitignore: *.sqlite.key)"


def test_names_are_stored_exactly_as_given(tmp_path):
    db = tmp_path / "lb.sqlite"
    names = ["fused pool", "ü fused/pool #2 — 'bf16', batch=512 (ÿ)", "x" * lb.NAME_MAX, "火 run 🚀", "a  b"]
    for i, name in enumerate(names):
        lb.add(_sealed(db, name, _figures(1000.0 + i)), path=db)
    assert sorted(lb.entries(path=db)["name"]) == sorted(names)


def test_numbers_of_any_real_type_are_taken_as_floats(tmp_path):
    db = tmp_path / "lb.sqlite"
    f = _figures(9000.0)
    numbers = {"img_per_s": np.float32(9000.0), "speedup": np.float64(18.0), "mfu_pct": np.float32(30.0),
               "accuracy": np.float16(0.5), "peak_mem_gb": np.int64(30), "nvml_util_pct": 99,
               "gpm_sm_pct": Decimal("88.5"), "speedup_bound": Fraction(60), "baseline_img_per_s": np.int32(500)}
    assert f["speedup_bound"] == 60
    checks = {k: np.bool_(True) for k in lb.CHECKS}
    added = lb.add(_sealed(db, figures=numbers, checks=checks), path=db)
    assert added.outcome == "added"
    row = lb.entries(path=db).iloc[0]
    assert row["img_per_s"] == 9000.0 and row["accuracy"] == 0.5 and row["peak_mem_gb"] == 30.0
    assert row["gpm_sm_pct"] == 88.5 and row["speedup_bound"] == 60.0
    assert all(type(row[k]) in (float, np.float64) for k in lb.REQUIRED)


def test_one_row_per_name_configuration_and_device_the_best_kept_and_said_so(tmp_path):
    db = tmp_path / "lb.sqlite"
    first = lb.add(_sealed(db, "my run", _figures(2000.0)), path=db)
    assert first.outcome == "added" and first.written
    again = lb.add(_sealed(db, "my run", _figures(2000.0)), path=db)  # the same run again: not a second row
    assert again.outcome == "kept" and not again.written
    slower = lb.add(_sealed(db, "my run", _figures(1500.0)), path=db)
    assert str(slower).startswith("kept your best: 'my run' stays at 2,000 img/s (2026-11-23); this run's 1,500 "
                                  "img/s was not added")
    faster = lb.add(_sealed(db, "my run", _figures(2500.0)), path=db)
    assert faster.outcome == "replaced" and faster.row_id == first.row_id
    assert str(faster).startswith("'my run' replaced its earlier run (2,000 img/s, 2026-11-23) with this faster "
                                  "one: 2,500 img/s, rank 1 of 1")
    lb.add(_sealed(db, "my run", _figures(1000.0), configuration=lb.configuration_of({"batch_size": 32})), path=db)
    lb.add(_sealed(db, "my run", _figures(1000.0), header={"device": "NVIDIA H200"}), path=db)
    df = lb.entries(path=db)
    assert len(df) == 3 and not df.duplicated(["name", "configuration", "device"]).any()
    assert df[(df.device == HEADER["device"]) & (df.configuration == CONFIG)]["img_per_s"].tolist() == [2500.0]


# -- what is refused, and why ---------------------------------------------------------------------------

REFUSED = [  # (what is wrong, the reason the message must give); each is sealed: the content alone refuses it
    (dict(figures={"mfu_pct": None}), r"the figure 'mfu_pct' \(.*\) is missing; every entry needs img_per_s"),
    (dict(figures={"accuracy": "0.6"}), r"accuracy='0\.6' is a str; it must be a number \(held-out accuracy"),
    (dict(figures={"img_per_s": True}), r"img_per_s=True is a bool; it must be a number"),
    (dict(figures={"img_per_s": 9000 + 0j}), r"img_per_s=\(9000\+0j\) is a complex; it must be a number"),
    (dict(figures={"img_per_s": 10**400}), r"img_per_s=10000000000000000000000… is too large to be a figure"),
    (dict(figures={"accuracy": 61.0}), r"accuracy=61 is outside what a run can measure \(held-out accuracy, a "
                                       r"fraction: 0 to 1\)"),
    (dict(figures={"mfu_pct": 20339.123456789}), r"mfu_pct=20,339\.1 is outside what a run can measure \(.*: 0 to "
                                                 r"100\)"),  # readable, not 20339.123456789
    (dict(figures={"img_per_s": float("nan")}), r"img_per_s=nan is outside what a run can measure"),
    (dict(figures={"img_per_s": float("inf")}), r"img_per_s=inf is outside what a run can measure"),
    (dict(figures={"speedup": 0.0}), r"speedup=0 is outside what a run can measure"),
    (dict(figures={"loss": 0.1}), r"unknown figures \['loss'\]; the leaderboard keeps"),
    (dict(figures={"speedup": 40.0}), r"its speed-up, 40×, does not agree with its img/s over the baseline's: "
                                      r"9,000 ÷ 500 = 18×; figures typed or edited by hand are never ranked"),
    (dict(figures={"speedup": 18.001}), r"its speed-up, 18.001×, does not agree with .* = 18×"),  # all it takes
    (dict(figures={"mfu_pct": 90.0}), r"its MFU, 90%, does not agree with 100 × its speed-up ÷ the most a run "
                                      r"could gain: 100 × 18 ÷ 60 = 30%"),
    (dict(checks={"same_function": False}), r"'fused pool' was not ranked: the harness did not pass it "
                                            r"\(same_function, the rule that the model's outputs match"),
    (dict(checks={"accuracy_not_worse": False}), r"did not pass it \(accuracy_not_worse, the rule that .*at least the accuracy "
                                                 r"target \(what 99% of the baseline's reruns reach\)\)"),
    (dict(checks={"same_function": (True, "the same logits")}),
     r"check same_function is \(True, 'the same logits…; each check is True or False \(a verdict's checks are "
     r"\(passed, why\) pairs: make it with verdict\.entry\(name\)"),
    (dict(checks={"faster": True}), r"unknown checks \['faster'\]; the harness checks same_function, images_seen, "
                                    r"accuracy_not_worse\.$"),
    (dict(name=""), r"^name '' refused \(it is empty\): a name has 1 to 80 printable characters, no space at either "
                    r"end\.$"),
    (dict(name="x" * 10_000), r"^name 'xxxxxxxxxxxxxxxxxxxxxx… refused \(it has 10,000 characters\): a name has 1 "
                              r"to 80"),
    (dict(name="\x00my run"), r"^name '\\x00my run' refused \(it holds '\\x00' at character 1\)"),
    (dict(name="my run\n"), r"refused \(it holds '\\n' at character 7\): a name has 1 to 80 printable"),
    (dict(name=" my run"), r"refused \(it has a space at one end\): .* no space at either end"),
    (dict(name=42), r"^name 42 refused \(it is not text but int\)"),
    (dict(header={"device": None}), r"where it ran is missing \(device\); make it with verdict\.entry\(name\)"),
]


@pytest.mark.parametrize("change, reason", REFUSED, ids=[f"{i:02d}" for i in range(len(REFUSED))])
def test_wrong_entries_are_refused_with_their_reason_and_nothing_is_written(tmp_path, change, reason):
    db = tmp_path / "lb.sqlite"
    lb.add(_sealed(db, "kept"), path=db)
    with pytest.raises(lb.EntryRefused) as e:
        lb.add(_sealed(db, **change), path=db)
    _refused(e, reason)
    assert list(lb.entries(path=db)["name"]) == ["kept"]


def test_a_check_the_harness_never_ran_is_named(tmp_path):
    checks = {k: True for k in list(lb.CHECKS)[1:]}
    entry = lb._seal(lb.Entry("x", _figures(), checks, HEADER, CONFIG), path=tmp_path / "lb.sqlite")
    with pytest.raises(lb.EntryRefused) as e:
        lb.add(entry, path=tmp_path / "lb.sqlite")
    _refused(e, r"did not pass it \(same_function: not checked\)")


def test_figures_typed_by_hand_with_every_check_passed_are_refused(tmp_path):
    db = tmp_path / "lb.sqlite"
    for typed in (_entry("typed by hand"), lb.Entry.of("typed by hand", _figures(20_000.0), PASSED, HEADER,
                                                       configuration=CONFIG, challenge=CHALLENGE)):
        with pytest.raises(lb.EntryRefused) as e:
            lb.add(typed, path=db)
        _refused(e, r"^'typed by hand' was not produced by the harness: make it with verdict\.entry\(name\) \(an "
                    r"entry built or typed by hand is never ranked\)\.$")
    forged = dataclasses.replace(_entry("typed by hand"), seal="0" * 64)
    with pytest.raises(lb.EntryRefused) as e:
        lb.add(forged, path=db)
    _refused(e, "does not match its seal")
    assert not db.exists()  # nothing refused ever creates the file


@pytest.mark.parametrize("edit", [
    dict(figures=_figures(18_000.0)),                     # faster figures, consistent with one another
    dict(checks={**PASSED, "same_function": True}),       # a refused run's checks set True (sealed as refused below)
    dict(name="someone else's run"),
    dict(configuration=lb.configuration_of({"batch_size": 1})),
    dict(header={**HEADER, "device": "NVIDIA B200"}),
])
def test_an_entry_edited_after_the_harness_sealed_it_is_refused(tmp_path, edit):
    db = tmp_path / "lb.sqlite"
    sealed = _sealed(db, checks={"same_function": False}) if "checks" in edit else _sealed(db)
    with pytest.raises(lb.EntryRefused) as e:
        lb.add(dataclasses.replace(sealed, **edit), path=db)
    _refused(e, r"does not match its seal: it was changed after verdict\.entry made it, or made for another "
                r"leaderboard than .*lb\.sqlite \(give verdict\.entry and leaderboard\.add the same path=\)")


def test_an_entry_sealed_for_another_leaderboard_is_refused(tmp_path):
    entry = _sealed(tmp_path / "a" / "lb.sqlite")
    for other in (tmp_path / "b" / "lb.sqlite", tmp_path / "a" / "other.sqlite"):
        with pytest.raises(lb.EntryRefused) as e:
            lb.add(entry, path=other)
        _refused(e, r"does not match its seal: .* made for another leaderboard than")


def test_anything_but_an_entry_is_refused(tmp_path):
    with pytest.raises(lb.EntryRefused) as e:
        lb.add({"name": "x", **_figures()}, path=tmp_path / "lb.sqlite")
    _refused(e, r"^leaderboard\.add takes an Entry made by verdict\.entry\(name\), not a dict\.$")


# -- the learner's training, ranked by its time to the target ---------------------------------------------

TT_PASSED = {k: True for k in lb.TO_TARGET.checks}
TT_CEILING = 20_000.0  # the session's compute ceiling, img/s


def _tt_figures(seconds: float = 10.0, images: int = 49_152) -> dict:
    """A run to the target's figures that agree with one another, as the harness derives them."""
    img = images / seconds
    return {"time_to_target_s": seconds, "train_s": seconds, "images": images, "img_per_s": img,
            "accuracy": 0.93, "target_accuracy": 0.9, "ceiling_img_per_s": TT_CEILING,
            "mfu_pct": 100 * img / TT_CEILING, "peak_mem_gib": 12.5, "nvml_util_pct": 97.0, "gpm_sm_pct": None}


def _tt_entry(name="Ada", figures=None, checks=None, header=None, configuration="my loop"):
    return lb.Entry(name, {**_tt_figures(), **(figures or {})}, {**TT_PASSED, **(checks or {})},
                    {**HEADER, **(header or {})}, configuration, kind="to_target",
                    challenge="the course's gpu challenge: to 90% on 4,096 held-out, at 224² from 50,000 (seed 0)")


def _tt_sealed(db, *args, **kwargs):
    return lb._seal(_tt_entry(*args, **kwargs), path=db)


def test_runs_to_the_target_are_ranked_quickest_first_beside_the_ladder_in_one_file(tmp_path):
    db = tmp_path / "lb.sqlite"
    lb.add(_sealed(db, "fused pool", _figures(9000.0)), path=db)
    slow = lb.add(_tt_sealed(db, "Bo", _tt_figures(30.0)), path=db)
    # the time as the board's table prints it, trailing zero kept (06 read "1.6 s" beside the table's 1.60)
    assert str(slow).startswith("'Bo' added: 30.0 s to the target, rank 1 of 1 to the target on NVIDIA H100")
    readable_time = __import__("helpers.tables", fromlist=["readable"]).readable(
        lb.table("NVIDIA H100 80GB HBM3", path=db, kind="to_target")).shown["time to target s"].iloc[0]
    assert readable_time == "30.0"
    quick = lb.add(_tt_sealed(db, "Ada", _tt_figures(12.5, images=12_288)), path=db)  # fewer images, quicker
    assert quick.rank == 1 and quick.of == 2 and quick.kind == "to_target"
    lb.add(_tt_sealed(db, "Cy", _tt_figures(20.0), header={"device": "NVIDIA H200"}), path=db)
    t = lb.table("NVIDIA H100 80GB HBM3", path=db, kind="to_target")
    assert list(t["name"]) == ["Ada", "Bo"] and list(t["time_to_target_s"]) == [12.5, 30.0]
    assert t.loc[1, "images"] == 12_288 and t.loc[1, "img_per_s"] < t.loc[2, "img_per_s"]  # time ranks, not img/s
    boards = lb.tables(path=db)
    assert [(b.device, b.kind) for b in boards] == [("NVIDIA H100 80GB HBM3", "ladder"),
                                                     ("NVIDIA H100 80GB HBM3", "to_target"),
                                                     ("NVIDIA H200", "to_target")]
    assert list(boards[lb.Board("NVIDIA H100 80GB HBM3", "ladder", CHALLENGE)]["name"]) == ["fused pool"]
    assert str(lb.Board("NVIDIA H200", "to_target")) == ("NVIDIA H200: training to the accuracy target, quickest "
                                                         "first (seconds)")


def test_a_quicker_rerun_replaces_a_run_to_the_target_and_a_slower_one_is_kept_out(tmp_path):
    db = tmp_path / "lb.sqlite"
    first = lb.add(_tt_sealed(db, figures=_tt_figures(20.0)), path=db)
    slower = lb.add(_tt_sealed(db, figures=_tt_figures(25.0)), path=db)
    assert slower.outcome == "kept" and str(slower).startswith("kept your best: 'Ada' stays at 20.0 s (2026-11-23); "
                                                               "this run's 25.0 s was not added")
    quicker = lb.add(_tt_sealed(db, figures=_tt_figures(15.0)), path=db)
    assert quicker.outcome == "replaced" and quicker.row_id == first.row_id
    assert str(quicker).startswith("'Ada' replaced its earlier run (20.0 s, 2026-11-23) with this quicker one: 15.0 s")
    assert list(lb.entries(path=db, kind="to_target")["time_to_target_s"]) == [15.0]


TT_REFUSED = [  # (what is wrong, the reason); each sealed, so its content alone refuses it
    (dict(figures={"time_to_target_s": None}), r"the figure 'time_to_target_s' \(.*\) is missing"),
    (dict(figures={"time_to_target_s": 5.0}), r"its time to the target, 5 s, is not its timed training, 10 s"),
    (dict(figures={"img_per_s": 9000.0}), r"its img/s, 9,000, does not agree with its images over its training "
                                           r"time: 49,152 ÷ 10 s = 4,915"),
    (dict(figures={"images": 100_000}), r"its img/s, 4,915.2, does not agree with .* 100,000 ÷ 10 s = 10,000"),
    (dict(figures={"images": 49_152.5, "img_per_s": 4915.25}), r"images=49,152\.5 is not a whole number"),
    (dict(figures={"mfu_pct": 50.0}), r"its MFU, 50%, does not agree with 100 × its images over its training time "
                                       r"as printed ÷ the session's ceiling: 100 × 49,152 ÷ 10\.0 s ÷ 20,000 = "
                                       r"24\.6%"),
    (dict(figures={"mfu_pct": 150.0}), r"mfu_pct=150 is outside what a run can measure"),
    (dict(figures={"accuracy": 0.85}), r"its held-out accuracy, 85\.0%, is below its target, 90\.0%: a run that "
                                        r"missed the target has no time to it"),
    (dict(figures={"speedup": 18.0}), r"unknown figures \['speedup'\]"),  # a ladder figure
    (dict(checks={"accuracy_target": False}), r"'Ada' was not ranked: the harness did not pass it \(accuracy_target, the "
                                               r"rule that its held-out accuracy reached the target\)"),
    (dict(checks={"accuracy_not_worse": True}), r"unknown checks \['accuracy_not_worse'\]; the harness checks "
                                                 r"same_function, images_seen, accuracy_target\.$"),
]


@pytest.mark.parametrize("change, reason", TT_REFUSED, ids=[f"{i:02d}" for i in range(len(TT_REFUSED))])
def test_wrong_runs_to_the_target_are_refused_with_their_reason(tmp_path, change, reason):
    db = tmp_path / "lb.sqlite"
    lb.add(_tt_sealed(db, "kept"), path=db)
    with pytest.raises(lb.EntryRefused) as e:
        lb.add(_tt_sealed(db, **change), path=db)
    _refused(e, reason)
    assert list(lb.entries(path=db, kind="to_target")["name"]) == ["kept"]


def test_a_run_to_the_target_typed_by_hand_or_of_an_unknown_kind_is_refused(tmp_path):
    db = tmp_path / "lb.sqlite"
    with pytest.raises(lb.EntryRefused) as e:
        lb.add(_tt_entry("typed by hand"), path=db)
    _refused(e, r"^'typed by hand' was not produced by the harness")
    with pytest.raises(lb.EntryRefused) as e:
        lb.add(lb._seal(dataclasses.replace(_tt_entry(), kind="podium"), path=db), path=db)
    _refused(e, r"kind 'podium' is not one the leaderboard ranks \(ladder, to_target\)")
    with pytest.raises(lb.EntryRefused) as e:  # a ladder run's figures under the kind of a run to the target
        lb.add(lb._seal(dataclasses.replace(_entry(), kind="to_target"), path=db), path=db)
    _refused(e, r"unknown checks \['accuracy_not_worse'\]")
    assert not db.exists()
    sealed = _tt_sealed(db)
    assert lb.seal._mac(b"k" * 32, sealed) != lb.seal._mac(b"k" * 32, dataclasses.replace(sealed, kind="ladder"))


def _version_2(db: Path) -> bytes:
    """A file as the leaderboard wrote it before the learner's training was ranked: the ladder's table alone, layout 2,
    one sealed run in it. Returns its bytes."""
    lb.add(_sealed(db, "fused pool", _figures(9000.0)), path=db)
    con = sqlite3.connect(db)
    con.execute("DROP TABLE to_target")
    con.execute("ALTER TABLE entries DROP COLUMN datasheet_mfu_pct")  # layout 5's
    # the ladder's table as layout 2 made it: no challenge, one row per name, configuration and device
    old = lb.store._schema(lb.LADDER).replace("entries", "entries_v2").replace(
        "    challenge TEXT NOT NULL,\n", "").replace("UNIQUE (name, configuration, device, challenge)",
                                                   "UNIQUE (name, configuration, device)")
    assert "challenge" not in old
    con.execute(old)
    kept = ", ".join(["id", *(c for c in lb.store._columns(lb.LADDER)[:-1] if c != "datasheet_mfu_pct")])
    con.execute(f"INSERT INTO entries_v2 ({kept}) SELECT {kept} FROM entries")
    con.execute("DROP TABLE entries")
    con.execute("ALTER TABLE entries_v2 RENAME TO entries")
    con.execute("PRAGMA user_version = 2")
    con.commit()
    con.execute("VACUUM")
    con.close()
    return db.read_bytes()


def _layout_of(db: Path) -> tuple[int, set[str]]:
    con = sqlite3.connect(db)
    try:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        con.close()
    return version, tables - {"sqlite_sequence"}


def test_a_file_of_the_earlier_layout_is_read_as_it_is_and_migrated_at_its_first_write(tmp_path):
    db = tmp_path / "lb.sqlite"
    before = _version_2(db)
    ladder = lb.entries(path=db)
    assert _layout_of(db) == (2, {"entries"})
    assert lb.entries(path=db, kind="to_target").empty and [b.kind for b in lb.tables(path=db)] == ["ladder"]
    assert db.read_bytes() == before  # reading never writes
    added = lb.add(_tt_sealed(db), path=db)
    assert added.outcome == "added" and _layout_of(db) == (lb.store._VERSION, {"entries", "to_target"})
    pd.testing.assert_frame_equal(lb.entries(path=db), ladder)  # the ladder's rows kept as they were
    assert list(ladder["challenge"]) == [lb.store.UNNAMED]  # named as judged before challenges were
    assert list(lb.entries(path=db, kind="to_target")["name"]) == ["Ada"]
    assert lb.add(_sealed(db, "another", _figures(1000.0)), path=db).outcome == "added"  # the ladder still takes runs


def _version_4(db: Path) -> bytes:
    """A file as layout 4 wrote it: both tables, challenges named, no MFU over the data sheet; a run in each."""
    lb.add(_sealed(db, "fused pool", _figures(9000.0)), path=db)
    lb.add(_tt_sealed(db, "Bo", _tt_figures(30.0)), path=db)
    con = sqlite3.connect(db)
    for table in ("entries", "to_target"):
        con.execute(f"ALTER TABLE {table} DROP COLUMN datasheet_mfu_pct")
    con.execute("PRAGMA user_version = 4")
    con.commit()
    con.execute("VACUUM")
    con.close()
    return db.read_bytes()


def test_a_file_of_layout_4_is_read_as_it_is_and_keeps_its_rows_when_it_gains_mfu_over_the_data_sheet(tmp_path):
    db = tmp_path / "lb.sqlite"
    before = _version_4(db)
    ladder, to_target = lb.entries(path=db), lb.entries(path=db, kind="to_target")
    assert ladder["datasheet_mfu_pct"].isna().all() and to_target["datasheet_mfu_pct"].isna().all()
    assert db.read_bytes() == before  # reading never writes
    sheet = {**_figures(9500.0), "datasheet_mfu_pct": 100 * 9500.0 / CEILING * 0.8}
    added = lb.add(_sealed(db, "sheet", sheet), path=db)
    assert added.outcome == "added" and _layout_of(db)[0] == lb.store._VERSION == 5
    after = lb.entries(path=db)
    def kept(df):  # a row read back: an empty figure reads None from one layout and NaN beside a value
        return df.drop(columns="rank").reset_index(drop=True).astype({"datasheet_mfu_pct": float})

    pd.testing.assert_frame_equal(kept(after[after.name == "fused pool"]), kept(ladder))
    pd.testing.assert_frame_equal(lb.entries(path=db, kind="to_target"), to_target)
    board = lb.table("NVIDIA H100 80GB HBM3", path=db)
    cols = list(board.columns)
    assert cols[cols.index("mfu_pct") + 1] == "datasheet_mfu_pct"  # beside MFU over the measured ceiling
    assert board.set_index("name").loc["sheet", "datasheet_mfu_pct"] == pytest.approx(sheet["datasheet_mfu_pct"])
    assert "layout 4" in board.attrs["missing"]["datasheet_mfu_pct"]  # why the older row has none


def test_mfu_over_the_data_sheet_is_a_percentage_a_run_can_reach(tmp_path):
    db = tmp_path / "lb.sqlite"
    with pytest.raises(lb.EntryRefused) as e:
        lb.add(_sealed(db, figures={"datasheet_mfu_pct": 140.0}), path=db)
    _refused(e, r"datasheet_mfu_pct=140 is outside what a run can measure")


def test_a_migration_whose_write_fails_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    db = tmp_path / "lb.sqlite"
    before = _version_2(db)
    real = lb.store._connect

    # the INSERT after the migration fails inside the transaction
    monkeypatch.setattr(lb.store, "_connect", lambda p: _FailingInserts(real(p)))
    with pytest.raises(lb.LeaderboardFileError):
        lb.add(_tt_sealed(db), path=db)
    monkeypatch.setattr(lb.store, "_connect", real)
    assert _layout_of(db) == (2, {"entries"}) and db.read_bytes() == before


def test_a_file_of_a_later_layout_is_left_as_it_is(tmp_path):
    db = tmp_path / "lb.sqlite"
    lb.add(_sealed(db), path=db)
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 9")
    con.commit()
    con.close()
    before = db.read_bytes()
    with pytest.raises(lb.LeaderboardFileError) as e:
        lb.add(_tt_sealed(db), path=db)
    _refused_file(e, db, "was written by a later version of the course (layout 9); it was left as it is")
    assert db.read_bytes() == before


# -- a real verdict from the harness ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def judged():
    """A baseline and the same submission judged twice, by the harness, at a tiny size on the CPU (~2 s)."""
    from helpers.challenge.harness import Submission, judge

    from fakes import tiny_challenge, tiny_session

    rules, cfg = tiny_challenge()
    session = tiny_session(rules, matmul_tflops=50.0)  # a high ceiling: MFU well under 100%
    baseline = judge(Submission("baseline", cfg), session)
    runs = [judge(Submission("my run", cfg), session, baseline=baseline) for _ in range(2)]
    return baseline, runs


def test_a_verdict_from_the_harness_is_accepted_and_a_rerun_keeps_the_best(judged, tmp_path):
    baseline, (v1, v2) = judged
    assert not v1.refused and not v2.refused, v1.reasons + v2.reasons
    db = tmp_path / "lb.sqlite"
    assert lb.add(baseline.entry(path=db), path=db).outcome == "added"
    first = lb.add(v1.entry(path=db), path=db)
    assert first.outcome == "added" and str(first).startswith("'my run' added: ")
    second = lb.add(v2.entry(path=db), path=db)
    assert second.outcome == ("replaced" if v2.img_per_s > v1.img_per_s else "kept")
    df = lb.entries(path=db).set_index("name")
    assert len(df) == 2 and df.loc["my run", "img_per_s"] == max(v1.img_per_s, v2.img_per_s)
    assert df.loc["my run", "configuration"] == lb.configuration_of(v1.config)
    assert df.loc["my run", "speedup"] == pytest.approx(df.loc["my run", "img_per_s"] / baseline.img_per_s)
    with pytest.raises(lb.EntryRefused) as e:  # a name is stored as given or refused: never stripped
        lb.add(v1.entry(" my run", path=db), path=db)
    _refused(e, "it has a space at one end")


def test_a_verdict_entry_defaults_to_the_same_file_as_add(judged, tmp_path, monkeypatch):
    _, (v, _) = judged
    monkeypatch.setenv("HELPERS_RESULTS", str(tmp_path))
    added = lb.add(v.entry())
    assert lb.default_path().exists() and lb.key_path().exists() and added.outcome == "added"
    with pytest.raises(lb.EntryRefused) as e:  # sealed for the default file, added to another
        lb.add(v.entry(), path=tmp_path / "elsewhere.sqlite")
    _refused(e, "does not match its seal")


def test_a_verdict_edited_before_its_entry_is_made_is_refused(judged, tmp_path):
    _, (v, _) = judged
    faster = dataclasses.replace(v, img_per_s=10 * v.img_per_s, speedup=10 * v.speedup, mfu_pct=10 * v.mfu_pct)
    with pytest.raises(lb.EntryRefused) as e:
        faster.entry(path=tmp_path / "lb.sqlite")
    _refused(e, r"^'my run': its img_per_s, speedup, mfu_pct no longer match what judge measured \(the verdict was "
                r"edited after judge made it\), so it cannot be ranked")


def test_a_verdict_edited_so_that_its_figures_agree_is_still_refused_and_never_ranked(judged, tmp_path):
    """Edited so every figure agrees with every other (the baseline's img/s divided by 100, the speed-up and its
    bound times 100), checks set to passed, another configuration, another verdict's or a made-up token: judge's own
    record of the run decides, so each is refused, as an entry and as a baseline."""
    from helpers.challenge.harness import Submission, judge
    from helpers.challenge.rules import RuleBroken

    base, (v, _) = judged
    db = tmp_path / "lb.sqlite"
    agree = dataclasses.replace(v, baseline_img_per_s=v.baseline_img_per_s / 100, speedup=v.speedup * 100,
                                speedup_bound=None if v.speedup_bound is None else v.speedup_bound * 100)
    flipped = dataclasses.replace(v, checks={k: (True, why) for k, (_, why) in v.checks.items()})
    configured = dataclasses.replace(v, config=dataclasses.replace(v.config, batch_size=v.config.batch_size * 2))
    forged = dataclasses.replace(v, token="0" * 32)
    borrowed = dataclasses.replace(v, token=base.token)  # another run's record: its figures are not these
    for edited, what in ((agree, "baseline_img_per_s"), (configured, "configuration"), (borrowed, "img_per_s")):
        with pytest.raises(lb.EntryRefused, match=what):
            edited.entry(path=db)
    if not all(ok for ok, _ in v.checks.values()):
        with pytest.raises(lb.EntryRefused, match="no longer match"):
            flipped.entry(path=db)
    with pytest.raises(lb.EntryRefused, match="judge made no such verdict in this process"):
        forged.entry(path=db)
    slow = dataclasses.replace(base, img_per_s=base.img_per_s / 100)  # every later run would look 100× faster
    with pytest.raises(RuleBroken, match="the baseline 'baseline': its img_per_s no longer match"):
        judge(Submission("x", v.config), None, baseline=slow)  # refused before the session is read
    assert lb.entries(path=db).empty


# -- the file: errors that name it and what to do; a file it cannot read is left as it is -----------------

def _refused_file(excinfo, db, *phrases):
    msg = str(excinfo.value)
    assert results.shown(db) in msg, msg
    for phrase in phrases:
        assert phrase in msg, msg


def test_a_damaged_file_is_named_and_left_as_it_is(tmp_path):
    db = tmp_path / "lb.sqlite"
    entry = _sealed(db)
    junk = b"not a leaderboard\x00\xff" * 200
    db.write_bytes(junk)
    for call in (lambda: lb.add(entry, path=db), lambda: lb.entries(path=db), lambda: lb.tables(path=db)):
        with pytest.raises(lb.LeaderboardFileError) as e:
            call()
        _refused_file(e, db, "cannot be read (file is not a database); it was left as it is. Move it aside (mv ",
                      ".broken) to start a new one there, or give another file: verdict.entry(name, path=...)")
    assert db.read_bytes() == junk and sorted(p.name for p in tmp_path.iterdir()) == ["lb.sqlite", "lb.sqlite.key"]


def test_a_leaderboard_of_the_earlier_layout_or_another_programs_file_is_left_as_it_is(tmp_path):
    old = tmp_path / "old.sqlite"
    con = sqlite3.connect(old)  # the layout before entries were sealed (what results/ held until 2026-11-23)
    con.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, device TEXT, "
                "img_per_s REAL NOT NULL, checks TEXT NOT NULL, written_at REAL NOT NULL)")
    con.execute("INSERT INTO entries (name, device, img_per_s, checks, written_at) VALUES ('my run', 'x', 1, '{}', 0)")
    con.commit()
    con.close()
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (name TEXT)")
    con.commit()
    con.close()
    before = {p: p.read_bytes() for p in (old, other)}
    for db, phrase in ((old, "was written by an earlier version of the course (its rows carry no seal and cannot be "
                             "checked); it was left as it is. Move it aside (mv "),
                       (other, "is a SQLite file but not a leaderboard (it holds users); it was left as it is")):
        for call in (lambda: lb.add(_sealed(db), path=db), lambda: lb.entries(path=db)):
            with pytest.raises(lb.LeaderboardFileError) as e:
                call()
            _refused_file(e, db, phrase)
    assert {p: p.read_bytes() for p in before} == before


def test_a_damaged_key_is_named_and_left_as_it_is(tmp_path):
    db = tmp_path / "lb.sqlite"
    entry = _sealed(db)
    key = lb.key_path(db)
    key.write_text("not a key\n")
    for call in (lambda: _sealed(db), lambda: lb.add(entry, path=db)):
        with pytest.raises(lb.LeaderboardFileError) as e:
            call()
        _refused_file(e, key, "is damaged (not 64 hex digits); it was left as it is. Move it aside (mv ")
    assert key.read_text() == "not a key\n" and not db.exists()


def test_a_folder_where_the_file_should_be_is_named(tmp_path):
    db = tmp_path / "lb.sqlite"
    entry = _sealed(db)
    db.mkdir()
    for call in (lambda: lb.add(entry, path=db), lambda: lb.entries(path=db)):
        with pytest.raises(lb.LeaderboardFileError) as e:
            call()
        _refused_file(e, db, "is a folder, not a file: give another file: verdict.entry(name, path=...)")


def test_a_read_only_file_is_named_with_the_fix(tmp_path, monkeypatch):
    # The tests run as root, whom chmod does not stop: the file is opened read-only by SQLite itself (mode=ro),
    # which raises what a read-only file raises ("attempt to write a readonly database").
    db = tmp_path / "lb.sqlite"
    lb.add(_sealed(db, "kept"), path=db)
    before = db.read_bytes()
    real = lb.store._connect
    monkeypatch.setattr(lb.store, "_connect",  # where add looks it up
                        lambda p: sqlite3.connect(f"file:{p}?mode=ro", uri=True, isolation_level=None))
    with pytest.raises(lb.LeaderboardFileError) as e:
        lb.add(_sealed(db, "new"), path=db)
    _refused_file(e, db, "cannot be written (attempt to write a readonly database): make the file and its folder "
                         "writable (chmod u+w ")
    monkeypatch.setattr(lb.store, "_connect", real)
    assert db.read_bytes() == before and list(lb.entries(path=db)["name"]) == ["kept"]


def test_a_read_only_folder_is_named_with_the_fix(tmp_path, monkeypatch):
    # Simulated (the tests run as root, whom chmod does not stop): the OS refuses the key's file and SQLite its
    # database file, with the errors a read-only folder gives.
    db = tmp_path / "ro" / "lb.sqlite"

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied", str(db.parent))

    monkeypatch.setattr(lb.seal.tempfile, "mkstemp", refuse)
    with pytest.raises(lb.LeaderboardFileError) as e:
        _sealed(db)
    _refused_file(e, lb.key_path(db), "cannot be made ([Errno 13] Permission denied", "make its folder",
                  "writable, or give another file")
    monkeypatch.undo()
    entry = _sealed(db)

    def cannot_open(p):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(lb.store, "_connect", cannot_open)
    with pytest.raises(lb.LeaderboardFileError) as e:
        lb.add(entry, path=db)
    _refused_file(e, db, "cannot be opened (unable to open database file): its folder", "must be a folder you can "
                  "write to, or give another file")


def test_an_interrupted_write_rolls_back_and_names_the_file(tmp_path, monkeypatch):
    db = tmp_path / "lb.sqlite"
    lb.add(_sealed(db, "kept"), path=db)
    real = lb.store._connect

    # the INSERT fails inside the transaction (a disk full, an interrupt)
    monkeypatch.setattr(lb.store, "_connect", lambda p: _FailingInserts(real(p)))
    with pytest.raises(lb.LeaderboardFileError) as e:
        lb.add(_sealed(db, "lost"), path=db)
    _refused_file(e, db, "could not be written (disk I/O error): check that its disk has free space")
    monkeypatch.setattr(lb.store, "_connect", real)
    assert list(lb.entries(path=db)["name"]) == ["kept"]
    lb.add(_sealed(db, "after"), path=db)  # the lock was released: the next writer goes on
    assert len(lb.entries(path=db)) == 2


# -- concurrent writers, the file's places, the committed file ---------------------------------------------

@pytest.mark.slow  # starts and kills writer processes: `make test-slow`
@pytest.mark.parametrize("method", [None, "spawn"])  # by default a fork server where the platform has one
def test_concurrent_writers_lose_nothing_and_a_killed_writer_leaves_nothing(tmp_path, method):
    db = tmp_path / "lb.sqlite"
    res = lb.concurrent_writes_check(writers=3, each=10, path=db, start_method=method)
    assert (res.expected, res.found, res.whole, res.lost, res.half_written, res.ghosts) == (30, 30, 30, 0, 0, 0)
    assert "0 lost, 0 half-written" in str(res)
    assert lb.key_path(db).stat().st_mode & 0o777 == 0o600  # three processes raced to make it: one key


def test_re_runs_finishing_at_once_leave_one_row_the_best(tmp_path):
    # Threads, each with its own connection, as separate processes would be (SQLite locks the file, not the thread)
    from concurrent.futures import ThreadPoolExecutor

    db = tmp_path / "lb.sqlite"
    runs = [_sealed(db, "my run", _figures(1000.0 + 37 * i % 500)) for i in range(24)]
    with ThreadPoolExecutor(4) as pool:
        outcomes = [a.outcome for a in pool.map(lambda e: lb.add(e, path=db), runs)]
    df = lb.entries(path=db)
    assert len(df) == 1 and df["img_per_s"].iloc[0] == max(e.figures["img_per_s"] for e in runs)
    assert outcomes.count("added") == 1 and set(outcomes) <= {"added", "replaced", "kept"}


def test_smoke_runs_go_to_the_ignored_local_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("HELPERS_RESULTS", str(tmp_path))
    assert lb.default_path("smoke") == tmp_path / "local" / "leaderboard.sqlite"
    assert lb.default_path("full") == tmp_path / "leaderboard.sqlite"


@pytest.mark.slow  # starts and kills a writer process: `make test-slow`
def test_a_file_whose_only_writer_died_reads_as_empty(tmp_path):
    import multiprocessing

    db = tmp_path / "lb.sqlite"
    proc = multiprocessing.get_context("spawn").Process(target=lb._die_mid_write, args=(str(db),))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 1 and db.exists()
    assert lb.entries(path=db).empty
    lb.add(_sealed(db, "first"), path=db)  # its lock went with it: the next writer goes on
    assert list(lb.entries(path=db)["name"]) == ["first"]


def test_the_committed_leaderboard_has_the_sealed_layout_and_no_duplicates():
    committed = ROOT / "results" / "leaderboard.sqlite"
    df = lb.entries(path=committed)  # raises for the earlier layout
    assert not df.duplicated(["name", "configuration", "device"]).any()
    if shutil.which("git") is not None and (ROOT / ".git").exists():
        tracked = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True).stdout
        assert ".key" not in tracked


def test_a_refusal_quotes_the_figures_it_computed_from_as_a_reader_takes_them_in():
    """06's typed-by-hand example printed '20,000 ÷ 572.347121 = 34.9×': the baseline's img/s with every digit."""
    from helpers.leaderboard import entry

    with pytest.raises(lb.EntryRefused, match=r"29\.3×, .*: 20,000 ÷ 572\.3 = 34\.9×;"):
        entry._agree("typed", {"img_per_s": 20000.0, "speedup": 29.3193, "baseline_img_per_s": 572.347121,
                               "mfu_pct": 27.0, "speedup_bound": 113.0})


def test_an_entry_is_ranked_only_beside_runs_of_its_own_challenge(tmp_path):
    """Rules or a target of one's own make another challenge: its runs rank among themselves, on a board whose
    heading names it, never beside the course's; a row is kept per name, configuration, device and challenge."""
    db = tmp_path / "lb.sqlite"
    lb.add(_sealed(db, "honest", _figures(1000.0)), path=db)
    mine = "rules of its own ('mine'): 64 images at 8² from 64 (seed 0), judged on 64 held-out"
    added = lb.add(lb._seal(dataclasses.replace(_entry("small images", _figures(9000.0)), challenge=mine), path=db),
                   path=db)
    assert (added.rank, added.of, added.challenge) == (1, 1, mine) and str(added).endswith(
        f"rank 1 of 1 among runs of {mine} on NVIDIA H100 80GB HBM3 ({added.path}).")
    assert "among runs of" not in str(lb.add(_sealed(db, "another", _figures(500.0)), path=db))  # the course's
    boards = lb.tables(path=db)
    assert [(b.challenge, list(t["name"])) for b, t in boards.items()] == [(CHALLENGE, ["honest", "another"]),
                                                                           (mine, ["small images"])]
    both = lb.table("NVIDIA H100 80GB HBM3", path=db)  # each ranked within its own challenge, which a column names
    assert list(zip(both.index, both["name"], both["challenge"])) == [
        (1, "honest", CHALLENGE), (2, "another", CHALLENGE), (1, "small images", mine)]
    assert list(lb.table("NVIDIA H100 80GB HBM3", path=db, challenge=CHALLENGE)["name"]) == ["honest", "another"]
    assert "challenge" not in lb.table("NVIDIA H100 80GB HBM3", path=db, challenge=mine)


@pytest.mark.parametrize("challenge", ["", "   ", None, "x" * (lb.CHALLENGE_MAX + 1)])
def test_an_entry_that_names_no_challenge_is_refused(tmp_path, challenge):
    db = tmp_path / "lb.sqlite"
    with pytest.raises(lb.EntryRefused) as e:
        lb.add(lb._seal(dataclasses.replace(_entry("nameless"), challenge=challenge), path=db), path=db)
    _refused(e, r"^'nameless': the challenge it was judged on is .*; every entry names its challenge in 1 to 400 ")
    assert not db.exists()


def test_gpm_above_nvml_is_noted_with_the_gap_the_rows_show():
    """06's board said GPM "can pass [NVML] by a point or so" beside a row of 95.2 against 91.7."""
    import pandas as pd

    from helpers.leaderboard import store

    out = pd.DataFrame({"name": ["reference", "mine"], "nvml_util_pct": [91.7, 80.0], "gpm_sm_pct": [95.2, 70.0]})
    (note,) = store._sm_above_util_note(out)
    assert note.startswith("GPM's SM activity reads above NVML's utilisation for reference (by up to 3.5 points)")
    assert "point or so" not in note
    assert store._sm_above_util_note(out.assign(gpm_sm_pct=[90.0, 70.0])) == []


def test_a_run_to_the_targets_row_shows_img_per_s_as_its_images_over_its_seconds_as_shown(tmp_path):
    # the row read "1.62 · 36,864 · 22,694": a reader's 36,864 ÷ 1.62 is 22,756; the table keeps the measured rate
    db = tmp_path / "lb.sqlite"
    figures = _tt_figures(1.6244, images=36_864)
    # an H200's ceiling; MFU as judge_training computes it, from the rate as printed (36,864 ÷ 1.62 s)
    figures.update(ceiling_img_per_s=65_257.0, mfu_pct=100 * (36_864 / 1.62) / 65_257.0)
    lb.add(_tt_sealed(db, "Ada", figures), path=db)
    t = lb.table("NVIDIA H100 80GB HBM3", path=db, kind="to_target")
    shown = tables.readable(t).shown.iloc[0]
    assert (shown["time to target s"], shown["images"], shown["img/s"]) == ("1.62", "36,864", "22,756")
    assert round(float(t.iloc[0]["img_per_s"])) == 22_694
    assert tables.percent(float(t.iloc[0]["mfu_pct"])) == "34.9"  # 22,756 ÷ 65,257, as the row reads


def test_a_ladder_rows_speed_up_reads_as_its_img_s_over_its_baseline_as_shown(tmp_path):
    """06's board read 50.2× beside 21,516 img/s and a baseline of 428 (50.27), where the ladder's own line read
    50.3×: the column is shown from the two rates as the row prints them; the entry keeps the ranked ratio."""
    from helpers.tables import readable

    db = tmp_path / "lb.sqlite"
    figures = {**_figures(21_516.3), "baseline_img_per_s": 428.2, "speedup": 21_516.3 / 428.2,
               "speedup_bound": CEILING / 428.2}
    lb.add(_sealed(db, "+ padded conv1", figures), path=db)
    t = lb.table("NVIDIA H100 80GB HBM3", path=db)
    shown = readable(t).shown
    assert (shown["img/s"].iloc[0], shown["baseline img/s"].iloc[0]) == ("21,516", "428")
    assert shown["speed-up ×"].iloc[0] == "50.3"  # 21,516 ÷ 428; the unrounded ratio, 50.248, read 50.2
    assert t.loc[1, "speedup"] == pytest.approx(21_516.3 / 428.2)
