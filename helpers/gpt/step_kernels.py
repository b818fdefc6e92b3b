"""The GPT training step's kernels on the roofline: matrix products and fused attention placed, the rest as shares.

    prof = profiling.profile_steps(runner.step, wait=1, warmup=1, active=2)
    kernels = step_roofline(prof, setup, config)           # helpers.challenge.step_roofline.StepKernels
    readable_kernels(kernels, ceil); roofline.roofline_figure(kernels.points, ceil)

A kernel's place needs its FLOPs and the least bytes it must move; the profile gives each kernel's name and time,
the network's shapes give the FLOPs and bytes of each group, per optimizer step (every micro-batch of it):

- **matrix products (GEMM)**: each linear layer's forward, input gradient and weight gradient (the output layer
  included): ``2·tokens·in·out`` FLOPs each, and the two operands read and the result written once each, in the
  precision the step computes in (2 bytes in bf16). With attention written out, its two batched products
  (``QKᵀ`` and the scores times ``V``, the T×T scores read and written) are GEMMs too.
- **fused attention** (flash and its kin): ``QKᵀ`` and the scores times ``V`` forward, twice that backward, over the
  lower triangle only (a causal kernel skips the rest: half the ``12·L·H·Q·T`` the MFU convention credits); bytes:
  ``q, k, v`` read and ``o`` written forward, and ``q, k, v, o`` and the output's gradient read and the three
  gradients written backward. What it recomputes in the backward pass (the scores, on chip) is not counted.

Everything else (LayerNorm, GELU, the casts, the loss, AdamW's update, whatever the compiler fused) depends on what
was fused, so it is listed with its share of the step instead (``unplaced``).
"""

from __future__ import annotations

from .. import profiling, tables
from ..bench import Ceilings
from ..challenge.step_roofline import PAST_THE_ROOF, StepKernels, place_kernels
from .model import GPTConfig

__all__ = ["GEMM", "ATTENTION", "step_costs", "kernel_group", "step_roofline", "readable_kernels"]

GEMM = "matrix products (GEMM)"
ATTENTION = "fused attention"
_KIND = {GEMM: "GEMM", ATTENTION: "attention"}
_ATTENTION_WORDS = ("flash", "fmha", "attention", "sdpa")


def step_costs(cfg: GPTConfig, *, seq_len: int, global_batch: int, micro_batch: int, bytes_per_value: int = 2,
               attention: str = "sdpa") -> dict[str, tuple[float, float]]:
    """FLOPs and least bytes per optimizer step of each group: ``{GEMM: (flops, bytes), ATTENTION: (...)}``."""
    d, L, H, T, V, b = cfg.n_embd, cfg.n_layer, cfg.n_head, seq_len, cfg.vocab_size, bytes_per_value
    Q = cfg.head_dim
    micro = global_batch // micro_batch
    tokens = micro_batch * T
    linears = [(d, 3 * d), (d, d), (d, 4 * d), (4 * d, d)] * L + [(d, V)]
    gemm_flops = gemm_bytes = 0.0
    for i, o in linears:  # forward, input gradient, weight gradient: each reads two of the three, writes the third
        gemm_flops += 3 * 2.0 * tokens * i * o
        gemm_bytes += 3 * (tokens * i + i * o + tokens * o) * b
    per_seq_fwd = 4.0 * H * T * T * Q  # QKᵀ and PV, the whole square
    att_flops = att_bytes = 0.0
    if attention == "sdpa":
        att_flops = 3 * per_seq_fwd / 2 * micro_batch * L  # causal: the lower triangle
        att_bytes = (4 + 8) * T * d * b * micro_batch * L  # forward q, k, v, o; backward q, k, v, o, dO, dq, dk, dv
    else:  # written out: two batched GEMMs per pass, the T×T scores read and written
        gemm_flops += 3 * per_seq_fwd * micro_batch * L
        gemm_bytes += 3 * 2 * (2 * T * d + H * T * T) * b * micro_batch * L
    out = {GEMM: (gemm_flops * micro, gemm_bytes * micro)}
    if att_flops:
        out[ATTENTION] = (att_flops * micro, att_bytes * micro)
    return out


def kernel_group(name: str, kind: str) -> str | None:
    """The group a profiled kernel (or, on a CPU, aten op) belongs to, or None (not placed)."""
    low = name.lower()
    if any(w in low for w in _ATTENTION_WORDS):
        return ATTENTION
    return GEMM if kind == "GEMM" else None


def step_roofline(prof: profiling.ProfileResult, cfg: GPTConfig, *, seq_len: int, global_batch: int,
                  micro_batch: int, bytes_per_value: int = 2, attention: str = "sdpa") -> StepKernels:
    """Place the profiled optimizer steps' kernel groups on the roofline (module docstring); each profiled step is
    one optimizer step of ``global_batch`` sequences in micro-batches of ``micro_batch``."""
    costs = step_costs(cfg, seq_len=seq_len, global_batch=global_batch, micro_batch=micro_batch,
                       bytes_per_value=bytes_per_value, attention=attention)
    return place_kernels(prof, costs, kernel_group, _KIND)


def readable_kernels(kernels: StepKernels, ceil: Ceilings) -> tables.Table:
    """:meth:`StepKernels.table` to read, with the reason a group can pass its roof said under it: a CPU's measured
    ceilings are stand-ins that bound nothing; on a GPU, :data:`PAST_THE_ROOF`.

    Its "% of roof" is :meth:`StepKernels.table`'s, the achieved TFLOP/s over the roof's as the table shows them
    (07 read "GEMM … 719 … 787 … 91.5" where 719 ÷ 787 is 91.4), so a share read past 100 here is one the shown
    rates pass, and a reason is said under it."""
    df = kernels.table(ceil).set_index("kernels")
    if (df["% of roof"] > 100).any():
        df.attrs["above_roof"] = {"% of roof": PAST_THE_ROOF if ceil.bounds else (
            "a CPU's ceilings are a small fp32 matmul and a copy measured in a moment, which its kernels pass")}
    return tables.readable(df)
