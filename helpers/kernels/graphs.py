"""CUDA graphs: whether a function replays one, and how much faster than eager it runs.

    n = graph_launches(run, x)                                   # graph launches in one call of run(x)
    s = graph_speedup(lambda: model(x), lambda: run(x))          # GraphSpeedup, eager and replay interleaved
    s.speedup, s.low, s.high, s.separated                        # ratio of medians, rounds' range, apart?
    s.kernel_us, s.bound, s.gpu_busy_pct                         # the GPU's own time, the most a graph can give
    s.replay_kernels, s.gap_us                                   # kernels a replay runs, the GPU's time between them

An eager forward of a small model is bound by the host: Python and the launch of every kernel. A replayed
graph is one launch, then the GPU's own time. So the speed-up depends on the host as much as on the GPU: on one
H100 it differed by half of its value from one process to the next (scripts/graph_timing_spread.py). Timing
eager and replay in alternating rounds puts both under the same drift within a process, and each round gives
its own ratio: their median is the speed-up, their range its spread.

What means the same on every node is how close the replay comes to the GPU's own time: the kernels' durations
summed (the profiler's, from the eager calls: the same kernels a graph of them replays), over the replay's time
per call. That share (``gpu_busy_pct``) is what a graph is for; the speed-up is shown beside its bound, eager's
time over the kernels' (what removing every launch could give). A graph removes the host from between the kernels
but not the GPU's own start of each one: the replay's time the kernels do not fill, spread over its kernels
(``gap_us``), is that cost, about a microsecond each.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable

import torch

from .. import env, tables, timebox

__all__ = ["graph_launches", "kernel_us", "kernel_profile", "GraphSpeedup", "graph_speedup"]


def graph_launches(fn: Callable, *args) -> int:
    """How many CUDA graphs one call of ``fn(*args)`` launched: the ``cudaGraphLaunch`` calls the profiler records,
    or the ``torch.cuda.CUDAGraph.replay`` calls made, whichever saw more (0: the call ran no graph)."""
    from torch.profiler import ProfilerActivity, profile

    replays = 0
    original = torch.cuda.CUDAGraph.replay

    def counting_replay(self, *a, **k):
        nonlocal replays
        replays += 1
        return original(self, *a, **k)

    torch.cuda.synchronize()
    torch.cuda.CUDAGraph.replay = counting_replay
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn(*args)
            torch.cuda.synchronize()
    finally:
        torch.cuda.CUDAGraph.replay = original
    launched = sum(1 for e in prof.events() if "GraphLaunch" in e.name)  # the CUDA runtime's cudaGraphLaunch
    return max(launched, replays)


def kernel_us(fn: Callable, *args, calls: int = 20) -> float:
    """The GPU's own time per call of ``fn(*args)``: the durations of the kernels it ran (copies included), summed
    and averaged over ``calls`` calls, as the profiler records them; the gaps between kernels are not in it."""
    return kernel_profile(fn, *args, calls=calls)[0]


def kernel_profile(fn: Callable, *args, calls: int = 20) -> tuple[float, float]:
    """``(µs, kernels)`` per call of ``fn(*args)``: the GPU's own time (:func:`kernel_us`) and how many kernels,
    copies and memsets it ran, averaged over ``calls`` calls. A replayed graph's kernels are counted one by one."""
    from torch.profiler import ProfilerActivity, profile

    if calls < 1:
        raise ValueError(f"kernel_us needs calls ≥ 1 (got {calls}).")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        for _ in range(calls):
            fn(*args)
        torch.cuda.synchronize()
    gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    total = sum(e.device_time for e in gpu)
    if total <= 0:
        raise RuntimeError("the profiler saw no GPU kernels in these calls: nothing ran on the GPU to compare with.")
    return total / calls, len(gpu) / calls


@dataclasses.dataclass(frozen=True)
class GraphSpeedup:
    """Eager calls and graph replays timed in alternating rounds of ``calls`` calls each."""

    eager_us: float  # median time per call, eager
    graph_us: float  # median time per call, replayed
    speedup: float  # eager_us / graph_us: the ratio of the medians printed beside it
    low: float  # the lowest round's eager / graph ratio
    high: float  # the highest
    rounds: int
    calls: int
    separated: bool  # every replayed round was faster than every eager round: no overlap in their spreads
    kernel_us: float | None = None  # the GPU's own time per call: the eager call's kernels summed; None: not measured
    # the replay's own kernels (the eager call's, and whatever the replaying function adds: a copy of the input
    # in, of the output out), summed, and how many per call; None: not measured
    replay_kernel_us: float | None = None
    replay_kernels: float | None = None
    # the eager time per call of the round whose ratio was the highest; None: not kept
    high_eager_us: float | None = None

    @property
    def bound(self) -> float | None:
        """The most removing launches could give: eager's time over the GPU's own (None without ``kernel_us``), from
        the whole microseconds the sentence prints, so the figure recorded is the one a reader divides (03's sentence
        read 5.94× from 404 ÷ 68 µs and its targets table 5.98 from the unrounded times)."""
        return None if self.kernel_us is None else _shown(self.eager_us) / _shown(self.kernel_us)

    @property
    def gpu_busy_pct(self) -> float | None:
        """The share of a replay's time the GPU spent in kernels (the replay's own where measured, else the eager
        call's): 100 would be the GPU's own time exactly. From the whole microseconds printed, as :attr:`bound`."""
        busy = self.replay_kernel_us if self.replay_kernel_us is not None else self.kernel_us
        return None if busy is None else 100 * _shown(busy) / _shown(self.graph_us)

    @property
    def gap_us(self) -> float | None:
        """The replay's time its kernels did not fill, per kernel: what starting each kernel costs the GPU."""
        if self.replay_kernel_us is None or not self.replay_kernels:
            return None
        return max(0.0, self.graph_us - self.replay_kernel_us) / self.replay_kernels

    def __str__(self) -> str:
        # the speed-up as the reader's division of the medians printed: it had been the median of the rounds' own
        # ratios, "6.3× faster than eager (84 µs vs 520 µs per call …)" where 520 ÷ 84 is 6.2
        graph, eager = f"{self.graph_us:.0f}", f"{self.eager_us:.0f}"
        text = (f"{tables.times_as_shown(eager, graph, digits=2)} faster than eager ({graph} µs vs {eager} µs per call, "
                f"each the median of {self.rounds} rounds of {self.calls} calls; the rounds' own ratios ranged "
                f"{self.low:.1f}× to {self.high:.1f}×)")
        if self.kernel_us is None:
            return text
        # the bound as the reader's division of the microseconds printed (it read "561 µs … 68 µs … the bound is
        # 8.2×" where 561 ÷ 68 is 8.25, and 03's table of bounds printed 8.25)
        kernels = f"{self.kernel_us:.0f}"
        text += (f"; the eager call's kernels take {kernels} µs on the GPU, so the bound is "
                 f"{tables.times_as_shown(eager, kernels)} ({eager} ÷ {kernels} µs)")
        if (self.high_eager_us is not None and self.high_eager_us > self.eager_us
                and round(self.high, 1) > round(self.bound, 2)):
            # 03 read "ratios ranged 4.0× to 5.7×" beside "the bound is 5.14×": the bound divides the median eager
            # time, and the round above it had slower eager calls, so more host time for a graph to remove
            slow = f"{self.high_eager_us:.0f}"
            text += (f" for the medians; the round at {self.high:.1f}× passed it because its eager calls ran slower, "
                     f"{slow} µs each, and its own bound was {tables.times_as_shown(slow, kernels)}")
        if self.gap_us is None:
            return text + f" and the replay keeps the GPU busy {self.gpu_busy_pct:.0f}% of its time"
        # the share and the rest from the microseconds as printed: "82 µs … 72 µs … busy 89% … the other 9 µs" did
        # not add up for a reader (72 ÷ 82 is 88%, 82 − 72 is 10)
        whole, busy = tables.as_shown(f"{self.graph_us:.0f}"), tables.as_shown(f"{self.replay_kernel_us:.0f}")
        return text + (f". The replay runs those kernels and its copies of the input in and the output out: "
                       f"{self.replay_kernels:.0f} kernels, {busy:.0f} µs; they keep the GPU busy "
                       f"{100 * busy / max(whole, 1.0):.0f}% of its time, "
                       f"and the other {whole - busy:.0f} µs is {(whole - busy) / self.replay_kernels:.1f} µs "
                       "between one kernel and the next, which a graph shortens but cannot remove")


def _shown(us: float) -> float:
    """Microseconds as the sentences print them, whole; a time under half a microsecond keeps its own value (no
    division by a printed 0)."""
    return float(round(us)) if us >= 0.5 else us


def _round_us(fn: Callable[[], object], calls: int, dev: torch.device) -> float:
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize(dev)  # note: a sync point, so the host clock covers the GPU finishing the round
    return (time.perf_counter() - t0) * 1e6 / calls


def graph_speedup(eager: Callable[[], object], graphed: Callable[[], object], *, calls: int = 20, rounds: int = 15,
                  warmup: int = 5, device: torch.device | str | None = None, kernels: bool = True) -> GraphSpeedup:
    """Time ``eager()`` against ``graphed()`` on a CUDA GPU, back to back in rounds of ``calls`` calls, the order
    flipped every round (eager first, then replay first) so that neither always runs on a warmer host.

    The rounds stop at ``rounds`` or at the ``timing_repeats`` time box, never below three. ``kernels``: also
    profile the eager calls for the GPU's own time (:func:`kernel_us`: the kernels a graph of them replays), which
    gives ``bound`` and ``gpu_busy_pct``.
    """
    if calls < 1 or rounds < 1 or warmup < 0:
        raise ValueError(f"graph_speedup needs calls ≥ 1, rounds ≥ 1 and warmup ≥ 0 (got {calls}, {rounds}, {warmup}).")
    dev = torch.device(device) if device is not None else env.device()
    if dev.type != "cuda":
        raise RuntimeError(f"CUDA graphs need a CUDA GPU; {dev} has none. Run this on a GPU node.")
    for _ in range(warmup):
        eager()
        graphed()
    win = timebox.window("timing_repeats", planned=rounds, minimum=min(3, rounds), keep_minimum=True, unit="rounds",
                         say="once")
    e_us: list[float] = []
    g_us: list[float] = []
    while win.more():
        if win.done % 2 == 0:
            e_us.append(_round_us(eager, calls, dev))
            g_us.append(_round_us(graphed, calls, dev))
        else:
            g_us.append(_round_us(graphed, calls, dev))
            e_us.append(_round_us(eager, calls, dev))
        win.tick()
    ratios = [e / g for e, g in zip(e_us, g_us)]
    high_eager = e_us[ratios.index(max(ratios))]
    own = kernel_profile(eager, calls=calls)[0] if kernels else None
    replay_us = replay_n = None
    if kernels:
        try:
            replay_us, replay_n = kernel_profile(graphed, calls=calls)
        except RuntimeError:  # a profiler that records no kernel inside a graph: the eager call's kernels stand in
            pass
    eager_us, graph_us = statistics.median(e_us), statistics.median(g_us)
    # the speed-up recorded as the sentence prints it: the ratio of the two medians' whole microseconds
    return GraphSpeedup(eager_us, graph_us, _shown(eager_us) / _shown(graph_us), min(ratios), max(ratios),
                        len(ratios), calls, max(g_us) < min(e_us), own, replay_us, replay_n, high_eager)
