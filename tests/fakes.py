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
