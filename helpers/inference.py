"""Serving the network: latency percentiles and throughput against batch size, variant by variant.

Training cares about images per second; a server cares about how long one request waits. Each call below is
timed alone (CUDA events around it, then a sync, so no call hides behind the next one's launch), which is what a
request sees when the server answers it before taking the next::

    sweep = serve_sweep(ReferenceCNN(224), image_size=224, batches=(1, 4, 16, 64, 256))
    sweep.readable()              # p50, p99 and mean ms, img/s, error against fp32, per variant and batch
    sweep.p99_ms(batch=1)         # the lowest p99 at batch 1, and which variant gave it
    sweep.meeting(2.0)            # per variant: the largest batch whose p99 stays within 2 ms
    sweep.figure().show()         # p99 and img/s against batch, one line per variant

The variants: eager fp32 (the reference), eager bf16 (channels_last), then CUDA graphs (every launch of a call
recorded once and replayed as one) and ``torch.compile`` (fused kernels), alone and together. Where a variant
cannot run (no GPU for a CUDA graph) it is left out with the reason; without bf16 instructions (most CPUs) a
bf16 variant runs in fp32, named so, as the course's bf16 steps do there.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import statistics
import time
from typing import Callable

import torch
from torch import nn

from . import env, figure_check, tables, timebox
from .svg import PALETTE

__all__ = ["ServingVariant", "VARIANTS", "LatencyPoint", "ServingSweep", "serve_sweep", "percentile"]


@dataclasses.dataclass(frozen=True)
class ServingVariant:
    """One way to serve the network: its precision, whether it is compiled, whether each call is a graph replay."""

    name: str
    precision: str  # "fp32", "bf16" or "fp16" (half weights and activations, channels_last)
    compiled: bool = False
    cuda_graph: bool = False

    def on(self, device: torch.device) -> "ServingVariant | str":
        """This variant as it runs on ``device``, or why it cannot run there.

        Without bf16 arithmetic (a CPU without AVX-512 bf16), a bf16 variant runs in fp32, as the course's bf16
        steps do there, and is named so (``compiled fp32``).
        """
        if self.cuda_graph and device.type != "cuda":
            return "a CUDA graph needs a GPU"
        if self.precision != "fp32" and (runs := env.resolve_dtype(self.precision, device)) != self.precision:
            return dataclasses.replace(self, name=self.name.replace(self.precision, runs), precision=runs)
        return self


VARIANTS = (
    ServingVariant("eager fp32", "fp32"),
    ServingVariant("eager bf16", "bf16"),
    ServingVariant("eager bf16 + CUDA graph", "bf16", cuda_graph=True),
    ServingVariant("compiled bf16", "bf16", compiled=True),
    ServingVariant("compiled bf16 + CUDA graph", "bf16", compiled=True, cuda_graph=True),
)

#: The largest error against eager fp32's logits (relative to their largest magnitude) each precision may show.
#: fp32 convolutions run in TF32 on a recent GPU (PyTorch's default for cuDNN), hence 1%, not 1e-6.
TOLERANCE = {"fp32": 1e-2, "bf16": 5e-2, "fp16": 5e-2}
_HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}  # a GPU without bf16 (a T4) serves the bf16 variants in fp16


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q ≤ 100): a value that was measured, never interpolated."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"q={q}: a percentile is in (0, 100]")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclasses.dataclass(frozen=True)
class LatencyPoint:
    """One variant at one batch size: per-call latencies in ms, the throughput they give, its error vs fp32."""

    variant: str
    precision: str
    batch: int
    p50_ms: float
    p99_ms: float
    mean_ms: float
    samples: int
    max_rel_err: float  # against eager fp32's logits on the same images

    @property
    def img_per_s(self) -> float:
        """Images served per second, one call after another: the batch over the mean call *as printed* (three
        figures), so the table's "img/s (batch ÷ mean)" and every sentence that quotes it are the reader's division
        of the figures beside them (06 read 40,106 beside 64 images and 1.60 ms, which give 40,000). Three figures
        move it by at most 0.5%."""
        return 1e3 * tables.rate_as_shown(self.batch, self.mean_ms)

    @property
    def correct(self) -> bool:
        """Whether its logits agree with eager fp32's within what its precision allows (:data:`TOLERANCE`)."""
        return self.max_rel_err <= TOLERANCE[self.precision]


@dataclasses.dataclass(frozen=True)
class ServingSweep:
    """Every variant at every batch size, measured in one process; ``skipped``: variant → why it did not run."""

    points: tuple[LatencyPoint, ...]
    skipped: dict[str, str]
    image_size: int
    device: str

    def table(self) -> "pandas.DataFrame":  # noqa: F821
        """Full precision, one row per (variant, batch)."""
        import pandas as pd

        return pd.DataFrame([{**dataclasses.asdict(p), "img_per_s": p.img_per_s} for p in self.points])

    def readable(self) -> tables.Table:
        """The table as a person reads it: ms to three significant figures, img/s as whole numbers."""
        import pandas as pd

        # img/s is the batch over the mean call, so the mean sits beside it (beside p50 alone it read 5,725 where
        # 4 images ÷ 0.744 ms is 5,376)
        df = pd.DataFrame([{"variant": p.variant, "batch": p.batch, "p50 ms": p.p50_ms, "p99 ms": p.p99_ms,
                            "mean ms": p.mean_ms, "calls": p.samples, "img/s (batch ÷ mean)": p.img_per_s,
                            "error vs fp32 %": 100 * p.max_rel_err}
                           for p in self.points])
        t = tables.readable(df, formats={"calls": "whole"})
        fewest = min((p.samples for p in self.points), default=0)
        note = (f"calls: the calls timed at that point (at least {fewest:,}; more where calls are short, within "
                f"{MORE_WITHIN_S:g} s): the p99 is the time only 1 call in 100 took longer than, so it rests on the "
                "slowest hundredth of them")
        return dataclasses.replace(t, notes=(*t.notes, note, *self.slower_when_smaller()))

    def slower_when_smaller(self) -> list[str]:
        """Where a variant's median call took longer at a smaller batch than at a larger one, why, one line per
        variant: a smaller batch gives the GPU less arithmetic, so the extra time is something else: the host's work
        per call (its Python, a compiled function's guards and wrapper, the launches), or a GPU that short calls
        leave idle between them running slower. 06's compiled bf16 read a p50 of 0.854 ms at batch 1 against
        0.606 ms at batch 16 (one H200, 2026-11-29); an earlier run read 0.415 ms at batch 1."""
        said = []
        for variant in dict.fromkeys(p.variant for p in self.points):
            pts = sorted(self.of(variant), key=lambda p: p.batch)
            worst = max(((a, b) for i, a in enumerate(pts) for b in pts[i + 1:] if a.p50_ms > 1.1 * b.p50_ms),
                        key=lambda ab: ab[0].p50_ms / ab[1].p50_ms, default=None)
            if worst is not None:
                a, b = worst
                said.append(f"{variant}: batch {a.batch} took longer than batch {b.batch} (p50 {a.p50_ms:.3g} ms "
                            f"against {b.p50_ms:.3g} ms): less arithmetic, more time, so the extra is something "
                            "else: the host's work per call (its Python, a compiled function's guards, the launches) "
                            "or a GPU that short calls leave idle running slower, not measured apart here")
        return said

    def p99_basis(self) -> str:
        """How many slow calls the p99s rest on, from the calls each point took (the points with the fewest say the
        least): ``8 of the 25 points took 200 calls, so each of their p99s is passed by only 2 calls; the others
        took more, up to 2,000``. "" with no points."""
        if not self.points:
            return ""
        counts = [p.samples for p in self.points]
        fewest, most = min(counts), max(counts)
        above = fewest - math.ceil(0.99 * fewest)  # the calls slower than a p99 of `fewest` (percentile's rank)
        calls = f"{above} call{'s' if above != 1 else ''}"
        if fewest == most:
            return f"every point took {fewest:,} calls, so each p99 is passed by only {calls}"
        n = counts.count(fewest)
        who = (f"{n} of the {len(counts)} points took {fewest:,} calls, so each of their p99s is passed by only "
               f"{calls}" if n > 1 else f"1 of the {len(counts)} points took {fewest:,} calls, so its p99 is passed "
               f"by only {calls}")
        return f"{who}; the others took more, up to {most:,}"

    @property
    def wrong(self) -> list[LatencyPoint]:
        """Points whose logits are further from eager fp32's than their precision allows (none, if it works)."""
        return [p for p in self.points if not p.correct]

    def of(self, variant: str) -> list[LatencyPoint]:
        """The points of ``variant`` as it ran here: a bf16 variant on a GPU without bf16 ran as fp16 (on a CPU
        without it as fp32) and is found under either name."""
        pts = [p for p in self.points if p.variant == variant]
        for runs_as in ("fp16", "fp32"):
            if not pts and "bf16" in variant:
                pts = [p for p in self.points if p.variant == variant.replace("bf16", runs_as)]
        if not pts:
            raise KeyError(f"no variant {variant!r} was measured; measured: {sorted({p.variant for p in self.points})}"
                           + (f"; left out: {self.skipped}" if self.skipped else ""))
        return pts

    def p99_ms(self, batch: int = 1) -> LatencyPoint:
        """The variant with the lowest p99 at ``batch``."""
        pts = [p for p in self.points if p.batch == batch]
        if not pts:
            raise KeyError(f"batch {batch} was not measured; batches: {sorted({p.batch for p in self.points})}")
        return min(pts, key=lambda p: p.p99_ms)

    def best_throughput(self) -> LatencyPoint:
        return max(self.points, key=lambda p: p.img_per_s)

    def meeting(self, p99_target_ms: float) -> dict[str, LatencyPoint | None]:
        """Per variant: the largest batch whose p99 is within the target (None: not even batch 1)."""
        out: dict[str, LatencyPoint | None] = {}
        for name in dict.fromkeys(p.variant for p in self.points):
            ok = [p for p in self.of(name) if p.p99_ms <= p99_target_ms]
            out[name] = max(ok, key=lambda p: p.batch) if ok else None
        return out

    def figure(self, *, p99_target_ms: float | None = None):
        """p99 latency and img/s against batch size (log axes), one line per variant."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        # panels 16% of the width apart: at plotly's 10%, the right panel's tick labels and "img/s" title reached
        # back to the left panel's edge, where the target's dotted line ends, and the line ran into the title
        fig = make_subplots(rows=1, cols=2, subplot_titles=("p99 latency per call", "throughput"),
                            horizontal_spacing=0.16)
        for i, name in enumerate(dict.fromkeys(p.variant for p in self.points)):
            pts = self.of(name)
            color = PALETTE[i % len(PALETTE)]
            xs = [p.batch for p in pts]
            fig.add_trace(go.Scatter(x=xs, y=[p.p99_ms for p in pts], name=name, legendgroup=name,
                                     line=dict(color=color)), row=1, col=1)
            fig.add_trace(go.Scatter(x=xs, y=[p.img_per_s for p in pts], name=name, legendgroup=name,
                                     showlegend=False, line=dict(color=color)), row=1, col=2)
        batches = sorted({p.batch for p in self.points})
        # ticked at the batch sizes measured, upright: 1-2-5 ticks over three decades crowd a half-width panel
        fig.update_xaxes(type="log", title_text="batch size", tickmode="array", tickvals=batches,
                         ticktext=[str(b) for b in batches], tickangle=0)
        # room above the target for its label, under the panel's title
        for col, values in ((1, [p.p99_ms for p in self.points] + ([p99_target_ms * 1.6] if p99_target_ms else [])),
                            (2, [p.img_per_s for p in self.points])):
            values = [v for v in values if v and v > 0]
            if values:  # framed by labelled ticks: the highest point has a tick above it (36k under a "50k")
                lo, hi = _enclosing_ticks(min(values), max(values))
                fig.update_yaxes(type="log", range=[math.log10(lo), math.log10(hi)], row=1, col=col)
        fig.update_yaxes(type="log", title_text="ms", row=1, col=1)
        fig.update_yaxes(type="log", title_text="img/s", row=1, col=2)
        figure_check.readable_log_axes(fig)  # 1, 2, 5, 10 ... 10k, not plotly's bare "2" and "5"
        fig.update_xaxes(tickmode="array", tickvals=batches, ticktext=[str(b) for b in batches])
        if p99_target_ms is not None:  # its label at the target's log10: on a log axis a label's y is an exponent;
            # at the panel's left, where batch 1's calls sit far below any target (its right edge meets the next
            # panel's axis title)
            figure_check.log_marker(fig, y=p99_target_ms, text=f"target {p99_target_ms:g} ms", row=1, col=1)
            fig.layout.annotations[-1].update(x=0, xanchor="left")
        fig.update_layout(title=f"Serving the reference network at {self.image_size}²<br><sup>{self.device}</sup>",
                          height=480, legend=dict(orientation="h", y=-0.22), margin=dict(b=110))
        return fig


def _enclosing_ticks(lo: float, hi: float) -> tuple[float, float]:
    """The 1-2-5 values just at or below ``lo`` and at or above ``hi``: a log axis that starts and ends on a tick."""
    def steps(e: int) -> list[float]:
        return [m * 10.0 ** e for m in (1, 2, 5)]

    below = max(v for e in range(math.floor(math.log10(lo)) - 1, math.floor(math.log10(lo)) + 1)
                for v in steps(e) if v <= lo * (1 + 1e-9))
    above = min(v for e in range(math.floor(math.log10(hi)), math.floor(math.log10(hi)) + 2)
                for v in steps(e) if v >= hi * (1 - 1e-9))
    return below, above


def _prepare(model: nn.Module, variant: ServingVariant, device: torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
    m = copy.deepcopy(model).to(device).eval()
    if variant.precision in _HALF:
        m = m.to(dtype=_HALF[variant.precision], memory_format=torch.channels_last)
    if variant.compiled:
        return torch.compile(m, backend=env.compile_backend(device))
    return m


def _graphed(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """``fn`` on ``x`` recorded as one CUDA graph: each call replays every kernel of it with one launch.
    The graph reads ``x``'s memory: a server copies each request into it (``static.copy_(request)``)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as graph capture asks (cuDNN picks its kernels)
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(x)

    def replay() -> torch.Tensor:
        graph.replay()
        return out

    return replay


#: A point whose ``samples`` calls ended sooner than this keeps calling until it is spent (up to ``MOST_SAMPLES`` ×
#: ``samples`` calls): a p99 of 200 calls rests on the two slowest, and short calls can afford many more.
MORE_WITHIN_S = 0.5
MOST_SAMPLES = 10


def _time_calls(call: Callable[[], torch.Tensor], device: torch.device, samples: int, warmup: int,
                more_within_s: float = MORE_WITHIN_S) -> list[float]:
    """The ms of each call: at least ``samples``, more while the point has taken less than ``more_within_s``."""
    for _ in range(warmup):
        call()
    times: list[float] = []
    began = time.perf_counter()

    def more() -> bool:
        return len(times) < samples or (len(times) < MOST_SAMPLES * samples
                                        and time.perf_counter() - began < more_within_s)

    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        while more():
            start.record()
            call()
            end.record()
            end.synchronize()  # the request is answered before the next one starts: no call hides another's time
            times.append(start.elapsed_time(end))
    else:
        while more():
            t0 = time.perf_counter()
            call()
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def serve_sweep(model: nn.Module, *, image_size: int, batches: tuple[int, ...] = (1, 4, 16, 64, 256),
                variants: tuple[ServingVariant, ...] = VARIANTS, samples: int = 200, warmup: int = 10,
                device: torch.device | str | None = None, seed: int = 0,
                on_point: Callable[[LatencyPoint], None] | None = None) -> ServingSweep:
    """Time ``model``'s forward pass for every variant at every batch size (at least ``samples`` calls each, after
    ``warmup``; more, up to ten times as many, while a point has taken less than :data:`MORE_WITHIN_S`), and check each variant's logits against eager fp32's on the same images.

    ``model`` is copied for each precision (it is not changed). The compiled variants start from a reset compiler
    (``torch._dynamo.reset()``) and share one compiled module, compiled twice: once for batch 1, once for every
    other batch (dynamic).
    Raises ``ValueError`` for a batch below 1 or too few samples for a p99 (fewer than 100).
    """
    if not batches or min(batches) < 1:
        raise ValueError(f"batches={batches}: give at least one batch size, each 1 or more.")
    if samples < 100:
        raise ValueError(f"samples={samples}: a p99 needs at least 100 calls per point (one in a hundred is the p99).")
    dev = torch.device(device) if device is not None else env.device()
    if variants[0].precision != "fp32" or variants[0].compiled or variants[0].cuda_graph:
        raise ValueError(f"the first variant is the reference every other's error is measured against: make it "
                         f"eager fp32 (got {variants[0]}).")
    gen = torch.Generator().manual_seed(seed)
    inputs = {b: torch.randn(b, 3, image_size, image_size, generator=gen).to(dev) for b in sorted(set(batches))}
    skipped: dict[str, str] = {}
    runs: list[ServingVariant] = []
    for v in variants:
        here = v.on(dev)
        if isinstance(here, str):
            skipped[v.name] = here
        elif any(r.name == here.name for r in runs):
            skipped[v.name] = f"no {v.precision} arithmetic here: it would run as {here.name}, measured already"
        else:
            runs.append(here)
    reference: dict[int, torch.Tensor] = {}
    points: list[LatencyPoint] = []
    if any(v.compiled for v in variants):
        torch._dynamo.reset()  # compile counts and graphs start from zero, whatever ran before
    # Batch by batch, smallest first, every variant at each: when the box ends the sweep (a slow GPU: a T4's
    # batch 256 takes tens of ms a call), the largest batches are left out of every line alike.
    box = timebox.window("serving_sweep", planned=len(inputs), unit="batch sizes",
                         left_out="the larger batch sizes were not served")
    with torch.no_grad():
        prepared: dict[tuple[str, bool], Callable[[torch.Tensor], torch.Tensor]] = {}
        last: tuple[int, float] | None = None  # the last batch size served, and its seconds
        for b, x in inputs.items():
            # a batch's calls take about batch-proportional time: cut before one that would end past the box
            if not box.more(next_s=last[1] * b / last[0] if last else 0.0):
                left = [str(k) for k in inputs if k >= b]
                skipped[f"batch {', '.join(left)}"] = (f"the time box 'serving_sweep' ({box.seconds:.3g} s) "
                                                       "ended the sweep")
                break
            box.tick()
            t_batch, extra_s = time.perf_counter(), 0.0
            for v in runs:
                # a CUDA graph variant records the same module its plain twin runs (one compile serves both)
                key = (v.precision, v.compiled)
                if key not in prepared:
                    prepared[key] = _prepare(model, v, dev)
                fn = prepared[key]
                fmt = torch.channels_last if v.precision in _HALF else torch.contiguous_format
                xv = x.to(dtype=_HALF.get(v.precision, torch.float32)).contiguous(memory_format=fmt)
                call = _graphed(fn, xv) if v.cuda_graph else (lambda fn=fn, xv=xv: fn(xv))
                out = call().float()
                ref = reference.setdefault(b, out.clone())  # the first variant, eager fp32, is the reference
                err = float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-12))
                times = _time_calls(call, dev, samples, warmup)
                # the calls past `samples` were bought with spare time: the next batch's forecast leaves them out
                extra_s += (len(times) - samples) * statistics.fmean(times) / 1e3
                p = LatencyPoint(variant=v.name, precision=v.precision, batch=b, p50_ms=statistics.median(times),
                                 p99_ms=percentile(times, 99), mean_ms=statistics.fmean(times), samples=len(times),
                                 max_rel_err=err)
                points.append(p)
                if on_point is not None:
                    on_point(p)
            last = (b, time.perf_counter() - t_batch - extra_s)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    points.sort(key=lambda p: [v.name for v in runs].index(p.variant))  # variant by variant, as the table reads
    return ServingSweep(points=tuple(points), skipped=skipped, image_size=image_size,
                        device=env.device_label(torch.cuda.get_device_name(dev)) if dev.type == "cuda" else env.cpu_model())
