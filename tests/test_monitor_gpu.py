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


def test_the_energy_counters_steps_are_timed_and_a_short_phases_power_is_within_the_boards_limit():
    """NVML's energy counter moves in steps (about 100 ms apart on an H200): the poller times each, and a 0.85 s
    phase's mean power from them stays within what the board may draw (two samples had read 741 W on a 700 W H200)."""
    from helpers.monitor.energy import TIMED_WITHIN_S, energy_between

    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    with Monitor(period_s=0.25, live=False) as mon:
        _load(2.5, lambda: [big @ big for _ in range(10)])
    ups = mon.snapshot().energy
    timed = [u for u in ups if u["within_s"] <= TIMED_WITHIN_S]
    assert len(timed) >= 5, ups
    gaps = sorted(b["t_s"] - a["t_s"] for a, b in zip(timed, timed[1:]))
    limit_w = nvml.load().nvmlDeviceGetEnforcedPowerLimit(nvml.handle_for_cuda_device(torch.cuda.current_device())) / 1e3
    watts = [energy_between(ups, gpu=ups[0]["gpu"], start_s=a, end_s=a + 0.85) / 0.85 for a in (0.8, 1.0, 1.2, 1.4)]
    print(f"counter steps: median {1e3 * gaps[len(gaps) // 2]:.0f} ms apart; 0.85 s windows {[round(w) for w in watts]} W"
          f" (limit {limit_w:.0f} W)")
    assert all(20 < w <= 1.05 * limit_w for w in watts), (watts, limit_w)
