"""Gradient accumulation: several small batches, one optimizer step, the same gradients as one big batch.

    g_big = batch_gradients(model, x, y)
    g_acc = accumulated_gradients(model, x, y, micro_batches=4)            # loss ÷ 4 on each micro-batch
    max_relative_difference(g_acc, g_big)                                  # ~1e-7 in fp32

The mean loss over a batch of N is the mean of the micro-batches' mean losses only if each
micro-batch's loss is divided by their count: without it the gradients come out that many times
too large, as if the learning rate had been multiplied.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["batch_gradients", "accumulated_gradients", "max_relative_difference"]


def batch_gradients(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """Gradients of the mean cross-entropy over the whole batch."""
    model.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return grads


def accumulated_gradients(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, micro_batches: int,
                          divide: bool = True) -> list[torch.Tensor]:
    """Gradients summed over ``micro_batches`` equal slices, each loss divided by their count (unless ``divide=False``)."""
    if micro_batches < 1 or x.shape[0] % micro_batches:
        raise ValueError(f"micro_batches={micro_batches} must divide the batch of {x.shape[0]} evenly.")
    model.zero_grad(set_to_none=True)
    for xs, ys in zip(x.chunk(micro_batches), y.chunk(micro_batches)):
        loss = nn.functional.cross_entropy(model(xs), ys)
        (loss / micro_batches if divide else loss).backward()  # backward adds into .grad
    grads = [p.grad.detach().clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return grads


def max_relative_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """The largest ``|a − b| / max|b|`` over the tensors: 0 when equal, ~1e-7 for fp32 rounding."""
    worst = 0.0
    for ga, gb in zip(a, b):
        scale = float(gb.abs().max()) or 1.0
        worst = max(worst, float((ga - gb).abs().max()) / scale)
    return worst
