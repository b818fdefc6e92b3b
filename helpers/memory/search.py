"""The largest batch that fits, found by a search that survives running out of memory.

    probe = step_probe(lambda: ReferenceCNN(224), image_size=224, dtype=torch.bfloat16)
    found = largest_batch(probe, start=128, limit=8192)      # doubles until it fails, then bisects
    found.largest, found.table()                             # every trial: fits?, peak, img/s, why not
    search_figure([found_fp32, found_bf16]).show()

A trial that raises ``torch.OutOfMemoryError`` is caught; the memory it held is freed (gradients
dropped, Python's references collected, the allocator's cache emptied) and the search goes on.
With ``budget_gib`` a trial whose allocator peak exceeds the budget fails too: a memory budget is
the same question on a GPU you share. On a CPU there is no allocator peak: the probe estimates
the footprint (weights, gradients, optimizer state, activations kept for backward).
"""

from __future__ import annotations

import dataclasses
import gc
import time
from typing import Callable

import torch
from torch import nn

from .. import env, figure_check, timebox
from ..svg import PALETTE
from .anatomy import GIB, make_optimizer, optimizer_state_bytes, saved_activation_bytes

__all__ = ["Trial", "BatchSearch", "free_memory", "step_probe", "try_batch", "largest_batch", "search_figure"]

Probe = Callable[[int], tuple[float, float]]  # batch → (peak bytes, img/s)


@dataclasses.dataclass(frozen=True)
class Trial:
    batch: int
    fits: bool
    peak_gib: float | None
    img_per_s: float | None
    why: str = ""


@dataclasses.dataclass(frozen=True)
class BatchSearch:
    """All trials of one search, in the order they ran; ``largest`` is the largest batch that fitted."""

    label: str
    trials: tuple[Trial, ...]
    budget_gib: float | None
    cut: timebox.Cut | None = None  # set when the batch_search time box ended the search before its edge was found

    @property
    def edge_found(self) -> bool:
        """False when the time box stopped the search: ``largest`` is then only a batch that fits, not the edge."""
        return self.cut is None

    @property
    def largest(self) -> int | None:
        fits = [t.batch for t in self.trials if t.fits]
        return max(fits) if fits else None

    def table(self):
        import pandas as pd

        df = pd.DataFrame([dataclasses.asdict(t) for t in self.trials]).sort_values("batch").reset_index(drop=True)
        df.attrs["missing"] = {"peak_gib": "a batch that did not fit has no peak (why says what stopped it)",
                               "img_per_s": "a batch that did not fit trains nothing (why says what stopped it)"}
        return df


def free_memory() -> None:
    """Give back what a failed step held: collect Python's references, empty the allocator's cache."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def step_probe(make_model: Callable[[], nn.Module], *, image_size: int, dtype: torch.dtype | None = None,
               channels_last: bool = True, optimizer: str = "sgd", device: torch.device | str | None = None,
               timed_steps: int = 2) -> Probe:
    """A function ``batch → (peak bytes, img/s)`` that trains one model (built once) on a random batch of that size.

    On a GPU: one warm-up step, then ``timed_steps`` timed; the peak is the allocator's over those.
    On a CPU: the peak is an estimate (weights + gradients + optimizer state + activations kept).
    """
    dev = torch.device(device) if device is not None else env.device()
    dtype = env.autocast_dtype(dtype, dev)  # bf16 without the hardware for it: fp16 on a GPU, fp32 on a CPU (said once)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = make_model().to(dev, memory_format=fmt)
    opt = make_optimizer(optimizer, model.parameters())
    cuda = dev.type == "cuda"

    def step(x, y):
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def probe(batch: int) -> tuple[float, float]:
        x = torch.randn(batch, 3, image_size, image_size, device=dev).contiguous(memory_format=fmt)
        y = torch.randint(0, 10, (batch,), device=dev)
        try:
            step(x, y)  # warm-up: cuDNN picks its algorithms, the optimizer's state appears
            if cuda:
                torch.cuda.synchronize(dev)
                torch.cuda.reset_peak_memory_stats(dev)
            t0 = time.perf_counter()
            for _ in range(timed_steps):
                step(x, y)
            if cuda:
                torch.cuda.synchronize(dev)  # note: a CPU-GPU sync point, so the clock covers the work
            img_per_s = batch * timed_steps / (time.perf_counter() - t0)
            if cuda:
                return float(torch.cuda.max_memory_allocated(dev)), img_per_s
            params = list(model.parameters())
            with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
                acts = saved_activation_bytes(lambda: nn.functional.cross_entropy(model(x), y), params)
            weights = sum(p.numel() * p.element_size() for p in params)
            return float(2 * weights + optimizer_state_bytes(opt) + acts), img_per_s
        finally:
            opt.zero_grad(set_to_none=True)  # a step that failed half-way must not leave gradients behind

    return probe


def try_batch(probe: Probe, batch: int, *, budget_gib: float | None = None) -> Trial:
    """One trial: does ``batch`` fit (and stay within ``budget_gib``)? Never raises for running out of memory."""
    oom = False
    try:
        peak, ips = probe(batch)
    except torch.OutOfMemoryError:
        oom = True
    if oom:
        free_memory()  # after the except block: the exception's traceback no longer holds the step's tensors
        return Trial(batch, False, None, None, "out of memory")
    if budget_gib is not None and peak / GIB > budget_gib:
        return Trial(batch, False, peak / GIB, ips, f"{peak / GIB:.2f} GiB is over the {budget_gib:.2f} GiB budget")
    return Trial(batch, True, peak / GIB, ips)


def largest_batch(probe: Probe, *, start: int, limit: int, budget_gib: float | None = None, multiple: int = 8,
                  resolution: float = 0.05, label: str = "") -> BatchSearch:
    """Double from ``start`` until a batch fails (or ``limit``), then bisect to within ``resolution`` of the edge.

    Batches stay multiples of ``multiple`` (tensor cores like them). If even ``start`` fails, the search
    halves downward to 1 and raises a clear error when nothing fits. The ``batch_search`` time box
    (:mod:`helpers.timebox`) ends the growing and bisecting early: then ``edge_found`` is False, and ``largest``
    is a batch that fits, not the largest.
    """
    if start < 1 or limit < start:
        raise ValueError(f"largest_batch needs 1 ≤ start ≤ limit (got start={start}, limit={limit}).")
    trials: list[Trial] = []
    # Halving down to 1, doubling up to limit, bisecting to the resolution: more trials than any search needs.
    planned = start.bit_length() + (limit // start).bit_length() + int(1 / resolution).bit_length() + 1
    box = timebox.window("batch_search", planned=planned, unit="trials it could need",
                         left_out=f"{label or 'this search'}'s largest batch is not measured here (only a batch "
                                  "that fits)")

    def run(b: int) -> bool:
        t = try_batch(probe, b, budget_gib=budget_gib)
        trials.append(t)
        box.tick()
        return t.fits

    lo, hi, b = None, None, start
    while b >= 1 and lo is None:  # find one batch that fits (never cut short: a search must find one)
        if run(b):
            lo = b
        else:
            hi, b = b, b // 2
    if lo is None:
        measured = [t for t in trials if t.peak_gib is not None]
        least = min(measured, key=lambda t: t.peak_gib) if measured else None
        said = (f"the smallest footprint measured was {least.peak_gib:.3f} GiB at batch {least.batch}"
                if least is not None else "every trial ran out of memory")
        raise RuntimeError(f"not even a batch of 1 fits{f' in {budget_gib:.3f} GiB' if budget_gib else ''}: {said}. "
                           "Raise the budget or free memory on the GPU (other processes, tensors you keep), or shrink "
                           "the step: dtype bf16, activation checkpointing, a smaller model or image size.")
    while hi is None and lo * 2 <= limit and box.more():  # grow
        if run(lo * 2):
            lo *= 2
        else:
            hi = lo * 2
    while hi is not None and hi - lo > max(multiple, int(lo * resolution)) and box.more():  # bisect the edge
        mid = (lo + hi) // 2 // multiple * multiple or (lo + hi) // 2
        if mid <= lo:
            break
        if run(mid):
            lo = mid
        else:
            hi = mid
    return BatchSearch(label, tuple(trials), budget_gib, box.cut)


def search_figure(searches: list[BatchSearch], *, title: str = "The largest batch that fits"):
    """img/s and allocator peak against batch size, one line per search; failed trials marked."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("img/s", "peak memory (GiB)"))
    budgets: set[float] = set()  # one line and label per budget: searches under the same one share it
    # a batch that did not fit (out of memory: no peak to draw) goes in a row of crosses above every peak and budget
    # (at 0 GiB it read as a measured value), named by a label
    tops = [t.peak_gib for s in searches for t in s.trials if t.peak_gib is not None]
    tops += [s.budget_gib for s in searches if s.budget_gib is not None]
    failed_y = 1.15 * max(tops, default=1.0)
    for i, s in enumerate(searches):
        color = PALETTE[i % len(PALETTE)]  # one colour per search in both panels (plotly would give each trace its own)
        t = s.table()
        ok = t[t.fits]
        fig.add_trace(go.Scatter(x=ok.batch, y=ok.img_per_s, mode="lines+markers", name=s.label,
                                 legendgroup=s.label, line=dict(color=color)), row=1, col=1)
        fig.add_trace(go.Scatter(x=ok.batch, y=ok.peak_gib, mode="lines+markers", name=s.label,
                                 legendgroup=s.label, showlegend=False, line=dict(color=color)), row=1, col=2)
        bad = t[~t.fits]
        if len(bad):
            fig.add_trace(go.Scatter(x=bad.batch, y=[failed_y] * len(bad), mode="markers", marker_symbol="x",
                                     marker_size=10, marker_color=color, name=f"{s.label}: did not fit",
                                     legendgroup=s.label,
                                     hovertext=list(bad.why), hovertemplate="batch %{x}: %{hovertext}<extra></extra>"),
                          row=1, col=2)
        if s.budget_gib is not None and round(s.budget_gib, 3) not in budgets:
            budgets.add(round(s.budget_gib, 3))
            fig.add_hline(y=s.budget_gib, line_dash="dot", annotation_text="budget", row=1, col=2,
                          annotation_position="bottom right")  # above it: the crosses of batches that did not fit
    fig.update_xaxes(type="log", title="batch size")
    if any(not t.fits for s in searches for t in s.trials):
        fig.update_yaxes(range=[0, 1.3 * failed_y], row=1, col=2)
        fig.add_annotation(x=0, xref="x2 domain", xanchor="left", y=failed_y, yref="y2", yanchor="bottom",
                           yshift=6, text="did not fit", showarrow=False, font=dict(size=11))
    figure_check.readable_log_axes(fig)  # batch 1, 2, 5, 10 ... not plotly's bare "2" and "5"
    fig.update_layout(title=title, height=380)
    return fig
