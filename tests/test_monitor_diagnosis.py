import dataclasses

from helpers.monitor import diagnose
from helpers.monitor import MonitorSummary

BASE = MonitorSummary(source="nvml", duration_s=10, samples=40, mean_util_pct=95.0, mean_sm_active_pct=90.0,
                      mean_tensor_active_pct=60.0, mean_dram_bw_pct=20.0, peak_used_gib=40.0, mem_total_gib=80.0,
                      peak_allocated_gib=30.0, mean_power_w=600.0, slowdown_share=0.0, img_per_s=1000.0, steps=100)


class _Result:
    def __init__(self, wait):
        self.data_wait_share = wait


def titles(summary, wait=None):
    return [f.title for f in diagnose(summary, _Result(wait) if wait is not None else None)]


def test_data_bound_loop():
    s = dataclasses.replace(BASE, mean_util_pct=15.0, mean_sm_active_pct=10.0)
    t = titles(s, wait=0.7)
    assert t[0] == "Input pipeline: the GPU waits for data"
    assert "The GPU idles between kernels, and not for data" not in t


def test_high_utilisation_with_idle_sms_is_not_good():
    # A common reading takes >80% utilisation as healthy; GPM shows the SMs mostly idle.
    s = dataclasses.replace(BASE, mean_util_pct=92.0, mean_sm_active_pct=12.0)
    assert titles(s, wait=0.0)[0] == "Busy but not full: small kernels or launch overhead"


def test_low_utilisation_without_data_wait_points_at_host_overhead():
    s = dataclasses.replace(BASE, mean_util_pct=30.0, mean_sm_active_pct=25.0)
    assert titles(s, wait=0.05)[0] == "The GPU idles between kernels, and not for data"


def test_busy_sms_without_tensor_cores():
    s = dataclasses.replace(BASE, mean_tensor_active_pct=2.0)
    assert "SMs busy, tensor cores mostly idle" in titles(s)


def test_good_run_memory_and_clocks():
    s = dataclasses.replace(BASE, peak_used_gib=78.0, slowdown_share=0.5, mean_dram_bw_pct=85.0)
    t = titles(s)
    assert {"The SMs are busy", "Memory nearly full", "Clocks lowered by power or thermal limits",
            "Memory-bandwidth bound"} <= set(t)
    assert t[-1] == "The SMs are busy"  # good news last


def test_room_for_a_larger_batch_without_gpm():
    s = dataclasses.replace(BASE, mean_sm_active_pct=None, mean_tensor_active_pct=None, peak_used_gib=8.0)
    assert "Room for a larger batch" in titles(s)


def test_host_only():
    s = dataclasses.replace(BASE, source="host", mean_sm_active_pct=None, mean_util_pct=70.0)
    findings = diagnose(s)
    assert any(f.title == "No GPU telemetry here" for f in findings)
    assert all(str(f) for f in findings)
    assert all(". " + f.evidence[:1].upper() in str(f) for f in findings)  # each evidence starts its own sentence


def test_waiting_host_with_a_busy_gpu_is_not_an_input_bottleneck():
    # An asynchronous loop: the host waits in next() while the GPU still works through queued steps.
    s = dataclasses.replace(BASE, mean_util_pct=88.0, mean_sm_active_pct=85.0)
    assert "Input pipeline: the GPU waits for data" not in titles(s, wait=0.9)
