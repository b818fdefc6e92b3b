"""ReLU and 2×2 max-pool fused, forward and backward, in Triton: the kernel the final challenge's profile asks for.

    from helpers.kernels.relu_pool_triton import relu_maxpool2x2
    y = relu_maxpool2x2(x)     # == F.max_pool2d(F.relu(x), 2), any layout (channels_last is the fast one), and
    y.sum().backward()         # x.grad as PyTorch's ReLU + max-pool backward gives it, ties included
    fuse_relu_pool(model)      # a ReferenceCNN's blocks run conv → this kernel (same weights, same function)

Why it pays: ``max(0, max of four) == max of four (max(0, each))``, so the ReLU can follow the pool. PyTorch runs
them as separate kernels and keeps, for the backward, ReLU's output (as large as ``x``) and the pool's
argmax indices (int64, a quarter of ``x``'s elements at 8 bytes each). Its pool backward fills the whole
input gradient with zeros, then scatters the output gradient into it; ReLU's backward reads that gradient and
its own output and writes the gradient again.

Here the forward reads ``x`` once and writes ``y`` (a quarter of it), and keeps ``x`` alone for the backward
(the convolution before it already produced it). The backward finds each window's argmax again from ``x``
(the first largest, in the order PyTorch's pool uses), and writes every element of the input gradient
exactly once: the output gradient where the window's maximum was and was positive, zero elsewhere. No fill,
no scatter, no indices.

Registered as a custom operator (``gpl::relu_maxpool2x2``, :func:`torch.library.triton_op`) with its backward,
so ``torch.compile`` sees the kernels and autograd differentiates it. This module imports Triton; on a CPU,
Triton's interpreter runs it (``helpers`` sets ``TRITON_INTERPRET=1``): correct there, slow.
"""

from __future__ import annotations

import types

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

__all__ = ["relu_maxpool2x2", "relu_maxpool2x2_reference", "FusedReluPool", "fuse_relu_pool", "BLOCK"]

BLOCK = 1024  # output elements per program


@triton.jit
def _window(x_ptr, n, c, oh, ow, sn, sc, sh, sw, mask):
    """The 2×2 window of ``x`` under output (n, c, oh, ow): its four values, in PyTorch's scan order."""
    base = n * sn + c * sc + (2 * oh) * sh + (2 * ow) * sw
    v00 = tl.load(x_ptr + base, mask=mask, other=0.0).to(tl.float32)
    v01 = tl.load(x_ptr + base + sw, mask=mask, other=0.0).to(tl.float32)
    v10 = tl.load(x_ptr + base + sh, mask=mask, other=0.0).to(tl.float32)
    v11 = tl.load(x_ptr + base + sh + sw, mask=mask, other=0.0).to(tl.float32)
    return base, v00, v01, v10, v11


@triton.jit
def _output_coords(offs, C, OH, OW, CHANNELS_LAST: tl.constexpr):
    """Output element ``offs`` (in the output's memory order, so loads and stores are contiguous) as n, c, oh, ow."""
    if CHANNELS_LAST:  # memory order n, oh, ow, c: neighbouring programs' lanes are neighbouring channels
        c = offs % C
        rest = offs // C
        ow = rest % OW
        rest = rest // OW
        oh = rest % OH
        n = rest // OH
    else:  # n, c, oh, ow
        ow = offs % OW
        rest = offs // OW
        oh = rest % OH
        rest = rest // OH
        c = rest % C
        n = rest // C
    return n, c, oh, ow


@triton.jit
def relu_maxpool_fwd_kernel(x_ptr, y_ptr, total, C, OH, OW, sn, sc, sh, sw, yn, yc, yh, yw,
                            CHANNELS_LAST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # int64: batch 1024 at 224² passes 2³¹
    mask = offs < total
    n, c, oh, ow = _output_coords(offs, C, OH, OW, CHANNELS_LAST)
    base, v00, v01, v10, v11 = _window(x_ptr, n, c, oh, ow, sn, sc, sh, sw, mask)
    best = tl.maximum(tl.maximum(v00, v01), tl.maximum(v10, v11))
    out = tl.maximum(best, 0.0)  # the ReLU, after the pool: the same value, one comparison instead of four
    tl.store(y_ptr + n * yn + c * yc + oh * yh + ow * yw, out.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def relu_maxpool_bwd_kernel(x_ptr, gy_ptr, gx_ptr, total, C, OH, OW, sn, sc, sh, sw, yn, yc, yh, yw,
                            CHANNELS_LAST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # int64: batch 1024 at 224² passes 2³¹
    mask = offs < total
    n, c, oh, ow = _output_coords(offs, C, OH, OW, CHANNELS_LAST)
    base, v00, v01, v10, v11 = _window(x_ptr, n, c, oh, ow, sn, sc, sh, sw, mask)
    # the first largest in scan order, as PyTorch's pool picks it (a later value must be strictly larger)
    idx = tl.zeros_like(offs)
    best = v00
    idx = tl.where(v01 > best, 1, idx)
    best = tl.maximum(best, v01)
    idx = tl.where(v10 > best, 2, idx)
    best = tl.maximum(best, v10)
    idx = tl.where(v11 > best, 3, idx)
    best = tl.maximum(best, v11)
    g = tl.load(gy_ptr + n * yn + c * yc + oh * yh + ow * yw, mask=mask, other=0.0).to(tl.float32)
    g = tl.where(best > 0.0, g, 0.0)  # ReLU's gradient: nothing flows where the window's maximum was ≤ 0
    zero = tl.zeros_like(g)
    ty = gx_ptr.dtype.element_ty
    # the input gradient's layout is the input's: the same strides
    tl.store(gx_ptr + base, tl.where(idx == 0, g, zero).to(ty), mask=mask)
    tl.store(gx_ptr + base + sw, tl.where(idx == 1, g, zero).to(ty), mask=mask)
    tl.store(gx_ptr + base + sh, tl.where(idx == 2, g, zero).to(ty), mask=mask)
    tl.store(gx_ptr + base + sh + sw, tl.where(idx == 3, g, zero).to(ty), mask=mask)


def _layout(x: torch.Tensor) -> tuple[bool, torch.memory_format]:
    if x.dim() != 4:
        raise ValueError(f"relu_maxpool2x2 expects a 4-D (N, C, H, W) tensor, got shape {tuple(x.shape)}.")
    cl = x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    return cl, torch.channels_last if cl else torch.contiguous_format


@triton_op("gpl::relu_maxpool2x2", mutates_args=())
def _forward(x: torch.Tensor) -> torch.Tensor:
    cl, fmt = _layout(x)
    x = x.contiguous(memory_format=fmt)  # a no-op for either dense layout; strided views are made dense
    N, C, H, W = x.shape
    y = torch.empty((N, C, H // 2, W // 2), device=x.device, dtype=x.dtype, memory_format=fmt)
    total = y.numel()
    if total:
        wrap_triton(relu_maxpool_fwd_kernel)[(triton.cdiv(total, BLOCK),)](
            x, y, total, C, H // 2, W // 2, *x.stride(), *y.stride(), CHANNELS_LAST=cl, BLOCK=BLOCK)
    return y


@triton_op("gpl::relu_maxpool2x2_backward", mutates_args=())
def _backward(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    cl, fmt = _layout(x)
    x = x.contiguous(memory_format=fmt)
    grad_y = grad_y.contiguous(memory_format=fmt)
    N, C, H, W = x.shape
    # even sides: every input element lies in one window and is written once, so no fill is needed; an odd
    # side's last row or column lies in none (the pool floors) and must read as zero
    odd = H % 2 or W % 2
    grad_x = (torch.zeros_like if odd else torch.empty_like)(x, memory_format=fmt)
    total = grad_y.numel()
    if total:
        wrap_triton(relu_maxpool_bwd_kernel)[(triton.cdiv(total, BLOCK),)](
            x, grad_y, grad_x, total, C, H // 2, W // 2, *x.stride(), *grad_y.stride(), CHANNELS_LAST=cl,
            BLOCK=BLOCK)
    return grad_x


def _setup_context(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def _grad(ctx, grad_y):
    (x,) = ctx.saved_tensors
    return torch.ops.gpl.relu_maxpool2x2_backward(grad_y, x)


_forward.register_autograd(_grad, setup_context=_setup_context)


def relu_maxpool2x2(x: torch.Tensor) -> torch.Tensor:
    """``F.max_pool2d(F.relu(x), 2)`` in one Triton kernel, differentiable (its backward is one kernel too)."""
    return torch.ops.gpl.relu_maxpool2x2(x)


def relu_maxpool2x2_reference(x: torch.Tensor) -> torch.Tensor:
    """What it must equal: PyTorch's two ops, as the reference CNN runs them."""
    return torch.nn.functional.max_pool2d(torch.relu(x), 2, 2)


class FusedReluPool(torch.nn.Module):
    """A module for the fused op: ``model.relu_pool = FusedReluPool()`` where a block runs ``pool(relu(conv(x)))``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_maxpool2x2(x)


def fuse_relu_pool(model: torch.nn.Module) -> torch.nn.Module:
    """Make a :class:`~helpers.models.ReferenceCNN` run each block as conv → fused ReLU + pool, in place: the same
    weights and the same function (checkpointing included, which recomputes the same block). Returns ``model``."""
    if not hasattr(model, "_block"):
        raise TypeError(f"fuse_relu_pool needs the course's ReferenceCNN (conv → ReLU → pool blocks), got "
                        f"{type(model).__name__}.")
    model._block = types.MethodType(lambda self, conv, x: relu_maxpool2x2(conv(x)), model)
    return model
