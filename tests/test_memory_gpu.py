"""04_memory's helpers on a real GPU (run by scripts/gpu_test.py; skipped without CUDA): a real out-of-memory
survived with nothing left behind, the phases' peaks, and expandable segments in a fresh process."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from helpers import models  # noqa: E402
from helpers.memory import anatomy, fragmentation, search  # noqa: E402


def test_a_real_out_of_memory_is_survived_and_its_memory_given_back():
    probe = search.step_probe(lambda: models.ReferenceCNN(224), image_size=224, dtype=torch.bfloat16)
    ok = search.try_batch(probe, 8)
    search.free_memory()
    before = torch.cuda.memory_allocated()
    free, total = torch.cuda.mem_get_info()
    huge = int(total / (224 * 224 * 64 * 2)) + 64  # conv1's output alone is larger than the whole GPU
    trial = search.try_batch(probe, huge)
    assert ok.fits and not trial.fits and trial.why == "out of memory"
    assert torch.cuda.memory_allocated() <= before + 2**20  # the failed step's tensors are gone
    assert search.try_batch(probe, 8).fits  # and the same model trains again


def test_phase_peaks_order_and_adam_state():
    x = torch.randn(32, 3, 224, 224, device="cuda")
    y = torch.randint(0, 10, (32,), device="cuda")
    sgd = anatomy.anatomy(models.ReferenceCNN(224).cuda(), x, y, optimizer="sgd")
    adam = anatomy.anatomy(models.ReferenceCNN(224).cuda(), x, y, optimizer="adam")
    assert sgd.peak_backward >= sgd.peak_forward > sgd.peak_optimizer  # activations dominate at batch 32
    assert adam.optimizer_state == 2 * sgd.optimizer_state
    assert sgd.reserved_after >= sgd.allocated_after
    assert sgd.nvml_used_after is None or sgd.nvml_used_after >= sgd.reserved_after


def test_expandable_segments_keep_reserved_near_allocated():
    off, on = fragmentation.run_in_subprocess(False), fragmentation.run_in_subprocess(True)
    assert on["peak_reserved_gib"] < off["peak_reserved_gib"]
    assert on["peak_reserved_gib"] / on["peak_allocated_gib"] < 1.1


@pytest.mark.parametrize("recipe, passes", [("reference", True), ("the baseline's rate", False),
                                            ("the linear scaling rule", False), ("AdamW, no warm-up, too high", False)])
def test_large_batch_exercise_at_full_scale(recipe, passes):
    """04's large-batch exercise where a learner with a GPU meets it: the reference keeps the baseline's accuracy
    from fresh seeds; SGD at the baseline's rate and at 8× it, and AdamW at 1e-2 without warm-up, are refused."""
    from helpers import large_batch as lb
    from helpers.exercises import nb04

    answers = {"reference": (nb04.large_batch_optimizer, nb04.large_batch_lr),
               "the baseline's rate": (lb.sgd(0.01), lb.constant(0.01)),
               "the linear scaling rule": (lb.sgd(0.08), lb.constant(0.08)),
               "AdamW, no warm-up, too high": (lambda p: torch.optim.AdamW(p, lr=1e-2), lb.constant(1e-2))}
    check = nb04.check_large_batch(*answers[recipe], setup=lb.setup_for("full"), device="cuda")
    assert check.passed == passes, check.message


def test_the_snapshot_of_one_step_holds_its_phases_and_its_kinds_and_ends_where_the_allocator_does(tmp_path):
    """What the CPU tests could only assume from torch's source: the record_function ranges reach the snapshot's
    external_annotations, the backward's blocks are told apart by when they lived, and the timeline's last total is
    the allocator's own count."""
    from helpers import figure_check, profiling
    from helpers.memory import snapshot

    net = models.ReferenceCNN(64).cuda()
    adam = torch.optim.Adam(net.parameters())
    x = torch.randn(32, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (32,), device="cuda")

    def step():
        with profiling.nvtx_range("forward"):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        with profiling.nvtx_range("backward"):
            loss.backward()
        with profiling.nvtx_range("optimizer"):
            adam.step()
            adam.zero_grad(set_to_none=False)

    snap = snapshot.record_snapshot(step, device="cuda")
    tl = snapshot.timeline(snap, kinds=snapshot.tensor_kinds(net, adam), label="test")
    assert [name for name, _s, _e in tl.phases] == ["forward", "backward", "optimizer"], tl.notes
    at_end = dict(zip(tl.kinds, (series[-1] for series in tl.allocated)))
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    assert at_end.get("parameters") == pytest.approx(params, rel=0.01)
    assert at_end.get("optimizer state", 0) >= 2 * params * 0.99  # Adam's two moments
    assert tl.at_peak().get("activations", 0) > 0 and tl.peak_phase in ("forward", "backward")
    assert tl.total[-1] == pytest.approx(torch.cuda.memory_allocated(), rel=0.05)
    assert figure_check.problems(snapshot.timeline_figure(tl)) == []
    assert len(snapshot.largest_blocks_table(tl).shown) > 0
    assert snapshot.save_viewer(snap, tmp_path / "step.html").stat().st_size > 0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_largest_block_exercise_agrees_with_the_allocators_record(dtype):
    """04's exercise judged as a learner with a GPU meets it: the reference's count of the largest block matches
    what the allocator handed out at both sizes (an activation at one, fc1's weight at the other), and an answer
    that knows only the activations is refused."""
    from helpers.exercises import nb04

    for batch, size in nb04.LARGEST_BLOCK_CASES:
        measured = nb04.measure_largest_block(batch, size, dtype, device="cuda")
        assert abs(measured - nb04.largest_block_bytes(batch, size, dtype)) <= 0.01 * measured, (batch, size, measured)
    assert nb04.check_largest_block(nb04.largest_block_bytes, dtype=dtype, device="cuda").passed
    only_activations = nb04.check_largest_block(lambda b, s, d: b * 64 * s * s * d.itemsize, dtype=dtype,
                                                device="cuda")
    assert only_activations.status == "failed"


def test_the_probe_reads_memory_a_layer_holds_only_while_it_runs():
    """A Linear that allocates 64 MiB for the length of its forward and 128 MiB in its backward: the probe reads
    each (and nothing for a plain Linear), though its output and its weight's gradient stay allocated."""
    from helpers.memory import scratch

    class Greedy(torch.nn.Linear):
        def forward(self, x):
            tmp = torch.empty(64 * 2**20, dtype=torch.uint8, device=x.device)  # held only inside this call
            del tmp
            return _Hold.apply(super().forward(x))

    class _Hold(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            tmp = torch.empty(128 * 2**20, dtype=torch.uint8, device=g.device)
            del tmp
            return g

    net = torch.nn.Sequential(torch.nn.Linear(256, 256), Greedy(256, 256)).cuda()
    x = torch.randn(32, 256, device="cuda")
    with scratch.probe(net, "cuda") as rows:
        net(x).sum().backward()
    got = {(r.layer, r.pass_): r.scratch_gib * 2**10 for r in rows}  # MiB
    assert got[("1", "forward")] == pytest.approx(64, abs=1)
    assert got[("1", "backward")] == pytest.approx(128, abs=1)
    assert got[("0", "forward")] < 1 and got[("0", "backward")] < 1
    assert scratch.largest(rows).pass_ == "backward"
    assert all(r.peak_gib >= r.entry_gib >= 0 for r in rows)
    # the parts of the peak during each call add up to it, as 04's sentence adds them
    assert all(r.entry_gib + r.added_gib + r.scratch_gib == pytest.approx(r.peak_gib, abs=1e-6) or r.scratch_gib == 0
               for r in rows)
    with scratch.probe(net, "cuda") as again:
        pass
    net(x).sum().backward()
    assert again == []  # the hooks went with the block


def test_fp32_without_tf32_is_probed_layer_by_layer():
    from helpers.memory import scratch
    from helpers.train import TrainConfig

    cfg = TrainConfig(batch_size=32, image_size=64, data="gpu", channels_last=True, dataset_size=64)
    from helpers.memory import precision

    with precision.tf32(False):
        rows = scratch.layer_scratch(cfg, device="cuda")
    convs = {r.layer for r in rows if r.kind == "Conv2d"}
    assert len(convs) >= 3 and {r.pass_ for r in rows} == {"forward", "backward"}
    assert all(r.scratch_gib >= 0 for r in rows)
