"""Serving and the profiler's step filter on a real GPU (run by scripts/gpu_test.py; skipped without CUDA):
every serving variant runs and computes what eager fp32 does; a CUDA graph replay beats eager launches at batch 1;
the profile counts only the kernels its active steps launched, CUDA graph replays included."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from helpers import models, profiling  # noqa: E402
from helpers.inference import VARIANTS, serve_sweep  # noqa: E402


def test_every_variant_serves_the_same_function_and_the_graph_cuts_batch_1_latency():
    sweep = serve_sweep(models.ReferenceCNN(64), image_size=64, batches=(1, 8), samples=100)
    assert not sweep.skipped and [v.name for v in VARIANTS] == list(dict.fromkeys(p.variant for p in sweep.points))
    assert not sweep.wrong, sweep.wrong
    eager, graph = sweep.of("eager bf16")[0], sweep.of("eager bf16 + CUDA graph")[0]
    assert graph.p50_ms < eager.p50_ms, (graph, eager)  # ~a dozen launches become one


def test_the_profile_counts_only_kernels_launched_in_its_active_steps():
    x = torch.randn(256, 256, device="cuda")

    def step():  # a matmul (cuBLAS may take more than one kernel) and a ReLU
        return (x @ x).relu_()

    g = torch.cuda.CUDAGraph()
    step()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        step()
    for fn in (step, g.replay):  # a replay's kernels carry the graph launch's correlation id
        alone = profiling.profile_steps(fn, wait=0, warmup=0, active=1).kernel_stats().kernels_per_step
        assert alone >= 2
        warmed = profiling.profile_steps(fn, wait=1, warmup=2, active=3).kernel_stats().kernels_per_step
        assert warmed == alone  # the warm-up steps' kernels are not counted as the active steps' own
