"""Fakes the tests share (import them: ``from fakes import KernelTableProfile``; pytest puts tests/ on the path)."""

from __future__ import annotations

import pandas as pd

from helpers import profiling


class KernelTableProfile(profiling.ProfileResult):
    """A profile's kernel table without a profiler: convolutions take 50% of the kernel time, pooling 25%, GEMM 25%."""

    def __init__(self):
        super().__init__(prof=None, active_steps=1)

    def top_kernels(self, n):
        return pd.DataFrame({"kind": ["convolution", "pooling", "convolution", "GEMM"],
                             "total_us": [300.0, 250.0, 200.0, 250.0]})


def tiny_challenge():
    """The final challenge shrunk for a CPU test: 64 training images of 16², 64 held-out, batch 16, one warm-up step."""
    from helpers.challenge.rules import Rules
    from helpers.train import TrainConfig

    return (Rules(images=64, image_size=16, dataset_size=256, heldout=64, size="tiny"),
            TrainConfig(batch_size=16, warmup_steps=1, data="gpu", image_size=16, dataset_size=256))


def tiny_session(rules, *, matmul_tflops: float = 0.1):
    """A judging session on ``rules`` with made-up ceilings (no measuring): ``matmul_tflops`` sets where MFU lands."""
    from helpers import bench, models
    from helpers.challenge.harness import Session

    ceil = bench.Ceilings("test CPU", matmul_tflops=matmul_tflops, matmul_dtype="float32", matmul_n=64,
                          copy_gb_per_s=1.0, copy_bytes=1)
    return Session(rules, ceil, bench.flops_per_image(models.ReferenceCNN(rules.image_size), rules.image_size), "cpu")
