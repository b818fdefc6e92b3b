"""04_memory's helpers on a CPU: the anatomy of a step, memory over time, precisions and GradScaler,
accumulation, the largest-batch search and the loop that backs off, both surviving out-of-memory."""

from __future__ import annotations

import dataclasses
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import figure_check, models, profiling, timebox, train
from helpers.memory import accumulation, anatomy, precision, resilient, search, timeline
from helpers.memory.anatomy import GIB


def _batch(n=8, size=32):
    return torch.randn(n, 3, size, size), torch.randint(0, 10, (n,))


def test_anatomy_counts_weights_gradients_and_optimizer_state():
    x, y = _batch()
    sgd = anatomy.anatomy(models.ReferenceCNN(32), x, y, optimizer="sgd")
    adam = anatomy.anatomy(models.ReferenceCNN(32), x, y, optimizer="adam")
    weights = models.count_params(models.ReferenceCNN(32)) * 4
    assert sgd.params == weights and sgd.grads == weights
    assert sgd.optimizer_state == weights and adam.optimizer_state == 2 * weights  # momentum; Adam's two moments
    assert sgd.activations > 0 and sgd.peak is None  # no allocator peak on a CPU: not made up
    table = anatomy.anatomy_table([sgd, adam])
    assert list(table.index) == [sgd.label, adam.label] and "activations kept for backward GiB" in table.columns
    with pytest.raises(ValueError, match="sgd, adam"):
        anatomy.make_optimizer("lion", models.small_mlp().parameters())


def test_activations_grow_with_the_batch_and_checkpointing_keeps_less():
    keep = lambda m, n: anatomy.saved_activation_bytes(  # noqa: E731
        lambda: nn.functional.cross_entropy(m(_batch(n)[0]), torch.zeros(n, dtype=torch.long)), list(m.parameters()))
    plain, ckpt = models.ResidualNet(32, depth=6), models.ResidualNet(32, depth=6, checkpoint=True)
    assert keep(plain, 8) == pytest.approx(2 * keep(plain, 4), rel=0.05)
    assert keep(ckpt, 8) < 0.5 * keep(plain, 8)


def test_checkpointed_models_compute_the_same_gradients():
    x, y = _batch(4)
    for make in (lambda c: models.ReferenceCNN(32, checkpoint=c), lambda c: models.ResidualNet(32, depth=3, checkpoint=c)):
        a, b = make(False), make(True)
        b.load_state_dict(a.state_dict())
        ga, gb = accumulation.batch_gradients(a, x, y), accumulation.batch_gradients(b, x, y)
        assert accumulation.max_relative_difference(gb, ga) < 1e-5


def test_memory_timeline_has_phases_and_a_peak():
    m = models.ReferenceCNN(32)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x, y = _batch()

    def step():
        with profiling.nvtx_range("forward"):
            loss = nn.functional.cross_entropy(m(x), y)
        with profiling.nvtx_range("backward"):
            loss.backward()
        with profiling.nvtx_range("optimizer"):
            opt.step()
            opt.zero_grad()

    tl = timeline.memory_timeline(step, device="cpu")
    assert tl.peak > 0 and len(tl.t_ms) == len(tl.allocated) > 10
    assert {p[0] for p in tl.phases} == {"forward", "backward", "optimizer"}
    assert list(tl.t_ms) == sorted(tl.t_ms)
    assert len(timeline.timeline_figure(tl).data) >= 1


def test_accumulation_matches_the_big_batch_only_when_the_loss_is_divided():
    torch.manual_seed(0)
    m = models.small_mlp(width=16, depth=2)
    head = nn.Sequential(m, nn.Linear(16, 10))
    x, y = torch.randn(32, 16), torch.randint(0, 10, (32,))
    big = accumulation.batch_gradients(head, x, y)
    assert accumulation.max_relative_difference(accumulation.accumulated_gradients(head, x, y, micro_batches=4), big) < 1e-5
    undivided = accumulation.accumulated_gradients(head, x, y, micro_batches=4, divide=False)
    assert accumulation.max_relative_difference(undivided, [4 * g for g in big]) < 1e-5
    with pytest.raises(ValueError, match="divide the batch"):
        accumulation.accumulated_gradients(head, x, y, micro_batches=5)


def test_scaler_skips_the_overflowing_step_and_halves_the_scale():
    t = precision.scaler_trace(steps=8, overflow_at=(4,), growth_interval=3, device="cpu")
    assert t.loc[4, "overflow found"] and t.loc[4, "step skipped"]
    assert t.loc[4, "scale after update"] == t.loc[4, "scale"] / 2
    assert not t.drop(index=4)["step skipped"].any()
    assert t.loc[2, "scale after update"] == 2 * t.loc[2, "scale"]  # grows after 3 clean steps


def test_tf32_context_restores_the_flags():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with precision.tf32(True):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    with precision.tf32(False):
        assert not torch.backends.cudnn.allow_tf32
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


def test_compare_precisions_trains_each_from_the_same_start():
    cfg = train.TrainConfig(batch_size=4, image_size=16, data="gpu", steps=3, warmup_steps=0, dataset_size=16)
    runs = precision.compare_precisions(cfg, ["fp32, no TF32", "fp32 (PyTorch's default: TF32 convolutions)",
                                              "bf16 autocast"], device="cpu")
    assert runs["fp32, no TF32"].losses[0] == pytest.approx(runs["fp32 (PyTorch's default: TF32 convolutions)"].losses[0])
    table = precision.precision_table(runs)
    assert table.loc["fp32 (PyTorch's default: TF32 convolutions)", precision.SPEED_COLUMN] == 1.0
    # the speed column is the step alone's, shown as the reader's division of the step-alone column beside it
    # (it read 0.532 beside whole-loop img/s of 2,906 and 5,377)
    from helpers.tables import as_shown, readable
    shown = readable(table).shown
    base_step = as_shown(shown.loc["fp32 (PyTorch's default: TF32 convolutions)", "step alone img/s"])
    for name in runs:
        ratio = as_shown(shown.loc[name, "step alone img/s"]) / base_step
        assert as_shown(shown.loc[name, precision.SPEED_COLUMN]) == pytest.approx(ratio, rel=0.006)
    # the loss column says what it holds: the mean of the last quarter, not the curve's last point
    r = runs["bf16 autocast"]
    tail = r.losses[-max(1, len(r.losses) // 4):]
    assert table.loc["bf16 autocast", precision.LOSS_COLUMN] == pytest.approx(sum(tail) / len(tail))
    assert "final loss" not in table.columns
    # on a GPU: the peaks to the hundredth the sentences print, the saving from them as shown (04 read 31.7 beside
    # 11.9 and 8.10 GiB, which give 31.9, and -40.4 beside 16.6 and 11.9)
    peaks = {"fp32, no TF32": 16.6449, "fp32 (PyTorch's default: TF32 convolutions)": 11.8514, "bf16 autocast": 8.0966}
    gpu = {name: dataclasses.replace(r, peak_allocated_gib=peaks[name]) for name, r in runs.items()}
    shown = readable(precision.precision_table(gpu)).shown
    assert list(shown["PyTorch allocated peak GiB"]) == ["16.64", "11.85", "8.10"]
    assert list(shown["memory saved vs fp32 %"]) == ["-40.4", "0", "31.6"]  # 1 - 8.10 / 11.85, -(16.64 / 11.85 - 1)
    fig = precision.loss_figure(runs)
    assert len(fig.data) == 3 and fig.layout.legend.orientation == "h"  # long names under the plot, not beside it
    assert figure_check.problems(fig) == []


class _Limited(nn.Module):
    """A model that runs out of "memory" above a batch size: how the tests make an OOM on a CPU."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.net = models.ReferenceCNN(16)

    def forward(self, x):
        if x.shape[0] > self.limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory (test): batch {x.shape[0]} > {self.limit}")
        return self.net(x)


def test_largest_batch_survives_out_of_memory_and_bisects_to_the_edge():
    probe = search.step_probe(lambda: _Limited(100), image_size=16, channels_last=False, device="cpu", timed_steps=1)
    found = search.largest_batch(probe, start=16, limit=1024, label="limited")
    assert 96 <= found.largest <= 100
    t = found.table()
    assert (t[~t.fits].why == "out of memory").all() and t.fits.any()
    assert len(search.search_figure([found]).data) >= 2


def test_largest_batch_respects_a_budget_and_says_when_nothing_fits():
    probe = search.step_probe(lambda: models.ReferenceCNN(16), image_size=16, channels_last=False, device="cpu",
                              timed_steps=1)
    peak_8 = search.try_batch(probe, 8).peak_gib
    found = search.largest_batch(probe, start=4, limit=64, budget_gib=peak_8 * 1.001)
    assert 8 <= found.largest < 16  # the peak grows with the batch: 8 fits the budget, 16 does not
    assert any("over the" in t.why for t in found.trials)
    with pytest.raises(RuntimeError, match="not even a batch of 1 fits in 0.000 GiB: the smallest footprint measured"):
        search.largest_batch(probe, start=4, limit=64, budget_gib=1e-9)


def test_training_backs_off_keeps_its_model_and_its_losses():
    model = _Limited(24)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    seen = []
    run = resilient.train_with_backoff(model, batch=64, steps=3, image_size=16, optimizer=opt, device="cpu",
                                       on_backoff=seen.append)
    assert run.batch == 64 and run.micro_batch == 16 and run.grad_accum == 4
    assert [(e.micro_batch_before, e.micro_batch_after) for e in run.events] == [(64, 32), (32, 16)]
    assert seen == list(run.events) and len(run.losses) == 3 and all(l > 0 for l in run.losses)
    # its img/s says what it measured: the steps run whole at the setting it settled on (both back-offs were at step 0)
    assert run.timed_steps == 3 and run.img_per_s > 0 and "wall clock over the 3 steps" in str(run)
    # batches read with their thousands separated, as the back-off lines print them (04 read "batch 10240 as 4 × 2560")
    big = str(dataclasses.replace(run, batch=10_240, micro_batch=2_560))
    assert "batch 10,240 as 4 × 2,560" in big and "At 4 × 2,560:" in big
    assert opt.state and all("momentum_buffer" in s for s in opt.state.values())  # the same optimizer carried on
    with pytest.raises(torch.OutOfMemoryError, match="even a micro-batch of 2 does not fit"):
        resilient.train_with_backoff(_Limited(1), batch=4, steps=1, image_size=16, device="cpu", min_micro_batch=2)


def _live_tensors() -> int:
    import gc

    gc.collect()
    return sum(1 for o in gc.get_objects() if torch.is_tensor(o))


def test_measuring_saved_activations_leaves_no_graph_behind():
    # A pack hook that returns the tensor itself makes a node that saves its own output (ReLU) hold its graph in
    # a cycle the collector cannot see: every measurement would leak a forward pass of activations.
    from helpers.kernels import attention

    m = models.ReferenceCNN(32)
    x, y = _batch()
    before = _live_tensors()
    anatomy.saved_activation_bytes(lambda: nn.functional.cross_entropy(m(x), y), list(m.parameters()))
    anatomy.anatomy(m, x, y)
    q = torch.randn(1, 2, 32, 8, requires_grad=True)
    attention.saved_bytes(attention.naive_attention, q, q, q)
    assert _live_tensors() <= before + 1  # only q


# -- the exercises --------------------------------------------------------------------------------------

from helpers.exercises import nb04  # noqa: E402


@pytest.fixture(scope="module")
def budget():
    return nb04.memory_budget(base_batch=64, factor=2, image_size=32, device="cpu")


@pytest.mark.slow  # trains every plan side by side: `make test-slow`
def test_memory_plans_side_by_side_the_fastest_that_fits_is_the_answer_and_wrong_lists_say_why(budget):
    P = nb04.MemoryPlan
    res = nb04.check_memory_plans([P(64, "bf16", False, 2), P(128, "bf16", True, 1), P(128, "fp32")], budget=budget,
                                  device="cpu")
    assert res.passed and "(fastest)" in res.message and "1 × 128, fp32: does not qualify" in res.message, res.message
    assert res.value in (P(64, "bf16", False, 2), P(128, "bf16", True, 1))
    assert f"Your answer is the fastest: {nb04._label(res.value)}" in res.message
    for plans, says in (([P(64, "bf16", False, 2)], "only 2 × 64, bf16"),  # one plan in a list
                        (P(64, "bf16", False, 2), "holds one plan"),       # a plan, not a list
                        ([P(64, "bf16", False, 2), P(64, "bf16", False, 2)], "the same micro-batch step as"),
                        ([P(64, "fp32", False, 2), P(64, "fp32", False, 3)], "the same micro-batch step as"),
                        ([P(64, "bf16", False, 2), P(64, "bf16", False, 2**62)], "from 1 to 64"),
                        ([P(128, "fp32"), P(64, "fp32")], "none trained 128"),  # over the budget, and too small
                        ([P(64, "bf16", False, 2)] * 7, "keep the six"),
                        ([P(64, "bf16", False, 2), "bf16"], "a list of checks.MemoryPlan")):
        res = nb04.check_memory_plans(plans, budget=budget, device="cpu")
        assert res.status == "failed" and says in res.message, (says, res.message)
        assert res.value == nb04.memory_plan(budget)  # the notebook carries on with the reference
    for blank in (None, ..., [], [P(), P()]):
        assert nb04.check_memory_plans(blank, budget=budget, device="cpu").status == "not done"


def test_memory_plan_reference_passes_and_wrong_plans_say_why(budget):
    assert nb04.check_memory_plan(None, budget=budget, device="cpu").status == "not done"
    assert nb04.check_memory_plan(nb04.memory_plan(budget), budget=budget, device="cpu").passed
    over = nb04.check_memory_plan(nb04.MemoryPlan(128, "fp32"), budget=budget, device="cpu")
    assert over.status == "failed" and "exceeded the budget" in over.message
    small = nb04.check_memory_plan(nb04.MemoryPlan(64, "bf16"), budget=budget, device="cpu")
    assert small.status == "failed" and "128 (2× 64)" in small.message


def _undivided(model, optimizer, scaler, micro_batches, *, dtype, max_norm):
    for x, y in micro_batches:
        with torch.autocast(x.device.type, dtype=dtype):
            loss = nn.functional.cross_entropy(model(x), y)  # not ÷ len(micro_batches)
        (scaler.scale(loss) if scaler else loss).backward()
    if scaler:
        scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad()


def _clip_before_unscale(model, optimizer, scaler, micro_batches, *, dtype, max_norm):
    for x, y in micro_batches:
        with torch.autocast(x.device.type, dtype=dtype):
            loss = nn.functional.cross_entropy(model(x), y) / len(micro_batches)
        scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # on gradients still × the scale
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()


@pytest.mark.slow  # trains the reference in bf16 on a CPU: `make test-slow`
def test_amp_reference_passes_in_bf16():
    res = nb04.check_amp_step(nb04.amp_step, nb04.amp_plan(), device="cpu", seed=1, steps=10)
    assert res.passed, res.message


@pytest.mark.parametrize("fn,plan,says", [
    (_undivided, nb04.AmpPlan("bf16", False), "divide each micro-batch's loss by 4"),
    (_clip_before_unscale, nb04.AmpPlan("fp16", True), "unscale_(optimizer) before clip_grad_norm_"),
    (nb04.amp_step, nb04.AmpPlan("bf16", True, ""), "A scaler with bf16, and no reason given"),
    (nb04.amp_step, nb04.AmpPlan("fp16", False), "fp16 without a scaler"),
])
def test_amp_known_wrong_answers_say_what_is_wrong(fn, plan, says):
    res = nb04.check_amp_step(fn, plan, device="cpu", seed=2, steps=10)
    assert res.status == "failed" and says in res.message, res.message


def test_amp_unwritten_is_not_done():
    def unwritten(*a, **k):
        raise NotImplementedError

    assert nb04.check_amp_step(unwritten, nb04.amp_plan(), device="cpu").status == "not done"
    assert nb04.check_amp_step(nb04.amp_step, nb04.AmpPlan(), device="cpu").status == "not done"


def test_out_of_memory_in_the_helpers_says_which_knob_to_turn(monkeypatch, budget):
    from helpers.kernels import compile_modes

    with pytest.raises(torch.OutOfMemoryError, match="smaller batch .*bfloat16"):
        anatomy.anatomy(_Limited(2), *_batch(4, 16))

    def oom(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory (test)")

    monkeypatch.setattr(train.Trainer, "step", oom)
    with pytest.raises(torch.OutOfMemoryError, match="Try batch_size=2, dtype='bf16', or grad_accum"):
        compile_modes.time_train_step(train.TrainConfig(batch_size=4, image_size=16, data="gpu"), repeats=1)
    monkeypatch.setattr(nb04, "measure_plan", oom)
    res = nb04.check_memory_plan(nb04.MemoryPlan(4096, "fp32"), budget=budget, device="cpu")
    assert res.status == "failed" and "ran out of GPU memory altogether" in res.message


def test_batches_that_did_not_fit_are_crosses_above_the_peaks_not_values_at_zero():
    """04's largest-batch chart drew a batch that ran out of memory at 0 GiB, where it read as a measured peak; its
    memory timeline's time axis started short of 0."""
    from helpers import figure_check

    trials = tuple(search.Trial(b, b <= 256, b / 200 if b <= 256 else None, 900.0 + b if b <= 256 else None,
                                "" if b <= 256 else "out of memory") for b in (8, 16, 32, 64, 128, 256, 512, 384))
    fig = search.search_figure([search.BatchSearch("fp32", trials, budget_gib=1.6)])
    (crosses,) = [t for t in fig.data if t.name == "fp32: did not fit"]
    # at the peak they would need, on the line through the peaks that fit: above the budget and every peak
    assert set(crosses.x) == {384, 512} and list(crosses.y) == pytest.approx([384 / 200, 512 / 200])
    assert any(a.text.startswith("budget") for a in fig.layout.annotations)
    assert fig.layout.yaxis2.range[1] > max(crosses.y)
    assert figure_check.problems(fig) == []
    # with no line to place them by (one batch fitted), they go in a row of their own, named
    alone = search.search_figure([search.BatchSearch("fp32", (search.Trial(8, True, 0.1, 9.0),
                                                               search.Trial(16, False, None, None, "out of memory")),
                                                     budget_gib=None)])
    (row,) = [t for t in alone.data if t.name == "fp32: did not fit"]
    assert row.y[0] > 0.1 and any(a.text == "did not fit" for a in alone.layout.annotations)
    assert figure_check.problems(alone) == []
    tl = timeline.MemoryTimeline("cpu", (0.0, 1.0, 2.0), (2**30, 2**31, 2**30), (0,) * 3,
                                 (("forward", 0.2, 1.0), ("backward", 1.0, 2.0)))
    assert tuple(timeline.timeline_figure(tl).layout.xaxis.range) == (0, 2.0)


# What PyTorch 2.11 said on an H100 80GB when 04's searches ran out of memory (bf16 + activation checkpointing on the
# reference CNN at 224×224), and the peaks of the batches that fitted in the same search.
_H100_OOM = {
    3072: "CUDA out of memory. Tried to allocate 18.38 GiB. GPU 0 has a total capacity of 79.18 GiB of which 17.80 GiB "
          "is free. Including non-PyTorch memory, this process has 61.38 GiB memory in use. Of the allocated memory "
          "45.14 GiB is allocated by PyTorch, and 15.49 GiB is reserved by PyTorch but unallocated.",
    4096: "CUDA out of memory. Tried to allocate 24.50 GiB. GPU 0 has a total capacity of 79.18 GiB of which 24.30 GiB "
          "is free. Including non-PyTorch memory, this process has 54.87 GiB memory in use. Of the allocated memory "
          "33.75 GiB is allocated by PyTorch, and 20.37 GiB is reserved by PyTorch but unallocated.",
}
_H100_CKPT_PEAKS = {256: 6.41, 512: 11.60, 1024: 21.98, 2048: 42.75, 2560: 53.14, 2816: 58.33, 2944: 60.92}


def _h100_like(label="bf16 + checkpointing", peaks=_H100_CKPT_PEAKS, failed=_H100_OOM, scale=1.0):
    trials = [search.Trial(b, True, p * scale, 5000.0) for b, p in peaks.items()]
    trials += [search.Trial(b, False, None, None, "out of memory", **search.allocator_report(m)) for b, m in failed.items()]
    return search.BatchSearch(label, tuple(trials), None, capacity_gib=79.18)


def test_allocator_report_reads_what_pytorch_said():
    said = search.allocator_report(_H100_OOM[3072])
    assert said == pytest.approx({"asked_gib": 18.38, "free_gib": 17.80, "live_gib": 45.14, "cached_gib": 15.49})
    small = search.allocator_report("Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 14.74 GiB of which "
                                    "512.00 KiB is free.")
    assert small == pytest.approx({"asked_gib": 20 / 1024, "free_gib": 512 / 2**20})
    assert search.allocator_report("CUDA out of memory (test)") == {}


def test_a_trial_keeps_what_the_allocator_said_when_it_ran_out():
    def probe(batch):
        raise torch.OutOfMemoryError(_H100_OOM[3072])

    t = search.try_batch(probe, 3072)
    assert not t.fits and t.why == "out of memory"
    assert (t.asked_gib, t.free_gib, t.live_gib, t.cached_gib) == pytest.approx((18.38, 17.80, 45.14, 15.49))


def test_a_failure_says_whether_it_needed_more_than_the_gpu_or_found_the_memory_in_pieces():
    """On the H100, bf16 + checkpointing failed at batch 3,072, where its peak would be about 63.5 GiB of 79.2: the
    allocator wanted one block of 18.4 GiB, and free plus cached memory (33 GiB) held no piece that large."""
    found = _h100_like()
    assert found.need_gib(3072) == pytest.approx(63.5, abs=0.3)
    by_batch = {t.batch: t for t in found.trials}
    assert found.cause(by_batch[3072]).startswith("fragmentation: no free piece of 18.4 GiB")
    assert found.cause(by_batch[4096]).startswith("more than the GPU has: needs about 84")
    assert found.cause(by_batch[2944]) == ""
    table = found.table()
    assert table.set_index("batch").loc[3072, "why"].startswith("fragmentation")
    lines = found.reasons()
    assert len(lines) == 2 and lines[0].startswith("bf16 + checkpointing, batch 3,072: out of memory asking for one "
                                                   "block of 18.38 GiB, with 17.80 GiB free")
    assert "less than the GPU has" in lines[0] and "(fragmentation)" in lines[0]
    assert "more than the 78.4 GiB PyTorch could hold" in lines[1]
    # the card's figure beside it, and where the difference went (04 printed 138.0 here and 139.8 a line later)
    assert "the rest of the card's 79.2 GiB holds the CUDA context" in lines[1]
    unread = search.BatchSearch("x", (search.Trial(8, True, 1.0, 1.0), search.Trial(16, False, None, None,
                                                                                    "out of memory")), None)
    assert unread.reasons() == ["x, batch 16: out of memory."]


def _marker_px(fig, trace):
    """(x, y) pixels of a trace's markers in the memory panel, as the figure check frames the figure."""
    from helpers import figure_check

    lay = fig.layout
    width, height = lay.width or figure_check.DEFAULT_WIDTH, lay.height
    m = {"l": 80, "r": 80, "t": 100, "b": 80}
    (x0, x1), (y0, y1) = lay.xaxis2.range, lay.yaxis2.range
    (dx0, dx1), (dy0, dy1) = lay.xaxis2.domain, lay.yaxis2.domain
    pw, ph = width - m["l"] - m["r"], height - m["t"] - m["b"]
    return [(m["l"] + pw * (dx0 + (x - x0) / (x1 - x0) * (dx1 - dx0)),
             m["t"] + ph * (1 - (dy0 + (y - y0) / (y1 - y0) * (dy1 - dy0)))) for x, y in zip(trace.x, trace.y)]


def test_the_largest_batch_chart_draws_the_gpu_memory_and_keeps_failures_apart():
    """04's chart drew every failure in one row above the peaks, with no line for the GPU's memory (a reader could
    not see why they failed), crosses drawn over one another."""
    from helpers import figure_check

    bf16_peaks = {256: 7.94, 512: 14.66, 1024: 28.11, 2048: 55.00, 2560: 68.45, 2816: 75.17}
    bf16_oom = {b: _H100_OOM[4096] for b in (2944, 3072, 4096)}
    fp32_peaks = {256: 11.70, 512: 22.17, 1024: 43.13, 1536: 64.09, 1664: 69.33}
    fp32_oom = {b: _H100_OOM[4096] for b in (1728, 1792, 2048)}
    found = [_h100_like("fp32", fp32_peaks, fp32_oom), _h100_like("bf16", bf16_peaks, bf16_oom), _h100_like()]
    fig = search.search_figure(found)
    assert figure_check.problems(fig) == []
    (line,) = [s for s in fig.layout.shapes if s.y0 == s.y1 == 79.18]
    assert line.yref == "y2" and fig.layout.yaxis2.range[0] < 79.18 < fig.layout.yaxis2.range[1]
    assert any(a.text == "GPU memory 79.2 GiB" and a.yref == "y2" for a in fig.layout.annotations)
    marks = {t.name: t for t in fig.data if t.name and t.name.endswith(": did not fit")}
    ckpt = marks["bf16 + checkpointing: did not fit"]
    # the batch that failed in pieces sits under the GPU's line, as an open diamond; the one that needs more above it
    assert dict(zip(ckpt.x, ckpt.marker.symbol)) == {3072: "diamond-open", 4096: "x"}
    assert dict(zip(ckpt.x, ckpt.y))[3072] < 79.18 < dict(zip(ckpt.x, ckpt.y))[4096]
    assert "fragmentation" in dict(zip(ckpt.x, ckpt.hovertext))[3072]
    px = [p for t in marks.values() for p in _marker_px(fig, t)]
    size = ckpt.marker.size
    for i, (xa, ya) in enumerate(px):  # no two failures' marks drawn over one another
        for xb, yb in px[i + 1:]:
            assert max(abs(xa - xb), abs(ya - yb)) >= size, (xa, ya, xb, yb)


@pytest.mark.parametrize("phases", [
    # two steps of Adam in bf16 on the H100 (ms): the optimizer phases are short, the next phase's label comes soon
    (("forward", 0.0, 2.19), ("backward", 2.25, 5.34), ("optimizer", 5.43, 6.88), ("forward", 7.06, 9.19),
     ("backward", 9.25, 13.49), ("optimizer", 13.54, 14.94)),
    # at smoke scale on a CPU: the forward pass short against the backward, the last phase ending the record
    (("forward", 0.0, 3.0), ("backward", 3.1, 30.0), ("optimizer", 30.1, 31.0), ("forward", 31.2, 34.0),
     ("backward", 34.1, 61.0), ("optimizer", 61.1, 62.0)),
])
def test_memory_timeline_labels_sit_clear_of_the_curves_and_of_one_another(phases):
    """04's memory timeline drew a phase label across the reserved line, and the last one past the plot's edge."""
    from helpers import figure_check

    end = phases[-1][2]
    t = tuple(end * i / 200 for i in range(201))
    alloc = tuple(int(2**30 * (1.5 + (i % 100) / 30)) for i in range(201))  # climbing to the top of each step
    tl = timeline.MemoryTimeline("H100", t, alloc, tuple(int(6.1 * 2**30) for _ in t), phases)
    fig = timeline.timeline_figure(tl)
    assert figure_check.problems(fig) == []
    x_end, y_top = fig.layout.xaxis.range[1], fig.layout.yaxis.range[1]
    plot_h = fig.layout.height - 180  # plotly's default margins
    highest = max(max(alloc), max(tl.reserved)) / 2**30
    labels = [a for a in fig.layout.annotations if a.text in ("forward", "backward", "optimizer")]
    assert len(labels) == len(phases)
    for a, (name, start, _end) in zip(labels, phases):
        assert a.text == name and a.x == start and a.xanchor == "left"  # on its own band
        bottom = a.y - 12 / plot_h  # anchored at its top, 12 px high
        assert bottom * y_top > highest, f"'{name}' is crossed by a curve"
        assert start + figure_check.text_width(name, 12) / 400 * x_end <= x_end, f"'{name}' runs past the plot"


def test_every_trial_starts_from_an_empty_cache(monkeypatch):
    """Blocks a smaller batch left in the allocator's cache are cut to its sizes: a larger batch reusing them failed
    for want of one large piece (bf16 + checkpointing at 3,072 on an H100) where, tried first, it fitted."""
    calls = []
    monkeypatch.setattr(search, "free_memory", lambda: calls.append("free"))

    def probe(batch):
        calls.append(batch)
        return 1.0 * batch, 100.0

    for b in (8, 16):
        assert search.try_batch(probe, b).fits
    assert calls == ["free", 8, "free", 16]


# --- the largest batch measured in a fresh process, the back-off's retry, reserved over the measured step ---------


def test_a_search_in_a_fresh_process_comes_back_whole_under_the_allocator_it_was_given(monkeypatch, capsys):
    """04's searches run each in a fresh process with expandable segments, so that fragmentation left by earlier
    steps (bf16 + checkpointing stopped 21% short of its memory on an H200) does not decide the comparison."""
    kw = dict(image_size=16, dtype=None, checkpoint=False, start=4, limit=64)
    probe = search.step_probe(lambda: models.ReferenceCNN(16), image_size=16, device="cpu", timed_steps=2)
    budget = search.try_batch(probe, 20).peak_gib  # on a CPU the footprint is an estimate: the same in both processes
    here = search.reference_cnn_search("fp32", budget_gib=budget, device="cpu", **kw)
    fresh = search.fresh_search("fp32", budget_gib=budget, **kw)
    assert fresh.allocator == search.EXPANDABLE and here.allocator is None
    assert fresh.where() == "in a fresh process with expandable_segments:True" and here.where() == "in this process"
    assert fresh.label == "fp32" and fresh.budget_gib == budget and fresh.edge_found
    assert 16 <= fresh.largest == here.largest < 24
    assert [(t.batch, t.fits) for t in fresh.trials] == [(t.batch, t.fits) for t in here.trials]
    assert all(isinstance(t, search.Trial) for t in fresh.trials)
    # a time box that ends the child's search comes back as a cut, and is said here
    monkeypatch.setenv("HELPERS_TIMEBOX_FACTOR", "1e-9")
    capsys.readouterr()
    cut = search.fresh_search("fp32", budget_gib=budget, alloc_conf="", **kw)
    assert not cut.edge_found and cut.cut.box == "batch_search" and cut.allocator == ""
    assert cut.where() == "in a fresh process" and "time box 'batch_search'" in capsys.readouterr().out
    with pytest.raises(RuntimeError, match="the broken search in a fresh process failed"):
        search.fresh_search("broken", **{**kw, "start": 0})


def _ended(label, largest, failed_cause, *, cut=None):
    """A search whose batches up to ``largest`` fitted on the line 1 + 0.02 × batch GiB (an 80 GiB card holds
    3,950), and the batch above failed: ``"more"`` (needs more than the card) or ``"pieces"`` (fragmentation)."""
    trials = [search.Trial(b, True, 1 + 0.02 * b, 100.0) for b in (largest // 4, largest // 2, largest)]
    if failed_cause == "more":  # twice the batch needs more than the 79 GiB PyTorch could hold
        trials.append(search.Trial(2 * largest, False, None, None, "out of memory", asked_gib=20.0, free_gib=2.0,
                                   cached_gib=3.0, live_gib=74.0))
    else:  # a little more would need less than the card, and free + cached exceed the block
        trials.append(search.Trial(largest + 256, False, None, None, "out of memory", asked_gib=20.0, free_gib=15.0,
                                   cached_gib=15.0, live_gib=40.0))
    return search.BatchSearch(label, tuple(trials), None, cut, 80.0, search.EXPANDABLE)


def test_the_checkpointing_answer_is_read_from_both_searches_and_says_what_ended_them():
    bf16, ckpt = _ended("bf16", 3000, "more"), _ended("bf16 + checkpointing", 3840, "more")
    line = search.gain_reading(bf16, ckpt)
    assert line.startswith("bf16 + checkpointing trains batches up to 3,840, +28% against bf16's 3,000 (both searched "
                           "in a fresh process with expandable_segments:True)")
    assert line.endswith("so the difference is the memory each step needs.")
    pieces = search.gain_reading(bf16, _ended("bf16 + checkpointing", 2048, "pieces"))
    assert "-32% against" in pieces and "fragmentation, not the memory, ended the bf16 + checkpointing search" in pieces
    cut = _ended("bf16", 3000, "more", cut=timebox.Cut("batch_search", 45, 3, 18, 1, "trials", ""))
    assert "a time box ended a search before its edge" in search.gain_reading(cut, ckpt)
    mixed = dataclasses.replace(bf16, allocator=None)
    assert "bf16 searched in this process, bf16 + checkpointing in a fresh process" in search.gain_reading(mixed, ckpt)


# What PyTorch said on an H200 when 04's back-off loop ran a micro-batch of 5,120 (bf16): free and cached held more
# than the block, in no piece that large.
_PIECES = ("CUDA out of memory. Tried to allocate 7.66 GiB. GPU 0 has a total capacity of 139.80 GiB of which 2.44 GiB "
           "is free. Of the allocated memory 125.91 GiB is allocated by PyTorch, and 10.69 GiB is reserved by PyTorch "
           "but unallocated.")


class _Pieces(nn.Module):
    """Runs out of memory "in pieces" above ``limit``, and at ``flaky`` the first time only (fits when redone)."""

    def __init__(self, limit: int, flaky: int | None = None, message: str = _PIECES) -> None:
        super().__init__()
        self.limit, self.flaky, self.message = limit, flaky, message
        self.net = models.ReferenceCNN(16)

    def forward(self, x):
        if x.shape[0] == self.flaky:
            self.flaky = None  # the first time only
            raise torch.OutOfMemoryError(self.message)
        if x.shape[0] > self.limit:
            raise torch.OutOfMemoryError(self.message)
        return self.net(x)


def test_a_fragmentation_failure_is_redone_once_at_the_same_micro_batch_before_halving(monkeypatch):
    freed = []
    monkeypatch.setattr(resilient, "free_memory", lambda: freed.append(1))
    run = resilient.train_with_backoff(_Pieces(16), batch=64, steps=2, image_size=16, device="cpu")
    moves = [(e.micro_batch_before, e.micro_batch_after, e.retried) for e in run.events]
    assert moves == [(64, 64, True), (64, 32, False), (32, 32, True), (32, 16, False)]
    assert run.micro_batch == 16 and run.grad_accum == 4 and len(run.losses) == 2 and len(freed) == 4
    assert str(run.events[0]).startswith("step 0: micro-batch 64 redone from an empty cache, after it ran out of "
                                         "memory: it asked for 7.66 GiB")
    # the halving after it quotes the redo's own failure, and says so (the same figures, on a GPU that repeats itself)
    assert str(run.events[1]) == ("step 0: micro-batch 64 → 32 (× 2 accumulated): the redo ran out of memory too, at "
                                  "the same figures as the first try: from the emptied cache it made the same "
                                  "allocations in the same order, so what it held cached it had cached itself before "
                                  "the failing request")
    assert run.events[1].same_as_first and "it asked for 7.66 GiB" in run.events[1].said
    other = resilient.Backoff(0, 64, 32, 2, "it asked for 8.00 GiB with 1.00 GiB free", redo_failed=True)
    assert str(other).endswith("the redo ran out of memory too: it asked for 8.00 GiB with 1.00 GiB free")
    assert [e.redo_failed for e in run.events] == [False, True, False, True]
    assert len(run.halvings) == 2 and len(run.retries) == 2
    line = resilient.settled_reading(run, 32, searched_where="in a fresh process with expandable_segments:True")
    assert line.startswith("It settled on micro-batches of 16, below the 32 the search in a fresh process with "
                           "expandable_segments:True fitted: a step of 32 ran out of memory here, in this process with")
    assert "again when redone from an empty cache" in line
    # redone, it fits: the loop keeps the micro-batch the search found
    once = resilient.train_with_backoff(_Pieces(32, flaky=32, message="CUDA out of memory (test)"), batch=64, steps=2,
                                        image_size=16, device="cpu")
    # without the allocator's report nothing says "in pieces": it halves at once, as before
    assert [(e.micro_batch_after, e.retried) for e in once.events] == [(32, False), (16, False)]
    redone = resilient.train_with_backoff(_Pieces(32, flaky=32), batch=64, steps=2, image_size=16, device="cpu")
    assert [(e.micro_batch_before, e.micro_batch_after, e.retried) for e in redone.events] == [
        (64, 64, True), (64, 32, False), (32, 32, True)]
    assert redone.micro_batch == 32 and redone.timed_steps == 2
    assert "fitted when redone from an empty cache" in resilient.settled_reading(redone, 32)


def test_a_failed_step_lets_go_of_its_micro_batch_before_the_cache_is_emptied(monkeypatch):
    """Left bound until the redo copied its first micro-batch, the failed one was freed after ``empty_cache`` and
    stayed in the allocator's cache: on an H200 the redo at 5,120 then ran out in pieces, though 5,120 fitted alone."""
    import weakref

    seen, alive = [], []

    class Fails(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = models.ReferenceCNN(16)

        def forward(self, x):
            if x.shape[0] > 8:
                seen.append(weakref.ref(x))
                raise torch.OutOfMemoryError("CUDA out of memory (test)")
            return self.net(x)

    monkeypatch.setattr(resilient, "free_memory", lambda: alive.append(seen[-1]() is not None))
    run = resilient.train_with_backoff(Fails(), batch=16, steps=1, image_size=16, device="cpu")
    assert run.micro_batch == 8 and alive == [False]


def test_reserved_is_read_over_the_measured_step_from_an_empty_cache(monkeypatch):
    """On an H200, SGD and Adam in fp32 read the same reserved, 6 GiB above every peak: it was read after the first
    step's cache and a counting forward. The measured step now starts from an empty cache, and reserved is its peak
    and what it holds right after, before the counting forward."""
    log = []
    reserved = iter([5 * GIB, 7 * GIB, 6 * GIB])  # the reserved peak of each phase: forward, backward, optimizer
    fake = {"reset_peak_memory_stats": lambda d=None: log.append("reset"),
            "max_memory_allocated": lambda d=None: 4 * GIB, "max_memory_reserved": lambda d=None: next(reserved),
            "memory_allocated": lambda d=None: GIB, "synchronize": lambda d=None: None,
            "memory_reserved": lambda d=None: log.append("reserved after") or 6 * GIB}
    for name, fn in fake.items():
        monkeypatch.setattr(torch.cuda, name, fn)
    monkeypatch.setattr(anatomy, "free_memory", lambda: log.append("free"))
    monkeypatch.setattr(anatomy, "nvml_used_bytes", lambda d=None: None)
    counted = anatomy.saved_bytes_by_kind
    monkeypatch.setattr(anatomy, "saved_bytes_by_kind", lambda *a: log.append("count") or counted(*a))
    net = models.ReferenceCNN(16)
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    opt = anatomy.make_optimizer("sgd", net.parameters())
    forward = lambda: F.cross_entropy(net(x), y)  # noqa: E731
    a = anatomy._measure(net, opt, list(net.parameters()), forward, lambda: None,
                         types.SimpleNamespace(type="cuda"), None, "sgd", "SGD, fp32")
    assert log == ["free", "reset", "reset", "reset", "reserved after", "count"]
    assert a.peak_reserved == 7 * GIB and a.reserved_after == 6 * GIB and a.peak == 4 * GIB
    assert anatomy.anatomy_table([a]).loc["SGD, fp32", "peak reserved GiB"] == 7.0
    line = anatomy.reserved_reading([a])
    assert "SGD, fp32: 7.00 GiB reserved at most against 4.00 GiB allocated, 3.00 GiB more" in line
    # the difference is the reader's subtraction of the two figures printed (04 read 16.37 − 11.70 as 4.68)
    odd = dataclasses.replace(a, peak_reserved=int(16.374 * GIB), peak_forward=int(11.6951 * GIB), peak_backward=None,
                              peak_optimizer=None)
    assert "16.37 GiB reserved at most against 11.70 GiB allocated, 4.67 GiB more" in anatomy.reserved_reading([odd])
    assert "starts from an empty cache" in line and "allocated plus the allocator's cache" in line
    cpu = anatomy.anatomy(models.ReferenceCNN(16), x, y)
    assert cpu.peak_reserved is None and anatomy.reserved_reading([cpu]) == ""


def test_one_steps_peaks_in_several_cells_are_read_beside_what_earlier_cells_held():
    """04 read the fp32 peak at batch 256 as 11.70, 11.85 and 11.88 GiB in three cells, and said nothing of why: an
    allocator peak counts every live tensor, and the later cells began with the anatomy's input batch alive."""
    from helpers.memory.anatomy import live_gib, peaks_beside_live

    line = peaks_beside_live("fp32 at batch 256", [("the anatomy", 11.695, 0.001), ("the precision comparison",
                                                   11.8512, 0.1437), ("this budget", 11.8802, 0.1752)],
                             held="the anatomy's input batch among them")
    assert "11.70, 11.85 and 11.88 GiB at its peak" in line
    assert "held 0.00, 0.14 and 0.18 GiB when each began (the anatomy's input batch among them)" in line
    assert line.endswith("the step's own peaks read 11.70, 11.71 and 11.70 GiB.")  # from the printed figures
    # a CPU has no allocator: nothing to say, and nothing live to count
    assert peaks_beside_live("fp32", [("a", 1.0, None), ("b", 1.1, 0.1)]) == ""
    assert live_gib("cpu") is None
