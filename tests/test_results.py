import json
from pathlib import Path

import pytest

from helpers import env, results


def test_record_writes_the_documented_schema(monkeypatch, tmp_path):
    monkeypatch.setenv("HELPERS_SCALE", "smoke")
    path = results.record({"ceiling_copy_gb_per_s": 12.5, "baseline_img_per_s": 3})
    assert path.parent.name == "local" and path.name == "cpu-smoke.json"
    data = json.loads(path.read_text())
    assert list(data)[:6] == ["device", "driver", "torch", "cuda", "date", "host_cpu"]
    assert data["date"] == env.today()
    assert data["figures"] == {"ceiling_copy_gb_per_s": 12.5, "baseline_img_per_s": 3.0}


def test_record_merges_and_keeps_earlier_figures():
    results.record({"a": 1.0})
    path = results.record({"b": 2.0, "a": 3.0})
    assert results.load(path)["figures"] == {"a": 3.0, "b": 2.0}
    assert not list(path.parent.glob("*.tmp"))  # no leftovers of the atomic write


def test_figures_must_be_measured_numbers():
    with pytest.raises(ValueError, match="numbers"):
        results.record({"x": "fast"})
    with pytest.raises(ValueError):
        results.record({"x": True})


def test_full_scale_writes_beside_the_repo_with_the_gpu_slug(monkeypatch):
    monkeypatch.setattr(results, "device_header", lambda: {
        "device": "NVIDIA H100 80GB HBM3", "driver": "580", "torch": "2.11", "cuda": "13.0", "date": "2026-11-22",
        "host_cpu": "x"})
    monkeypatch.setenv("HELPERS_SCALE", "full")
    assert results.results_path(results.device_header()).name == "nvidia-h100-80gb-hbm3.json"


def test_comparison_table_adds_speedups():
    results.add_comparison_row("baseline", {"img_per_s": 500.0})
    path = results.add_comparison_row("loader", {"img_per_s": 2500.0})
    df = results.comparison_table(path)
    assert list(df.index) == ["baseline", "loader"]
    assert df.loc["loader", "speedup_x"] == pytest.approx(5.0)
    assert list(results.figures_table(path).columns) == ["figure", "value", "unit"]


def test_a_notebooks_comparison_leaves_out_the_rows_later_notebooks_measured_in_an_earlier_run():
    """01's table showed 02's and 03's rows of the run before (a full run keeps results/ between notebooks)."""
    results.add_comparison_row("baseline", {"img_per_s": 500.0}, notebook="01_baseline")
    results.add_comparison_row("loader_tuned", {"img_per_s": 4500.0}, notebook="02_dataloader")
    path = results.add_comparison_row("compiled_step", {"img_per_s": 15000.0}, notebook="03_kernels")
    assert list(results.comparison_table(path, upto="01_baseline").index) == ["baseline"]
    df = results.comparison_table(path, upto="02_dataloader")
    assert list(df.index) == ["baseline", "loader_tuned"] and "notebook" not in df.columns
    assert len(results.comparison_table(path)) == 3  # every row, as the README's and a results reader's table



def test_the_comparison_lists_the_baseline_first_and_the_rest_in_course_order(tmp_path):
    """02's export listed 01's baseline under 02's rows: on that GPU, 02 had recorded its rows before 01 first ran."""
    path = tmp_path / "gpu.json"
    results.add_comparison_row("compiled_step", {"img_per_s": 15000.0}, notebook="03_kernels", path=path)
    results.add_comparison_row("loader_tuned", {"img_per_s": 4500.0}, notebook="02_dataloader", path=path)
    results.add_comparison_row("baseline", {"img_per_s": 500.0}, notebook="01_baseline", path=path)
    assert list(results.load(path)["comparison"]) == ["compiled_step", "loader_tuned", "baseline"]  # file order
    assert list(results.comparison_table(path).index) == ["baseline", "loader_tuned", "compiled_step"]


def test_missing_file_loads_empty(tmp_path):
    assert results.load(tmp_path / "none.json") == {"figures": {}, "comparison": {}}


def test_a_notebook_shows_its_own_figures_and_prints_paths_without_the_machines_folders(tmp_path, monkeypatch):
    path = results.record({"a_img_per_s": 1.0, "b_img_per_s": 2.0, "c_pct": 3.0}, path=tmp_path / "gpu.json")
    assert list(results.figures_table(path, only={"a_img_per_s", "c_pct"}).figure) == ["a_img_per_s", "c_pct"]
    assert len(results.figures_table(path)) == 3
    root = Path(results.__file__).resolve().parents[1]
    assert results.shown(root / "results" / "x.json") == "results/x.json"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert results.shown(tmp_path / "course" / "r.json") == "~/course/r.json"
    assert results.shown("/nowhere/else.json") == "/nowhere/else.json"


def test_two_gpu_figures_recorded_elsewhere_are_found_with_their_device_and_date(tmp_path):
    import json

    from helpers.tables import readable

    (tmp_path / "nvidia-h200.json").write_text(json.dumps({"device": "NVIDIA H200", "date": "2026-11-27", "figures": {
        "ddp_gpus": 2.0, "ddp2_efficiency_pct_bs256": 97.39, "ddp2_efficiency_pct_bs32": 85.57}}))
    (tmp_path / "nvidia-h100.json").write_text(json.dumps({"device": "NVIDIA H100", "date": "2026-11-27", "figures": {
        "ddp2_efficiency_pct_bs256": 12.0}}))  # one GPU's file: not a two-GPU measurement
    (tmp_path / "broken.json").write_text("{")
    df = results.recorded_elsewhere(["ddp2_efficiency_pct_bs256", "ddp2_efficiency_pct_bs32"], folder=tmp_path)
    assert list(df.figure) == ["ddp2_efficiency_pct_bs256", "ddp2_efficiency_pct_bs32"]
    assert set(df.device) == {"2 × NVIDIA H200"} and set(df.date) == {"2026-11-27"}
    assert list(readable(df).shown["value"]) == ["97.4", "85.6"]
    assert results.recorded_elsewhere(["nothing_like_it"], folder=tmp_path).empty


def test_a_figure_in_joules_per_image_reads_in_its_unit_not_as_seconds():
    # "energy_j_per_image_final" ends in neither _s nor _ms, but "_per_image" once matched nothing and read unitless
    assert results.figure_unit("energy_j_per_image_final") == ("J/image", "sig")
    assert results.figure_unit("energy_j_per_image_baseline")[0] == "J/image"
    assert results.figure_unit("baseline_img_per_s")[0] == "img/s"  # the per-image rule takes no other figure


def test_each_figure_keeps_the_day_it_was_measured_when_a_later_run_adds_to_the_file(monkeypatch, tmp_path):
    """A node's file gathers several runs (05 on one day, 07 on another): its "date" is the latest run's, and a
    sentence about 05 must still name 05's day."""
    path = tmp_path / "nvidia-h200.json"
    day = {"now": "2026-11-27"}
    monkeypatch.setattr(results, "device_header", lambda: {"device": "NVIDIA H200", "driver": "580", "torch": "2.11",
                                                           "cuda": "13.0", "date": day["now"], "host_cpu": "x"})
    results.record({"ddp_gpus": 2.0, "ddp2_efficiency_pct_bs256": 97.1}, path=path)
    day["now"] = "2026-11-28"
    results.record({"gpt_shard_gpus": 2.0, "gpt_shard_zero_vs_ddp_x": 0.95}, path=path)
    data = results.load(path)
    assert data["date"] == "2026-11-28"
    assert results.measured_on(data, "ddp2_efficiency_pct_bs256") == "2026-11-27"
    assert results.measured_on(data, "gpt_shard_zero_vs_ddp_x") == "2026-11-28"
    assert results.measured_on({"date": "2026-11-20", "figures": {"a": 1}}, "a") == "2026-11-20"  # an older file
    ddp = results.recorded_elsewhere(["ddp2_efficiency_pct_bs256"], folder=tmp_path)
    gpt = results.recorded_elsewhere(["gpt_shard_zero_vs_ddp_x"], where="gpt_shard_gpus", folder=tmp_path)
    assert list(ddp.date) == ["2026-11-27"] and list(gpt.date) == ["2026-11-28"]


def test_the_flops_per_image_reads_to_the_four_figures_its_ceiling_is_divided_by(tmp_path):
    # 00 printed "65,340 img/s (788 TFLOP/s ÷ 12.06 GFLOP per image)" above a table that read 12.1, where 788 ÷ 12.1
    # is 65,124
    from helpers import tables

    path = results.record({"ceiling_bf16_tflops": 787.93, "reference_gflop_per_image": 12.0594,
                           "reference_ceiling_img_per_s": 788e3 / 12.06}, path=tmp_path / "gpu.json")
    shown = dict(tables.readable(results.figures_table(path)).shown[["figure", "value"]].to_numpy())
    assert (shown["ceiling_bf16_tflops"], shown["reference_gflop_per_image"]) == ("788", "12.06")
    assert shown["reference_ceiling_img_per_s"] == f"{788e3 / 12.06:,.0f}"
