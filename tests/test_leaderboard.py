"""The final challenge's leaderboard: entries validated with reasons, one transaction each, concurrent writers
losing nothing and leaving nothing half-written, a table per device."""

from __future__ import annotations

import sqlite3

import pandas as pd
import pytest

from helpers import leaderboard as lb

HEADER = {"device": "NVIDIA H100 80GB HBM3", "driver": "580", "torch": "2.11.0", "cuda": "13.0",
          "host_cpu": "Xeon (16 usable cores)", "date": "2026-11-23"}
FIGURES = {"img_per_s": 9000.0, "speedup": 17.5, "mfu_pct": 27.3, "accuracy": 0.61, "peak_mem_gb": 30.2,
           "nvml_util_pct": 99.0, "gpm_sm_pct": None}
PASSED = {k: True for k in lb.CHECKS}


def _entry(name="fused pool", figures=None, checks=None, header=None):
    return lb.Entry(name, {**FIGURES, **(figures or {})}, {**PASSED, **(checks or {})}, {**HEADER, **(header or {})})


def test_an_entry_is_written_whole_and_ranked_per_device(tmp_path):
    db = tmp_path / "lb.sqlite"
    lb.add(_entry("slow", {"img_per_s": 1000.0}), path=db)
    lb.add(_entry("fast", {"img_per_s": 5000.0}), path=db)
    lb.add(_entry("other gpu", {"img_per_s": 3000.0}, header={"device": "NVIDIA H200"}), path=db)
    t = lb.table("NVIDIA H100 80GB HBM3", path=db)
    assert list(t["name"]) == ["fast", "slow"] and list(t.index) == [1, 2]
    assert t.loc[1, "mfu_pct"] == 27.3 and pd.isna(t.loc[1, "gpm_sm_pct"])  # None where not measured
    per_device = lb.tables(path=db)
    assert set(per_device) == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}
    assert list(per_device["NVIDIA H200"]["name"]) == ["other gpu"]


@pytest.mark.parametrize("change, phrase", [
    (dict(figures={"mfu_pct": None}), "'mfu_pct'"),                        # a missing figure
    (dict(figures={"accuracy": "0.6"}), "is a str"),                       # the wrong type
    (dict(figures={"img_per_s": True}), "is a bool"),
    (dict(figures={"accuracy": 61.0}), "outside what a run can measure"),  # a percentage where a fraction goes
    (dict(figures={"img_per_s": float("nan")}), "outside what a run can measure"),
    (dict(figures={"speedup": 0.0}), "outside what a run can measure"),
    (dict(figures={"loss": 0.1}), "unknown figures"),
    (dict(checks={"same_function": False}), "same_function"),              # a run the harness refused
    (dict(checks={"accuracy_not_worse": False}), "no worse than the baseline"),
    (dict(name=""), "give the run a name"),
    (dict(header={"device": None}), "where it ran is missing"),
])
def test_bad_entries_are_refused_with_the_reason_and_nothing_is_written(tmp_path, change, phrase):
    db = tmp_path / "lb.sqlite"
    lb.add(_entry("kept"), path=db)
    with pytest.raises(lb.EntryRefused, match=phrase):
        lb.add(_entry(**change), path=db)
    assert list(lb.entries(path=db)["name"]) == ["kept"]


def test_a_check_the_harness_never_ran_is_named():
    checks = {k: True for k in list(lb.CHECKS)[1:]}
    with pytest.raises(lb.EntryRefused, match="same_function: not checked"):
        lb.Entry("x", FIGURES, checks, HEADER).validate()


def test_an_interrupted_write_rolls_back(tmp_path, monkeypatch):
    db = tmp_path / "lb.sqlite"
    lb.add(_entry("kept"), path=db)
    real = lb._connect

    class Failing:  # the INSERT fails inside the transaction (a disk full, an interrupt)
        def __init__(self, con):
            self.con = con

        def execute(self, sql, *a):
            if sql.startswith("INSERT"):
                raise sqlite3.OperationalError("disk I/O error")
            return self.con.execute(sql, *a)

        def close(self):
            self.con.close()

    monkeypatch.setattr(lb, "_connect", lambda p: Failing(real(p)))
    with pytest.raises(sqlite3.OperationalError):
        lb.add(_entry("lost"), path=db)
    monkeypatch.setattr(lb, "_connect", real)
    assert list(lb.entries(path=db)["name"]) == ["kept"]
    lb.add(_entry("after"), path=db)  # the lock was released: the next writer goes on
    assert len(lb.entries(path=db)) == 2


def test_concurrent_writers_lose_nothing_and_a_killed_writer_leaves_nothing(tmp_path):
    res = lb.concurrent_writes_check(writers=3, each=10, path=tmp_path / "lb.sqlite")
    assert (res.expected, res.found, res.whole, res.lost, res.half_written, res.ghosts) == (30, 30, 30, 0, 0, 0)
    assert "0 lost, 0 half-written" in str(res)


def test_smoke_runs_go_to_the_ignored_local_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("HELPERS_RESULTS", str(tmp_path))
    assert lb.default_path("smoke") == tmp_path / "local" / "leaderboard.sqlite"
    assert lb.default_path("full") == tmp_path / "leaderboard.sqlite"


def test_a_file_whose_only_writer_died_reads_as_empty(tmp_path):
    import multiprocessing

    db = tmp_path / "lb.sqlite"
    proc = multiprocessing.get_context("spawn").Process(target=lb._die_mid_write, args=(str(db),))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 1 and db.exists()
    assert lb.entries(path=db).empty
    lb.add(_entry("first"), path=db)  # its lock went with it: the next writer goes on
    assert list(lb.entries(path=db)["name"]) == ["first"]
