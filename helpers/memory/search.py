"""The largest batch that fits, found by a search that survives running out of memory.

    probe = step_probe(lambda: ReferenceCNN(224), image_size=224, dtype=torch.bfloat16)
    found = largest_batch(probe, start=128, limit=8192)      # doubles until it fails, then bisects
    found.largest, found.table()                             # every trial: fits?, peak, img/s, why not
    found.reasons()                                          # why each batch that did not fit failed, in words
    search_figure([found_fp32, found_bf16]).show()

A trial that raises ``torch.OutOfMemoryError`` is caught; the memory it held is freed (gradients
dropped, Python's references collected, the allocator's cache emptied) and the search goes on. What
the allocator reported when it failed (the block it asked for, what was free, what its cache held)
is kept with the trial, so a failure can be told apart: a step that needs more than the GPU has, or
one that needed less but found the memory in pieces (fragmentation).
With ``budget_gib`` a trial whose allocator peak exceeds the budget fails too: a memory budget is
the same question on a GPU you share. On a CPU there is no allocator peak: the probe estimates
the footprint (weights, gradients, optimizer state, activations kept for backward).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from .. import env, timebox
from ..svg import PALETTE
from .anatomy import GIB, free_memory, make_optimizer, optimizer_state_bytes, saved_activation_bytes
from .oom_message import allocator_report  # the search's Trial and the back-off loop read it from here

__all__ = ["Trial", "BatchSearch", "allocator_report", "fragmented", "free_memory", "step_probe", "try_batch", "largest_batch",
           "EXPANDABLE", "reference_cnn_search", "fresh_search", "gain_reading", "search_figure"]

Probe = Callable[[int], tuple[float, float]]  # batch → (peak bytes, img/s)


@dataclasses.dataclass(frozen=True)
class Trial:
    batch: int
    fits: bool
    peak_gib: float | None
    img_per_s: float | None
    why: str = ""
    # what the allocator reported when the step ran out of memory (None where it said nothing we could read)
    asked_gib: float | None = None  # the one block it asked for and could not get
    free_gib: float | None = None  # free on the GPU at that moment
    live_gib: float | None = None  # in live tensors (allocated by PyTorch)
    cached_gib: float | None = None  # reserved by PyTorch's cache but not allocated: freed blocks it keeps


def fragmented(asked_gib: float, free_gib: float, cached_gib: float) -> bool:
    """Whether an out-of-memory failure was fragmentation: free memory and the allocator's cache together held more
    than the one block asked for, in no piece that large."""
    return asked_gib <= free_gib + cached_gib


@dataclasses.dataclass(frozen=True)
class BatchSearch:
    """All trials of one search, in the order they ran; ``largest`` is the largest batch that fitted."""

    label: str
    trials: tuple[Trial, ...]
    budget_gib: float | None
    cut: timebox.Cut | None = None  # set when the batch_search time box ended the search before its edge was found
    capacity_gib: float | None = None  # the GPU's memory as the allocator sees it; None on a CPU
    # the PYTORCH_CUDA_ALLOC_CONF of the fresh process the search ran in (fresh_search; "" for the default
    # allocator there); None: it ran in the calling process, under whatever that process's allocator was set to
    allocator: str | None = None

    def where(self) -> str:
        """Where the search ran, in words: ``"in a fresh process with expandable_segments:True"``."""
        if self.allocator is None:
            return "in this process"
        return f"in a fresh process with {self.allocator}" if self.allocator else "in a fresh process"

    def fragmentation_ended_it(self) -> bool:
        """Whether a batch above the largest that fitted failed for fragmentation (:meth:`cause`): the search then
        stopped at how the allocator's cache was cut, not (only) at what the step needs."""
        largest = self.largest
        return largest is not None and any(self.cause(t).startswith("fragmentation") for t in self.trials
                                           if not t.fits and t.batch > largest)

    @property
    def edge_found(self) -> bool:
        """False when the time box stopped the search: ``largest`` is then only a batch that fits, not the edge."""
        return self.cut is None

    @property
    def largest(self) -> int | None:
        fits = [t.batch for t in self.trials if t.fits]
        return max(fits) if fits else None

    def need_gib(self, batch: int) -> float | None:
        """The peak a step of ``batch`` would reach, on the straight line through the peaks of the batches that fit
        (fixed costs plus so much per image); None with fewer than two of them."""
        pts = sorted({t.batch: t.peak_gib for t in self.trials if t.fits and t.peak_gib is not None}.items())
        if len(pts) < 2:
            return None
        n = len(pts)
        mx, my = sum(b for b, _ in pts) / n, sum(p for _, p in pts) / n
        slope = sum((b - mx) * (p - my) for b, p in pts) / sum((b - mx) ** 2 for b, _ in pts)
        return my + slope * (batch - mx)

    def cause(self, trial: Trial) -> str:
        """Why ``trial`` did not fit, short (the table's and the chart's words); "" for one that fitted.

        * over the budget: its measured peak is;
        * more than the GPU has: the step would need more (:meth:`need_gib`) than PyTorch could hold at the moment
          it failed (what was free plus what it held, live and cached);
        * fragmentation: it would need less, and the free memory and the cache together were larger than the block
          it asked for, but no piece of them was that large;
        * out of memory: the allocator said too little to tell.
        """
        if trial.fits:
            return ""
        if trial.asked_gib is None or trial.free_gib is None or trial.cached_gib is None:
            return trial.why
        need = self.need_gib(trial.batch)
        could = trial.free_gib + (trial.live_gib or 0.0) + trial.cached_gib  # all PyTorch could have had
        if need is not None and need > could:
            return f"more than the GPU has: needs about {need:.1f} GiB"
        if fragmented(trial.asked_gib, trial.free_gib, trial.cached_gib):
            return (f"fragmentation: no free piece of {trial.asked_gib:.1f} GiB ({trial.free_gib:.1f} GiB free, "
                    f"{trial.cached_gib:.1f} GiB cached)")
        return f"out of memory: asked for {trial.asked_gib:.1f} GiB, {trial.free_gib:.1f} GiB free"

    def batch_at_capacity(self) -> int | None:
        """The batch whose step the line through the fitted peaks (:meth:`need_gib`) puts at the GPU's capacity: how
        far the memory itself would let this search go. None without a capacity or two fitted peaks."""
        if self.capacity_gib is None:
            return None
        a, b = self.need_gib(0), self.need_gib(1)
        if a is None or b is None or b - a <= 0:
            return None
        return int((self.capacity_gib - a) / (b - a))

    def edge_reading(self) -> str:
        """One sentence: where the search stopped, beside where the card's memory would have let it stop, and what
        stopped it there (its failures' causes). "" where it cannot say (a CPU, a search cut short)."""
        at_cap, largest = self.batch_at_capacity(), self.largest
        if at_cap is None or largest is None or not self.edge_found:
            return ""
        failed = [t for t in self.trials if not t.fits and t.batch > largest]
        causes = {self.cause(t).split(":")[0] for t in failed}
        line = (f"{self.label or 'this search'}: largest batch {largest:,}; the line through its peaks reaches the "
                f"card's {self.capacity_gib:.1f} GiB at about {at_cap:,}")
        if "fragmentation" in causes and largest < 0.95 * at_cap:
            return (line + f": fragmentation stopped it {100 * (1 - largest / at_cap):.0f}% short of what the memory "
                           "holds, not the memory itself." + self._edge_slowdown())
        return line + "." + self._edge_slowdown()

    #: A largest batch this much slower than the best batch below it is said to have slowed at the edge.
    EDGE_SLOWDOWN = 0.8

    def _edge_slowdown(self) -> str:
        """" It fits, but slowly: …" where the largest batch that fitted ran below :data:`EDGE_SLOWDOWN` × the best
        img/s of the batches below it (04's fp32 on one H200: 2,428 img/s at 3,328 against 5,219 at 3,072)."""
        ok = sorted((t for t in self.trials if t.fits and t.img_per_s), key=lambda t: t.batch)
        if len(ok) < 2:
            return ""
        last, best = ok[-1], max(ok[:-1], key=lambda t: t.img_per_s)
        if last.img_per_s >= self.EDGE_SLOWDOWN * best.img_per_s:
            return ""
        return (f" It fits, but slowly: {last.img_per_s:,.0f} img/s at {last.batch:,} against {best.img_per_s:,.0f} "
                f"at {best.batch:,} ({100 * (last.img_per_s / best.img_per_s - 1):+.0f}%). With so little memory "
                "left, the allocator must free its cache and ask the driver again during a step, and cuDNN picks "
                "algorithms that need less scratch memory; which of the two cost the time here was not measured. "
                "The largest batch that fits is not the fastest.")

    def reasons(self) -> list[str]:
        """One sentence per batch that did not fit: what stopped it, from what the allocator reported when it failed
        and the peaks of the batches that fitted."""
        out = []
        for t in sorted((t for t in self.trials if not t.fits), key=lambda t: t.batch):
            head = f"{self.label or 'this search'}, batch {t.batch:,}: "
            cause, need = self.cause(t), self.need_gib(t.batch)
            if not cause.startswith(("more than the GPU has", "fragmentation")):
                said = (f": it asked for {t.asked_gib:.2f} GiB with {t.free_gib:.2f} GiB free on the GPU"
                        if t.asked_gib is not None and t.free_gib is not None else "")
                out.append(f"{head}{cause}{said}.")
                continue
            said = (f"out of memory asking for one block of {t.asked_gib:.2f} GiB, with {t.free_gib:.2f} GiB free on "
                    f"the GPU, {t.cached_gib:.2f} GiB in PyTorch's cache and {t.live_gib or 0:.2f} GiB in live tensors")
            line = "on the line through the peaks of the batches that fit"
            if cause.startswith("more than the GPU has"):
                could = t.free_gib + (t.live_gib or 0.0) + t.cached_gib
                rest = (f"; the rest of the card's {self.capacity_gib:.1f} GiB holds the CUDA context and what other "
                        "processes use" if self.capacity_gib is not None and self.capacity_gib - could >= 0.05 else "")
                out.append(f"{head}{said}. Its step would need about {need:.1f} GiB ({line}), more than the "
                           f"{could:.1f} GiB PyTorch could hold (free, cached and live together{rest}).")
            else:
                guess = (f"Its step would need about {need:.1f} GiB ({line}), less than the GPU has: "
                         if need is not None else "")
                out.append(f"{head}{said}. {guess}free and cached memory together were larger than the block, but "
                           "no piece of them was that large: the allocator's cached blocks were cut to the sizes "
                           "of the step's other tensors (fragmentation).")
        return out

    def table(self):
        import pandas as pd

        rows = [{"batch": t.batch, "fits": t.fits, "peak_gib": t.peak_gib, "img_per_s": t.img_per_s,
                 "why": self.cause(t)} for t in self.trials]
        df = pd.DataFrame(rows).sort_values("batch").reset_index(drop=True)
        df.attrs["missing"] = {"peak_gib": "a batch that did not fit has no peak (why says what stopped it)",
                               "img_per_s": "a batch that did not fit trains nothing (why says what stopped it)"}
        return df


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
    said = None
    # Each trial from an empty cache: the blocks a smaller batch left cached are cut to its tensors' sizes, and a
    # larger batch that reuses them can fail for want of one large piece while the memory is there (on an H100, bf16
    # with checkpointing at 3,072 failed asking for 18.4 GiB with 17.8 GiB free and 15.5 GiB cached; tried first, it fit)
    free_memory()
    try:
        peak, ips = probe(batch)
    except torch.OutOfMemoryError as e:
        said = str(e)  # the message only: the exception's traceback holds the failed step's tensors
    if said is not None:
        free_memory()  # after the except block: the exception's traceback no longer holds the step's tensors
        return Trial(batch, False, None, None, "out of memory", **allocator_report(said))
    if budget_gib is not None and peak / GIB > budget_gib:
        return Trial(batch, False, peak / GIB, ips, f"{peak / GIB:.3g} GiB is over the {budget_gib:.3g} GiB budget")
    return Trial(batch, True, peak / GIB, ips)


def largest_batch(probe: Probe, *, start: int, limit: int, budget_gib: float | None = None, multiple: int = 8,
                  resolution: float = 0.05, label: str = "", capacity_gib: float | None = None) -> BatchSearch:
    """Double from ``start`` until a batch fails (or ``limit``), then bisect to within ``resolution`` of the edge.

    ``capacity_gib``: the GPU's memory as the allocator sees it (the chart draws it); by default
    :func:`helpers.env.gpu_memory_gib` (a learner-machine profile's limit, the card's memory), None on a CPU.

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
    if capacity_gib is None:
        capacity_gib = env.gpu_memory_gib()
    return BatchSearch(label, tuple(trials), budget_gib, box.cut, capacity_gib)


#: The allocator setting a fresh search process gets: expandable segments grow one segment in place, so a step's
#: large block is not refused for want of one free piece that large while the memory is there (fragmentation).
EXPANDABLE = "expandable_segments:True"
_ROOT = Path(__file__).resolve().parents[2]
_RESULT = "BATCH_SEARCH_RESULT "  # marks the child's one line of JSON among whatever else it prints


def reference_cnn_search(label: str, *, image_size: int, dtype: torch.dtype | None, checkpoint: bool, start: int,
                         limit: int, budget_gib: float | None = None,
                         device: torch.device | str | None = None) -> BatchSearch:
    """:func:`largest_batch` of the reference CNN (``checkpoint``: activation checkpointing) in this process."""
    from ..models import ReferenceCNN  # here, not at the top: models need nothing from this module, keep it so

    probe = step_probe(lambda: ReferenceCNN(image_size, checkpoint=checkpoint), image_size=image_size, dtype=dtype,
                       device=device)
    found = largest_batch(probe, start=start, limit=limit, budget_gib=budget_gib, label=label)
    free_memory()
    return found


def fresh_search(label: str, *, image_size: int, dtype: torch.dtype | None, checkpoint: bool, start: int, limit: int,
                 budget_gib: float | None = None, alloc_conf: str = EXPANDABLE, timeout_s: float = 600) -> BatchSearch:
    """:func:`reference_cnn_search` in a fresh Python process whose allocator is set by ``alloc_conf``
    (``PYTORCH_CUDA_ALLOC_CONF``, read once when CUDA starts, so it needs a process of its own).

    Why: in a process that has already run steps of other sizes, and with the default allocator even in a fresh one,
    a large block can be refused while the memory is there, in pieces (fragmentation); a search would then measure how
    the cache was cut, not what each step needs. The child's time-box cut, if any, is said here again. The child uses
    the first visible GPU (this process's ``CUDA_VISIBLE_DEVICES``); this process's cache is emptied first so that the
    child has the memory this one does not hold.
    """
    free_memory()
    spec = {"label": label, "image_size": image_size, "dtype": None if dtype is None else str(dtype).removeprefix("torch."),
            "checkpoint": checkpoint, "start": start, "limit": limit, "budget_gib": budget_gib}
    env_ = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=alloc_conf)
    env_["PYTHONPATH"] = str(_ROOT) + (os.pathsep + env_["PYTHONPATH"] if env_.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-m", "helpers.memory.search", json.dumps(spec)], capture_output=True,
                          text=True, timeout=timeout_s, env=env_, cwd=str(_ROOT))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_RESULT)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the {label} search in a fresh process failed (exit {proc.returncode}): "
                           f"{(proc.stderr.strip() or proc.stdout.strip())[-600:]}")
    said = json.loads(lines[-1][len(_RESULT):])
    found = _from_json(said, allocator=said["alloc_conf"])  # what the child ran under, as it read it
    if found.cut is not None:
        print(found.cut)  # the child said it; its words are not shown here otherwise
    return found


def _to_json(found: BatchSearch) -> dict:
    return {"label": found.label, "trials": [dataclasses.asdict(t) for t in found.trials],
            "budget_gib": found.budget_gib, "capacity_gib": found.capacity_gib,
            "cut": None if found.cut is None else dataclasses.asdict(found.cut),
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}


def _from_json(d: dict, *, allocator: str | None) -> BatchSearch:
    return BatchSearch(d["label"], tuple(Trial(**t) for t in d["trials"]), d["budget_gib"],
                       None if d["cut"] is None else timebox.Cut(**d["cut"]), d["capacity_gib"], allocator)


def gain_reading(base: BatchSearch, other: BatchSearch) -> str:
    """One sentence from two searches: ``other``'s largest batch against ``base``'s, where they ran, and whether
    fragmentation (rather than the memory) ended either, in which case the difference is partly the allocator's.

        print(gain_reading(found["bf16"], found["bf16 + checkpointing"]))
    """
    a, b = base.largest, other.largest
    if a is None or b is None:
        return ""
    if not (base.edge_found and other.edge_found):
        return (f"{other.label} fitted {b:,} and {base.label} {a:,}, but a time box ended a search before its edge: "
                "these are batches that fit, not the largest, and not compared here.")
    same = base.where() == other.where()
    ran = (f"both searched {base.where()}" if same else
           f"{base.label} searched {base.where()}, {other.label} {other.where()}")
    line = (f"{other.label} trains batches up to {b:,}, {100 * (b / a - 1):+.0f}% against {base.label}'s {a:,} "
            f"({ran})")
    ended = [s.label for s in (base, other) if s.fragmentation_ended_it()]
    if ended:
        return (line + f"; fragmentation, not the memory, ended the {' and the '.join(ended)} search"
                       f"{'es' if len(ended) > 1 else ''}, so part of that difference is how the allocator's cache was "
                       "cut.")
    causes = {s.cause(t) for s in (base, other) for t in s.trials if not t.fits and t.batch > s.largest}
    if causes and all(c.startswith("more than the GPU has") for c in causes):
        return line + ": each search ended where its step needed more memory than the GPU has, so the difference is " \
                      "the memory each step needs."
    if causes and all("budget" in c for c in causes):
        return line + ": each search ended at the budget, so the difference is the footprint each step needs."
    return line + "."


def search_figure(searches: list[BatchSearch], *, title: str = "The largest batch that fits"):
    """img/s and allocator peak against batch size, one line per search, and the GPU's memory (or the budget) as a
    line. A batch that did not fit is marked at the peak its step would need (its measured peak over a budget, else on
    the line through the peaks that fit, drawn dotted): a cross where it needs more than the GPU has, an open diamond
    where it needed less and the memory was there in pieces (:meth:`BatchSearch.cause`, also in the hover text)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    # one above the other, sharing the batch axis, so the memory panel has the figure's whole width: the trials near
    # the edge (bisected a few percent apart) stay apart. The batch axis is linear: the peak grows by so much per
    # image, a straight line, which the estimate of a failed batch's need extends.
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.32, 0.68], vertical_spacing=0.1,
                        subplot_titles=("img/s", "peak memory (GiB)"))
    # 4,000 img/s, as every other chart of the course writes it; from zero, so that a drop near the memory's edge
    # (04's fp32 at 3,328: 2,428 img/s after 5,219) reads as the half it is, not as a fall off the chart
    fig.update_yaxes(tickformat=",", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(tickformat=",")
    placed: list[tuple[BatchSearch, str, list[int], list[float | None], list[str]]] = []
    for i, s in enumerate(searches):
        color = PALETTE[i % len(PALETTE)]  # one colour per search in both panels (plotly would give each trace its own)
        ok = sorted((t for t in s.trials if t.fits), key=lambda t: t.batch)
        fig.add_trace(go.Scatter(x=[t.batch for t in ok], y=[t.img_per_s for t in ok], mode="lines+markers",
                                 name=s.label, legendgroup=s.label, line=dict(color=color)), row=1, col=1)
        fig.add_trace(go.Scatter(x=[t.batch for t in ok], y=[t.peak_gib for t in ok], mode="lines+markers",
                                 name=s.label, legendgroup=s.label, showlegend=False, line=dict(color=color)),
                      row=2, col=1)
        bad = sorted((t for t in s.trials if not t.fits), key=lambda t: t.batch)
        ys = [t.peak_gib if t.peak_gib is not None else s.need_gib(t.batch) for t in bad]
        placed.append((s, color, [t.batch for t in bad], ys, [s.cause(t) for t in bad]))
        drawn = [(t.batch, y) for t, y in zip(bad, ys) if y is not None and t.peak_gib is None]
        if ok and drawn:  # the estimate's line, from the largest batch that fitted to the failures
            xs = [ok[-1].batch, max(b for b, _ in drawn)]
            fig.add_trace(go.Scatter(x=xs, y=[s.need_gib(b) for b in xs], mode="lines", showlegend=False,
                                     legendgroup=s.label, hoverinfo="skip", line=dict(color=color, dash="dot", width=1)),
                          row=2, col=1)
    caps = sorted({round(s.capacity_gib, 2) for s in searches if s.capacity_gib is not None})
    budgets = sorted({round(s.budget_gib, 3) for s in searches if s.budget_gib is not None})
    tops = [y for *_, ys, _ in placed for y in ys if y is not None]
    tops += [t.peak_gib for s in searches for t in s.trials if t.peak_gib is not None] + caps + budgets
    top = max(tops, default=1.0)
    # a failure with nothing to place it by (no peak, too few batches fitted to draw a line): a row of its own above
    # everything, one row per search so that their crosses do not cover one another, named by a label
    row_y = [top * (1.12 + 0.07 * i) for i in range(len(searches))]
    # a cross where the step needs more than it may have (the GPU, the budget); an open diamond where it needed less
    # and the memory was there, in pieces (fragmentation)
    symbol = lambda cause: "diamond-open" if cause.startswith("fragmentation") else "x"  # noqa: E731
    for (s, color, xs, ys, causes), yr in zip(placed, row_y):
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=[y if y is not None else yr for y in ys], mode="markers",
                                     marker=dict(symbol=[symbol(c) for c in causes], size=8, color=color,
                                                 line=dict(width=1.5, color=color)),
                                     name=f"{s.label}: did not fit", legendgroup=s.label, showlegend=False,
                                     hovertext=causes, hovertemplate="batch %{x}: %{hovertext}<extra></extra>"),
                          row=2, col=1)
    seen = {symbol(c) for *_, causes in placed for c in causes}
    for sym, name in (("x", "did not fit: needs more (at the peak it would need)"),
                      ("diamond-open", "did not fit: memory in pieces (at the peak it would need)")):
        if sym in seen:  # one legend entry says what every colour's marks are
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name,
                                     marker=dict(symbol=sym, size=8, color="#555", line=dict(width=1.5, color="#555"))),
                          row=2, col=1)
    unplaced = [i for i, (_s, _c, xs, ys, _w) in enumerate(placed) if any(y is None for y in ys)]
    if unplaced:
        fig.add_annotation(x=0, xref="x2 domain", xanchor="left", y=row_y[unplaced[-1]], yref="y2",
                           yanchor="bottom", yshift=6, text="did not fit", showarrow=False, font=dict(size=11))
    for cap in caps:  # the line the crosses are read against: above it a step needs more than the GPU has
        fig.add_hline(y=cap, line_dash="dash", line_color="#555", row=2, col=1)
        fig.add_annotation(x=0, xref="x2 domain", xanchor="left", y=cap, yref="y2", yanchor="bottom",
                           text=f"GPU memory {cap:.1f} GiB", showarrow=False, font=dict(size=11, color="#555"))
    for budget in budgets:  # one line and label per budget: searches under the same one share it
        fig.add_hline(y=budget, line_dash="dot", row=2, col=1)
        fig.add_annotation(x=0, xref="x2 domain", xanchor="left", y=budget, yref="y2", yanchor="bottom",
                           text=f"budget {budget:.3g} GiB", showarrow=False, font=dict(size=11))
    highest = max([top] + [row_y[i] for i in unplaced])
    fig.update_yaxes(range=[0, 1.1 * highest], row=2, col=1)
    batches = [t.batch for s in searches for t in s.trials]
    fig.update_xaxes(range=[0, 1.04 * max(batches, default=1)])
    fig.update_xaxes(title="batch size", row=2, col=1)
    fig.update_layout(title=title, height=560, legend=dict(orientation="h", yanchor="top", y=-0.14, x=0))
    return fig


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.memory.search '{"label": …, …}'``: one :func:`reference_cnn_search` in this process,
    printed as one marked line of JSON (:func:`fresh_search` runs it so)."""
    spec = json.loads((argv if argv is not None else sys.argv[1:])[0])
    name = spec.pop("dtype")  # "bfloat16", "float16" or None (fp32)
    found = reference_cnn_search(spec.pop("label"), dtype=getattr(torch, name) if name else None, **spec)
    print(_RESULT + json.dumps(_to_json(found)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
