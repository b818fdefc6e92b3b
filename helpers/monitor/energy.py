"""The board's energy counter, timed to its own updates: what a phase of a second or less really drew.

    poller = EnergyPoller(readers, clock=mon_clock)      # the Monitor starts one beside its sampler
    poller.start(); ...; poller.stop()
    joules = energy_between(poller.updates, gpu=0, start_s=2.0, end_s=2.9)   # None where too few were timed

NVML's energy counter (``nvmlDeviceGetTotalEnergyConsumption``) does not count continuously: it moves in steps,
about every 100 ms on an H200 (driver 580; one H200, 2026-11-30, 40 steps in 4 s under a bf16 matmul load). A monitor
sample every 250 ms reads the counter as it stood at its last step, up to 100 ms before the sample was taken, so a
mean power from two samples 0.8 s apart can be off by a tenth either way: 06 printed energy per image that, times
its img/s, meant 741 W from a board capped at 700 W. A phase that short needs to know *when* the counter moved.

:class:`EnergyPoller` reads the counter every ``period_s`` (10 ms) on its own thread and keeps each step as it
happened: the counter's new value at the middle of the poll interval in which it changed. A step seen only after a
longer gap (the thread held up) is kept but marked, and :func:`energy_between` uses only the steps timed to within
:data:`TIMED_WITHIN_S`: the counter's value between them is interpolated, so the joules between two moments are
the counter's own, off by at most a few milliseconds of power at each end.
"""

from __future__ import annotations

import bisect
import threading
from typing import Any, Callable, Iterable

__all__ = ["EnergyPoller", "energy_between", "POLL_S", "TIMED_WITHIN_S"]

#: How often the poller reads each board's counter: 10 ms places a 100 ms step to within 5 ms, on a thread that sleeps
#: between its reads.
POLL_S = 0.01
#: A step counts as timed when the poll that saw it came at most this long after the one before it.
TIMED_WITHIN_S = 0.03


class EnergyPoller:
    """Reads each reader's energy counter every ``period_s`` on a daemon thread; ``updates`` keeps each step of
    each counter as a dict: ``gpu``, ``t_s`` (``clock()`` at the middle of the poll interval it changed in),
    ``energy_j`` (the counter's new value) and ``within_s`` (that interval's length).

    ``readers``: objects with ``nv``, ``handle`` and ``gpu`` (:class:`~helpers.monitor.telemetry.NvmlReader`);
    one whose counter cannot be read is dropped after its first failure."""

    def __init__(self, readers: Iterable[Any], clock: Callable[[], float], *, period_s: float = POLL_S) -> None:
        if not period_s > 0:
            raise ValueError(f"period_s={period_s!r}: use a positive number of seconds (0.01 is the default).")
        self.readers = [r for r in readers if hasattr(r, "nv") and hasattr(r, "handle")]
        self.clock, self.period_s = clock, float(period_s)
        self.updates: list[dict[str, Any]] = []
        self._last: dict[Any, tuple[float, float]] = {}  # gpu -> (time of its last poll, value it read)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> None:
        """Read every counter once; keep each one that moved since the last poll (the thread calls this)."""
        for r in list(self.readers):
            try:
                value = r.nv.nvmlDeviceGetTotalEnergyConsumption(r.handle) / 1e3  # mJ -> J
            except Exception:
                self.readers.remove(r)  # no counter on this board (before Volta): the samples say so already
                continue
            t = self.clock()
            gpu = getattr(r, "gpu", None)
            last = self._last.get(gpu)
            if last is not None and value != last[1]:
                with self._lock:
                    self.updates.append({"gpu": gpu, "t_s": (last[0] + t) / 2, "energy_j": value,
                                         "within_s": t - last[0]})
            self._last[gpu] = (t, value)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(u) for u in self.updates]

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "EnergyPoller":
        if self.running or not self.readers:
            return self
        self._stop.clear()
        self._last.clear()  # a restart's first poll is no step: the counter moved while nobody watched
        self._thread = threading.Thread(target=self._loop, name="gpu-energy", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while True:
            self.poll()
            if self._stop.wait(self.period_s):
                return

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)


def _interpolate(points: list[tuple[float, float]], t: float) -> float:
    """The counter at ``t`` from its timed steps, linear between them (and along the nearest two beyond them)."""
    if t <= points[0][0]:
        (t0, e0), (t1, e1) = points[0], points[1]
    elif t >= points[-1][0]:
        (t0, e0), (t1, e1) = points[-2], points[-1]
    else:
        i = bisect.bisect_right([p[0] for p in points], t)
        (t0, e0), (t1, e1) = points[i - 1], points[i]
    return e0 + (e1 - e0) * (t - t0) / (t1 - t0) if t1 > t0 else e1


def energy_between(updates: Iterable[dict[str, Any]], *, gpu: Any, start_s: float, end_s: float,
                   within_s: float = TIMED_WITHIN_S) -> float | None:
    """One board's joules between two moments, from its counter's timed steps: None where fewer than two steps were timed, or none
    lies within ``max(0.15 s, a tenth of the span)`` of either end (the counter there would be a guess).

    >>> ups = [{"gpu": 0, "t_s": 0.1 * k, "energy_j": 70.0 * k, "within_s": 0.01} for k in range(12)]  # 700 W
    >>> round(energy_between(ups, gpu=0, start_s=0.25, end_s=1.05), 6)                            # 0.8 s of it
    560.0
    """
    points = sorted((u["t_s"], u["energy_j"]) for u in updates
                    if u.get("gpu") == gpu and (u.get("within_s") or 0.0) <= within_s)
    if len(points) < 2 or not end_s > start_s:
        return None
    reach = max(0.15, 0.1 * (end_s - start_s))
    if any(min(abs(p[0] - t) for p in points) > reach for t in (start_s, end_s)):
        return None  # no timed step near an end (the poller was held up there): the counter there is a guess
    return _interpolate(points, end_s) - _interpolate(points, start_s)

