"""05_ddp's engine on real GPUs (run by scripts/gpu_test.py): NCCL ranks, one per GPU, with gradients equal to one
process's, every rank on its own GPU, a profiler trace whose NCCL kernels HTA measures, and a monitor of every GPU.
Skipped with one line on a node with fewer than two GPUs."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs of one node (NCCL ranks)")

from helpers.ddp import Variant, launch, overlap, scaling  # noqa: E402
from helpers.monitor import Monitor  # noqa: E402


def test_nccl_ranks_average_gradients_like_one_process():
    res = launch.launch(launch.LaunchSpec(nproc_per_node=2, args=("--mode", "grad-check", "--backend", "nccl",
                                                                  "--image-size", "64", "--batch", "8")), on_line=None)
    assert res.ok, res.error
    assert [r["device"] for r in res.results] == ["cuda:0", "cuda:1"]
    assert all(r["max_relative_grad_difference"] < 1e-4 for r in res.results)


def test_a_trace_of_two_gpus_has_nccl_kernels_that_hta_measures(tmp_path):
    settings = scaling.WorkerSettings(image_size=64, steps=2, repeats=2, warmup=2)
    with Monitor(devices="all", allocator=False, live=False) as mon:
        stats = scaling.measure_variants(2, [Variant("synced", 64), Variant("local", 64, sync="none")],
                                         settings=settings, extra=("--profile-dir", str(tmp_path)), monitor=mon,
                                         on_line=None, phase="2 GPUs")
    assert mon.devices == list(range(torch.cuda.device_count()))
    assert {s["gpu"] for s in mon.record.samples} == set(mon.devices)  # one figure, every GPU's lines
    assert stats["synced"].ddp and stats["synced"].world_size == 2
    kernels = overlap.trace_kernels(tmp_path / "rank0.json")
    assert (kernels["kind"] == "communication").any() and (kernels["kind"] == "computation").any()
    df = overlap.hta_overlap(tmp_path)
    assert list(df.index) == [0, 1] and df.iloc[:, 0].between(0, 100).all()
    assert overlap.timeline_figure(tmp_path / "rank0.json").data
    # the two ranks' GPUs each on their own, over their timed steps alone (short here: perhaps no sample inside)
    steady = scaling.steady_state_text(mon.snapshot(), 2)
    assert steady.startswith("the 2-GPU launch's timed steps alone (") and "GPU 0: " in steady and "GPU 1: " in steady
    assert "GPU 2" not in steady
    assert 0 <= scaling.hidden_fraction(stats["synced"], stats["local"], 1e3) <= 1
