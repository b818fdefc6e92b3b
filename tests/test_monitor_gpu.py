"""The real NVML path: runs on a GPU node (scripts/gpu_test.py runs this file first); skipped without a GPU."""

import time

import pytest
import torch

from helpers import nvml
from helpers.monitor import Monitor

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or not nvml.available(),
                                reason="needs a CUDA GPU and NVML (runs in the GPU test run)")


def test_cuda_device_maps_to_the_same_gpu_in_nvml():
    nv = nvml.load()
    for i in range(torch.cuda.device_count()):
        h = nvml.handle_for_cuda_device(i)
        uuid = nv.nvmlDeviceGetUUID(h)
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        assert str(torch.cuda.get_device_properties(i).uuid) in uuid


def _load(seconds: float, fn) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        fn()
        torch.cuda.synchronize()


def test_real_sampling_sees_the_difference_between_big_and_tiny_kernels():
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    tiny = torch.zeros(64, device="cuda")
    with Monitor(period_s=0.1, live=False) as mon:
        with mon.phase("big"):
            _load(2.0, lambda: [big @ big for _ in range(10)])
        with mon.phase("tiny"):
            _load(2.0, lambda: [tiny.add_(1) for _ in range(100)])
    df = mon.samples_frame()
    for col in ("util_pct", "mem_used_gib", "power_w", "sm_clock_mhz", "alloc_gib"):
        assert df[col].notna().any(), f"{col} never sampled"
    bigs, tinys = mon.summary(phase="big"), mon.summary(phase="tiny")
    assert bigs.mean_util_pct > 70
    # the host's CPU is sampled on a GPU run too: a loop that only waits on the GPU keeps one core of many busy
    assert bigs.mean_host_cpu_pct is not None and 0 <= bigs.mean_host_cpu_pct <= 100
    assert "host CPU" in str(bigs)
    if bigs.energy_j is not None:  # NVML's energy counter (Volta and newer): joules over the phase, above zero
        assert bigs.energy_j > 0
    assert bigs.peak_allocated_gib > 0.1
    if bigs.mean_sm_active_pct is not None:  # GPM: Hopper and newer
        assert bigs.mean_sm_active_pct > 60
        assert tinys.mean_sm_active_pct < 20
        assert bigs.mean_tensor_active_pct > 30
    mon.close()
