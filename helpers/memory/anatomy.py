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
from typing import Callable

import torch
from torch import nn

from .. import env, nvml

__all__ = ["GIB", "Anatomy", "saved_activation_bytes", "optimizer_state_bytes", "make_optimizer", "anatomy",
           "anatomy_table", "anatomy_figure", "nvml_used_bytes"]

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
    allocated_after: int | None  # live tensors after the step (weights, gradients, optimizer state)
    reserved_after: int | None  # the allocator's pool after the step
    nvml_used_after: int | None  # the whole GPU as nvidia-smi sees it

    @property
    def peak(self) -> int | None:
        peaks = [p for p in (self.peak_forward, self.peak_backward, self.peak_optimizer) if p is not None]
        return max(peaks) if peaks else None

    def as_row(self) -> dict:
        gib = lambda b: None if b is None else b / GIB  # noqa: E731
        return {"variant": self.label, "weights GiB": gib(self.params), "gradients GiB": gib(self.grads),
                "optimizer state GiB": gib(self.optimizer_state),
                "activations kept for backward GiB": gib(self.activations),
                "peak in forward GiB": gib(self.peak_forward), "peak in backward GiB": gib(self.peak_backward),
                "peak in optimizer step GiB": gib(self.peak_optimizer),
                "allocated after GiB": gib(self.allocated_after), "reserved after GiB": gib(self.reserved_after),
                "GPU used (NVML) after GiB": gib(self.nvml_used_after)}


def saved_activation_bytes(fn: Callable[[], torch.Tensor], params: list[torch.Tensor]) -> int:
    """Bytes autograd keeps from ``fn()``'s forward pass for backward, not counting the parameters themselves."""
    param_storages = {p.untyped_storage().data_ptr() for p in params}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in param_storages:
            seen[ptr] = t.untyped_storage().nbytes()  # one storage saved twice is kept once
        # Not t itself: a node that saves its own output would then hold itself in a cycle Python's collector cannot
        # see, and the whole graph would stay in memory. A detached alias keeps the same bytes without the cycle.
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


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

    A first step creates the optimizer's state; the second is measured phase by phase, each
    phase's allocator peak taken on its own (``reset_peak_memory_stats`` before it).
    """
    dev = x.device
    cuda = dev.type == "cuda"
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
    sync()
    peaks = {}

    def phase(name, fn):
        if cuda:
            torch.cuda.reset_peak_memory_stats(dev)
        out = fn()
        sync()
        peaks[name] = torch.cuda.max_memory_allocated(dev) if cuda else None
        return out

    loss = phase("forward", forward)
    phase("backward", loss.backward)
    grads = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)
    phase("optimizer", opt.step)
    del loss
    state = optimizer_state_bytes(opt)
    opt.zero_grad(set_to_none=True)
    activations = saved_activation_bytes(forward, params)
    sync()
    return Anatomy(
        label=label or f"{type(model).__name__}, {optimizer}, {str(dtype).removeprefix('torch.') if dtype else 'fp32'}",
        params=sum(p.numel() * p.element_size() for p in params),
        grads=grads, optimizer_state=state, activations=activations,
        peak_forward=peaks["forward"], peak_backward=peaks["backward"], peak_optimizer=peaks["optimizer"],
        allocated_after=torch.cuda.memory_allocated(dev) if cuda else None,
        reserved_after=torch.cuda.memory_reserved(dev) if cuda else None,
        nvml_used_after=nvml_used_bytes(dev) if cuda else None,
    )


def anatomy_figure(items: list[Anatomy], *, title: str = "Where one training step's memory goes"):
    """Stacked bars per variant: weights, gradients, optimizer state, activations kept for backward (GiB)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    # each variant's name on two lines ("SGD + momentum<br>fp32"): side by side on one line they run together
    labels = [a.label.replace(", ", "<br>", 1) for a in items]
    for part, attr in (("weights", "params"), ("gradients", "grads"), ("optimizer state", "optimizer_state"),
                       ("activations kept for backward", "activations")):
        fig.add_trace(go.Bar(x=labels, y=[getattr(a, attr) / GIB for a in items], name=part))
    peaks = [a.peak for a in items]
    if all(p is not None for p in peaks):
        fig.add_trace(go.Scatter(x=labels, y=[p / GIB for p in peaks], mode="markers",
                                 marker=dict(symbol="line-ew", size=40, line=dict(width=3, color="black")),
                                 name="allocator peak of the step"))
    fig.update_layout(barmode="stack", title=title, yaxis_title="GiB", height=380)
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
