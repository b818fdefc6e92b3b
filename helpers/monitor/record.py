"""What one monitored run saw, and its summary: plain data, saved as JSON, read by every other part of the monitor.

    rec = mon.snapshot()                   # a MonitorRecord: samples, steps, phases
    rec.summary(phase="measured")          # a MonitorSummary: means and peaks over that phase
    rec.save("run.json"); MonitorRecord.load("run.json")
    load_record("01_baseline")             # what 01_baseline saved with mon.save("01_baseline")
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from .energy import energy_between
from .telemetry import SLOWDOWN_BITS, decode_clock_reasons

__all__ = ["MonitorRecord", "MonitorSummary", "load_record", "rolling_img_per_s", "whole_run_window_s", "RollingRate",
           "ROLLING_S", "step_end_s"]


#: Fewer samples than this over a phase are too few for its means to be a steady state: 07's top rungs read "NVML
#: 100%" from 2 samples over 0.3 s, and said nothing of it (06 says how many samples its figures rest on).
FEW_SAMPLES = 5


@dataclasses.dataclass(frozen=True)
class MonitorSummary:
    """Means over a monitored run; None where the machine could not measure it."""

    source: str
    duration_s: float
    samples: int
    mean_util_pct: float | None  # NVML utilisation (GPU) or CPU utilisation (host)
    mean_sm_active_pct: float | None  # GPM, Hopper and newer
    mean_tensor_active_pct: float | None
    mean_dram_bw_pct: float | None
    # Two memory figures, never to be read as one: NVML's "used" is all the GPU memory in use (the CUDA
    # context, PyTorch's cached blocks, other processes), what nvidia-smi shows; PyTorch's "allocated" is
    # only the memory in live tensors. Both are sampled every period, so a short peak between samples is missed.
    peak_used_gib: float | None  # NVML used memory (GPU) or this process's resident memory (host)
    mem_total_gib: float | None
    peak_allocated_gib: float | None  # PyTorch's allocator, memory in tensors: the highest sample, not the exact peak
    mean_power_w: float | None
    slowdown_share: float | None  # share of busy samples with power or thermal clock slowdowns
    img_per_s: float | None  # images over the time between the first and last step
    steps: int
    unsupported: tuple[str, ...] = ()
    # the board's energy over the window (NVML's energy counter, last sample less the first), and per image over
    # the steps' span; over a measured phase, its mean power times its time, and that over all its images (so the
    # two divide into each other); None without the counter (before Volta, a CPU) or without steps
    energy_j: float | None = None
    j_per_image: float | None = None
    # what lowered the clocks in the busy samples that were slowed (NVML's clock-event reasons), most frequent first
    slowdown_reasons: tuple[str, ...] = ()
    # the host's CPU utilisation (all cores), on a GPU run too: a GPU waiting on a busy CPU shows here
    mean_host_cpu_pct: float | None = None

    def __str__(self) -> str:
        def pct(v):
            return "not measured" if v is None else f"{v:.0f}%"

        if self.source == "nvml":
            head = f"GPU utilisation (NVML) {pct(self.mean_util_pct)}, SM activity (GPM) {pct(self.mean_sm_active_pct)}"
        else:
            head = f"CPU utilisation {pct(self.mean_util_pct)} (no NVML: host telemetry)"
        if self.source == "nvml" and self.mean_host_cpu_pct is not None:
            head += f", host CPU {pct(self.mean_host_cpu_pct)}"
        thr = "" if self.img_per_s is None else f" | {self.img_per_s:,.0f} img/s"  # no steps counted: no cell
        few = (" (too few to read a steady state from: time more steps, or sample more often)"
               if self.samples < FEW_SAMPLES else "")
        # "across": the samples' window, first to last (warm-up included), not the steps the img/s is over: "651 img/s
        # | 14.1 s" had read as the run's time, where 01's timed steps took 14.7 s
        return f"{head} | {self.memory_text()}{thr} | {self.samples} samples across {self.duration_s:.1f} s{few}"

    def memory_text(self) -> str:
        """The memory figures, each named: ``GPU memory used (NVML) peak 5.53 GiB, PyTorch allocated 2.02 GiB at the
        highest sample``. The allocator's exact peak is the training summary's (``TrainResult.peak_allocated_gib``):
        a sample every 250 ms can miss the moment of the peak, so the two differ and must not share a name."""
        def gib(v):
            return "not measured" if v is None else f"{v:.2f} GiB"

        if self.source != "nvml":
            return f"process memory (RSS) peak {gib(self.peak_used_gib)}"
        alloc = ("PyTorch allocated not sampled" if self.peak_allocated_gib is None
                 else f"PyTorch allocated {gib(self.peak_allocated_gib)} at the highest sample")
        return f"GPU memory used (NVML) peak {gib(self.peak_used_gib)}, {alloc}"


#: The window a monitor's throughput line is averaged over, in seconds (see :func:`rolling_img_per_s`).
ROLLING_S = 1.0


def step_end_s(step: dict[str, Any]) -> float:
    """When a recorded step ended: when the GPU finished it (``t_done_s``, where the loop handed the monitor the
    step's CUDA event and synchronised: :meth:`~helpers.monitor.Monitor.synchronized`), else when the host queued it
    (``t_s``; on a CPU, or a synchronous loop, the two are one)."""
    done = step.get("t_done_s")
    return float(step["t_s"] if done is None else done)


def whole_run_window_s(steps: list[dict[str, Any]], window_s: float = ROLLING_S) -> float:
    """The window a whole run's throughput line is drawn with: ``window_s``, or a third of a run shorter than three
    windows (two significant figures, 0.05 s at least). 06's reference solution trains its images in about 1.4 s: over
    a 1 s window its line covered only its last 0.4 s; over 0.47 s it covers two thirds of the run."""
    if len(steps) < 2:
        return window_s
    span = step_end_s(steps[-1]) - step_end_s(steps[0])
    if span >= 3 * window_s:
        return window_s
    return float(f"{max(span / 3, 0.05):.2g}")


def rolling_img_per_s(steps: list[dict[str, Any]], window_s: float | None = None) -> tuple[list[float], list[float]]:
    """(t_s, img/s) at each step once ``window_s`` seconds have passed since the first: the images of the steps that
    ended in the last ``window_s`` seconds (at least the last step) over the wall time since the step before them.
    A run shorter than the window gets one point, at its last step: its images over its time::

        ts, ips = rolling_img_per_s(rec.steps)       # the monitor's throughput line

    Not a step's own ``images / step_ms``: where the loop times a step on the host, an asynchronous GPU step can
    return in a fraction of a millisecond, and its "rate" spikes far above anything the GPU can do (one H100's
    monitor showed spikes of millions of img/s beside a steady 20,000). Images over wall time cannot exceed
    what was really trained. Nor a rate over less than the window: a loader's workers fill their queue before the
    first step, and the first fraction of a second drains it far faster than they can refill it (02's tuned loader
    on an H100: 6,300 img/s for a moment, 4,000 after). ``window_s`` None: :func:`whole_run_window_s` of the run.

    Each step counts when it ended (:func:`step_end_s`): when the GPU finished it, where the record knows. By when
    the host queued them, the steps of an asynchronous loop arrive early and bunched: 06's top rung on one H200
    started its line at about 38,000 img/s beside a measured 21,867, and ended it 0.45 s before the GPU did."""
    rate = RollingRate(whole_run_window_s(steps) if window_s is None else window_s)
    ordered = sorted(steps, key=step_end_s)  # in order of their ends (one stream's events end in queue order)
    pts = [p for p in (rate.add(step_end_s(s), s.get("images") or 0) for s in ordered) if p is not None]
    if not pts and rate.so_far() is not None:
        pts = [rate.so_far()]
    return [t for t, _ in pts], [v for _, v in pts]


class RollingRate:
    """:func:`rolling_img_per_s` one step at a time (a live plot adds the steps since its last redraw)."""

    def __init__(self, window_s: float = ROLLING_S) -> None:
        self.window_s = float(window_s)
        self._t: list[float] = []
        self._cum: list[float] = []

    def add(self, t_s: float, images: float) -> tuple[float, float] | None:
        """The step that ended at ``t_s``: (t_s, img/s over the window), or None before a whole window has passed
        since the first step."""
        import bisect

        self._t.append(float(t_s))
        self._cum.append((self._cum[-1] if self._cum else 0.0) + float(images))
        i = len(self._t) - 1
        if self._t[i] - self._t[0] < self.window_s * (1 - 1e-9):
            return None
        j = min(max(bisect.bisect_right(self._t, self._t[i] - self.window_s) - 1, 0), i - 1)  # before the window
        if self._t[i] <= self._t[j]:
            return None
        return self._t[i], (self._cum[i] - self._cum[j]) / (self._t[i] - self._t[j])

    def so_far(self) -> tuple[float, float] | None:
        """(the last step's t_s, img/s since the first step): a run shorter than the window has only this."""
        if len(self._t) < 2 or self._t[-1] <= self._t[0]:
            return None
        return self._t[-1], (self._cum[-1] - self._cum[0]) / (self._t[-1] - self._t[0])


def _mean(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.fmean(vals) if vals else None


@dataclasses.dataclass
class MonitorRecord:
    """Everything one monitored run saw: plain lists of dicts, saved as JSON."""

    source: str  # "nvml" or "host"
    devices: list[int]
    period_s: float
    samples: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    phases: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    # each step of each board's energy counter, timed by the monitor's energy poller (:mod:`.energy`); a record
    # saved before it had none, and its energy comes from the samples
    energy: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def save(self, path: str | Path) -> Path:
        """Write the record as JSON (atomically: an interrupted save leaves the old file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(dataclasses.asdict(self), f)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "MonitorRecord":
        raw = json.loads(Path(path).read_text())
        return cls(**raw)

    def frames(self):
        """(samples, steps, phases) as pandas DataFrames."""
        import pandas as pd

        return pd.DataFrame(self.samples), pd.DataFrame(self.steps), pd.DataFrame(self.phases)

    def steady_phases(self) -> tuple[str, ...]:
        """The phases in steady state: the measured steps of a training run (``"measured"``, ``"baseline: measured"``:
        :meth:`helpers.train.Trainer.run` names them so), in the order they started."""
        return tuple(dict.fromkeys(p["name"] for p in self.phases if str(p["name"]).endswith("measured")))

    def summary_text(self, *, unsupported: tuple[str, ...] = ()) -> str:
        """The summary a person reads: over the steady-state phases, when the record has some, labelled, beside the
        whole window's utilisation (set-up, compilation and start-up included), labelled too."""
        whole = self.summary(unsupported=unsupported)
        steady = self.steady_phases()
        if not steady:
            return f"whole window: {whole}"
        s = self.summary(phase=steady, unsupported=unsupported)
        what = "GPU utilisation (NVML)" if whole.source == "nvml" else "CPU utilisation"
        sm = "" if whole.mean_sm_active_pct is None else f", SM activity (GPM) {whole.mean_sm_active_pct:.0f}%"
        util = "not measured" if whole.mean_util_pct is None else f"{whole.mean_util_pct:.0f}%"
        return (f"steady state (measured steps): {s}\n"
                f"whole window, set-up included: {what} {util}{sm} over {whole.duration_s:.1f} s")

    def summary(self, *, phase: str | tuple[str, ...] | None = None, unsupported: tuple[str, ...] = ()) -> MonitorSummary:
        """Means over the run (or over the time spans of the named phase, or phases)."""
        samples, steps = self.samples, self.steps
        if phase is not None:
            names = (phase,) if isinstance(phase, str) else tuple(phase)
            spans = [(p["start_s"], p["end_s"] or math.inf) for p in self.phases if p["name"] in names]
            if not spans:
                raise ValueError(f"no phase named {phase!r}; phases seen: {sorted({p['name'] for p in self.phases})}")
            inside = lambda t: any(a <= t <= b for a, b in spans)  # noqa: E731
            # a sample reads the interval since the one before it (NVML's utilisation and GPM's metrics are
            # averages over time): the first sample after a phase began mostly read the phase before (00's tiny
            # kernels read 32% utilisation with it, about 25% without, one H200, 2026-11-29). A phase keeps the
            # samples whose whole interval lies inside it; one shorter than an interval keeps those taken in it.
            # (the record's first sample has no interval before it in the record: it counts as the moment it was taken)
            since = [samples[i - 1]["t_s"] if i else samples[0]["t_s"] for i in range(len(samples))]
            covered = lambda t0, t: any(a - 1e-3 <= t0 and t <= b for a, b in spans)  # noqa: E731
            within = [s for s, t0 in zip(samples, since) if covered(t0, s["t_s"])]
            samples = within or [s for s in samples if inside(s["t_s"])]
            steps = [s for s in steps if inside(step_end_s(s))]
            closed = all(math.isfinite(b) for _a, b in spans)
        get = lambda key: [s.get(key) for s in samples]  # noqa: E731
        img_per_s, phase_s = None, 0.0
        if phase is not None and closed and steps:
            # every image of the phases over their time: a measured phase opens after a sync and closes after one,
            # as the Trainer's clock does. The steps' own times are when the host queued them: an asynchronous loop
            # queues its last steps well before the GPU runs them, and images over those times read 6% above what
            # the GPU trained (02, 5,006 against the step's own ceiling of 4,856 img/s, one H100, 2026-11-27)
            # where the phase's owner timed it (Monitor.time_phase), its time: the run's img/s, to the digit
            phase_s = sum(p.get("timed_s") or ((p["end_s"] or math.inf) - p["start_s"])
                          for p in self.phases if p["name"] in names)
            img_per_s = sum(s["images"] for s in steps) / phase_s if phase_s > 0 else None
        if self.source == "nvml":
            util, mem = get("util_pct"), get("mem_used_gib")
        else:
            util, mem = get("cpu_pct"), get("host_mem_gib")
        mem_vals = [m for m in mem if m is not None]
        alloc = [a for a in get("alloc_gib") if a is not None]
        busy = [s for s in samples if (s.get("util_pct") or 0) > 0 and s.get("clock_reasons") is not None]
        slow = [s for s in busy if int(s["clock_reasons"]) & SLOWDOWN_BITS]
        images = sum(s["images"] for s in steps[1:]) if len(steps) > 1 else 0
        span = step_end_s(steps[-1]) - step_end_s(steps[0]) if len(steps) > 1 else 0.0
        totals = [t for t in get("mem_total_gib") if t is not None]
        energy_j, j_per_image = _energy(samples, steps, images, span, self.energy)
        if img_per_s is not None and energy_j is not None:
            # a measured phase: the board's mean power over it times its time, over every image it trained, as its
            # img/s counts them; so the total and the per-image figure printed beside it divide into each other
            energy_j, j_per_image = _phase_energy(samples, phase_s, sum(s["images"] for s in steps),
                                                  self.energy, spans)
        counts: dict[str, int] = {}
        for s in slow:
            for name in decode_clock_reasons(int(s["clock_reasons"]) & SLOWDOWN_BITS):
                counts[name] = counts.get(name, 0) + 1
        return MonitorSummary(
            source=self.source,
            duration_s=(samples[-1]["t_s"] - samples[0]["t_s"]) if len(samples) > 1 else 0.0,
            samples=len(samples),
            mean_util_pct=_mean(util),
            mean_sm_active_pct=_mean(get("sm_active_pct")),
            mean_tensor_active_pct=_mean(get("tensor_active_pct")),
            mean_dram_bw_pct=_mean(get("dram_bw_pct")),
            peak_used_gib=max(mem_vals) if mem_vals else None,
            mem_total_gib=totals[-1] if totals else None,
            peak_allocated_gib=max(alloc) if alloc else None,
            mean_power_w=_mean(get("power_w")),
            slowdown_share=len(slow) / len(busy) if busy else None,
            img_per_s=img_per_s if img_per_s is not None else (images / span if span > 0 else None),
            steps=len(steps),
            unsupported=tuple(unsupported),
            energy_j=energy_j,
            j_per_image=j_per_image,
            slowdown_reasons=tuple(sorted(counts, key=lambda n: -counts[n])),
            mean_host_cpu_pct=_mean(get("cpu_pct")),
        )


def _energy_by_gpu(samples: list[dict[str, Any]]) -> dict[Any, list[tuple[float, float]]]:
    """Each board's (t_s, energy counter) samples, by GPU (a DDP run's ranks each have a board)."""
    by_gpu: dict[Any, list[tuple[float, float]]] = {}
    for s in samples:
        if s.get("energy_j") is not None:
            by_gpu.setdefault(s.get("gpu"), []).append((s["t_s"], s["energy_j"]))
    return by_gpu


def _timed_watts(updates: list[dict[str, Any]], gpu: Any, spans: list[tuple[float, float]]) -> float | None:
    """One board's mean power over ``spans`` from its counter's timed steps
    (:func:`~helpers.monitor.energy.energy_between`); None where the record has none timed near an end of a span."""
    joules = [energy_between(updates, gpu=gpu, start_s=a, end_s=b) for a, b in spans]
    if not spans or any(j is None for j in joules):
        return None
    return sum(joules) / sum(b - a for a, b in spans)


def _sampled_watts(e: list[tuple[float, float]]) -> float | None:
    """One board's mean power between the first and last of its (t_s, counter) samples; None with fewer than two.
    Two samples a quarter-second apart read a counter that moves every 100 ms: over 06's 0.9 s phases their mean
    power read up to a tenth high (741 W from a board capped at 700 W), so a record's timed steps come first."""
    return (e[-1][1] - e[0][1]) / (e[-1][0] - e[0][0]) if len(e) > 1 and e[-1][0] > e[0][0] else None


def _energy(samples: list[dict[str, Any]], steps: list[dict[str, Any]], images: int, span: float,
            updates: list[dict[str, Any]] = ()) -> tuple[float | None, float | None]:
    """(joules over the samples, joules per image over the steps' span) from each GPU's energy counter, summed over
    the GPUs (a DDP run's ranks each have a board); (None, None) without the counter. A board's power over the steps
    comes from its counter's timed steps where the record has them, else from its samples inside the steps' span."""
    by_gpu = _energy_by_gpu(samples)
    total = [e[-1][1] - e[0][1] for e in by_gpu.values() if len(e) > 1]
    watts = []
    if len(steps) > 1:
        a, b = step_end_s(steps[0]), step_end_s(steps[-1])
        for gpu, e in by_gpu.items():
            w = _timed_watts(updates, gpu, [(a, b)] if b > a else [])
            w = w if w is not None else _sampled_watts([(t, j) for t, j in e if a <= t <= b])
            if w is not None:
                watts.append(w)
    per_image = sum(watts) * span / images if watts and len(watts) == len(by_gpu) and images and span > 0 else None
    return (sum(total) if total else None), per_image


def _phase_energy(samples: list[dict[str, Any]], seconds: float, images: int, updates: list[dict[str, Any]] = (),
                  spans: list[tuple[float, float]] = ()) -> tuple[float | None, float | None]:
    """(joules, joules per image) over a measured phase of ``seconds`` that trained ``images``: each board's mean
    power over the phase's ``spans`` (from its counter's timed steps where the record has them, else from the
    phase's first and last samples), summed over the boards, times the phase's time; (None, None) where a board has
    neither."""
    by_gpu = _energy_by_gpu(samples)
    watts = []
    for gpu, e in by_gpu.items():
        w = _timed_watts(updates, gpu, list(spans))
        w = w if w is not None else _sampled_watts(e)
        if w is not None:
            watts.append(w)
    if not watts or len(watts) != len(by_gpu) or seconds <= 0:
        return None, None
    joules = sum(watts) * seconds
    return joules, (joules / images if images else None)


def load_record(name: str, *, directory: str | Path | None = None) -> MonitorRecord:
    """A record saved with ``mon.save(name)`` (from ``results/monitor/``, or ``results/local/monitor/`` at smoke scale)."""
    from .. import results

    directory = Path(directory) if directory is not None else results.scaled_dir("monitor")
    path = directory / f"{name}.json"
    if not path.exists():
        saved = sorted(p.stem for p in directory.glob("*.json")) if directory.is_dir() else []
        raise FileNotFoundError(f"no monitor record named {name!r} in {directory}; saved records: {saved or 'none'}. "
                                "Run the notebook that saves it first (e.g. 01_baseline saves '01_baseline').")
    return MonitorRecord.load(path)
