"""FLOPs per token of training the GPT, counted the way the field counts them, and MFU from them.

    flops_per_token(GPTConfig.full())                 # 6N + 12·L·H·Q·T, T = block_size: about 0.85 GFLOP
    flops_breakdown(cfg, seq_len=512)                 # FlopsPerToken: the two terms apart
    mfu(tokens_per_s=150_000, cfg=cfg, peak_flops_per_s=989e12)   # share (0–1) of the stated peak
    counted_flops_per_token(cfg)                      # what FlopCounterMode counts, shapes only (any scale, instant)

**The convention (PaLM, appendix B; nanoGPT's ``estimate_mfu``).** Training one token costs
``6N + 12·L·H·Q·T`` floating-point operations, a multiply-add counted as 2:

- ``6N``: every weight is used in one multiply-add per token in the forward pass (2N), and in two in the
  backward pass (the gradient with respect to the input and with respect to the weight: 4N).
  **N is every parameter except the position table.** The token table is counted: it is tied to the output
  layer, and the output layer's matmul (``d × vocab`` per token, 2·V·d FLOPs forward) is real compute, the
  largest single matmul of a small GPT; the embedding *lookup* is no arithmetic, so the token table is counted
  once, for the output layer. The position table is only looked up: left out. The LayerNorm weights (and biases,
  with ``bias=True``) are in N although they do no matmul: a few thousandths of N, kept because the convention
  counts parameters, not matmuls (the measurement below shows them as the whole difference).
- ``12·L·H·Q·T`` (L layers, H heads, Q head dim, T sequence): attention's two matmuls, ``QKᵀ`` and the scores
  times ``V``, each ``2·T·Q`` FLOPs per token per head forward, ×3 for training. The *full* T×T square is
  counted, as PaLM and nanoGPT count it, though a causal kernel (flash attention with ``is_causal``) skips the
  upper triangle and so does about half of this term's work: an MFU computed this way credits causal attention
  with work it did not do. Papers that halve the term for causal attention report lower MFU for the same run;
  say which convention a figure uses.
- Not counted: softmax, GELU, LayerNorm's arithmetic, the residual additions, the loss, the optimizer.

**What ``FlopCounterMode`` counts** (``torch.utils.flop_counter``): matmuls (``mm``, ``bmm``, ``addmm``),
convolutions and the fused attention ops of CUDA (flash, memory-efficient, cuDNN); not element-wise work. On a
CPU, ``scaled_dot_product_attention``'s own kernel is not in its table (torch 2.14), so the attention matmuls
vanish from a count of the real model on a CPU: :func:`counted_flops_per_token` counts on the ``meta`` device,
where SDPA runs as plain ``bmm``s, the same numbers on every machine.
"""

from __future__ import annotations

import dataclasses

import torch

from .model import GPT, GPTConfig

__all__ = ["FlopsPerToken", "CountedFlops", "flops_per_token", "flops_breakdown", "mfu", "counted_flops_per_token"]


@dataclasses.dataclass(frozen=True)
class FlopsPerToken:
    """The two terms of ``6N + 12·L·H·Q·T`` for one configuration and sequence length."""

    n_params: int  # N: every parameter but the position table (the tied token table counted once)
    seq_len: int  # T
    params_flops: int  # 6N
    attention_flops: int  # 12·L·H·Q·T

    @property
    def total(self) -> int:
        return self.params_flops + self.attention_flops

    @property
    def attention_share(self) -> float:
        """How much of the total is attention's score matmuls (grows with T: 13% for GPT-2 small at 1,024)."""
        return self.attention_flops / self.total


def flops_breakdown(cfg: GPTConfig, *, seq_len: int | None = None) -> FlopsPerToken:
    """``6N`` and ``12·L·H·Q·T`` for ``cfg`` at ``seq_len`` tokens per sequence (default: ``cfg.block_size``)."""
    T = cfg.block_size if seq_len is None else seq_len
    if not isinstance(T, int) or not 1 <= T <= cfg.block_size:
        raise ValueError(f"seq_len={seq_len!r}: give a whole number from 1 to block_size={cfg.block_size}.")
    n = cfg.param_count(non_embedding=True)
    return FlopsPerToken(n_params=n, seq_len=T, params_flops=6 * n,
                         attention_flops=12 * cfg.n_layer * cfg.n_head * cfg.head_dim * T)


def flops_per_token(cfg: GPTConfig, *, seq_len: int | None = None) -> int:
    """Training FLOPs per token, ``6N + 12·L·H·Q·T`` (module docstring: what is counted and why)."""
    return flops_breakdown(cfg, seq_len=seq_len).total


def mfu(tokens_per_s: float, cfg: GPTConfig, peak_flops_per_s: float, *, seq_len: int | None = None) -> float:
    """Model FLOPs utilisation: ``tokens_per_s × flops_per_token`` as a share (0–1) of ``peak_flops_per_s``.

    ``tokens_per_s`` counts the tokens trained on (forward and backward), all micro-batches of a step. The peak is
    a stated one (the data sheet's dense bf16 figure, or a measured matmul ceiling): say which beside the result.
    Recomputation (activation checkpointing) does not raise MFU: its extra forward is not in the formula.
    """
    if peak_flops_per_s <= 0:
        raise ValueError(f"peak_flops_per_s={peak_flops_per_s}: give the device's peak in FLOP/s, e.g. 989e12 for "
                         "an H100 SXM's dense bf16 (data sheet), or a measured matmul ceiling.")
    if tokens_per_s < 0:
        raise ValueError(f"tokens_per_s={tokens_per_s} cannot be negative.")
    return tokens_per_s * flops_per_token(cfg, seq_len=seq_len) / peak_flops_per_s


@dataclasses.dataclass(frozen=True)
class CountedFlops:
    """What ``FlopCounterMode`` counted for one forward (and backward) of the GPT, per token."""

    seq_len: int
    forward_per_token: float
    training_per_token: float  # forward + backward
    forward_by_op: dict[str, float]  # e.g. {"aten.mm": …, "aten.bmm": …}, per token


def counted_flops_per_token(cfg: GPTConfig, *, seq_len: int | None = None, batch: int = 1,
                            attention: str = "sdpa") -> CountedFlops:
    """Count the matmul FLOPs of a forward and a forward + backward pass with ``FlopCounterMode``, per token.

    The model is built on the ``meta`` device: shapes only, no arithmetic and no memory, so a full-scale count
    is instant on a CPU. Compare ``3 × forward_per_token`` (backward = 2 × forward for every matmul) with
    :func:`flops_per_token`: the difference is the LayerNorm parameters, which the convention counts in N.
    """
    from torch.utils.flop_counter import FlopCounterMode

    T = cfg.block_size if seq_len is None else seq_len
    with torch.device("meta"):
        model = GPT(cfg, attention=attention)
        idx = torch.zeros(batch, T, dtype=torch.long)
    tokens = batch * T
    with FlopCounterMode(display=False) as fwd:
        model(idx, idx)
    with FlopCounterMode(display=False) as both:
        _, loss = model(idx, idx)
        loss.backward()
    by_op = {str(op): n / tokens for op, n in fwd.get_flop_counts()["Global"].items()}
    return CountedFlops(seq_len=T, forward_per_token=fwd.get_total_flops() / tokens,
                        training_per_token=both.get_total_flops() / tokens, forward_by_op=by_op)
