"""Bias, ReLU and 2×2 max-pool fused, forward and backward, in Triton: the kernels the final challenge's profile asks for.

    from helpers.kernels.relu_pool_triton import relu_maxpool2x2
    y = relu_maxpool2x2(x)         # == F.max_pool2d(F.relu(x), 2), any layout (channels_last is the fast one)
    y = relu_maxpool2x2(x, bias)   # == F.max_pool2d(F.relu(x + bias[:, None, None]), 2): a convolution's bias too
    y.sum().backward()             # x.grad (and bias.grad) as PyTorch's ops give them, ties included
    fuse_relu_pool(model)          # a ReferenceCNN's blocks run conv (no bias) → this kernel (the same function)
    fuse_relu_pool(model, keep="argmax")   # the same, its backward reading a byte per output (see below)

Why it pays: ``max(0, max of four + b) == max of four (max(0, each + b))``, so the bias and the ReLU can follow the
pool. Compiled, PyTorch runs the convolution without its bias, then one kernel adds the bias and applies the ReLU
(reading and writing the whole activation), then the pool (reading it again, writing a quarter and the argmax
indices). In the backward a kernel scatters the output gradient through the indices and ReLU's mask, and another
sums the whole input gradient per channel for the bias.

Here the forward reads ``x`` once and writes ``y`` (a quarter of it), and keeps ``x`` for the backward (the
convolution produced it anyway). The backward finds each window's argmax again from ``x`` (the first largest, in
the order PyTorch's pool uses), writes every element of the input gradient exactly once (the output gradient where
the window's maximum was and was positive, zero elsewhere: no fill, no scatter, no indices), and sums the bias's
gradient from the output gradient it already holds, a quarter of the input's size: each tile adds its per-channel
sums with one atomic add per channel (so the bias gradient's last bits depend on the order tiles finish).

With ``keep="argmax"`` the forward also writes, per output, one byte: which of the four values was the window's
argmax, or that the ReLU stopped the gradient there. The backward reads those bytes and the output gradient (a
quarter of the input's values each) instead of the input itself, and autograd keeps the bytes instead of the
convolution's output, which is freed after the forward. In bf16 that moves 11 bytes per output in each direction
instead of 10 forward and 18 backward: on one H100 at batch 512 the reference solution's step took about 1 ms less
(scripts/probes/reference_timeline.py; results/archive/probe-reference-timeline…).

Each program takes a tile of output positions × channels, so the loads run along the channels in channels_last
(contiguous) and the bias is loaded once per tile. Registered as opaque custom operators (``gpl::relu_maxpool2x2``
and its backward, :func:`torch.library.custom_op`) with autograd: ``torch.compile`` calls them as they are. (Traced
into as a ``triton_op``, Inductor's functionalisation added copies of the buffers the kernels write: about 5 ms a
step at batch 512.) This module imports Triton. On a CPU the operators compute the same function with PyTorch's ops (:func:`on_cpu`):
Triton has no CPU backend, and its interpreter, which runs a kernel one program at a time in Python, took about ten
times as long as those ops for the reference CNN's training step (a 2-core CPU, AVX2, batch 32 at 32², 2026-11-27:
1.3 s against 0.13 s). With ``HELPERS_TRITON_ON_CPU=1`` a CPU runs the Triton kernels in the interpreter instead
(``helpers`` sets ``TRITON_INTERPRET=1`` there): the tests check the kernels that way, and both ways against
PyTorch's pool, bit for bit.
"""

from __future__ import annotations

import os
import types

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ..models import PaddedInputConv

__all__ = ["relu_maxpool2x2", "relu_maxpool2x2_kernel", "relu_maxpool2x2_reference", "FusedReluPool", "fuse_relu_pool", "BLOCK_P", "KEEPS",
           "on_cpu"]

BLOCK_P = 32  # output positions per tile (× up to 64 channels: 2,048 outputs); 32 times the backward 13% faster than 16 on an H100
_MAX_BLOCK_C = 64


@triton.jit
def _tile(p0, c0, P, C, OH, OW, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    """A tile's output positions (as n, oh, ow), its channels, and which of them exist."""
    p = p0.to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)  # int64: batch 1024 at 224² passes 2³¹ elements
    c = c0 * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (p < P)[:, None] & (c < C)[None, :]
    ow = p % OW
    rest = p // OW
    oh = rest % OH
    n = rest // OH
    return n, oh, ow, c, mask


@triton.jit
def _window(x_ptr, n, oh, ow, c, C, sn, sc, sh, sw, mask, b_ptr, HAS_BIAS: tl.constexpr):
    """The 2×2 windows of ``x`` under a tile: where they start, their four values (in PyTorch's scan order),
    and the bias of each channel (zeros without one)."""
    base = (n * sn + (2 * oh) * sh + (2 * ow) * sw)[:, None] + (c * sc)[None, :]
    v00 = tl.load(x_ptr + base, mask=mask, other=0.0).to(tl.float32)
    v01 = tl.load(x_ptr + base + sw, mask=mask, other=0.0).to(tl.float32)
    v10 = tl.load(x_ptr + base + sh, mask=mask, other=0.0).to(tl.float32)
    v11 = tl.load(x_ptr + base + sh + sw, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        b = tl.load(b_ptr + c, mask=c < C, other=0.0).to(tl.float32)
    else:
        b = tl.zeros_like(c).to(tl.float32)
    return base, v00, v01, v10, v11, b


@triton.jit
def relu_maxpool_fwd_kernel(x_ptr, b_ptr, y_ptr, P, C, OH, OW, sn, sc, sh, sw, yn, yc, yh, yw,
                            HAS_BIAS: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    n, oh, ow, c, mask = _tile(tl.program_id(0), tl.program_id(1), P, C, OH, OW, BLOCK_P, BLOCK_C)
    base, v00, v01, v10, v11, b = _window(x_ptr, n, oh, ow, c, C, sn, sc, sh, sw, mask, b_ptr, HAS_BIAS)
    best = tl.maximum(tl.maximum(v00, v01), tl.maximum(v10, v11)) + b[None, :]
    out = tl.maximum(best, 0.0)  # the ReLU, after the pool: the same value, one comparison instead of four
    dst = (n * yn + oh * yh + ow * yw)[:, None] + (c * yc)[None, :]
    tl.store(y_ptr + dst, out.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def relu_maxpool_bwd_kernel(x_ptr, b_ptr, gy_ptr, gx_ptr, gb_ptr, P, C, OH, OW, sn, sc, sh, sw, yn, yc, yh, yw,
                            HAS_BIAS: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    n, oh, ow, c, mask = _tile(tl.program_id(0), tl.program_id(1), P, C, OH, OW, BLOCK_P, BLOCK_C)
    base, v00, v01, v10, v11, b = _window(x_ptr, n, oh, ow, c, C, sn, sc, sh, sw, mask, b_ptr, HAS_BIAS)
    idx, best = _argmax(v00, v01, v10, v11)
    g = tl.load(gy_ptr + (n * yn + oh * yh + ow * yw)[:, None] + (c * yc)[None, :], mask=mask, other=0.0)
    g = tl.where(best + b[None, :] > 0.0, g.to(tl.float32), 0.0)  # ReLU's gradient: none where max + bias ≤ 0
    zero = tl.zeros_like(g)
    ty = gx_ptr.dtype.element_ty
    # the input gradient's layout is the input's: the same strides
    tl.store(gx_ptr + base, tl.where(idx == 0, g, zero).to(ty), mask=mask)
    tl.store(gx_ptr + base + sw, tl.where(idx == 1, g, zero).to(ty), mask=mask)
    tl.store(gx_ptr + base + sh, tl.where(idx == 2, g, zero).to(ty), mask=mask)
    tl.store(gx_ptr + base + sh + sw, tl.where(idx == 3, g, zero).to(ty), mask=mask)
    if HAS_BIAS:  # each output's gradient reaches exactly one input element: the bias's gradient is their sum
        tl.atomic_add(gb_ptr + c, tl.sum(g, axis=0), mask=c < C)


@triton.jit
def _argmax(v00, v01, v10, v11):
    """Each window's first largest value in scan order, as PyTorch's pool picks it (a later value must be strictly
    larger), and its place (0-3)."""
    idx = tl.zeros(v00.shape, dtype=tl.int32)
    best = v00
    idx = tl.where(v01 > best, 1, idx)
    best = tl.maximum(best, v01)
    idx = tl.where(v10 > best, 2, idx)
    best = tl.maximum(best, v10)
    idx = tl.where(v11 > best, 3, idx)
    best = tl.maximum(best, v11)
    return idx, best


@triton.jit
def relu_maxpool_fwd_keep_argmax_kernel(x_ptr, b_ptr, y_ptr, code_ptr, P, C, OH, OW, sn, sc, sh, sw, yn, yc, yh, yw,
                                        HAS_BIAS: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    n, oh, ow, c, mask = _tile(tl.program_id(0), tl.program_id(1), P, C, OH, OW, BLOCK_P, BLOCK_C)
    base, v00, v01, v10, v11, b = _window(x_ptr, n, oh, ow, c, C, sn, sc, sh, sw, mask, b_ptr, HAS_BIAS)
    idx, best = _argmax(v00, v01, v10, v11)
    best = best + b[None, :]
    dst = (n * yn + oh * yh + ow * yw)[:, None] + (c * yc)[None, :]
    tl.store(y_ptr + dst, tl.maximum(best, 0.0).to(y_ptr.dtype.element_ty), mask=mask)
    # one byte per output instead of the whole input kept for the backward (four values per output): the window's
    # argmax (0-3), or 4 where the ReLU stops the gradient (max + bias ≤ 0)
    tl.store(code_ptr + dst, tl.where(best > 0.0, idx, 4).to(tl.uint8), mask=mask)


@triton.jit
def relu_maxpool_bwd_keep_argmax_kernel(code_ptr, gy_ptr, gx_ptr, gb_ptr, P, C, OH, OW, sn, sc, sh, sw, yn, yc, yh,
                                        yw, HAS_BIAS: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    n, oh, ow, c, mask = _tile(tl.program_id(0), tl.program_id(1), P, C, OH, OW, BLOCK_P, BLOCK_C)
    src = (n * yn + oh * yh + ow * yw)[:, None] + (c * yc)[None, :]
    code = tl.load(code_ptr + src, mask=mask, other=4).to(tl.int32)
    g = tl.load(gy_ptr + src, mask=mask, other=0.0).to(tl.float32)
    g = tl.where(code < 4, g, 0.0)
    zero = tl.zeros_like(g)
    ty = gx_ptr.dtype.element_ty
    base = (n * sn + (2 * oh) * sh + (2 * ow) * sw)[:, None] + (c * sc)[None, :]
    tl.store(gx_ptr + base, tl.where(code == 0, g, zero).to(ty), mask=mask)
    tl.store(gx_ptr + base + sw, tl.where(code == 1, g, zero).to(ty), mask=mask)
    tl.store(gx_ptr + base + sh, tl.where(code == 2, g, zero).to(ty), mask=mask)
    tl.store(gx_ptr + base + sh + sw, tl.where(code == 3, g, zero).to(ty), mask=mask)
    if HAS_BIAS:
        tl.atomic_add(gb_ptr + c, tl.sum(g, axis=0), mask=c < C)


def _layout(x: torch.Tensor) -> torch.memory_format:
    if x.dim() != 4:
        raise ValueError(f"relu_maxpool2x2 expects a 4-D (N, C, H, W) tensor, got shape {tuple(x.shape)}.")
    cl = x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    return torch.channels_last if cl else torch.contiguous_format


_INTERPRETER_BLOCK_P = 1024  # on a CPU Triton's interpreter runs programs one by one: few, large tiles are fast


def _grid(x: torch.Tensor) -> tuple[tuple[int, int], int, int]:
    N, C, H, W = x.shape
    block_c = min(_MAX_BLOCK_C, triton.next_power_of_2(C)) if x.is_cuda else triton.next_power_of_2(C)
    block_p = BLOCK_P if x.is_cuda else _INTERPRETER_BLOCK_P
    return (triton.cdiv(N * (H // 2) * (W // 2), block_p), triton.cdiv(C, block_c)), block_p, block_c


def on_cpu() -> str:
    """What runs the operators on CPU tensors: ``"interpreter"`` (the Triton kernels in Triton's interpreter, where
    ``HELPERS_TRITON_ON_CPU=1``) or ``"pytorch ops"`` (the same function in PyTorch's ops: the default)."""
    return "interpreter" if os.environ.get("HELPERS_TRITON_ON_CPU") == "1" else "pytorch ops"


def _ops_here(t: torch.Tensor) -> bool:
    return not t.is_cuda and on_cpu() == "pytorch ops"


def _windows(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The four values of each 2×2 window in PyTorch's scan order, in fp32 (the kernels' arithmetic); an odd side's
    last row or column lies in no window."""
    xf = x[:, :, : x.shape[2] // 2 * 2, : x.shape[3] // 2 * 2].float()
    return xf[:, :, 0::2, 0::2], xf[:, :, 0::2, 1::2], xf[:, :, 1::2, 0::2], xf[:, :, 1::2, 1::2]


def _argmax_ops(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_argmax` in PyTorch's ops: each window's first largest value and its place (0-3)."""
    v00, v01, v10, v11 = _windows(x)
    idx, best = torch.zeros(v00.shape, dtype=torch.uint8, device=x.device), v00
    for k, v in ((1, v01), (2, v10), (3, v11)):
        idx = torch.where(v > best, k, idx)
        best = torch.maximum(best, v)
    return idx, best


def _bias_ops(bias: torch.Tensor | None) -> torch.Tensor | float:
    return bias.float()[None, :, None, None] if bias is not None else 0.0


def _grads_ops(g: torch.Tensor, idx: torch.Tensor, shape: torch.Size, dtype: torch.dtype, fmt: torch.memory_format,
               has_bias: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Both backwards in PyTorch's ops, from each window's output gradient ``g`` (fp32, zero where the ReLU stopped
    it) and its argmax ``idx``: the input gradient (``g`` at the argmax, zero elsewhere) and the bias's (fp32)."""
    grad_x = torch.zeros(shape, dtype=torch.float32, device=g.device)
    oh, ow = g.shape[2] * 2, g.shape[3] * 2
    for k, (dh, dw) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        grad_x[:, :, dh:oh:2, dw:ow:2] = torch.where(idx == k, g, 0.0)
    grad_b = g.sum((0, 2, 3)) if has_bias else torch.zeros(0, device=g.device)
    return grad_x.to(dtype).contiguous(memory_format=fmt), grad_b


def _check_bias(x: torch.Tensor, bias: torch.Tensor | None) -> None:
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != x.shape[1]):
        raise ValueError(f"relu_maxpool2x2: bias must have one value per channel ({x.shape[1]}), got shape "
                         f"{tuple(bias.shape)}.")


def relu_maxpool2x2_kernel(x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """The forward Triton kernel, launched whatever the device (in Triton's interpreter on a CPU), no autograd: what
    03's exercise reference runs, since the exercise is to launch a kernel.

        y = relu_maxpool2x2_kernel(x, bias)   # == relu_maxpool2x2(x, bias), without its backward
    """
    fmt = _layout(x)
    _check_bias(x, bias)
    x = x.contiguous(memory_format=fmt)  # a no-op for either dense layout; strided views are made dense
    N, C, H, W = x.shape
    y = torch.empty((N, C, H // 2, W // 2), device=x.device, dtype=x.dtype, memory_format=fmt)
    if y.numel():
        grid, block_p, block_c = _grid(x)
        relu_maxpool_fwd_kernel[grid](x, bias if bias is not None else x, y, N * (H // 2) * (W // 2),
                                      C, H // 2, W // 2, *x.stride(), *y.stride(), HAS_BIAS=bias is not None,
                                      BLOCK_P=block_p, BLOCK_C=block_c)
    return y


@torch.library.custom_op("gpl::relu_maxpool2x2", mutates_args=())
def _forward(x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    if _ops_here(x):
        fmt = _layout(x)
        _check_bias(x, bias)
        _, best = _argmax_ops(x)
        return torch.relu(best + _bias_ops(bias)).to(x.dtype).contiguous(memory_format=fmt)
    return relu_maxpool2x2_kernel(x, bias)


@_forward.register_fake
def _forward_fake(x, bias):
    fmt = _layout(x)
    N, C, H, W = x.shape
    return x.new_empty((N, C, H // 2, W // 2)).contiguous(memory_format=fmt)


@torch.library.custom_op("gpl::relu_maxpool2x2_backward", mutates_args=())
def _backward(grad_y: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    fmt = _layout(x)
    x = x.contiguous(memory_format=fmt)
    grad_y = grad_y.contiguous(memory_format=fmt)
    N, C, H, W = x.shape
    if _ops_here(x):
        idx, best = _argmax_ops(x)
        g = torch.where(best + _bias_ops(bias) > 0.0, grad_y.float(), 0.0)  # ReLU's gradient: none where max + bias ≤ 0
        grad_x, grad_b = _grads_ops(g, idx, x.shape, x.dtype, fmt, bias is not None)
        return grad_x, grad_b.to(bias.dtype) if bias is not None else grad_b
    # even sides: every input element lies in one window and is written once, so no fill is needed; an odd
    # side's last row or column lies in none (the pool floors) and must read as zero
    odd = H % 2 or W % 2
    grad_x = (torch.zeros_like if odd else torch.empty_like)(x, memory_format=fmt)
    grad_b = torch.zeros(C if bias is not None else 0, device=x.device, dtype=torch.float32)
    if grad_y.numel():
        grid, block_p, block_c = _grid(x)
        relu_maxpool_bwd_kernel[grid](x, bias if bias is not None else x, grad_y, grad_x, grad_b,
                                      N * (H // 2) * (W // 2), C, H // 2, W // 2, *x.stride(), *grad_y.stride(),
                                      HAS_BIAS=bias is not None, BLOCK_P=block_p, BLOCK_C=block_c)
    return grad_x, grad_b.to(bias.dtype) if bias is not None else grad_b


@_backward.register_fake
def _backward_fake(grad_y, x, bias):
    fmt = _layout(x)
    grad_b = x.new_empty((x.shape[1] if bias is not None else 0,), dtype=bias.dtype if bias is not None else torch.float32)
    return torch.empty_like(x, memory_format=fmt), grad_b


def _setup_context(ctx, inputs, output):
    x, bias = inputs
    ctx.save_for_backward(x, bias)
    ctx.has_bias = bias is not None


def _grad(ctx, grad_y):
    x, bias = ctx.saved_tensors
    grad_x, grad_b = torch.ops.gpl.relu_maxpool2x2_backward(grad_y, x, bias if ctx.has_bias else None)
    return grad_x, (grad_b if ctx.has_bias else None)


_forward.register_autograd(_grad, setup_context=_setup_context)


@torch.library.custom_op("gpl::relu_maxpool2x2_keep_argmax", mutates_args=())
def _forward_argmax(x: torch.Tensor, bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    fmt = _layout(x)
    _check_bias(x, bias)
    x = x.contiguous(memory_format=fmt)
    N, C, H, W = x.shape
    if _ops_here(x):
        idx, best = _argmax_ops(x)
        best = best + _bias_ops(bias)
        y = torch.relu(best).to(x.dtype).contiguous(memory_format=fmt)
        return y, torch.where(best > 0.0, idx, 4).to(torch.uint8).contiguous(memory_format=fmt)
    y = torch.empty((N, C, H // 2, W // 2), device=x.device, dtype=x.dtype, memory_format=fmt)
    code = torch.empty((N, C, H // 2, W // 2), device=x.device, dtype=torch.uint8, memory_format=fmt)
    if y.numel():
        grid, block_p, block_c = _grid(x)
        relu_maxpool_fwd_keep_argmax_kernel[grid](x, bias if bias is not None else x, y, code,
                                                  N * (H // 2) * (W // 2), C, H // 2, W // 2, *x.stride(),
                                                  *y.stride(), HAS_BIAS=bias is not None, BLOCK_P=block_p,
                                                  BLOCK_C=block_c)
    return y, code


@_forward_argmax.register_fake
def _forward_argmax_fake(x, bias):
    fmt = _layout(x)
    N, C, H, W = x.shape
    y = x.new_empty((N, C, H // 2, W // 2)).contiguous(memory_format=fmt)
    return y, torch.empty_like(y, dtype=torch.uint8)


@torch.library.custom_op("gpl::relu_maxpool2x2_keep_argmax_backward", mutates_args=())
def _backward_argmax(grad_y: torch.Tensor, code: torch.Tensor, has_bias: bool, height: int,
                     width: int) -> tuple[torch.Tensor, torch.Tensor]:
    fmt = _layout(code)
    code = code.contiguous(memory_format=fmt)
    grad_y = grad_y.contiguous(memory_format=fmt)  # the same shape and layout as code: the same strides
    N, C, OH, OW = code.shape
    if _ops_here(code):
        g = torch.where(code < 4, grad_y.float(), 0.0)  # code 4: the ReLU stopped the gradient
        return _grads_ops(g, code, torch.Size((N, C, height, width)), grad_y.dtype, fmt, has_bias)
    odd = height % 2 or width % 2  # an odd side's last row or column lies in no window: it must read as zero
    # made in the layout it is written in (an empty tensor made contiguous would be copied, in full, each step)
    grad_x = torch.empty((N, C, height, width), device=code.device, dtype=grad_y.dtype, memory_format=fmt)
    if odd:
        grad_x.zero_()
    grad_b = torch.zeros(C if has_bias else 0, device=code.device, dtype=torch.float32)
    if grad_y.numel():
        grid, block_p, block_c = _grid(grad_x)
        relu_maxpool_bwd_keep_argmax_kernel[grid](code, grad_y, grad_x, grad_b, N * OH * OW, C, OH, OW,
                                                  *grad_x.stride(), *grad_y.stride(), HAS_BIAS=has_bias,
                                                  BLOCK_P=block_p, BLOCK_C=block_c)
    return grad_x, grad_b


@_backward_argmax.register_fake
def _backward_argmax_fake(grad_y, code, has_bias, height, width):
    fmt = _layout(code)
    N, C = code.shape[:2]
    grad_x = grad_y.new_empty((N, C, height, width)).contiguous(memory_format=fmt)
    return grad_x, grad_y.new_empty((C if has_bias else 0,), dtype=torch.float32)


def _setup_context_argmax(ctx, inputs, output):
    x, bias = inputs
    _, code = output
    ctx.save_for_backward(code)  # not x: the convolution's output is freed after the forward
    ctx.mark_non_differentiable(code)
    ctx.has_bias, ctx.height, ctx.width = bias is not None, x.shape[2], x.shape[3]
    ctx.bias_dtype = bias.dtype if bias is not None else None


def _grad_argmax(ctx, grad_y, _grad_code):
    (code,) = ctx.saved_tensors
    grad_x, grad_b = torch.ops.gpl.relu_maxpool2x2_keep_argmax_backward(grad_y, code, ctx.has_bias, ctx.height,
                                                                        ctx.width)
    return grad_x, (grad_b.to(ctx.bias_dtype) if ctx.has_bias else None)


_forward_argmax.register_autograd(_grad_argmax, setup_context=_setup_context_argmax)

#: What the backward finds each window's argmax from: ``"input"`` (the convolution's output, kept; the argmax found
#: again) or ``"argmax"`` (one byte per output written by the forward: less to keep and to read back).
KEEPS = ("input", "argmax")


def relu_maxpool2x2(x: torch.Tensor, bias: torch.Tensor | None = None, *, keep: str = "input") -> torch.Tensor:
    """``F.max_pool2d(F.relu(x + bias per channel), 2)`` in one Triton kernel, differentiable (its backward, the
    bias's gradient included, is one kernel too). ``keep``: what the backward reads (:data:`KEEPS`)."""
    if keep == "argmax":
        return torch.ops.gpl.relu_maxpool2x2_keep_argmax(x, bias)[0]
    if keep != "input":
        raise ValueError(f"relu_maxpool2x2(keep={keep!r}): use one of {KEEPS}.")
    return torch.ops.gpl.relu_maxpool2x2(x, bias)


def relu_maxpool2x2_reference(x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """What it must equal: PyTorch's ops, as the reference CNN runs them (the bias added by its convolution)."""
    if bias is not None:
        x = x + bias.to(x.dtype)[:, None, None]
    return F.max_pool2d(torch.relu(x), 2, 2)


class FusedReluPool(torch.nn.Module):
    """A module for the fused op: ``model.relu_pool = FusedReluPool()`` where a block runs ``pool(relu(conv(x)))``."""

    def __init__(self, keep: str = "input") -> None:
        super().__init__()
        self.keep = keep

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return relu_maxpool2x2(x, bias, keep=self.keep)


def _fused_block(self, conv: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    if isinstance(conv, PaddedInputConv):  # conv1 padded to 8 input channels (the same function)
        x, conv = conv.pad(x), conv.conv
    return relu_maxpool2x2(conv._conv_forward(x, conv.weight, None), conv.bias, keep=getattr(self, "relu_pool_keeps", "input"))


def fuse_relu_pool(model: torch.nn.Module, *, keep: str = "input") -> torch.nn.Module:
    """Make a :class:`~helpers.models.ReferenceCNN` run each block as conv (without its bias) → the fused bias, ReLU
    and pool, in place: the same weights (the bias stays the convolution's parameter) and the same function
    (checkpointing included, which recomputes the same block). ``keep``: what the pools' backward reads
    (:data:`KEEPS`; ``model.relu_pool_keeps`` says it after). Returns ``model``."""
    if not hasattr(model, "_block"):
        raise TypeError(f"fuse_relu_pool needs the course's ReferenceCNN (conv → ReLU → pool blocks), got "
                        f"{type(model).__name__}.")
    if keep not in KEEPS:
        raise ValueError(f"fuse_relu_pool(keep={keep!r}): use one of {KEEPS}.")
    model.relu_pool_keeps = keep
    model._block = types.MethodType(_fused_block, model)
    return model
