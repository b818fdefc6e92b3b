import dataclasses
import threading
import time

import pytest

from helpers import monitor, train
from helpers.monitor import Monitor
from helpers.monitor.record import MonitorRecord
from helpers.monitor.telemetry import decode_clock_reasons

GPM = {2: 90.0, 3: 40.0, 5: 70.0, 10: 30.0}


def _threads():
    return [t for t in threading.enumerate() if t.name == "gpu-monitor"]


def _mon(nv, **kw):
    kw.setdefault("period_s", 0.02)
    return Monitor(backend=nv, handles=["h"], live=False, **kw)


def test_samples_every_nvml_field_in_the_background(fake_nvml):
    nv = fake_nvml(util=(10, 30, 50, 70), mem_used_gib=2.0, power_mw=250_000)
    with _mon(nv) as mon:
        time.sleep(0.15)
    df = mon.samples_frame()
    assert len(df) >= 4 and df["t_s"].is_monotonic_increasing
    for col in ("util_pct", "mem_used_gib", "mem_total_gib", "power_w", "temp_c", "sm_clock_mhz",
                "clock_reasons", "pcie_tx_mb_s", "pcie_rx_mb_s"):
        assert col in df and df[col].notna().all(), col
    assert df["pcie_rx_mb_s"].iloc[0] == pytest.approx(3.0)
    s = mon.summary()
    assert s.source == "nvml" and 10 <= s.mean_util_pct <= 70
    assert s.peak_used_gib == pytest.approx(2.0) and s.mem_total_gib == 80
    # Each memory figure carries its own name: NVML's used memory is not PyTorch's allocated memory.
    assert "GPU memory used (NVML) peak 2.00 GiB, PyTorch allocated not sampled" in str(s)
    assert "peak memory" not in str(s) and "allocated peak" not in str(s)  # the exact peak is the training summary's
    # a handful of samples says so (07's top rungs read "NVML 100%" from 2 samples over 0.3 s)
    few = dataclasses.replace(s, samples=2, duration_s=0.3)
    assert "2 samples across 0.3 s (too few to read a steady state from" in str(few)
    assert ("too few" in str(s)) is (s.samples < 5)
    assert s.mean_power_w == pytest.approx(250.0)
    assert s.mean_sm_active_pct is None  # no GPM on this fake
    assert not _threads()


def test_gpm_metrics_need_two_samples_100ms_apart(fake_nvml):
    nv = fake_nvml(gpm=GPM)
    mon = Monitor(backend=nv, handles=["h"], gpm=True, live=False, period_s=0.05)
    with mon:
        time.sleep(0.35)
    df = mon.samples_frame()
    assert pd_isnan(df["sm_active_pct"].iloc[0])  # the first reading has no interval yet
    assert (df["sm_active_pct"].dropna() == 90.0).all() and df["sm_active_pct"].notna().sum() >= 2
    assert mon.summary().mean_tensor_active_pct == pytest.approx(70.0)
    mon.close()
    assert nv.gpm_freed == nv.gpm_allocated == 2


def pd_isnan(v) -> bool:
    return v != v


def test_unsupported_fields_are_asked_once(fake_nvml):
    nv = fake_nvml(power_supported=False)
    with _mon(nv, period_s=0.01) as mon:
        time.sleep(0.08)
    assert nv.power_calls == 1
    assert "power" in mon.unsupported
    assert mon.summary().mean_power_w is None


def test_steps_and_phases_share_the_time_axis(fake_nvml):
    with _mon(fake_nvml()) as mon:
        with mon.phase("data"):
            time.sleep(0.03)
        for _ in range(4):
            time.sleep(0.01)
            mon.step(images=32)
        mon.step(images=32, step_ms=20.0)
    steps, phases = mon.steps_frame(), mon.phases_frame()
    assert list(steps["step"]) == [0, 1, 2, 3, 4]
    assert steps["img_per_s"].iloc[0] is None or pd_isnan(steps["img_per_s"].iloc[0])  # no previous step
    assert steps["img_per_s"].iloc[-1] == pytest.approx(1600.0)
    assert phases.loc[0, "name"] == "data" and phases.loc[0, "end_s"] > phases.loc[0, "start_s"]
    assert mon.summary().img_per_s > 0
    assert mon.summary(phase="data").steps == 0
    with pytest.raises(ValueError, match="no phase named 'nope'"):
        mon.summary(phase="nope")


def test_training_feeds_the_monitor(fake_nvml):
    cfg = train.TrainConfig(batch_size=8, steps=5, warmup_steps=2, image_size=16, dataset_size=64)
    with _mon(fake_nvml()) as mon:
        res = train.train(cfg, monitor=mon)
    assert len(mon.record.steps) == 7
    assert [p["name"] for p in mon.record.phases] == ["set-up", "warm-up", "measured"]
    measured = mon.summary(phase="measured")
    # the run timed its measured phase (Monitor.time_phase): the monitor's img/s is the run's, to the digit (02 had
    # printed 5,455 in the monitor's line and 5,456 in the run's, a line apart)
    assert measured.steps == 5 and measured.img_per_s == pytest.approx(res.img_per_s, rel=1e-9)
    assert mon.record.phases[-1]["timed_s"] == pytest.approx(res.wall_s)


def test_a_phase_is_timed_by_name_and_a_bad_time_or_name_says_what_to_change(fake_nvml):
    with _mon(fake_nvml()) as mon:
        with mon.phase("measured"):
            mon.step(images=100)
            mon.step(images=100)
        mon.time_phase("measured", 0.5)
        with pytest.raises(ValueError, match="no phase named 'nope' to time; phases seen: \\['measured'\\]"):
            mon.time_phase("nope", 1.0)
        with pytest.raises(ValueError, match="must be above zero"):
            mon.time_phase("measured", 0.0)
    assert mon.summary(phase="measured").img_per_s == pytest.approx(200 / 0.5)


def test_start_twice_stop_twice(fake_nvml):
    mon = _mon(fake_nvml(), period_s=0.01)
    mon.stop()  # before start: harmless
    mon.start()
    mon.start()
    assert len(_threads()) == 1
    mon.stop()
    mon.stop()
    assert not mon.running and not _threads()


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError])
def test_an_exception_inside_the_block_stops_the_thread_and_closes_phases(fake_nvml, exc):
    mon = _mon(fake_nvml(), period_s=0.01)
    with pytest.raises(exc):
        with mon:
            with mon.phase("train"):
                raise exc
    assert not _threads()
    assert mon.record.phases[0]["end_s"] is not None


def test_stop_all_catches_monitors_left_running(fake_nvml):
    mons = [_mon(fake_nvml()).start() for _ in range(2)]
    assert monitor.stop_all() == 2
    assert not any(m.running for m in mons) and not _threads()


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
    with _mon(nv, period_s=0.01) as mon:
        time.sleep(0.08)
    assert mon.summary().samples >= 3
    assert "util" not in mon.unsupported


def test_without_nvml_it_samples_the_host(capsys):
    with Monitor(period_s=0.02, live=False) as mon:
        sum(i for i in range(200000))
        time.sleep(0.05)
    s = mon.summary()
    assert s.source == "host" and s.samples >= 2 and s.peak_used_gib > 0
    assert "no NVML" in str(s)
    assert capsys.readouterr().out.count("NVML unavailable") == 1


def test_record_round_trips_through_json(fake_nvml, tmp_path):
    with _mon(fake_nvml()) as mon:
        with mon.phase("p"):
            mon.step(images=4, step_ms=2.0)
    path = mon.save("run-a")
    assert path.parent.name == "monitor" and path.name == "run-a.json"
    again = monitor.load_record("run-a")
    assert again.samples == mon.record.samples and again.phases == mon.record.phases
    assert again.meta["name"] == "run-a"
    with pytest.raises(FileNotFoundError, match="saved records: \\['run-a'\\]"):
        monitor.load_record("run-b")


def test_bad_arguments_say_what_to_use():
    with pytest.raises(ValueError, match="period_s"):
        Monitor(period_s=0, live=False)
    with pytest.raises(ValueError, match="refresh_hz"):
        Monitor(refresh_hz=0, live=False)


def test_clock_reason_names():
    assert decode_clock_reasons(0) == []
    assert decode_clock_reasons(0x4 | 0x40) == ["power cap (software)", "thermal (hardware)"]


def test_the_summary_shows_the_measured_steps_beside_the_whole_window():
    # 10 s of set-up at 5%, then 2 s of measured steps at 95%: the whole window's mean hides the steady state
    samples = [{"t_s": t / 10, "gpu": 0, "util_pct": 5.0 if t < 100 else 95.0, "sm_active_pct": None}
               for t in range(121)]
    phases = [{"name": "run: set-up", "start_s": 0.0, "end_s": 10.0},
              {"name": "run: measured", "start_s": 10.0, "end_s": 12.0}]
    rec = MonitorRecord(source="nvml", devices=[0], period_s=0.1, samples=samples, phases=phases)
    assert rec.steady_phases() == ("run: measured",)
    text = rec.summary_text()
    steady, whole = text.split("\n")
    assert steady.startswith("steady state (measured steps): GPU utilisation (NVML) 95%")
    assert whole.startswith("whole window, set-up included: GPU utilisation (NVML) 21%") and "over 12.0 s" in whole
    assert rec.summary(phase=("run: set-up", "run: measured")).mean_util_pct == rec.summary().mean_util_pct
    bare = MonitorRecord(source="nvml", devices=[0], period_s=0.1, samples=samples)
    assert bare.summary_text().startswith("whole window: GPU utilisation (NVML) 21%")  # nothing to call steady


def test_energy_per_image_and_the_reasons_that_lowered_the_clocks_come_from_the_samples():
    from helpers.monitor.record import MonitorRecord

    power_cap, thermal = 0x4, 0x20
    samples = [{"t_s": t, "util_pct": 90, "energy_j": 1000 + 300 * t, "clock_reasons": r}
               for t, r in ((0.0, 0), (1.0, power_cap), (2.0, power_cap | thermal), (3.0, power_cap), (4.0, 0))]
    steps = [{"t_s": 1.0, "images": 256}, {"t_s": 2.0, "images": 256}, {"t_s": 3.0, "images": 256}]
    s = MonitorRecord("nvml", [0], 1.0, samples=samples, steps=steps).summary()
    assert s.energy_j == pytest.approx(1200)  # 300 W for the 4 s the samples span
    assert s.j_per_image == pytest.approx(300 * 2 / 512)  # 300 W over the steps' 2 s, for the 512 images after the first
    assert s.slowdown_share == pytest.approx(3 / 5) and s.slowdown_reasons == ("power cap (software)", "thermal (software)")
    without = MonitorRecord("nvml", [0], 1.0, samples=[{k: v for k, v in x.items() if k != "energy_j"} for x in samples],
                            steps=steps).summary()
    assert without.energy_j is None and without.j_per_image is None


def test_a_ddp_runs_energy_is_each_boards_counter_summed_never_one_boards_less_anothers():
    from helpers.monitor.record import MonitorRecord

    # two boards whose counters started far apart (each since its own driver load): 300 W and 200 W
    samples = [{"t_s": t, "gpu": g, "util_pct": 90, "energy_j": base + w * t}
               for t in (0.0, 1.0, 2.0, 3.0) for g, base, w in ((0, 5e6, 300), (1, 1e3, 200))]
    steps = [{"t_s": 1.0, "images": 500}, {"t_s": 2.0, "images": 500}]
    s = MonitorRecord("nvml", [0, 1], 1.0, samples=samples, steps=steps).summary()
    assert s.energy_j == pytest.approx(3 * 500)  # 500 W together for 3 s
    assert s.j_per_image == pytest.approx(500 * 1 / 500)  # 500 W over the steps' 1 s, for the 500 images after the first


def test_the_monitor_reads_the_boards_energy_counter(fake_nvml):
    with _mon(fake_nvml()) as mon:
        time.sleep(0.08)
    assert mon.summary().energy_j > 0 and "energy" not in mon.unsupported


def test_a_closed_phases_rate_is_its_images_over_its_time_not_over_when_the_host_queued_them():
    """An asynchronous loop queues its last steps long before the GPU runs them: the host's step times end early,
    and images over them read above what the GPU trained (02 showed 5,006 img/s beside a step ceiling of 4,856)."""
    from helpers.monitor.record import MonitorRecord

    # 10 steps of 100 images; the GPU takes 1 s each; the host queued the last 4 within 0.1 s of one another
    queued = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 6.03, 6.06, 6.09]
    steps = [{"t_s": t, "images": 100} for t in queued]
    phases = [{"name": "measured", "start_s": 0.0, "end_s": 10.0}]  # closed after the sync: the GPU's 10 s
    rec = MonitorRecord("host", [], 0.25, samples=[{"t_s": t, "cpu_pct": 50.0} for t in range(11)], steps=steps,
                        phases=phases)
    assert rec.summary(phase="measured").img_per_s == pytest.approx(100.0)
    assert rec.summary().img_per_s == pytest.approx(900 / 6.09)  # no phase: the host's times are all there is


def test_a_measured_phases_energy_and_energy_per_image_divide_into_each_other():
    from helpers.monitor.record import MonitorRecord

    # 400 W; the timed phase runs 1.0 s to 3.0 s and trains 3 x 256 images; samples every 0.5 s (the edges missed)
    samples = [{"t_s": t, "util_pct": 90, "energy_j": 1000 + 400 * t} for t in (0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.25)]
    steps = [{"t_s": 1.5, "images": 256}, {"t_s": 2.0, "images": 256}, {"t_s": 2.9, "images": 256}]
    phases = [{"name": "run: timed", "start_s": 1.0, "end_s": 3.0}]
    s = MonitorRecord("nvml", [0], 0.5, samples=samples, steps=steps, phases=phases).summary(phase="run: timed")
    assert s.img_per_s == pytest.approx(768 / 2.0)
    assert s.energy_j == pytest.approx(400 * 2.0)  # the board's power over the phase's whole 2 s, not its samples' 1 s
    assert s.j_per_image == pytest.approx(s.energy_j / 768)  # every image the phase trained, as img/s counts them


class _FakeEvent:
    """A CUDA event stand-in: it completes at ``gpu_s`` on a GPU clock of its own (an event's time is never on the
    host's clock); ``done`` says whether the GPU has reached it yet."""

    def __init__(self, gpu_s: float, done: bool = True) -> None:
        self.gpu_s, self.done = gpu_s, done

    def query(self) -> bool:
        return self.done

    def elapsed_time(self, end: "_FakeEvent") -> float:
        if not (self.done and end.done):
            raise RuntimeError("CUDA error: device not ready")
        return (end.gpu_s - self.gpu_s) * 1e3


def test_a_synchronised_loops_steps_are_timed_when_the_gpu_finished_them_not_when_the_host_queued_them():
    """06's top rung on one H200: the host queued its steps far ahead of the GPU, so by the host's times the
    throughput line started near 38,000 img/s beside a measured 21,867 and ended 0.45 s before the GPU did."""
    from helpers.monitor import rolling_img_per_s

    mon = Monitor(live=False)  # no GPU here: the host's monitor takes steps the same way
    events = [_FakeEvent(gpu_s=100.0 + 0.01 * (i + 1)) for i in range(20)]  # the GPU: 100 images per 0.01 s
    for ev in events:  # the host queues all 20 at once, well ahead of the GPU
        mon.step(images=100, done=ev)
    queued = [s["t_s"] for s in mon.snapshot().steps]
    ts, ips = rolling_img_per_s(mon.snapshot().steps, 0.03)
    assert max(ips) > 10 * 10_000  # by the host's times: far above the 10,000 img/s the GPU trained
    time.sleep(0.25)  # the host waits in torch.cuda.synchronize() while the GPU runs the 0.2 s it queued
    assert mon.synchronized() == 20
    steps = mon.snapshot().steps
    done = [s["t_done_s"] for s in steps]
    assert done[-1] - done[0] == pytest.approx(0.19)  # the GPU's own 0.01 s between steps
    assert all(d >= q for d, q in zip(done, queued))  # no step ends before the host queued it
    assert done[-1] - queued[-1] == pytest.approx(0.25, abs=0.05)  # the last one ends at the sync, now
    ts, ips = rolling_img_per_s(steps, 0.03)
    assert ips == pytest.approx([10_000.0] * len(ips))  # the rate the GPU trained at, from the first point to the last
    assert ts[-1] == pytest.approx(done[-1]) and mon.synchronized() == 0  # nothing left to time


def test_a_synchronized_call_before_the_gpu_is_done_leaves_the_steps_on_host_time_until_it_is():
    mon = Monitor(live=False)
    ev = _FakeEvent(gpu_s=1.05, done=False)
    mon.step(images=8, done=_FakeEvent(gpu_s=1.0))
    mon.step(images=8, done=ev)
    assert mon.synchronized() == 0  # the last event has not completed: no sync after all
    assert all("t_done_s" not in s for s in mon.snapshot().steps)
    time.sleep(0.1)
    ev.done = True
    assert mon.synchronized() == 2
    a, b = mon.snapshot().steps
    assert b["t_done_s"] - a["t_done_s"] == pytest.approx(0.05, abs=1e-3)
    mon.step(images=8)  # a step without an event: host time, and records saved before t_done_s existed still load
    assert monitor.record.step_end_s(mon.snapshot().steps[-1]) == mon.snapshot().steps[-1]["t_s"]


def test_the_trainer_tells_its_monitor_when_it_synchronised_after_the_warm_up_and_the_measured_steps():
    class Spy:
        def __init__(self):
            self.calls = []

        def phase(self, name):
            import contextlib

            return contextlib.nullcontext()

        def on_train_step(self, rec, done=None):
            self.calls.append(("step", done))

        def synchronized(self):
            self.calls.append(("sync", None))

        def time_phase(self, name, seconds):
            self.calls.append(("timed", (name, seconds)))

    cfg = train.TrainConfig(batch_size=8, steps=3, warmup_steps=2, image_size=16, dataset_size=64, data="gpu")
    spy = Spy()
    train.Trainer(cfg).run(monitor=spy)
    kinds = [k for k, _ in spy.calls]
    assert kinds == ["step", "step", "sync", "step", "step", "step", "sync", "timed"]
    assert spy.calls[-1][1][0] == "measured" and spy.calls[-1][1][1] > 0  # the run's own clock, after the sync
    assert all(done is None for k, done in spy.calls if k == "step")  # on a CPU the host's times are the GPU's


def test_a_phase_keeps_the_samples_that_read_its_own_time_not_the_one_that_straddles_its_start():
    """00's tiny-kernel phase read 32% NVML utilisation beside a chart at about 25%: its first sample (99%) read the
    interval before, the large matmuls'. A sample reads the time since the one before it."""
    from helpers.monitor.record import MonitorRecord

    # 1 s of 99% then 1 s of 20%, sampled every 0.25 s; the phase boundary at 1.1 s falls inside an interval
    samples = [{"t_s": t / 4, "gpu": 0, "util_pct": 99.0 if t <= 4 else 20.0} for t in range(9)]
    samples[5]["util_pct"] = 80.0  # the sample at 1.25 s read its interval from 1.0 s: part matmuls, part tiny
    phases = [{"name": "matmuls", "start_s": 0.0, "end_s": 1.1}, {"name": "tiny", "start_s": 1.1, "end_s": 2.0}]
    rec = MonitorRecord(source="nvml", devices=[0], period_s=0.25, samples=samples, phases=phases)
    tiny = rec.summary(phase="tiny")
    assert tiny.samples == 3 and tiny.mean_util_pct == pytest.approx(20.0)  # 1.5, 1.75, 2.0: not 1.25
    assert rec.summary(phase="matmuls").mean_util_pct == pytest.approx(99.0)  # 0 to 1.0; 1.25 lies past its end
    short = [{"name": "blip", "start_s": 1.4, "end_s": 1.6}]  # shorter than an interval: the samples taken in it
    rec2 = MonitorRecord(source="nvml", devices=[0], period_s=0.25, samples=samples, phases=short)
    blip = rec2.summary(phase="blip")
    assert blip.samples == 1 and blip.mean_util_pct == pytest.approx(20.0)  # the one at 1.5 s
