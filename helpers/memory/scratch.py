"""Scratch memory measured layer by layer: what each convolution or matrix product holds inside its own call, above
what it had on entry and what it returns. cuDNN's and cuBLAS's workspaces are such memory: the allocator counts them
with the tensors, so a peak that moves with a setting (TF32 off, say) while the tensors stay the same is read here
rather than inferred.

    with precision.tf32(False):
        rows = layer_scratch(cfg, device="cuda")           # [LayerScratch(layer="conv2", pass_="backward", ...)]
    largest(rows)                                          # the call that held the most

How: forward and backward hooks on every ``Conv2d`` and ``Linear`` of the Trainer's network. On entry to a call the
hook reads the allocated bytes and resets the allocator's peak (host-side bookkeeping: no sync); on exit, the peak
above both what stayed allocated after it and the entry's bytes plus what the call returned (its output; in backward,
the input's gradient and its parameters' gradients) is memory the call held only while it ran. A warm-up step runs
first, so cuDNN's algorithm search (``cudnn_benchmark``), which tries workspaces it will not keep, is not read as the
step's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from typing import Iterator

import torch
from torch import nn

from .. import train
from ..train import TrainConfig
from .anatomy import free_memory

__all__ = ["LayerScratch", "probe", "layer_scratch", "largest", "highest"]

GIB = 2**30


@dataclasses.dataclass(frozen=True)
class LayerScratch:
    """One layer's call in one pass: the memory it held only while it ran, in GiB."""

    layer: str  # the module's name in the network ("features.3")
    kind: str  # "Conv2d", "Linear"
    pass_: str  # "forward" or "backward"
    scratch_gib: float
    entry_gib: float = 0.0  # allocated when the call began
    # what it added that outlived it: its output; in backward, its input's and its parameters' gradients (or what
    # stayed allocated after it, where that is more): entry + added + scratch is the peak during the call
    added_gib: float = 0.0
    peak_gib: float = 0.0  # the allocator's highest point during the call: where a step's peak falls, if it is here


def _bytes(ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


@contextlib.contextmanager
def probe(model: nn.Module, device: torch.device | str) -> Iterator[list[LayerScratch]]:
    """Within the block, every call of ``model``'s Conv2d and Linear layers (forward and backward) adds a row to
    the list it yields: the memory that call held only while it ran. The hooks go when the block ends.

        with probe(model, "cuda") as rows:
            loss_fn(model(x), y).backward()
    """
    dev = torch.device(device)
    if dev.type != "cuda":
        raise RuntimeError(f"scratch memory is read from CUDA's allocator; {dev} has none. Run this on a GPU.")
    rows: list[LayerScratch] = []
    entry: dict[tuple[str, str], int] = {}  # (layer, pass) → bytes allocated on entry

    def opened(name: str, pass_: str) -> None:
        entry[(name, pass_)] = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)

    def closed(name: str, pass_: str, m: nn.Module, returned) -> None:
        at_entry = entry.pop((name, pass_))
        made = _bytes(returned)
        if pass_ == "backward":  # and a gradient for each of its parameters, kept or not yet accumulated
            made += _bytes(p for p in m.parameters() if p.requires_grad)
        # what stays allocated after the call (an autocast copy of the weights, say) is not scratch either
        kept = max(at_entry + made, torch.cuda.memory_allocated(dev))
        peak = torch.cuda.max_memory_allocated(dev)
        rows.append(LayerScratch(name, type(m).__name__, pass_, max(0, peak - kept) / GIB, at_entry / GIB,
                                 (kept - at_entry) / GIB, peak / GIB))

    handles = []
    for name, m in model.named_modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            handles += [
                m.register_forward_pre_hook(lambda mod, args, n=name: opened(n, "forward")),
                m.register_forward_hook(lambda mod, args, out, n=name: closed(n, "forward", mod, (out,))),
                m.register_full_backward_pre_hook(lambda mod, g_out, n=name: opened(n, "backward")),
                m.register_full_backward_hook(lambda mod, g_in, g_out, n=name: closed(n, "backward", mod, g_in)),
            ]
    try:
        yield rows
    finally:
        for h in handles:
            h.remove()


def layer_scratch(cfg: TrainConfig, *, device: torch.device | str | None = None,
                  warmup_steps: int = 2) -> list[LayerScratch]:
    """Every Conv2d's and Linear's scratch memory (:func:`probe`) in one training step of ``cfg`` (its dtype; TF32
    as set where it is called: :func:`helpers.memory.precision.tf32`), after ``warmup_steps``. Empty on a CPU: no
    allocator counts its memory there."""
    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type != "cuda":
        return []
    free_memory()
    trainer = train.Trainer(cfg, device=dev)
    try:
        for _ in range(warmup_steps):  # cuDNN's algorithm search, the optimizer's state: not the step's
            trainer.step(measure=False)
        torch.cuda.synchronize(dev)
        with probe(trainer.model, dev) as rows, warnings.catch_warnings():
            # the first layer's input needs no gradient: its backward hook sees only its output's, as meant
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            trainer.step(measure=False)
            torch.cuda.synchronize(dev)
    finally:
        del trainer
        free_memory()
    return rows


def largest(rows: list[LayerScratch]) -> LayerScratch | None:
    """The call that held the most scratch memory (None where nothing was measured)."""
    return max(rows, key=lambda r: r.scratch_gib, default=None)


def highest(rows: list[LayerScratch]) -> LayerScratch | None:
    """The call during which the step's memory was highest (None where nothing was measured)."""
    return max(rows, key=lambda r: r.peak_gib, default=None)
