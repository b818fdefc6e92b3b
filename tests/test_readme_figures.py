"""The README's table of measured figures: written from results/ (one column per GPU at full scale), checked."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("readme_figures", ROOT / "scripts" / "readme_figures.py")
rf = sys.modules.setdefault("readme_figures", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(rf)


def test_the_readme_shows_what_results_holds():
    assert rf.update_readme(check=True), "run: python3 scripts/readme_figures.py"


def _write(folder: Path, name: str, device: str, figures: dict) -> None:
    (folder / name).write_text(json.dumps({"device": device, "date": "2026-11-23", "figures": figures}))


def test_each_gpu_gets_a_column_and_smoke_runs_none(tmp_path):
    _write(tmp_path, "nvidia-h100-80gb-hbm3.json", "NVIDIA H100 80GB HBM3", {"final_mfu_pct": 30.04, "ladder_top_img_per_s": 19508.6})
    _write(tmp_path, "nvidia-h200.json", "NVIDIA H200", {"ddp2_efficiency_pct_bs256": 97.3})
    _write(tmp_path, "nvidia-geforce-rtx-4090.json", "NVIDIA GeForce RTX 4090", {"final_mfu_pct": 12.34})  # a learner's
    _write(tmp_path, "smoke-avx2.json", "cpu (AVX2 only)", {"final_mfu_pct": 9.0})
    _write(tmp_path, "cpu-smoke.json", "cpu", {"final_mfu_pct": 8.0})
    block = rf.figures_block(tmp_path)
    head = block.splitlines()[1]
    assert head == ("| notebook | figure | NVIDIA GeForce RTX 4090 (2026-11-23) | NVIDIA H100 80GB HBM3 (2026-11-23) | "
                    "NVIDIA H200 (2026-11-23) |")
    rows = {line.split("`")[3]: line for line in block.splitlines() if line.startswith("| `")}
    assert rows["final_mfu_pct"].endswith("| 12.3 | 30.0 | — |")
    assert rows["ladder_top_img_per_s"].endswith("| — | 19,509 | — |")
    assert rows["ddp2_efficiency_pct_bs256"].endswith("| — | — | 97 |")
    assert "9.0" not in block and "8.0" not in block  # smoke runs never add a column


def test_a_readme_without_the_markers_is_refused(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no table here\n")
    with pytest.raises(ValueError, match="no figures table markers"):
        rf.update_readme(readme, results_dir=tmp_path)


def test_a_columns_date_is_the_span_of_the_days_its_figures_were_measured(tmp_path):
    (tmp_path / "nvidia-h200.json").write_text(json.dumps({
        "device": "NVIDIA H200", "date": "2026-11-28", "figures": {"ddp2_efficiency_pct_bs256": 97.3, "gpt_mfu_pct": 45.4,
                                                                   "not_a_key_figure": 1.0},
        "measured_on": {"ddp2_efficiency_pct_bs256": "2026-11-27", "gpt_mfu_pct": "2026-11-28",
                        "not_a_key_figure": "2026-11-20"}}))
    assert rf.figures_block(tmp_path).splitlines()[1].endswith("| NVIDIA H200 (2026-11-27 to 2026-11-28) |")
    assert rf.days_of({"date": "2026-11-22", "figures": {"a": 1}}, ["a", "b"]) == "2026-11-22"  # an older file


def test_a_time_keeps_its_trailing_zero_as_the_notebooks_print_it(tmp_path):
    """The README read the reference solution's time to the target as "1.6" s beside 06's "1.60"."""
    _write(tmp_path, "nvidia-h200.json", "NVIDIA H200", {"reference_time_to_target_s": 1.5993,
                                                        "baseline_time_to_target_s": 50.04, "inference_p99_ms_bs1": 0.165})
    rows = {line.split("`")[3]: line for line in rf.figures_block(tmp_path).splitlines() if line.startswith("| `")}
    assert rows["reference_time_to_target_s"].endswith("| 1.60 |")
    assert rows["baseline_time_to_target_s"].endswith("| 50.0 |")
    assert rows["inference_p99_ms_bs1"].endswith("| 0.165 |")
