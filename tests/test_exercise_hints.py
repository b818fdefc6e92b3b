"""Every exercise left blank says where the notebook teaches it: the "not done" hint names at least one cell, by
the id it has in that notebook (as shown in JupyterLab's cell toolbar and the exports), and every id named exists.
(03's CUDA graph says on a CPU that it needs a GPU instead; 05's files name the cell that writes them.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from helpers import bench
from helpers.exercises import nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb07

ROOT = Path(__file__).resolve().parents[1]


def _unwritten(*args, **kwargs):
    raise NotImplementedError


GRID = pd.DataFrame([{"batch_size": 32, "num_workers": 0, "pin_memory": False, "img_per_s": 500.0}])
CEIL = bench.Ceilings("test CPU", matmul_tflops=1.0, matmul_dtype="float32", matmul_n=64, copy_gb_per_s=100.0,
                      copy_bytes=1)
BUDGET = nb04.MemoryBudget(base_batch=64, factor=2, budget_gib=0.05, base_img_per_s=100.0, image_size=32)
EVIDENCE = nb01.BaselineEvidence(util_pct=40.0, util_source="nvml", img_per_s=500.0,
                                 phase_ms={"data": 45.0, "h2d": 3.0, "compute": 10.0, "other": 6.0},
                                 ceiling_img_per_s=66_000.0)

BLANK = {
    "00": lambda: nb00.check_ceiling_img_per_s(_unwritten),
    "01": lambda: nb01.check_baseline_analysis(nb01.BaselineAnalysis(), EVIDENCE),
    "02 loader": lambda: nb02.check_fast_loader(None, grid_df=GRID, measure=_unwritten),
    "02 loop": lambda: nb02.check_loop_without_syncs(None, device="cpu"),
    "02 bytes": lambda: nb02.check_loop_from_bytes(None, device="cpu"),
    "02 augment": lambda: nb02.check_gpu_augment(_unwritten, device="cpu"),
    "03 softmax": lambda: nb03.check_fused_softmax(None, device="cpu"),
    "03 bias relu pool": lambda: nb03.check_bias_relu_pool(None, device="cpu"),
    "03 fast step": lambda: nb03.check_fast_step(None, device="cpu"),
    "03 roofline": lambda: nb03.check_roofline(None, CEIL, kernels=nb03.given_kernels("smoke")),
    "04 amp": lambda: nb04.check_amp_step(None, nb04.amp_plan(), device="cpu"),
    "04 plans": lambda: nb04.check_memory_plans(None, budget=BUDGET, device="cpu"),
    "04 largest block": lambda: nb04.check_largest_block(_unwritten, device="cpu"),
    "05 efficiency": lambda: nb05.check_predicted_efficiency(_unwritten),
    "06.0": lambda: nb06.check_own_training(None, SimpleNamespace(time_to_target_s=2.0)),
    "06.1": lambda: nb06.check_spot_the_cheat(None, {}),
    "07.1": lambda: nb07.check_flops_per_token(_unwritten),
    "07.2": lambda: nb07.check_selective_policy(_unwritten, device="cpu"),
}


def _ids(notebook: str) -> set[str]:
    path = next((ROOT / "notebooks").glob(f"{notebook}_*.ipynb"))
    return {c.get("id") for c in json.loads(path.read_text())["cells"]}


@pytest.mark.parametrize("case", sorted(BLANK))
def test_a_blank_exercise_names_the_cells_that_teach_it_and_they_exist(case):
    res = BLANK[case]()
    assert res.status == "not done", res.message
    named = re.findall(r"\[(\d\d-[\w-]+)\]", res.message)
    assert named, f"{case}: the hint names no cell: {res.message}"
    for cell in named:
        assert cell in _ids(cell[:2]), f"{case}: [{cell}] is not a cell of notebook {cell[:2]}"


def test_a_cell_named_in_a_message_gets_the_heading_of_its_section_once():
    from helpers.exercises.cells import name_cells

    once = name_cells("from your grid [02-07], then [99-zz]")
    assert once == 'from your grid [02-07] (under "Predict, then measure: the loader grid"), then [99-zz]'
    assert name_cells(once) == once  # a message named already stays as it is
