"""CUDA graphs: whether a function replays one, and how much faster than eager it runs.

    n = graph_launches(run, x)                                   # graph launches in one call of run(x)
    s = graph_speedup(lambda: model(x), lambda: run(x))          # GraphSpeedup, eager and replay interleaved
    s.speedup, s.low, s.high, s.separated                        # median ratio, its range over rounds, apart?

An eager forward of a small model is bound by the host: Python and the launch of every kernel. A replayed
graph is one launch, then the GPU's own time. So the ratio of the two depends on the host as much as on the
GPU, and the host's speed drifts (other processes, clocks). Timing eager and replay in alternating rounds puts
both under the same drift, and each round gives its own ratio: their median is the figure, their range its
spread.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable

import torch

from .. import env, timebox

__all__ = ["graph_launches", "GraphSpeedup", "graph_speedup"]


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


@dataclasses.dataclass(frozen=True)
class GraphSpeedup:
    """Eager calls and graph replays timed in alternating rounds of ``calls`` calls each."""

    eager_us: float  # median time per call, eager
    graph_us: float  # median time per call, replayed
    speedup: float  # the median of each round's eager / graph ratio
    low: float  # the lowest round's ratio
    high: float  # the highest
    rounds: int
    calls: int
    separated: bool  # every replayed round was faster than every eager round: no overlap in their spreads

    def __str__(self) -> str:
        return (f"{self.speedup:.1f}× faster than eager ({self.graph_us:.0f} µs vs {self.eager_us:.0f} µs per call; "
                f"{self.rounds} rounds of {self.calls} calls each way ranged {self.low:.1f}× to {self.high:.1f}×)")


def _round_us(fn: Callable[[], object], calls: int, dev: torch.device) -> float:
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize(dev)  # note: a sync point, so the host clock covers the GPU finishing the round
    return (time.perf_counter() - t0) * 1e6 / calls


def graph_speedup(eager: Callable[[], object], graphed: Callable[[], object], *, calls: int = 20, rounds: int = 15,
                  warmup: int = 5, device: torch.device | str | None = None) -> GraphSpeedup:
    """Time ``eager()`` against ``graphed()`` on a CUDA GPU, back to back in rounds of ``calls`` calls, the order
    flipped every round (eager first, then replay first) so that neither always runs on a warmer host.

    The rounds stop at ``rounds`` or at the ``timing_repeats`` time box, never below three.
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
    return GraphSpeedup(statistics.median(e_us), statistics.median(g_us), statistics.median(ratios), min(ratios),
                        max(ratios), len(ratios), calls, max(g_us) < min(e_us))
