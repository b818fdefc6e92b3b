import threading
import time

import pytest

from helpers import monitor


def _threads():
    return [t for t in threading.enumerate() if t.name == "gpu-sampler"]


def test_samples_nvml_in_the_background(fake_nvml):
    nv = fake_nvml(util=(10, 30, 50, 70), mem_used_gib=2.0, power_mw=250_000)
    with monitor.GpuSampler(period_s=0.02, backend=nv, handle="h") as mon:
        time.sleep(0.15)
    s = mon.summary()
    assert s.source == "nvml" and s.samples >= 4
    assert 10 <= s.mean_util_pct <= 70
    assert s.peak_mem_gib == pytest.approx(2.0)
    assert s.mean_power_w == pytest.approx(250.0)
    df = mon.to_frame()
    assert len(df) == s.samples and df["t_s"].is_monotonic_increasing
    assert "GPU utilisation (NVML)" in str(s)
    assert not _threads()


def test_unsupported_power_is_asked_once(fake_nvml):
    nv = fake_nvml(power_supported=False)
    with monitor.GpuSampler(period_s=0.01, backend=nv, handle="h") as mon:
        time.sleep(0.08)
    assert nv.power_calls == 1
    assert mon.summary().mean_power_w is None


def test_start_twice_stop_twice(fake_nvml):
    mon = monitor.GpuSampler(period_s=0.01, backend=fake_nvml(), handle="h")
    mon.stop()  # before start: harmless
    mon.start()
    mon.start()
    assert len(_threads()) == 1
    mon.stop()
    mon.stop()
    assert not mon.running and not _threads()


def test_an_exception_in_the_block_stops_the_thread(fake_nvml):
    with pytest.raises(KeyboardInterrupt):
        with monitor.GpuSampler(period_s=0.01, backend=fake_nvml(), handle="h"):
            raise KeyboardInterrupt
    assert not _threads()


def test_a_failing_read_skips_a_sample_and_keeps_going(fake_nvml):
    nv = fake_nvml()
    calls = {"n": 0}
    real = nv.nvmlDeviceGetUtilizationRates

    def flaky(h):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("GPU is lost")
        return real(h)

    nv.nvmlDeviceGetUtilizationRates = flaky
    with monitor.GpuSampler(period_s=0.01, backend=nv, handle="h") as mon:
        time.sleep(0.08)
    assert mon.summary().samples >= 3


def test_without_nvml_it_samples_the_host(capsys):
    with monitor.GpuSampler(period_s=0.02) as mon:
        sum(i for i in range(200000))
        time.sleep(0.05)
    s = mon.summary()
    assert s.source == "host" and s.samples >= 2 and s.peak_mem_gib > 0
    assert "no NVML" in str(s)
    assert capsys.readouterr().out.count("NVML unavailable") <= 1


def test_empty_summary_and_bad_period():
    with pytest.raises(ValueError, match="period_s"):
        monitor.GpuSampler(period_s=0)
    s = monitor.GpuSampler(period_s=1).summary()
    assert s.samples == 0
