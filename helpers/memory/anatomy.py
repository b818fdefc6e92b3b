"""Where one training step's GPU memory goes: weights, gradients, optimizer state, activations, the cache.

    a = anatomy(model, x, y, optimizer="adam")      # Anatomy: bytes by kind, peaks by phase
    anatomy_table([sgd, adam])                       # one row each, in GiB

Three figures that are easy to confuse, each labelled here:
- **allocated**: bytes held by live tensors (PyTorch's allocator); its *peak* is exact;
- **reserved**: what the allocator holds from the driver, allocated plus its cache of freed blocks;
- **used (NVML)**: what ``nvidia-smi`` shows for the whole GPU: reserved, plus the CUDA context
  (several hundred MiB before the first tensor), plus any other process.
"""

from __future__ import annotations

import dataclasses
import gc
from typing import Callable

import torch
from torch import nn

from .. import env, nvml

__all__ = ["GIB", "Anatomy", "saved_activation_bytes", "saved_bytes_by_kind", "free_memory", "optimizer_state_bytes",
           "make_optimizer", "anatomy", "anatomy_table", "anatomy_figure", "nvml_used_bytes", "precision_reading",
           "reserved_reading"]

GIB = 2**30
OPTIMIZERS = ("sgd", "adam")


@dataclasses.dataclass(frozen=True)
class Anatomy:
    """One training step's memory, in bytes (peaks are None off a GPU: the allocator's counters are CUDA's)."""

    label: str
    params: int
    grads: int
    optimizer_state: int
    activations: int  # tensors autograd keeps from the forward pass for the backward pass (weights excluded)
    peak_forward: int | None  # allocator peak during each phase of a step in steady state
    peak_backward: int | None
    peak_optimizer: int | None
    allocated_after: int | None  # live tensors after the step (weights, optimizer state; gradients set to None)
    reserved_after: int | None  # the allocator's pool right after the measured step (its cache included)
    nvml_used_after: int | None  # the whole GPU as nvidia-smi sees it
    # Of the activations, those kept as integers: max-pool's int64 index per output (and the labels the loss keeps,
    # a few bytes). A lower precision does not shrink them: bf16 halves the floats kept, not these.
    activation_indices: int = 0
    # the most the allocator held from the driver during the measured step, which starts from an empty cache: live
    # tensors plus the freed blocks it keeps for reuse (None off a GPU)
    peak_reserved: int | None = None

    @property
    def activation_floats(self) -> int:
        """The activations kept as floating point: what autocast's precision sets."""
        return self.activations - self.activation_indices

    @property
    def peak(self) -> int | None:
        peaks = [p for p in (self.peak_forward, self.peak_backward, self.peak_optimizer) if p is not None]
        return max(peaks) if peaks else None

    def as_row(self) -> dict:
        gib = lambda b: None if b is None else b / GIB  # noqa: E731
        return {"variant": self.label, "weights GiB": gib(self.params), "gradients GiB": gib(self.grads),
                "optimizer state GiB": gib(self.optimizer_state),
                "activations kept for backward GiB": gib(self.activations),
                "of which floats GiB": gib(self.activation_floats),
                "of which integers GiB": gib(self.activation_indices),
                "peak in forward GiB": gib(self.peak_forward), "peak in backward GiB": gib(self.peak_backward),
                "peak in optimizer step GiB": gib(self.peak_optimizer),
                "allocated after GiB": gib(self.allocated_after), "peak reserved GiB": gib(self.peak_reserved),
                "reserved after GiB": gib(self.reserved_after),
                "GPU used (NVML) after GiB": gib(self.nvml_used_after)}


def saved_activation_bytes(fn: Callable[[], torch.Tensor], params: list[torch.Tensor]) -> int:
    """Bytes autograd keeps from ``fn()``'s forward pass for backward, not counting the parameters themselves."""
    return sum(saved_bytes_by_kind(fn, params).values())


def saved_bytes_by_kind(fn: Callable[[], torch.Tensor], params: list[torch.Tensor]) -> dict[str, int]:
    """:func:`saved_activation_bytes` split by what is kept: ``{"floats": …, "integers": …}``. The integers are
    max-pool's indices (int64, one per output, so the backward knows which input won: 8 bytes each whatever the
    precision the network computes in) and the labels the loss keeps.

        kept = saved_bytes_by_kind(lambda: F.cross_entropy(net(x), y), list(net.parameters()))
    """
    param_storages = {p.untyped_storage().data_ptr() for p in params}
    seen: dict[int, tuple[int, bool]] = {}

    def pack(t: torch.Tensor):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in param_storages:  # one storage saved twice is kept once
            seen[ptr] = (t.untyped_storage().nbytes(), t.is_floating_point() or t.is_complex())
        # Not t itself: a node that saves its own output would then hold itself in a cycle Python's collector cannot
        # see, and the whole graph would stay in memory. A detached alias keeps the same bytes without the cycle.
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return {"floats": sum(n for n, floating in seen.values() if floating),
            "integers": sum(n for n, floating in seen.values() if not floating)}


def free_memory() -> None:
    """Give back what a failed step or an earlier variant held: collect Python's references, empty the allocator's
    cache (so that what one measurement left cached is not the next one's). On a CPU there is no cache to empty
    and reference counting frees a step's tensors, so it does nothing: a full collection in a large process (a
    test session's) takes most of a second, which a batch search paid on every trial."""
    if torch.cuda.is_available():
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def optimizer_state_bytes(opt: torch.optim.Optimizer) -> int:
    """Bytes of the optimizer's state tensors (momentum buffers, Adam's two moments)."""
    return sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
               if isinstance(v, torch.Tensor) and v.dim() > 0)


def make_optimizer(name: str, params) -> torch.optim.Optimizer:
    """``"sgd"`` (momentum 0.9: one buffer per weight) or ``"adam"`` (two per weight)."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3)
    raise ValueError(f"optimizer={name!r}: choose one of {', '.join(OPTIMIZERS)}.")


def anatomy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, optimizer: str = "sgd",
            dtype: torch.dtype | None = None, label: str | None = None) -> Anatomy:
    """Measure one training step of ``model`` on ``(x, y)`` (already on its device).

    A first step creates the optimizer's state (and lets cuDNN pick its algorithms); the second is measured phase by
    phase, each phase's allocator peak taken on its own (``reset_peak_memory_stats`` before it). On a GPU the
    allocator's cache is emptied before each of the two steps, so that "reserved" is the measured step's own: not
    what an earlier variant, nor the first step, left cached (read after both steps and a counting forward, three
    variants whose allocated peaks differed read the same reserved, above all their peaks). Reserved is read twice:
    its peak over the measured step, and right after it, before the activations are counted.
    """
    dev = x.device
    cuda = dev.type == "cuda"
    if cuda:
        free_memory()  # what an earlier variant left unreferenced, then its cached blocks
        torch.cuda.reset_peak_memory_stats(dev)
    dtype = env.autocast_dtype(dtype, dev)  # bf16 without the hardware for it: fp16 on a GPU, fp32 on a CPU
    opt = make_optimizer(optimizer, model.parameters())
    params = list(model.parameters())

    def forward():
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
            return nn.functional.cross_entropy(model(x), y)

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    try:
        return _measure(model, opt, params, forward, sync, dev, dtype, optimizer, label)
    except torch.OutOfMemoryError as e:
        opt.zero_grad(set_to_none=True)
        raise torch.OutOfMemoryError(
            f"a training step of batch {x.shape[0]} at {tuple(x.shape[-2:])} ran out of GPU memory while its anatomy "
            f"was measured. Use a smaller batch (say {max(1, x.shape[0] // 2)}), dtype=torch.bfloat16, or a smaller "
            f"image size. (PyTorch said: {str(e).splitlines()[0] if str(e) else 'out of memory'})") from None


def _measure(model, opt, params, forward, sync, dev, dtype, optimizer, label) -> Anatomy:
    cuda = dev.type == "cuda"
    loss = forward()  # step 1: the optimizer's state appears here
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    del loss
    # The measured step from an empty cache: what the first step left cached (blocks cut to its sizes, the scratch
    # memory of the algorithms cuDNN tried) would otherwise be read as this step's reserved.
    free_memory()
    sync()
    peaks = {}
    reserved_peaks = []

    def phase(name, fn):
        if cuda:
            torch.cuda.reset_peak_memory_stats(dev)  # resets the reserved peak too
        out = fn()
        sync()
        peaks[name] = torch.cuda.max_memory_allocated(dev) if cuda else None
        if cuda:
            reserved_peaks.append(torch.cuda.max_memory_reserved(dev))
        return out

    loss = phase("forward", forward)
    phase("backward", loss.backward)
    grads = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)
    phase("optimizer", opt.step)
    del loss
    state = optimizer_state_bytes(opt)
    opt.zero_grad(set_to_none=True)
    sync()
    # read now, before the counting forward below: it runs a forward pass of its own, which the allocator would serve
    allocated_after = torch.cuda.memory_allocated(dev) if cuda else None
    reserved_after = torch.cuda.memory_reserved(dev) if cuda else None
    nvml_after = nvml_used_bytes(dev) if cuda else None
    kept = saved_bytes_by_kind(forward, params)
    sync()
    return Anatomy(
        label=label or f"{type(model).__name__}, {optimizer}, {str(dtype).removeprefix('torch.') if dtype else 'fp32'}",
        params=sum(p.numel() * p.element_size() for p in params),
        grads=grads, optimizer_state=state, activations=kept["floats"] + kept["integers"],
        activation_indices=kept["integers"],
        peak_forward=peaks["forward"], peak_backward=peaks["backward"], peak_optimizer=peaks["optimizer"],
        allocated_after=allocated_after, reserved_after=reserved_after, nvml_used_after=nvml_after,
        peak_reserved=max(reserved_peaks) if reserved_peaks else None,
    )


def reserved_reading(items: list[Anatomy]) -> str:
    """What "reserved" counts here, in one sentence written from the anatomies: each variant's reserved peak over its
    measured step beside its allocated peak, and what the difference is. "" off a GPU (no allocator).

        print(reserved_reading(steps))
    """
    shown = [a for a in items if a.peak_reserved is not None and a.peak is not None]
    if not shown:
        return ""
    def more(a: Anatomy) -> str:  # the difference of the two figures as printed (16.37 − 11.70 had read 4.68)
        return f"{round(a.peak_reserved / GIB, 2) - round(a.peak / GIB, 2):.2f}"

    each = "; ".join(f"{a.label}: {a.peak_reserved / GIB:.2f} GiB reserved at most against {a.peak / GIB:.2f} GiB "
                     f"allocated, {more(a)} GiB more" for a in shown)
    return (f"Reserved is read over the measured step alone, which starts from an empty cache (the first step's "
            f"blocks given back): {each}. Reserved is allocated plus the allocator's cache: blocks freed earlier in "
            "the step and kept for reuse rather than given back to the driver, and the unused remainders of blocks "
            "cut to size. It does not fall during a step, so its peak is what the step took from the driver; "
            "NVML's used adds the CUDA context.")


def live_gib(device: torch.device | str | None = None) -> float | None:
    """GiB that live tensors hold now (the allocator's count), None off a GPU: what earlier cells still hold, which
    every allocator peak taken after this counts too (:func:`peaks_beside_live`). Unreachable tensors are collected
    first: a measurement that starts with :func:`free_memory` frees them, so they are not what earlier cells hold."""
    dev = torch.device(device) if device is not None else env.device()
    if dev.type != "cuda":
        return None
    free_memory()
    return torch.cuda.memory_allocated(dev) / GIB


def peaks_beside_live(what: str, readings: list[tuple[str, float | None, float | None]], *, held: str = "") -> str:
    """One sentence on the same step's peak read in several cells, written from the readings: each ``(where, peak
    GiB, GiB live when it began)``. An allocator peak counts every tensor alive in the process, the earlier cells'
    too, so the same step reads higher in a later cell; less what was live before, the step's own peaks. "" where a
    reading is missing (a CPU has no allocator). ``held``: what those earlier tensors are, where the caller knows.

        print(peaks_beside_live("fp32 at batch 256", [("the anatomy", 11.70, 0.0), ("this budget", 11.88, 0.18)]))

    04 read the fp32 peak at batch 256 as 11.70, 11.85 and 11.88 GiB in three cells and said nothing of why.
    """
    if len(readings) < 2 or any(peak is None or live is None for _, peak, live in readings):
        return ""
    names = [where for where, _, _ in readings]
    joined = lambda items: ", ".join(items[:-1]) + " and " + items[-1]  # noqa: E731
    peaks = [f"{peak:.2f}" for _, peak, _ in readings]
    lives = [f"{live:.2f}" for _, _, live in readings]
    own = [f"{float(p) - float(v):.2f}" for p, v in zip(peaks, lives)]  # from the figures as printed
    return (f"{what}, one step read in {len(readings)} cells ({joined(names)}): {joined(peaks)} GiB at its peak. An "
            f"allocator peak counts every tensor alive in this process, earlier cells' too, and those held "
            f"{joined(lives)} GiB when each began{f' ({held})' if held else ''}; less those, the step's own peaks "
            f"read {joined(own)} GiB.")


def precision_reading(full: Anatomy, low: Anatomy) -> str:
    """What a lower precision did to the activations kept, in one sentence written from the two anatomies: how much
    the floats fell, and that the integer indices did not (so the whole falls less than half).

        print(precision_reading(steps[0], steps[2]))   # SGD in fp32 beside SGD in bf16
    """
    def gib(b: int) -> str:
        return f"{b / GIB:.2f} GiB"

    if not full.activations:
        return "no activations were kept: nothing for a precision to shrink."
    fell = 1 - low.activations / full.activations
    floats = 1 - low.activation_floats / full.activation_floats if full.activation_floats else 0.0
    line = (f"{low.label} kept {gib(low.activations)} of activations against {full.label}'s {gib(full.activations)}: "
            f"{fell:.0%} less")
    if not full.activation_indices:
        return line + "; none of them were integers."
    same = abs(low.activation_indices - full.activation_indices) <= 0.01 * full.activation_indices
    ints = (f"stayed at {gib(low.activation_indices)}" if same else
            f"went from {gib(full.activation_indices)} to {gib(low.activation_indices)}")
    return (line + f". The floats fell {floats:.0%} ({gib(full.activation_floats)} → {gib(low.activation_floats)}); "
            f"the integers (max-pool's int64 indices, and the labels) {ints}, "
            f"{low.activation_indices / low.activations:.0%} of what {low.label} keeps: a precision sets the size of "
            "the floats, not of the indices.")


def anatomy_figure(items: list[Anatomy], *, title: str = "Where one training step's memory goes"):
    """Stacked bars per variant: weights, gradients, optimizer state, activations kept for backward (GiB)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    # each variant's name on two lines ("SGD + momentum<br>fp32"): side by side on one line they run together
    labels = [a.label.replace(", ", "<br>", 1) for a in items]
    for part, attr in (("weights", "params"), ("gradients", "grads"), ("optimizer state", "optimizer_state"),
                       ("activations kept as floats", "activation_floats"),
                       ("integers kept (max-pool's indices)", "activation_indices")):
        fig.add_trace(go.Bar(x=labels, y=[getattr(a, attr) / GIB for a in items], name=part))
    peaks = [a.peak for a in items]
    if all(p is not None for p in peaks):
        fig.add_trace(go.Scatter(x=labels, y=[p / GIB for p in peaks], mode="markers",
                                 marker=dict(symbol="line-ew", size=40, line=dict(width=3, color="black")),
                                 name="allocator peak of the step"))
    # the legend (six entries) under the plot: beside it, it took the width the three variants' names need
    fig.update_layout(barmode="stack", title=title, yaxis_title="GiB", height=460,
                      legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0))
    return fig


def anatomy_table(items: list[Anatomy]) -> "pandas.DataFrame":  # noqa: F821
    """One row per measured step, every figure in GiB (full precision; ``tables.readable`` shows it to read)."""
    import pandas as pd

    df = pd.DataFrame([a.as_row() for a in items]).set_index("variant")
    no_allocator = "no GPU allocator on a CPU: the tensors' own sizes are counted, not the allocator's peaks"
    df.attrs["missing"] = {**{c: no_allocator for c in df.columns if c.startswith(("peak", "allocated", "reserved"))},
                           "GPU used (NVML) after GiB": "no NVIDIA driver on a CPU"}
    return df


def nvml_used_bytes(device: torch.device | str | None = None) -> int | None:
    """What ``nvidia-smi`` shows as used on this CUDA device, or None where NVML cannot say."""
    dev = torch.device(device) if device is not None else env.device()
    if dev.type != "cuda":
        return None
    handle = nvml.handle_for_cuda_device(dev.index if dev.index is not None else torch.cuda.current_device())
    nv = nvml.load(quiet=True)
    if handle is None or nv is None:
        return None
    try:
        return int(nv.nvmlDeviceGetMemoryInfo(handle).used)
    except Exception:  # NVML may refuse on some virtualised GPUs: the figure is then missing, not wrong
        return None
