"""07's sharded optimizer on real GPUs (run by scripts/gpu_test.py on a node of two or more): DDP, ZeRO-1 and FSDP2
over NCCL, one rank per GPU, GPT-2 small in bf16. The run's figures are recorded in results/ for 07 to show on a
node of one GPU (helpers.results.recorded_elsewhere). Skipped with one line on a node with fewer than two GPUs."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs of one node (NCCL ranks)")

from helpers import results  # noqa: E402
from helpers.gpt import sharded_speed  # noqa: E402


def test_zero_and_fsdp2_train_like_ddp_in_less_memory_and_their_speed_is_recorded():
    r = sharded_speed.measure_speed(2, timeout_s=300, on_line=None)
    assert [v.variant for v in r.ran] == ["ddp", "zero", "fsdp2"], [v.error for v in r.variants]
    for v in r.ran:
        assert [x.backend for x in v.ranks] == ["nccl", "nccl"] and len({x.device for x in v.ranks}) == 1
        assert all(len(x.step_ms) == 10 for x in v.ranks)
    ddp = r.variant("ddp")
    for v in r.ran:
        # the same weights, batches and arithmetic: the first step's loss is the same computation on every variant,
        # and the later ones differ only by the order of bf16 and fp32 sums
        assert v.ranks[0].losses[0] == pytest.approx(ddp.ranks[0].losses[0], rel=1e-3), v.variant
        assert max(abs(a - b) for a, b in zip(v.ranks[0].losses, ddp.ranks[0].losses)) < 0.05, v.variant
    # ZeRO-1 keeps each rank's half of Adam's moments; FSDP2 half of the weights, gradients and moments too
    assert r.variant("zero").peak_gib < ddp.peak_gib and r.variant("fsdp2").peak_gib < ddp.peak_gib
    figs = sharded_speed.figures(r)
    assert set(figs) == set(sharded_speed.FIGURES)
    print(sharded_speed.reading(r))
    print(r.table().to_string())
    results.record(figs)  # 07 shows them on a node of one GPU, with this node's device and date
