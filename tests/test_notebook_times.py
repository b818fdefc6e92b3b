"""Run times: every cell timed, figures for results/, the budget, and a README table written from results/."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("notebook_times", ROOT / "scripts" / "notebook_times.py")
nt = sys.modules.setdefault("notebook_times", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(nt)

TIMINGS = {"scale": "full", "notebooks": {
    "00_setup": {"run_s": 20.0, "passed": True, "figures_checked": 3, "cells": [
        {"cell": "00-02", "s": 4.0, "first_line": "import time", "passed": True},
        {"cell": "00-11", "s": 9.5, "first_line": "ceil = bench.measure_ceilings()", "passed": True}]},
    "02_dataloader": {"run_s": 320.0, "passed": True, "cells": [
        {"cell": "02-07", "s": 120.0, "first_line": "GRID_BATCHES = ...", "passed": True},
        {"cell": "02-23", "s": 30.0, "first_line": "tuned_cfg = ...", "passed": True}]},
    "01_baseline": {"run_s": 12.0, "passed": False, "cells": [
        {"cell": "01-04", "s": 12.0, "first_line": "with monitor.Monitor(...) as mon:", "passed": False}]},
}}


def test_figures_name_each_notebook_and_leave_out_failed_runs():
    figs = nt.figures_from(TIMINGS)
    assert figs == {"run_s_00_setup": 20.0, "max_cell_s_00_setup": 9.5, "figures_checked_00_setup": 3,
                    "run_s_02_dataloader": 320.0, "max_cell_s_02_dataloader": 120.0}  # 02: a run before the count


def test_the_slowest_cells_come_with_their_first_line():
    top = nt.slowest_cells(TIMINGS, n=2)
    assert [(c["notebook"], c["cell"]) for c in top] == [("02_dataloader", "02-07"), ("02_dataloader", "02-23")]
    text = nt.report(TIMINGS)
    assert "120.0 s  02_dataloader [02-07]  GRID_BATCHES = ..." in text
    assert len(nt.slowest_cells(TIMINGS)) == 5 and text.startswith("the five slowest cells:")


def test_the_budget_names_what_is_over_it():
    misses = nt.over_budget(TIMINGS, "full")
    assert misses == ["02_dataloader took 320 s (budget 300 s)",
                      "02_dataloader cell [02-07] took 120 s (budget 90 s): GRID_BATCHES = ..."]
    assert nt.over_budget(TIMINGS, "smoke") == ["02_dataloader took 320 s (budget 180 s)",
                                                "02_dataloader cell [02-07] took 120 s (budget 60 s): GRID_BATCHES = ..."]
    assert "OVER" in nt.report(TIMINGS)


def test_the_readme_table_is_written_from_results(tmp_path):
    (tmp_path / nt.REFERENCE).write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-22",
                                                     "figures": {"run_s_00_setup": 19.6, "max_cell_s_00_setup": 6.2}}))
    block = nt.readme_block(tmp_path, notebooks=["00_setup", "01_baseline"])
    assert "| `00_setup` | 20 s | 6 s | not measured yet | not measured yet | not measured yet |" in block
    assert "| `01_baseline` | not measured yet | not measured yet | not measured yet | not measured yet |" in block


def test_a_notebook_that_needs_two_gpus_takes_its_times_from_that_node(tmp_path):
    (tmp_path / nt.REFERENCE).write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-22",
                                                     "figures": {"run_s_05_ddp": 1.0}}))  # one GPU: skipped cells
    (tmp_path / nt.MULTI_GPU_REFERENCE["05_ddp"]).write_text(json.dumps(
        {"device": "NVIDIA H200", "date": "2026-11-23", "figures": {"run_s_05_ddp": 155.2, "max_cell_s_05_ddp": 34.1,
                                                                     "ddp_gpus": 2.0}}))
    block = nt.readme_block(tmp_path, notebooks=["05_ddp"])
    assert "| `05_ddp` | 155 s ¹ | 34 s | not measured yet | not measured yet | not measured yet |" in block
    assert "`05_ddp` on 2 × NVIDIA H200, 2026-11-23" in block
    # a later run on that node (07's, say) moves the file's date, not 05's; the one GPU's runs span two days
    (tmp_path / nt.MULTI_GPU_REFERENCE["05_ddp"]).write_text(json.dumps(
        {"device": "NVIDIA H200", "date": "2026-11-28", "figures": {"run_s_05_ddp": 155.2, "ddp_gpus": 2.0},
         "measured_on": {"run_s_05_ddp": "2026-11-23"}}))
    (tmp_path / nt.REFERENCE).write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-28",
                                                     "figures": {"run_s_00_setup": 1.0, "run_s_01_baseline": 2.0},
                                                     "measured_on": {"run_s_00_setup": "2026-11-22",
                                                                     "run_s_01_baseline": "2026-11-28"}}))
    block = nt.readme_block(tmp_path, notebooks=["00_setup", "01_baseline", "05_ddp"])
    assert "`05_ddp` on 2 × NVIDIA H200, 2026-11-23" in block
    assert "Full scale: one NVIDIA H100 80GB HBM3, 2026-11-22 to 2026-11-28" in block


def test_the_readme_shows_what_results_holds():
    assert nt.update_readme(check=True), "run: python3 scripts/notebook_times.py readme"


def test_a_timings_file_is_checked(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"00_setup": 3.0}))
    with pytest.raises(ValueError, match="not a timings file"):
        nt.load(bad)


def test_record_writes_the_figures_and_the_readme_table(monkeypatch):
    from helpers import results

    rewritten = []
    monkeypatch.setattr(nt, "update_readme", lambda: rewritten.append(True))
    smoke = {"scale": "smoke", "cpu_capability": "AVX512", "notebooks": {"00_setup": TIMINGS["notebooks"]["00_setup"]}}
    path = nt.record(smoke)
    assert path == results.results_dir() / nt.SMOKE  # the test's own results folder (tests/conftest.py)
    assert results.load(path)["figures"] == {"run_s_00_setup": 20.0, "max_cell_s_00_setup": 9.5,
                                                  "figures_checked_00_setup": 3}
    assert rewritten == [True]
    for capability in ("AVX2", "AVX512 (oneDNN ≤ AVX2)"):  # an AVX2-only CPU, real or made by the two settings
        path = nt.record({**smoke, "cpu_capability": capability})
        assert path == results.results_dir() / nt.SMOKE_AVX2
        data = results.load(path)
        assert data["device"] == "cpu (AVX2 only)" and data["cpu_capability"] == capability
        assert "usable cores" in data["host_cpu"]
    rewritten.clear()
    failed = {"scale": "smoke", "notebooks": {"01_baseline": TIMINGS["notebooks"]["01_baseline"]}}
    assert nt.record(failed) is None and rewritten == []  # a failed run records nothing


def test_the_smoke_budget_bounds_each_cell_too():
    slow_cell = {"scale": "smoke", "notebooks": {"04_memory": {"run_s": 100.0, "passed": True, "cells": [
        {"cell": "04-21", "s": 75.0, "first_line": "found[...] = find(...)", "passed": True}]}}}
    assert nt.over_budget(slow_cell, "smoke") == ["04_memory cell [04-21] took 75 s (budget 60 s): found[...] = find(...)"]


def _script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = sys.modules.setdefault(name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


def test_the_shrunk_box_comparison_reads_the_asserted_targets_and_skips_unmeasured_ones(tmp_path):
    sb = _script("shrunk_boxes")
    asserted = sb.asserted_figures()
    assert asserted["amp_bf16_speedup"] == "04_memory" and asserted["compile_speedup"] == "03_kernels"
    assert "loader_tuned_speedup" not in asserted  # shown beside its bound, never asserted (required=False)
    normal = {"device": "GPU", "figures": {"a": 2.0, "b": 10.0, "c": 1.0}}
    shrunk = {"device": "GPU", "figures": {"a": 2.1, "b": float("nan")}}
    rows = {r["figure"]: r for r in sb.compare(shrunk, normal, {"a": "x", "b": "x", "c": "x"})}
    assert rows["a"]["diff_pct"] == pytest.approx(5.0)
    assert rows["b"]["diff_pct"] is None and rows["c"]["diff_pct"] is None
    n, s = tmp_path / "n.json", tmp_path / "s.json"
    n.write_text(json.dumps(normal))
    s.write_text(json.dumps({**shrunk, "device": "other GPU"}))
    assert sb.main([str(s), str(n)]) == 2  # runs of two devices are not compared


def test_a_fresh_clone_time_goes_to_the_smoke_file_of_its_cpu(monkeypatch):
    from helpers import env, results

    monkeypatch.setattr(nt, "update_readme", lambda: None)
    monkeypatch.setattr(env, "cpu_capability", lambda: "AVX512 (oneDNN ≤ AVX2)")
    path = nt.record_fresh_clone(780.0, commit="abc1234")
    assert path.name == nt.SMOKE_AVX2 and results.load(path)["figures"]["smoke_make_test_s_avx2"] == 780.0
    assert results.load(path)["fresh_clone_commit"] == "abc1234"  # the README states the commit beside the time
    monkeypatch.setattr(env, "cpu_capability", lambda: "AVX512")
    path = nt.record_fresh_clone(600.0)
    assert path.name == nt.SMOKE and results.load(path)["figures"]["smoke_make_test_s"] == 600.0
