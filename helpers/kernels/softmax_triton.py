"""A fused row softmax in Triton: the reference solution of 03_kernels' exercise (try it first).

    from helpers.kernels.softmax_triton import softmax
    y = softmax(x)          # x: 2-D, on a CUDA GPU (or on the CPU with TRITON_INTERPRET=1)

One program per row: load the row once (masking the tail when the row is shorter than the
block), subtract its max so ``exp`` cannot overflow, exponentiate, divide by the sum, store once.
This module imports Triton; ``helpers`` imports it only when asked for.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["softmax_kernel", "softmax"]


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols  # BLOCK is a power of two ≥ n_cols: the tail of the block is not part of the row
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)  # exp of the largest is 1: nothing overflows
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, (num / den).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor, one Triton program per row."""
    if x.dim() != 2:
        raise ValueError(f"softmax expects a 2-D tensor (rows × columns), got shape {tuple(x.shape)}.")
    x = x if x.stride(1) == 1 else x.contiguous()  # the kernel walks a row's columns one element apart
    rows, cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    num_warps = 4 if block <= 2048 else (8 if block <= 8192 else 16)  # more threads for longer rows
    softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK=block, num_warps=num_warps)
    return out
