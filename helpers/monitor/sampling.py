"""The monitor itself: samples GPU telemetry on a background thread beside what the training loop does.

    with Monitor() as mon:                      # a live plot appears in the notebook
        result = train(cfg, monitor=mon)        # per-step img/s and the run's phases feed it
    mon.summary()                               # mean utilisation and SM activity, memory (NVML used, PyTorch allocated), img/s
    mon.samples_frame()                         # every sample as a DataFrame

Any loop can feed it: ``mon.step(images=256)`` once per step, and
``with mon.phase("data"): ...`` for shaded phases. An asynchronous GPU loop
that also hands each step's CUDA event (``mon.step(images=256, done=ev)``) and
says when it synchronised (``mon.synchronized()``) gets its throughput line
timed by when the GPU finished each step, not by when the host queued it.

What it samples, every ``period_s`` (250 ms by default) on a background thread:
NVML utilisation, memory, power, temperature, SM clock, clock-event reasons
and PCIe traffic; on Hopper and newer also GPM SM activity, SM occupancy,
tensor-core activity and DRAM bandwidth; PyTorch's allocator memory. Without
NVML it samples CPU utilisation and host memory, and says so once.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Iterator

from .. import nvml
from .energy import POLL_S, EnergyPoller
from .exporters import PrometheusExporter, write_tensorboard
from .record import MonitorRecord, MonitorSummary
from .telemetry import HostReader, NvmlReader
from .view import LiveView, build_figure, default_title, in_notebook

__all__ = ["Monitor", "stop_all"]

_running: "weakref.WeakSet[Monitor]" = weakref.WeakSet()


def stop_all() -> int:
    """Stop every monitor still running in this process (a cell that failed before ``stop()``); return how many."""
    mons = list(_running)
    for m in mons:
        m.stop()
    return len(mons)


atexit.register(stop_all)  # a kernel shutdown or restart stops the threads before NVML goes away


class Monitor:
    """Samples GPU (or host) telemetry in a background thread; plots it live; a context manager.

    ``devices``: CUDA device indices to watch (default: the current one), or ``"all"``: every GPU of the node.
    ``live``: draw a live plotly widget (default: when running in a Jupyter kernel); ``"offscreen"``
    does all of a live plot's work without displaying it (to measure what the live plot costs).
    ``backend``/``handles``: a stand-in for ``pynvml`` and its device handles (tests).
    ``energy_poll_s``: how often a second thread reads each board's energy counter to time its steps (10 ms;
    None: not at all, and a short phase's energy comes from the samples alone: :mod:`~helpers.monitor.energy`).
    """

    def __init__(
        self,
        devices: list[int] | str | None = None,
        *,
        period_s: float = 0.25,
        live: bool | str | None = None,
        window_s: float = 120.0,
        refresh_hz: float = 4.0,
        pcie: bool = True,
        gpm: bool | None = None,
        allocator: bool = True,
        backend: Any = None,
        handles: list[Any] | None = None,
        title: str | None = None,
        energy_poll_s: float | None = POLL_S,
    ) -> None:
        if not (isinstance(period_s, (int, float)) and period_s > 0):
            raise ValueError(f"period_s={period_s!r}: use a positive number of seconds (0.25 is the default).")
        if not refresh_hz > 0:
            raise ValueError(f"refresh_hz={refresh_hz!r}: use a positive rate (4 redraws a second is the default).")
        self.period_s = float(period_s)
        self.window_s = window_s
        self.refresh_interval_s = 1.0 / refresh_hz
        self._lock = threading.RLock()
        self._stop_evt = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.perf_counter()
        self._t0_wall = time.time()  # the same moment on the wall clock: phases other processes report (add_phase)
        self._started = False
        self._readers, self.devices, self.source = self._make_readers(devices, backend, handles, pcie, gpm)
        # the host's CPU beside the GPU's figures: a GPU run fed by a busy CPU (decoding, resizing, launching)
        # shows the CPU near 100% while the GPU waits
        self._host = HostReader() if self.source == "nvml" else None
        self._allocator = allocator and self.source == "nvml" and backend is None
        self.record = MonitorRecord(source=self.source, devices=list(self.devices), period_s=self.period_s)
        self.title = title or default_title(self.record)  # by what it watches: "GPU monitor", or the CPU's
        self._open_phases: list[dict[str, Any]] = []
        self._last_step_t: float | None = None
        self._pending: list[tuple[dict[str, Any], Any]] = []  # (step row, its CUDA event) until a sync times them
        self._view = None
        self._live = live
        self._exporters: list[Any] = []
        # the board's energy counter moves in steps about 100 ms apart: a second thread times each step, so a
        # phase of a second or less gets its joules from the counter itself (:mod:`~helpers.monitor.energy`)
        self._energy = EnergyPoller(self._readers if self.source == "nvml" and energy_poll_s else [], self._now,
                                    period_s=energy_poll_s or POLL_S)

    # -- set-up -------------------------------------------------------------------------------
    @staticmethod
    def _make_readers(devices, backend, handles, pcie, gpm):
        if backend is not None:
            devices = devices if devices is not None else list(range(len(handles or [None])))
            handles = handles or [None] * len(devices)
            readers = [NvmlReader(backend, h, gpu=d, gpm=gpm if gpm is not None else False, pcie=pcie)
                       for d, h in zip(devices, handles)]
            return readers, devices, "nvml"
        import torch

        nv = nvml.load()  # prints once why, if unavailable
        if nv is not None and torch.cuda.is_available():
            if devices == "all":  # every GPU of the node, one set of lines each (a DDP run's ranks)
                devices = list(range(torch.cuda.device_count()))
            devices = devices if devices is not None else [torch.cuda.current_device()]
            found = [(d, nvml.handle_for_cuda_device(d)) for d in devices]
            if all(h is not None for _, h in found):
                return [NvmlReader(nv, h, gpu=d, gpm=gpm, pcie=pcie) for d, h in found], devices, "nvml"
        return [HostReader()], [], "host"

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "Monitor":
        """Start sampling (and the live plot). Starting a running monitor does nothing."""
        with self._lock:
            if self.running:
                return self
            if not self._started:
                self._t0, self._t0_wall = time.perf_counter(), time.time()
                self._started = True
            self._stop_evt.clear()
            self._sample()  # one sample now, so even a short block has data
            self._thread = threading.Thread(target=self._loop, name="gpu-monitor", daemon=True)
            self._thread.start()
            self._energy.start()
            _running.add(self)
        if self._want_live():
            self._view = LiveView(self)
            self._view.show(display_widget=self._live != "offscreen")
        return self

    def __repr__(self) -> str:
        where = f"GPU {', '.join(map(str, self.devices))}" if self.source == "nvml" else "host"
        state = "running" if self.running else "stopped"
        return (f"Monitor({where}, every {self.period_s * 1e3:.0f} ms, {state}, {len(self.record.samples)} samples, "
                f"{len(self.record.steps)} steps)")

    def stop(self) -> None:
        """Stop sampling, close open phases, finish the plot. Safe to call twice, or before start."""
        thread = self._thread
        self._stop_evt.set()
        self._energy.stop()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10 * self.period_s + 2)
        with self._lock:
            was_running = self._thread is not None
            self._thread = None
            _running.discard(self)
            now = self._now()
            for ph in self._open_phases:
                ph["end_s"] = now
            self._open_phases.clear()
            self._pending.clear()  # never synchronised: those steps keep their host times
        if was_running:
            self._sample()  # a last sample at the end of the block
            if self._view is not None and self._live != "offscreen":
                self._view.finish()
            self._view = None  # a restart draws a new live plot where it is started

    def close(self) -> None:
        """Stop and release NVML/GPM resources (the monitor cannot be restarted after)."""
        self.stop()
        for r in self._readers:
            r.close()
        for e in self._exporters:
            e.close()

    def __enter__(self) -> "Monitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- sampling -----------------------------------------------------------------------------
    def _now(self) -> float:
        return time.perf_counter() - self._t0

    def _loop(self) -> None:
        while not self._stop_evt.wait(self.period_s):
            self._sample()
            view = self._view  # read once: stop() may clear it meanwhile
            if view is not None and view.thread_refresh:
                view.maybe_refresh()

    def _sample(self) -> None:
        t = self._now()
        rows = []
        host: dict[str, float] = {}
        if self._host is not None:
            try:
                host = self._host.read()  # once per sample, beside each GPU's row
            except Exception:
                host = {}
        for r in self._readers:
            try:
                values = r.read()
            except Exception:
                continue  # a failed read skips one sample; it must never kill the thread
            row = {"t_s": t, "gpu": getattr(r, "gpu", None), **values, **host}
            if self._allocator:
                row.update(self._allocator_gib(row["gpu"]))
            rows.append(row)
        with self._lock:
            self.record.samples.extend(rows)
        for e in self._exporters:
            for row in rows:
                e.on_sample(row)

    @staticmethod
    def _allocator_gib(device: int | None) -> dict[str, float]:
        import torch

        if device is None or not torch.cuda.is_available():
            return {}
        return {
            "alloc_gib": torch.cuda.memory_allocated(device) / 2**30,
            "reserved_gib": torch.cuda.memory_reserved(device) / 2**30,
        }

    # -- the training side --------------------------------------------------------------------
    def step(self, *, images: int, step_ms: float | None = None, done: Any = None) -> None:
        """Record one training step of ``images`` images (call it once per step, from any loop).

        Without ``step_ms`` the step time is the time since the previous call. ``done``: a CUDA event (made with
        ``enable_timing=True``) recorded after the step's work; the next :meth:`synchronized` then times the step
        by when the GPU reached that event (``t_done_s``), where ``t_s`` is when the host queued it.
        """
        now = self._now()
        if step_ms is None:
            step_ms = (now - self._last_step_t) * 1e3 if self._last_step_t is not None else None
        self._last_step_t = now
        row = {"t_s": now, "step": len(self.record.steps), "images": images, "step_ms": step_ms,
               "img_per_s": images / (step_ms / 1e3) if step_ms else None}
        with self._lock:
            self.record.steps.append(row)
            if done is not None:
                self._pending.append((row, done))
        for e in self._exporters:
            e.on_step(row)
        view = self._view
        if view is not None:
            view.maybe_refresh()  # from the main thread: works where thread output does not

    def synchronized(self) -> int:
        """Call right after the loop synchronised the GPU (``torch.cuda.synchronize()``): every step handed a
        ``done`` event since the last call is timed by when the GPU finished it, and the count is returned.

        An asynchronous loop queues steps well ahead of the GPU (under CUDA graphs, 0.45 s ahead at the end of 06's
        top rung on one H200), so the host's times start its throughput line high and end it early. No event's own
        time is on the host's clock; but a sync has just returned, so the last event completed now, and each
        earlier one the GPU's own elapsed time before it. This costs no synchronisation; an event not yet completed
        (no sync after all) leaves every step pending, on its host time until a later call.
        """
        now = self._now()  # first: the moment the sync returned, before the host work below
        with self._lock:
            pending = self._pending
            if not pending:
                return 0
            last = pending[-1][1]
            try:
                if not last.query():
                    return 0
                before_last_s = [ev.elapsed_time(last) / 1e3 for _row, ev in pending]
            except Exception:  # events of another device, or made without timing: those steps keep host times
                self._pending = []
                return 0
            for (row, _ev), ahead in zip(pending, before_last_s):
                # never before the host queued it, nor after now (the GPU's and host's clocks differ by ppm)
                row["t_done_s"] = min(max(now - ahead, row["t_s"]), now)
            self._pending = []
            return len(pending)

    def refresh(self) -> None:
        """Redraw the live plot now if it is due (at most ``refresh_hz``): call it from your own loop
        where output from background threads does not reach the notebook."""
        if self._view is not None:
            self._view.maybe_refresh()

    def on_train_step(self, rec, done: Any = None) -> None:
        """Adapter for ``train(..., on_step=mon.on_train_step)``; ``done``: the step's CUDA event (:meth:`step`)."""
        self.step(images=rec.images, step_ms=rec.step_ms, done=done)

    def add_phase(self, name: str, wall_start: float, wall_end: float) -> None:
        """Mark a phase that another process timed, from its wall-clock times (``time.time()`` there): the measured
        steps of a DDP launch's ranks, say, inside the launch's own phase."""
        if wall_end < wall_start:
            raise ValueError(f"phase {name!r} ends ({wall_end}) before it starts ({wall_start}).")
        with self._lock:
            self.record.phases.append({"name": str(name), "start_s": wall_start - self._t0_wall,
                                       "end_s": wall_end - self._t0_wall})

    def time_phase(self, name: str, seconds: float) -> None:
        """Give the latest phase called ``name`` the time its owner measured: the monitor's img/s over it is then
        its images over that time, the figure the owner prints (02 read 5,455 img/s in the monitor's line and
        5,456 in the run's a line below, one H200, 2026-11-29: the phase also held the time box's set-up and the
        monitor's own read-back, and a spot check the run leaves out)."""
        if not seconds > 0:
            raise ValueError(f"phase {name!r}: a measured time must be above zero, not {seconds!r}.")
        with self._lock:
            for ph in reversed(self.record.phases):
                if ph["name"] == str(name):
                    ph["timed_s"] = float(seconds)
                    return
        raise ValueError(f"no phase named {name!r} to time; phases seen: "
                         f"{sorted({p['name'] for p in self.record.phases})}")

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Mark a phase of the run (drawn as a shaded band): ``with mon.phase("data"): ...``."""
        ph = {"name": str(name), "start_s": self._now(), "end_s": None}
        with self._lock:
            self.record.phases.append(ph)
            self._open_phases.append(ph)
        try:
            yield
        finally:
            with self._lock:
                if ph["end_s"] is None:
                    ph["end_s"] = self._now()
                if ph in self._open_phases:
                    self._open_phases.remove(ph)

    # -- results ------------------------------------------------------------------------------
    def snapshot(self) -> MonitorRecord:
        """A copy of the record so far (safe to read while sampling goes on)."""
        with self._lock:
            return MonitorRecord(
                source=self.record.source, devices=list(self.record.devices), period_s=self.period_s,
                samples=list(self.record.samples), steps=list(self.record.steps),
                phases=[dict(p) for p in self.record.phases], meta=dict(self.record.meta),
                energy=self._energy.snapshot(),
            )

    def rows_since(self, n_samples: int, n_steps: int) -> tuple[list[dict], list[dict], list[dict]]:
        """Samples and steps added after the first ``n_samples``/``n_steps``, and all phases (for live redraws)."""
        with self._lock:
            return (self.record.samples[n_samples:], self.record.steps[n_steps:],
                    [dict(p) for p in self.record.phases])

    def samples_frame(self):
        return self.snapshot().frames()[0]

    def steps_frame(self):
        return self.snapshot().frames()[1]

    def phases_frame(self):
        return self.snapshot().frames()[2]

    @property
    def unsupported(self) -> tuple[str, ...]:
        out: list[str] = []
        for r in self._readers:
            out += [f for f in getattr(r, "unsupported", []) if f not in out]
        return tuple(out)

    def summary(self, *, phase: str | tuple[str, ...] | None = None) -> MonitorSummary:
        """Means over the run (or over the named phase's, or phases', time spans)."""
        return self.snapshot().summary(phase=phase, unsupported=self.unsupported)

    def summary_text(self) -> str:
        """The steady state (measured steps) beside the whole window, each labelled (:meth:`MonitorRecord.summary_text`)."""
        return self.snapshot().summary_text(unsupported=self.unsupported)

    # -- views and exports --------------------------------------------------------------------
    def _want_live(self) -> bool:
        if self._live is not None:
            return bool(self._live)
        return in_notebook()

    def figure(self, *, title: str | None = None):
        """A static plotly figure of the whole record (panels: utilisation, memory, power/clock, throughput)."""
        return build_figure(self.snapshot(), title=title or self.title, window_s=None)

    def save(self, name: str, *, directory: str | Path | None = None) -> Path:
        """Save the record to ``results/monitor/<name>.json`` (``results/local/monitor/`` at smoke scale)."""
        from .. import results

        directory = Path(directory) if directory is not None else results.scaled_dir("monitor")
        rec = self.snapshot()
        rec.meta.setdefault("name", name)
        return rec.save(directory / f"{name}.json")

    def serve_prometheus(self, port: int = 0) -> str:
        """Serve the latest readings at ``http://127.0.0.1:<port>/metrics``; ``port=0`` picks a free port.

        The endpoint stays up across ``stop()``/``start()``; ``close()`` shuts it down."""
        exp = PrometheusExporter(port=port)
        self._exporters.append(exp)
        return exp.url

    def write_tensorboard(self, log_dir: str | Path) -> Path:
        """Write the whole record as TensorBoard scalars (``tensorboard --logdir <log_dir>``)."""
        return write_tensorboard(self.snapshot(), log_dir)
