"""Every exercise check survives what learners type: an answer of the wrong type or shape (None, a string where a
number is due, containers of the wrong length or types, NaN, ±inf, bools, impossible negatives, numbers too large
to compute with) never raises; it fails, and the message says what form the answer should take. Numpy scalars and
0-d tensors are numbers. 06.1 accepts any rule a run really broke."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import bench, large_batch, leaderboard
from helpers.challenge.harness import Submission, judge
from helpers.challenge.to_target import TrainingVerdict
from helpers.monitor import MonitorRecord
from helpers.exercises import nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb07
from helpers.loaders import LoaderSpec
from fakes import next_change_case, tiny_challenge, tiny_session

NAN, INF = float("nan"), float("inf")

# -- the battery, built once: label → a wrong answer ---------------------------------------------------------------

#: Not numbers (nor a number in a string): wrong wherever a number is due.
NOT_NUMBERS = {
    "None": None, "Ellipsis": ..., "a word": "fast", "a number in a string": "48", "an empty string": "",
    "a list": [1, 2], "an empty list": [], "a list of three": ["convolution", 48.0, "extra"],
    "a nested list": [["convolution"], 42], "a tuple of three": (1, 2, 3), "a dict": {"a": 1}, "an empty dict": {},
    "a set": {1, 2}, "NaN": NAN, "inf": INF, "-inf": -INF, "a bool": True, "a numpy bool": np.bool_(False),
    "10**400": 10**400, "-10**400": -(10**400), "10**5000": 10**5000, "a tensor": torch.ones(3),
    "a 0-d bool tensor": torch.tensor(True), "an array": np.ones(3), "bytes": b"48", "a complex": 1 + 2j,
    "an object": object(), "a class": int, "a function": len,
}
#: Numbers that no count, size or speed-up can be.
NEGATIVE = {"-3": -3, "-0.5": -0.5, "a negative numpy float": np.float64(-2.0)}
BATTERY = {**NOT_NUMBERS, **NEGATIVE}
BLANK = ("None", "Ellipsis")  # the answer left as handed out: "not done" where a check says so


def _without(values: dict, *labels: str, where=lambda v: False) -> dict:
    return {k: v for k, v in values.items() if k not in labels and not where(v)}


def _not_text(values: dict) -> dict:
    return _without(values, where=lambda v: isinstance(v, str))


def _pairs(v) -> bool:
    return isinstance(v, (list, tuple)) and len(v) == 2


# -- what the checks compare with: built or faked cheaply ----------------------------------------------------------

REFERENCE_RUN = TrainingVerdict(name="reference solution", checks={"accuracy_target": (True, "reached")},
                                accuracy=0.95, target=0.85, train_s=2.0, images=36_864, img_per_s=18_432.0,
                                mfu_pct=30.0, peak_mem_gib=11.8, nvml_util_pct=None, gpm_sm_pct=None, rehearsal_s=9.0,
                                monitor=MonitorRecord(source="host", devices=[], period_s=0.1))
NEXT = next_change_case()
GPU_EVIDENCE = nb01.BaselineEvidence(util_pct=40.0, util_source="nvml", img_per_s=500.0,
                                     phase_ms={"data": 45.0, "h2d": 3.0, "compute": 10.0, "other": 6.0},
                                     ceiling_img_per_s=66_000.0)
GOOD_ANALYSIS = nb01.baseline_analysis(GPU_EVIDENCE)
GRID = pd.DataFrame([{"batch_size": 32, "num_workers": 0, "pin_memory": False, "img_per_s": 500.0},
                     {"batch_size": 256, "num_workers": 0, "pin_memory": True, "img_per_s": 450.0},
                     {"batch_size": 256, "num_workers": 2, "pin_memory": True, "img_per_s": 4000.0}])
CPU_CEIL = bench.Ceilings("test CPU", matmul_tflops=1.0, matmul_dtype="float32", matmul_n=64, copy_gb_per_s=100.0,
                          copy_bytes=1)
KERNELS = nb03.given_kernels("full")
PLACED = nb03.placements(KERNELS, CPU_CEIL)
# A budget as memory_budget measures it; no wrong answer gets as far as measuring (the fixture below makes sure).
BUDGET = nb04.MemoryBudget(base_batch=64, factor=2, budget_gib=0.05, base_img_per_s=100.0, image_size=32)
# The large-batch exercise on a handful of images: every wrong answer below is refused before a step is taken.
LB = large_batch.Setup(task=large_batch.data.COURSE_TASK, image_size=16, images=64, base_batch=8, large_batch=64,
                       heldout=64, pool=128)
LB_SGD = large_batch.sgd(0.01)




def _never(*args, **kwargs):
    raise AssertionError("a wrong answer was measured: the check must refuse it first")


@pytest.fixture(autouse=True)
def _nothing_is_measured(monkeypatch):
    monkeypatch.setattr(nb04, "measure_plan", _never)
    monkeypatch.setattr(nb04, "_curve", _never)


def judged_runs():
    """Four judged runs on a tiny CPU challenge: one honest, two that broke one rule each, one that broke two. The
    harness's checks are set on a real verdict (dataclasses.replace), as in test_challenge."""
    tiny, cfg = tiny_challenge()
    real = judge(Submission("baseline", cfg), tiny_session(tiny))

    def broke(**why):
        return dataclasses.replace(real, checks={k: (k not in why, why.get(k, "ok")) for k in leaderboard.CHECKS})

    return {"run A": broke(), "run B": broke(same_function="logits differ"),
            "run C": broke(images_seen="trained on 32 images; every run trains on 64"),
            "run D": broke(images_seen="trained on 32 images; every run trains on 64",
                           accuracy_not_worse="held-out accuracy 0.10, baseline 0.30")}


@pytest.fixture(scope="module")
def runs():
    return judged_runs()


RIGHT_CHEATS = {"run A": None, "run B": "same_function", "run C": "images_seen", "run D": "images_seen"}


# -- the targets: each check, each place a wrong answer can go -----------------------------------------------------
# (name, call(wrong, runs) → CheckResult, wrong answers, what the message must say)

_with = dataclasses.replace
#: Wrong wherever a function is due (a function of the wrong arity is the learner's code, which the check runs).
NOT_FUNCTIONS = _without(BATTERY, "a function")

TARGETS = [
    ("nb00 ceiling: the answer", lambda w, r: nb00.check_ceiling_img_per_s(w, seed=0), NOT_FUNCTIONS,
     "Your answer should be the function itself, ceiling_img_per_s"),
    ("nb00 ceiling: what it returns", lambda w, r: nb00.check_ceiling_img_per_s(lambda t, g: w, seed=0), NOT_NUMBERS,
     "return the number of images per second"),
    ("nb01 analysis: the answer", lambda w, r: nb01.check_baseline_analysis(w, GPU_EVIDENCE), BATTERY,
     "my_analysis should be checks.BaselineAnalysis("),
    ("nb01 analysis: gpu_util_pct", lambda w, r: nb01.check_baseline_analysis(
        _with(GOOD_ANALYSIS, gpu_util_pct=w), GPU_EVIDENCE),
     {**_without(BATTERY, "None"), "101": 101}, "my_analysis.gpu_util_pct should be a utilisation in %"),
    ("nb01 analysis: bottlenecks", lambda w, r: nb01.check_baseline_analysis(
        _with(GOOD_ANALYSIS, bottlenecks=w), GPU_EVIDENCE),
     {**_without(BATTERY, "None", "an empty string", "an empty list", "an empty dict", "Ellipsis"),
      "one name as a string": "data_loading", "a set of names": {"data_loading", "compute"},
      "an array of names": np.array(["data_loading"])}, "my_analysis.bottlenecks should be a list of bottleneck names"),
    ("nb01 analysis: speedup_if_only_compute_x", lambda w, r: nb01.check_baseline_analysis(
        _with(GOOD_ANALYSIS, speedup_if_only_compute_x=w), GPU_EVIDENCE),
     {**_without(BATTERY, "None"), "0": 0}, "my_analysis.speedup_if_only_compute_x should be a speed-up"),
    ("nb01 analysis: speedup_at_ceiling_x", lambda w, r: nb01.check_baseline_analysis(
        _with(GOOD_ANALYSIS, speedup_at_ceiling_x=w), GPU_EVIDENCE),
     {**_without(BATTERY, "None"), "0": 0}, "my_analysis.speedup_at_ceiling_x should be a speed-up"),
    ("nb02 loader: the answer", lambda w, r: nb02.check_fast_loader(w, grid_df=GRID, measure=_never),
     _without(BATTERY, *BLANK), "my_spec should be a LoaderSpec"),
    ("nb02 loader: batch_size", lambda w, r: nb02.check_fast_loader(LoaderSpec(w, 2, True), grid_df=GRID,
                                                                    measure=_never),
     {"10**400": 10**400, "10**5000": 10**5000, "a million": 10**6}, "my_spec.batch_size should be a whole number"),
    ("nb02 loader: pin_memory", lambda w, r: nb02.check_fast_loader(LoaderSpec(256, 2, w), grid_df=GRID,
                                                                    measure=_never),
     {**_without(BATTERY, "a bool", "a numpy bool", "a 0-d bool tensor"), "1": 1, "yes": "yes"},
     "my_spec.pin_memory should be True or False"),
    ("nb02 loader: prefetch_factor", lambda w, r: nb02.check_fast_loader(
        LoaderSpec(256, 2, True, prefetch_factor=w), grid_df=GRID, measure=_never),
     {**_without(BATTERY, "None"), "0": 0, "2.5": 2.5}, "my_spec.prefetch_factor should be None or a whole number"),
    ("nb02 loop without syncs: the answer", lambda w, r: nb02.check_loop_without_syncs(w, device="cpu"),
     _without(NOT_FUNCTIONS, *BLANK), "my_loop should be"),
    ("nb02 loop from bytes: the answer", lambda w, r: nb02.check_loop_from_bytes(w, device="cpu"),
     _without(NOT_FUNCTIONS, *BLANK), "my_loop should be"),
    ("nb02 augment: the answer", lambda w, r: nb02.check_gpu_augment(w, device="cpu"), NOT_FUNCTIONS,
     "Your answer should be the function itself, gpu_augment"),
    ("nb03 softmax: the answer", lambda w, r: nb03.check_fused_softmax(w, device="cpu"), _without(NOT_FUNCTIONS, *BLANK),
     "my_softmax should be a function"),
    ("nb03 bias + ReLU + pool: the answer", lambda w, r: nb03.check_bias_relu_pool(w, device="cpu"),
     _without(NOT_FUNCTIONS, *BLANK), "my_bias_relu_pool should be a function"),
    ("nb03 fast step: the answer", lambda w, r: nb03.check_fast_step(w, device="cpu", batch=2, steps=1),
     _without(NOT_FUNCTIONS, *BLANK), "my_fast_step should be"),
    ("nb03 graph: the answer", lambda w, r: nb03.check_cuda_graph(w, device="cpu"), _without(NOT_FUNCTIONS, *BLANK),
     "my_graphed should be a function"),
    ("nb03 graph break: the answer", lambda w, r: nb03.check_graph_break(w, device="cpu"), _without(BATTERY, *BLANK),
     "MyScaleLoggedMLP should be a class made from ScaleLoggedMLP"),
    ("nb03 roofline: the answer", lambda w, r: nb03.check_roofline(w, CPU_CEIL, kernels=KERNELS),
     _without(BATTERY, *BLANK, "an empty string", "an empty list", "an empty dict", where=lambda v: isinstance(v, dict)),
     "my_placements should be a dict of one Placement per kernel"),
    ("nb03 roofline: one kernel's answer", lambda w, r: nb03.check_roofline({**PLACED, "add": w}, CPU_CEIL,
                                                                            kernels=KERNELS),
     _without(BATTERY, "None"), "my_placements['add'] should be Placement("),
    ("nb03 roofline: flops", lambda w, r: nb03.check_roofline(
        {**PLACED, "add": _with(PLACED["add"], flops=w)}, CPU_CEIL, kernels=KERNELS),
     {**_without(BATTERY, "None"), "0": 0}, "my_placements['add'].flops should be a count of floating-point operations"),
    ("nb03 roofline: bytes", lambda w, r: nb03.check_roofline(
        {**PLACED, "matmul": _with(PLACED["matmul"], bytes=w)}, CPU_CEIL, kernels=KERNELS),
     {**_without(BATTERY, "None"), "0": 0}, "my_placements['matmul'].bytes should be a count of bytes"),
    ("nb03 roofline: bound", lambda w, r: nb03.check_roofline(
        {**PLACED, "add": _with(PLACED["add"], bound=w)}, CPU_CEIL, kernels=KERNELS),
     {**_without(BATTERY, "None"), "another word": "fast"}, "my_placements['add'].bound should be one of 'memory', 'compute'"),
    ("nb04 memory plans: the list", lambda w, r: nb04.check_memory_plans(w, budget=BUDGET, device="cpu"),
     _without(BATTERY, *BLANK, "an empty list", "a list", "a list of three", "a nested list", "a tuple of three"),
     "my_plans should be a list of checks.MemoryPlan"),
    ("nb04 memory plans: an item", lambda w, r: nb04.check_memory_plans([nb04.MemoryPlan(64, "bf16", False, 2), w],
                                                                         budget=BUDGET, device="cpu"),
     _without(BATTERY, *BLANK), "my_plans should be a list of checks.MemoryPlan"),
    ("nb04 memory plan: the answer", lambda w, r: nb04.check_memory_plan(w, budget=BUDGET, device="cpu"),
     _without(BATTERY, *BLANK), "my_plan should be checks.MemoryPlan("),
    ("nb04 memory plan: batch_size", lambda w, r: nb04.check_memory_plan(nb04.MemoryPlan(w, "bf16", False, 2),
                                                                         budget=BUDGET, device="cpu"),
     {**_without(BATTERY, "None"), "0": 0, "64.5": 64.5, "past the largest measured": 64 * 128 + 1},
     "my_plan.batch_size should be a whole number of images per micro-batch"),
    ("nb04 memory plan: dtype", lambda w, r: nb04.check_memory_plan(nb04.MemoryPlan(64, w, False, 2), budget=BUDGET,
                                                                    device="cpu"),
     {**BATTERY, "fp64": "fp64", "a torch dtype": torch.bfloat16}, "my_plan.dtype should be one of 'fp32', 'bf16', 'fp16'"),
    ("nb04 memory plan: checkpoint", lambda w, r: nb04.check_memory_plan(nb04.MemoryPlan(64, "bf16", w, 2),
                                                                         budget=BUDGET, device="cpu"),
     {**_without(BATTERY, "a bool", "a numpy bool", "a 0-d bool tensor"), "1": 1}, "my_plan.checkpoint should be True or False"),
    ("nb04 memory plan: grad_accum", lambda w, r: nb04.check_memory_plan(nb04.MemoryPlan(64, "bf16", False, w),
                                                                         budget=BUDGET, device="cpu"),
     {**BATTERY, "0": 0, "1.5": 1.5}, "my_plan.grad_accum should be a whole number of micro-batches"),
    ("nb04 largest block: the answer", lambda w, r: nb04.check_largest_block(w, device="cpu"),
     _without(NOT_FUNCTIONS, *BLANK), "my_largest_block should be a function of (batch, image_size, dtype)"),
    ("nb04 largest block: what it returns", lambda w, r: nb04.check_largest_block(lambda b, s, d: w, device="cpu"),
     BATTERY, "should be a number of bytes"),
    ("nb07 FLOPs per token: the answer", lambda w, r: nb07.check_flops_per_token(w, seed=0),
     _without(NOT_FUNCTIONS, *BLANK), "my_flops_per_token should be a function of (cfg, seq_len)"),
    ("nb07 FLOPs per token: what it returns", lambda w, r: nb07.check_flops_per_token(lambda cfg, t: w, seed=0),
     BATTERY, "should be a number of"),
    ("nb07 selective policy: the answer", lambda w, r: nb07.check_selective_policy(w, device="cpu"),
     _without(NOT_FUNCTIONS, *BLANK), "my_saves should be a function of one aten op"),
    ("nb07 selective policy: what it returns", lambda w, r: nb07.check_selective_policy(lambda op: w, device="cpu"),
     _without(BATTERY, "a bool", "a numpy bool", "a 0-d bool tensor"), "should be True or False"),
    ("nb04 amp: the function", lambda w, r: nb04.check_amp_step(w, nb04.amp_plan(), device="cpu"),
     _without(NOT_FUNCTIONS, *BLANK), "Your answer should be the function itself, amp_step"),
    ("nb04 amp: the plan", lambda w, r: nb04.check_amp_step(nb04.amp_step, w, device="cpu"),
     _without(BATTERY, *BLANK), "my_amp should be checks.AmpPlan("),
    ("nb04 amp: dtype", lambda w, r: nb04.check_amp_step(nb04.amp_step, nb04.AmpPlan(w, False, ""), device="cpu"),
     {**_without(BATTERY, "None"), "fp32": "fp32", "a torch dtype": torch.bfloat16},
     "my_amp.dtype should be one of 'bf16', 'fp16'"),
    ("nb04 amp: use_scaler", lambda w, r: nb04.check_amp_step(nb04.amp_step, nb04.AmpPlan("fp16", w, ""),
                                                              device="cpu"),
     {**_without(BATTERY, "None", "a bool", "a numpy bool", "a 0-d bool tensor"), "1": 1, "yes": "yes"},
     "my_amp.use_scaler should be True or False"),
    ("nb04 amp: why", lambda w, r: nb04.check_amp_step(nb04.amp_step, nb04.AmpPlan("bf16", True, w), device="cpu"),
     _without(_not_text(BATTERY), "None"), "my_amp.why should be a sentence in quotes"),
    ("nb04 large batch: the optimizer", lambda w, r: nb04.check_large_batch(w, large_batch.constant(0.01), setup=LB,
                                                                            device="cpu"),
     _without(NOT_FUNCTIONS, *BLANK), "my_optimizer should be a function of the model's parameters"),
    ("nb04 large batch: what the optimizer returns", lambda w, r: nb04.check_large_batch(
        lambda params: w, large_batch.constant(0.01), setup=LB, device="cpu"),
     BATTERY, "not a torch.optim.Optimizer"),
    ("nb04 large batch: the schedule", lambda w, r: nb04.check_large_batch(LB_SGD, w, setup=LB, device="cpu"),
     _without(NOT_FUNCTIONS, *BLANK), "my_lr should be a function my_lr(step, steps)"),
    ("nb04 large batch: the rate", lambda w, r: nb04.check_large_batch(LB_SGD, lambda step, steps: w, setup=LB,
                                                                       device="cpu"),
     BATTERY, "it must be a finite number ≥ 0"),
    ("nb05 worker: the path", lambda w, r: nb05.check_ddp_worker(w), _not_text(BATTERY),
     "The worker's path should be the path of your worker file"),
    ("nb05 sync: the path", lambda w, r: nb05.check_sync(w, "each"), _not_text(BATTERY),
     "Your file's path should be the path of your file"),
    ("nb05 efficiency: the answer", lambda w, r: nb05.check_predicted_efficiency(w), NOT_FUNCTIONS,
     "Your answer should be the function itself, predicted_efficiency_pct"),
    ("nb05 efficiency: what it returns", lambda w, r: nb05.check_predicted_efficiency(lambda c, a, h: w), NOT_NUMBERS,
     "return the efficiency in percent"),
    ("nb06.0 own training: the run", lambda w, r: nb06.check_own_training(w, REFERENCE_RUN),
     _without(BATTERY, *BLANK), "my_run should be the verdict judge_training returned"),
    ("nb06.1 cheats: the answer", lambda w, r: nb06.check_spot_the_cheat(w, r),
     _without(BATTERY, *BLANK, where=lambda v: isinstance(v, dict)), "my_cheats should be a dict with one entry per run"),
    ("nb06.1 cheats: its runs", lambda w, r: nb06.check_spot_the_cheat(w, r),
     {"an empty dict": {}, "another key": {**RIGHT_CHEATS, "run E": None}, "a key missing": {"run A": None},
      "keys of other types": {1: None, (2, 3): "same_function", 10**5000: None, "run B": None}},
     "Give one entry per run: run A, run B, run C, run D"),
    ("nb06.1 cheats: one run's rule", lambda w, r: nb06.check_spot_the_cheat({**RIGHT_CHEATS, "run B": w}, r),
     {**_without(BATTERY, "None"), "two rules in a list": ["same_function", "images_seen"]},
     "my_cheats['run B'] should be one of 'same_function', 'images_seen', 'accuracy_not_worse' or None"),
    ("nb06.2 next change: the answer", lambda w, r: nb06.check_next_change(w, *NEXT),
     _without(BATTERY, *BLANK, where=_pairs), "my_next_change should be a (group, MFU in %) pair"),
    ("nb06.2 next change: the group", lambda w, r: nb06.check_next_change((w, 30.0), *NEXT),
     {**BATTERY, "another group": "pooling"}, "The group in my_next_change should be one of"),
    ("nb06.2 next change: the MFU", lambda w, r: nb06.check_next_change(("convolutions", w), *NEXT),
     {**BATTERY, "101": 101, "1e300": 1e300}, "The MFU in my_next_change should be an MFU in % from 0 to 100"),
]

CASES = [pytest.param(call, wrong, says, id=f"{target} <- {label}")
         for target, call, values, says in TARGETS for label, wrong in values.items()]


def per_check() -> dict[str, int]:
    """How many wrong answers each check is given (the report's count)."""
    counts: dict[str, int] = {}
    for target, _, values, _ in TARGETS:
        check = target.split(":")[0]
        counts[check] = counts.get(check, 0) + len(values)
    return counts


@pytest.mark.parametrize("call, wrong, says", CASES)
def test_a_wrong_answer_fails_with_a_message_that_names_the_form(call, wrong, says, runs):
    res = call(wrong, runs)  # never raises
    assert res.status == "failed" and not res.passed and not res, (res.status, res.message)
    assert says in res.message, res.message
    assert "carries on with the reference" in res.message


def test_every_public_check_is_given_the_battery():
    mods = (nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb07)
    # check_prediction (01, 04, 05) has no reference to carry on with: tests/test_predictions.py gives it the battery
    public = {f"{m.__name__.rsplit('.', 1)[-1]}.{n}" for m in mods for n in m.__all__
              if n.startswith("check_") and n != "check_prediction"}
    called = {"nb00.check_ceiling_img_per_s", "nb01.check_baseline_analysis", "nb02.check_fast_loader",
              "nb02.check_gpu_augment", "nb02.check_loop_without_syncs", "nb02.check_loop_from_bytes", "nb03.check_fused_softmax", "nb03.check_bias_relu_pool", "nb03.check_fast_step", "nb03.check_cuda_graph", "nb03.check_roofline",
              "nb03.check_graph_break",
              "nb04.check_memory_plan", "nb04.check_memory_plans", "nb04.check_amp_step", "nb04.check_large_batch", "nb04.check_largest_block",
              "nb05.check_ddp_worker",
              "nb05.check_predicted_efficiency", "nb05.check_sync", "nb06.check_own_training", "nb06.check_spot_the_cheat",
              "nb06.check_next_change", "nb07.check_flops_per_token", "nb07.check_selective_policy"}
    assert public == called  # a new check joins TARGETS above
    assert len(per_check()) == len(called) and min(per_check().values()) >= 25


# -- "not done" keeps its meaning ------------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda blank, r: nb02.check_fast_loader(blank, grid_df=GRID, measure=_never),
    lambda blank, r: nb02.check_loop_without_syncs(blank, device="cpu"),
    lambda blank, r: nb02.check_loop_from_bytes(blank, device="cpu"),
    lambda blank, r: nb03.check_fused_softmax(blank, device="cpu"),
    lambda blank, r: nb03.check_graph_break(blank, device="cpu"),
    lambda blank, r: nb03.check_bias_relu_pool(blank, device="cpu"),
    lambda blank, r: nb03.check_fast_step(blank, device="cpu"),
    lambda blank, r: nb03.check_roofline(blank, CPU_CEIL, kernels=KERNELS),
    lambda blank, r: nb04.check_memory_plan(blank, budget=BUDGET, device="cpu"),
    lambda blank, r: nb04.check_amp_step(blank, nb04.amp_plan(), device="cpu"),
    lambda blank, r: nb04.check_amp_step(nb04.amp_step, blank, device="cpu"),
    lambda blank, r: nb04.check_large_batch(blank, large_batch.constant(0.01), setup=LB, device="cpu"),
    lambda blank, r: nb04.check_large_batch(LB_SGD, blank, setup=LB, device="cpu"),
    lambda blank, r: nb06.check_own_training(blank, REFERENCE_RUN),
    lambda blank, r: nb06.check_spot_the_cheat(blank, r),
    lambda blank, r: nb06.check_next_change(blank, *NEXT),
], ids=["nb02 loader", "nb02 loop", "nb02 loop bytes", "nb03 softmax", "nb03 graph break", "nb03 bias relu pool", "nb03 fast step", "nb03 roofline", "nb04 memory plan", "nb04 amp fn", "nb04 amp plan",
        "nb04 large batch optimizer", "nb04 large batch schedule", "nb06.0", "nb06.1", "nb06.2"])
@pytest.mark.parametrize("blank", [None, ...], ids=["None", "Ellipsis"])
def test_an_answer_left_blank_is_not_done(call, blank, runs):
    res = call(blank, runs)
    assert res.status == "not done" and "carries on with the reference" in res.message


def test_fields_left_blank_are_not_done():
    assert nb01.check_baseline_analysis(nb01.BaselineAnalysis(None, [], None, None), GPU_EVIDENCE).status == "not done"
    assert nb03.check_roofline({"add": nb03.Placement(), "matmul": None}, CPU_CEIL,
                               kernels=KERNELS).status == "not done"
    assert nb04.check_memory_plan(nb04.MemoryPlan(None), budget=BUDGET, device="cpu").status == "not done"
    assert nb04.check_amp_step(nb04.amp_step, nb04.AmpPlan(), device="cpu").status == "not done"
    on_cpu = nb03.check_cuda_graph(None, device="cpu")  # graphs need a GPU: the notebook carries on without one
    assert on_cpu.status == "not done" and on_cpu.value is None
    wrong_on_cpu = nb03.check_cuda_graph("graph", device="cpu")
    assert wrong_on_cpu.status == "failed" and wrong_on_cpu.value is None


# -- numpy scalars and 0-d tensors are numbers -----------------------------------------------------------------------

AS_NUMBERS = [lambda x: np.float64(x), lambda x: np.float32(x), lambda x: torch.tensor(x, dtype=torch.float64),
              lambda x: np.array(x)]


@pytest.mark.parametrize("wrap", AS_NUMBERS, ids=["np.float64", "np.float32", "0-d tensor", "0-d array"])
def test_numpy_scalars_and_0d_tensors_are_accepted_as_numbers(wrap, monkeypatch):
    assert nb00.check_ceiling_img_per_s(lambda t, g: wrap(nb00.ceiling_img_per_s(t, g)), seed=1).passed
    assert nb05.check_predicted_efficiency(lambda c, a, h: wrap(nb05.predicted_efficiency_pct(c, a, h))).passed
    answer = nb01.BaselineAnalysis(wrap(40.0), ["data_loading"], wrap(6.4), wrap(132.0))
    assert nb01.check_baseline_analysis(answer, GPU_EVIDENCE).passed
    placed = {k: nb03.Placement(wrap(p.flops), wrap(p.bytes), p.bound) for k, p in PLACED.items()}
    assert nb03.check_roofline(placed, CPU_CEIL, kernels=KERNELS).passed
    assert nb06.check_next_change(("convolutions", wrap(30.0)), *NEXT).passed
    monkeypatch.setattr(nb04, "measure_plan", lambda plan, **kw: (0.04, 120.0))  # within BUDGET's 0.05 GiB
    res = nb04.check_memory_plan(nb04.MemoryPlan(wrap(64.0), "bf16", np.bool_(False), np.int64(2)), budget=BUDGET,
                                 device="cpu")
    assert res.passed and res.value == nb04.MemoryPlan(64, "bf16", False, 2) and type(res.value.batch_size) is int


def test_reference_answers_still_pass_and_names_match_without_regard_to_case(runs):
    assert nb03.check_roofline({k: dataclasses.replace(p, bound=f" {p.bound.title()} ") for k, p in PLACED.items()},
                               CPU_CEIL, kernels=KERNELS).passed
    assert nb06.check_next_change(["Convolutions ", 30], *NEXT).passed  # a list of two is a pair too
    assert nb06.check_spot_the_cheat(nb06.cheats_solution(runs), runs).passed
    assert nb06.check_spot_the_cheat({**RIGHT_CHEATS, "run B": "Same_Function"}, runs).passed


# -- the cases learners found ----------------------------------------------------------------------------------------

def test_spot_the_cheat_with_a_list_says_what_form_instead_of_crashing(runs):
    res = nb06.check_spot_the_cheat(["run A", "run B", "run C", "run D"], runs)
    assert res.status == "failed" and "you gave a list of 4 items" in res.message
    two = nb06.check_spot_the_cheat({**RIGHT_CHEATS, "run D": ["images_seen", "accuracy_not_worse"]}, runs)
    assert two.status == "failed" and "my_cheats['run D'] should be one of" in two.message
    assert "you gave a list of 2 items" in two.message and two.value == nb06.cheats_solution(runs)
    assert "Name one rule per run: any rule the run broke is right." in two.message


def test_spot_the_cheat_accepts_any_rule_a_run_really_broke(runs):
    assert nb06.cheats_solution(runs)["run D"] == "images_seen"  # the harness's first broken rule: the reference
    second = nb06.check_spot_the_cheat({**RIGHT_CHEATS, "run D": "accuracy_not_worse"}, runs)
    assert second.passed, second.message
    missed = nb06.check_spot_the_cheat({**RIGHT_CHEATS, "run D": None}, runs)
    assert not missed.passed and ("run D broke images_seen (trained on 32 images; every run trains on 64) and "
                                  "accuracy_not_worse (held-out accuracy 0.10, baseline 0.30)") in missed.message
    other = nb06.check_spot_the_cheat({**RIGHT_CHEATS, "run D": "same_function"}, runs)
    assert not other.passed and "not same_function; naming any of them is right" in other.message
    one = nb06.check_spot_the_cheat({**RIGHT_CHEATS, "run C": "accuracy_not_worse"}, runs)  # C broke only one
    assert not one.passed and "run C broke images_seen, not accuracy_not_worse: trained on 32" in one.message


def test_next_change_refuses_nan_and_a_list_for_a_group():
    res = nb06.check_next_change(("convolutions", NAN), *NEXT)
    assert res.status == "failed" and "you gave NaN" in res.message and "you said" not in res.message
    res = nb06.check_next_change((["convolutions"], 30), *NEXT)
    assert res.status == "failed" and "The group in my_next_change should be" in res.message
    assert "you gave a list of 1 item" in res.message
    res = nb06.check_next_change(("convolutions", math.inf), *NEXT)
    assert res.status == "failed" and "you gave inf" in res.message
