"""The board's energy over a short phase comes from its counter's timed steps, not from two samples of it.

NVML's counter moves about every 100 ms (one H200, driver 580, 2026-11-30): two samples 0.8 s apart read it as it
stood up to 100 ms earlier, and 06 printed energy per image that meant 741 W from a board capped at 700 W."""

import types

import pytest

from helpers.monitor.energy import EnergyPoller, energy_between
from helpers.monitor.record import MonitorRecord

WATTS, STEP_S = 700.0, 0.1


def _counter(t: float) -> float:
    """A 700 W board's counter in joules, as NVML shows it: it moves only every 100 ms (a little after 0.05 s)."""
    k = int((t - 0.05) // STEP_S)
    return 1000.0 + WATTS * STEP_S * k


class _Board:
    """An NVML stand-in whose counter follows ``_counter`` on a clock the test moves."""

    def __init__(self, clock):
        self.clock, self.calls = clock, 0

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self.calls += 1
        return int(round(_counter(self.clock[0]) * 1e3))  # millijoules, as NVML reports it


def _polled(until_s: float, period_s: float = 0.01, stall: tuple[float, float] | None = None):
    clock = [0.0]
    board = _Board(clock)
    reader = types.SimpleNamespace(nv=board, handle=None, gpu=0)
    poller = EnergyPoller([reader], lambda: clock[0], period_s=period_s)
    ms = 0  # whole milliseconds: a float clock summed in 0.01 s steps drifts across the counter's step times
    while ms <= 1000 * until_s:
        clock[0] = ms / 1000 + 0.0005  # half a millisecond off the counter's steps: no poll lands on one
        poller.poll()
        ms += 250 if stall and 1000 * stall[0] <= ms < 1000 * stall[1] else round(1000 * period_s)
    return poller


def test_each_step_of_the_counter_is_kept_with_when_it_happened_to_half_a_poll():
    ups = _polled(2.0).updates
    assert len(ups) == pytest.approx(19, abs=1)  # one step every 100 ms
    for u in ups:
        true_t = 0.05 + STEP_S * round((u["t_s"] - 0.05) / STEP_S)  # the step the poller saw
        assert abs(u["t_s"] - true_t) <= 0.005 + 1e-9 and u["within_s"] == pytest.approx(0.01)
        assert u["energy_j"] == pytest.approx(_counter(u["t_s"] + 0.006))


def test_a_short_phases_power_from_the_timed_steps_is_the_boards_and_from_two_samples_is_not():
    ups = _polled(3.0).updates
    worst_samples, worst_timed = 0.0, 0.0
    for i in range(40):  # phases of 0.85 s (8.5 of the counter's steps) starting anywhere within a step
        a = 1.0 + i * 0.0025
        b = a + 0.85
        from_samples = (_counter(b) - _counter(a)) / 0.85
        from_steps = energy_between(ups, gpu=0, start_s=a, end_s=b) / 0.85
        worst_samples = max(worst_samples, abs(from_samples / WATTS - 1))
        worst_timed = max(worst_timed, abs(from_steps / WATTS - 1))
    assert worst_samples > 0.05  # two samples see 8 or 9 steps: 659 or 741 W (06 printed what meant 741 W)
    assert worst_timed < 0.015  # timed steps: within a few milliseconds of power at each end


def test_steps_seen_after_a_stall_are_kept_but_not_used_and_too_few_timed_steps_give_none():
    ups = _polled(3.0, stall=(1.0, 2.0)).updates
    assert any(u["within_s"] > 0.2 for u in ups)  # the thread was held up: those steps are marked
    j = energy_between(ups, gpu=0, start_s=0.3, end_s=2.8)  # the stall's steps are skipped; the span still holds
    assert j / 2.5 == pytest.approx(WATTS, rel=0.01)
    assert energy_between(ups, gpu=0, start_s=1.2, end_s=1.8) is None  # inside the stall: nothing timed near its ends
    assert energy_between(ups, gpu=1, start_s=0.3, end_s=2.8) is None  # no such board
    assert energy_between([], gpu=0, start_s=0.3, end_s=2.8) is None


def test_a_board_without_the_counter_is_dropped_after_one_try():
    class NoCounter:
        calls = 0

        def nvmlDeviceGetTotalEnergyConsumption(self, handle):
            NoCounter.calls += 1
            raise RuntimeError("Not Supported")

    poller = EnergyPoller([types.SimpleNamespace(nv=NoCounter(), handle=None, gpu=0)], lambda: 0.0)
    poller.poll(); poller.poll()
    assert NoCounter.calls == 1 and poller.readers == [] and poller.updates == []
    assert not poller.start().running  # nothing to poll: no thread
    with pytest.raises(ValueError, match="positive"):
        EnergyPoller([], lambda: 0.0, period_s=0)


def test_a_measured_phase_takes_its_power_from_the_timed_steps_where_the_record_has_them():
    """The samples every 250 ms read the stepped counter: their mean power over a 0.85 s phase reads well off the board's 700 W here.
    With the poller's steps in the record the phase's energy per image is the board's 700 W over its images."""
    ts = [0.99 + 0.25 * k for k in range(6)]  # 0.99 … 2.24 s
    samples = [{"t_s": t, "gpu": 0, "util_pct": 90, "energy_j": _counter(t)} for t in ts]
    steps = [{"t_s": 1.1 + 0.1 * k, "images": 256} for k in range(8)]  # all 8 end inside the phase
    phases = [{"name": "measured", "start_s": 1.0, "end_s": 1.85, "timed_s": 0.85}]
    plain = MonitorRecord("nvml", [0], 0.25, samples=samples, steps=steps, phases=phases)
    timed = MonitorRecord("nvml", [0], 0.25, samples=samples, steps=steps, phases=phases,
                          energy=_polled(3.0).updates)
    images = 8 * 256
    from_samples = plain.summary(phase="measured").j_per_image * images / 0.85
    from_steps = timed.summary(phase="measured").j_per_image * images / 0.85
    assert abs(from_samples / WATTS - 1) > 0.05  # the stepped counter read from two samples
    assert from_steps == pytest.approx(WATTS, rel=0.015)
    s = timed.summary(phase="measured")
    assert s.energy_j == pytest.approx(s.j_per_image * images)  # the two printed figures divide into each other


def test_a_record_keeps_the_counters_steps_and_one_saved_before_them_still_loads(tmp_path):
    ups = _polled(1.0).updates
    rec = MonitorRecord("nvml", [0], 0.25, samples=[{"t_s": 0.0}], energy=ups)
    back = MonitorRecord.load(rec.save(tmp_path / "r.json"))
    assert back.energy == ups
    old = tmp_path / "old.json"
    old.write_text('{"source": "nvml", "devices": [0], "period_s": 0.25, "samples": [], "steps": [], '
                   '"phases": [], "meta": {}}')
    assert MonitorRecord.load(old).energy == []


def test_the_monitor_polls_the_counter_on_its_own_thread_and_stops_it(fake_nvml):
    import threading
    import time

    from helpers.monitor import Monitor

    nv = fake_nvml()
    mon = Monitor(backend=nv, handles=[object()], period_s=0.2, live=False, allocator=False, pcie=False)
    with mon:
        time.sleep(0.15)
        assert [t for t in threading.enumerate() if t.name == "gpu-energy"]
    assert not [t for t in threading.enumerate() if t.name == "gpu-energy"]
    ups = mon.snapshot().energy
    assert len(ups) >= 5  # about every 10 ms while the 0.2 s sampler slept; the stand-in's counter moves each read
    assert all(u["gpu"] == 0 and u["within_s"] > 0 for u in ups)
