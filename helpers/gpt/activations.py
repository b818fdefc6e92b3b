"""What a GPT block keeps for its backward pass: every op of its forward, what a selective checkpointing policy keeps
and what it recomputes, and attention's memory at long sequences.

    ops = block_ops(GPTConfig.smoke(), device="cpu")       # BlockOp per aten op: its output's new bytes, its FLOPs
    cost = policy_cost(saves_matmuls, GPTConfig.smoke())   # PolicyCost: kept bytes beside none's, FLOPs recomputed
    cost.kept_share, cost.recompute_share, cost.table()
    long = attention_memory([1024, 2048, 4096], device="cuda")   # manual against fused attention, kept and peak

**Selective activation checkpointing** (``torch.utils.checkpoint`` with ``create_selective_checkpoint_contexts``):
the block is checkpointed whole, and a policy says for each aten op of its forward whether its output is kept
(``MUST_SAVE``) or recomputed in the backward pass (``PREFER_RECOMPUTE``). Between forward and backward the block
then holds its input and the outputs of the ops the policy kept; the backward pass recomputes the others, paying
their FLOPs again. :func:`policy_cost` counts both from one recorded forward pass: the bytes of the storages the
kept outputs live in (a view kept keeps its whole storage; the weights are not counted), and the FLOPs of the ops
not kept (matrix products and attention, counted as :mod:`helpers.gpt.flops` counts them: the full T×T square;
elementwise ops, LayerNorm and casts count as free). Without checkpointing the block keeps what autograd saves
(measured with saved-tensor hooks, :func:`helpers.memory.anatomy.saved_activation_bytes`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .. import env, timebox
from ..memory.anatomy import saved_activation_bytes
from .model import GPT, MATMUL_OPS, GPTConfig, op_name, unique_params

__all__ = ["BlockOp", "BlockRecord", "PolicyCost", "block_ops", "policy_cost", "attention_memory", "growth", "op_flops"]

_SDPA = {n for n in MATMUL_OPS if "attention" in n}


def op_flops(name: str, args: tuple) -> float:
    """Forward FLOPs of one aten op (a multiply-add counted as 2): matrix products and attention; 0 for the rest."""
    shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
    if name in ("mm", "_scaled_mm") and len(shapes) >= 2:
        (m, k), (_, n) = shapes[0][-2:], shapes[1][-2:]
        return 2.0 * m * k * n
    if name == "addmm" and len(shapes) >= 3:
        (m, k), (_, n) = shapes[1][-2:], shapes[2][-2:]
        return 2.0 * m * k * n
    if name == "bmm" and len(shapes) >= 2:
        b, m, k = shapes[0]
        return 2.0 * b * m * k * shapes[1][-1]
    if name in _SDPA and len(shapes) >= 2:  # q (B, H, T, Q), k (B, H, S, Q): QKᵀ and the scores times V
        q, k = shapes[0], shapes[1]
        if name in ("_flash_attention_forward", "_efficient_attention_forward"):  # (B, T, H, Q) layout
            q, k = (q[0], q[2], q[1], q[3]), (k[0], k[2], k[1], k[3])
        return 4.0 * q[0] * q[1] * q[2] * k[2] * q[3]
    return 0.0


@dataclasses.dataclass(frozen=True)
class BlockOp:
    """One aten op of a block's forward pass, in call order."""

    index: int
    op: Any  # the OpOverload, as a policy receives it
    name: str
    new_bytes: int  # bytes of the storages its outputs created (0 for a view of an existing tensor)
    storages: tuple[int, ...]  # which storages its outputs live in (keeping any output keeps its storage)
    flops: float  # forward FLOPs (matrix products and attention only)


class _Record(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, tuple, list[torch.Tensor]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        flat = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        self.calls.append((func, args, flat))
        return out


def _storage(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def _block_and_input(cfg: GPTConfig, device: torch.device, batch: int, seq_len: int, attention: str, seed: int):
    torch.manual_seed(seed)
    model = GPT(cfg, attention=attention).to(device)
    block = model.blocks[0]
    x = torch.randn(batch, seq_len, cfg.n_embd, device=device, requires_grad=True)
    return model, block, x


def _autocast(device: torch.device, dtype: torch.dtype | None):
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


@dataclasses.dataclass(frozen=True)
class BlockRecord:
    """One block's forward pass, recorded op by op: what a policy is asked about, and what no checkpointing keeps."""

    ops: tuple[BlockOp, ...]
    storage_bytes: dict[int, int] = dataclasses.field(repr=False)  # every output storage's bytes
    weights: frozenset[int] = dataclasses.field(repr=False)  # the parameters' storages (never counted as kept)
    input_bytes: int  # the block's input: all that checkpointing the whole block keeps
    input_storage: int = dataclasses.field(repr=False)
    none_bytes: int  # what autograd keeps for backward without checkpointing

    def table(self) -> "pandas.DataFrame":  # noqa: F821
        """The block's ops by name, in the order each first runs: calls, the new MiB their outputs took (0 for a
        view), their forward MFLOP."""
        import pandas as pd

        rows: dict[str, list[float]] = {}
        for op in self.ops:
            r = rows.setdefault(op.name, [0, 0.0, 0.0])
            r[0] += 1
            r[1] += op.new_bytes / 2**20
            r[2] += op.flops / 1e6
        df = pd.DataFrame([{"op": name, "calls": n, "new MiB": mib, "forward MFLOP": mflop}
                           for name, (n, mib, mflop) in rows.items()]).set_index("op")
        df.attrs["formats"] = {"calls": "whole"}
        return df


def block_ops(cfg: GPTConfig, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None,
              batch: int = 4, seq_len: int | None = None, attention: str = "sdpa", seed: int = 0) -> BlockRecord:
    """Every aten op of one block's forward pass, as a checkpointing policy sees them, with its output's new bytes
    and its FLOPs, and what autograd keeps without checkpointing. ``dtype``: autocast's (None: fp32), as the
    training step runs it."""
    dev = torch.device(device)
    model, block, x = _block_and_input(cfg, dev, batch, seq_len or cfg.block_size, attention, seed)
    params = frozenset(_storage(p)[0] for p in unique_params(model))
    rec = _Record()
    with _autocast(dev, dtype), rec:  # every output stays referenced by rec: no two storages share an address
        block._both(x, attention)
    x_ptr, x_bytes = _storage(x)
    seen = {x_ptr} | params
    sizes: dict[int, int] = {}
    ops = []
    for i, (func, args, outs) in enumerate(rec.calls):
        mine = {_storage(t)[0]: _storage(t)[1] for t in outs}
        sizes.update(mine)
        new = sum(b for ptr, b in mine.items() if ptr not in seen)
        seen |= set(mine)
        ops.append(BlockOp(i, func, op_name(func), new, tuple(mine), op_flops(op_name(func), args)))
    del rec
    with _autocast(dev, dtype):
        none = saved_activation_bytes(lambda: block._both(x, attention), unique_params(model))
    return BlockRecord(tuple(ops), sizes, params, x_bytes, x_ptr, none)


@dataclasses.dataclass(frozen=True)
class PolicyCost:
    """What a policy keeps and recomputes, per block, beside no checkpointing and checkpointing the whole block."""

    kept_bytes: int  # the block's input and the storages of the outputs the policy keeps (weights not counted)
    none_bytes: int  # what autograd keeps without checkpointing
    block_bytes: int  # checkpointing the whole block: its input alone
    recompute_flops: float  # FLOPs of the ops the policy does not keep, run again in backward
    training_flops: float  # the block's forward and backward FLOPs (3 × forward)
    ops: tuple[BlockOp, ...] = dataclasses.field(repr=False)
    kept: tuple[bool, ...] = dataclasses.field(repr=False)  # the policy's answer for each op

    @property
    def kept_share(self) -> float:
        """Kept bytes as a share (0–1) of what the block keeps without checkpointing."""
        return self.kept_bytes / self.none_bytes

    @property
    def recompute_share(self) -> float:
        """FLOPs recomputed as a share (0–1) of the block's training FLOPs: what the policy costs in arithmetic."""
        return self.recompute_flops / self.training_flops

    def table(self) -> "pandas.DataFrame":  # noqa: F821
        """One row per kind of op (by name): calls, what the policy does with them, new MiB, and forward MFLOP."""
        import pandas as pd

        rows: dict[tuple[str, bool], list[float]] = {}
        for op, keep in zip(self.ops, self.kept):
            r = rows.setdefault((op.name, keep), [0, 0.0, 0.0])
            r[0] += 1
            r[1] += op.new_bytes / 2**20
            r[2] += op.flops / 1e6
        df = pd.DataFrame([{"op": name, "calls": n, "policy": "kept" if keep else "recomputed",
                            "new MiB": mib, "forward MFLOP": mflop}
                           for (name, keep), (n, mib, mflop) in rows.items()])
        df = df.sort_values(["policy", "new MiB"], ascending=[True, False]).reset_index(drop=True)
        df.attrs["formats"] = {"op": "text", "policy": "text", "calls": "whole"}
        return df

    def sentence(self) -> str:
        """What the policy keeps and costs, in words, from the figures above."""
        mib = lambda b: f"{b / 2**20:.3g} MiB"  # noqa: E731
        cost = ("recomputes no matrix product" if self.recompute_flops == 0 else
                f"recomputes {self.recompute_share:.1%} of the block's training FLOPs")
        return (f"Per block it keeps {mib(self.kept_bytes)} for the backward pass, {self.kept_share:.0%} of the "
                f"{mib(self.none_bytes)} kept without checkpointing (checkpointing the whole block keeps "
                f"{mib(self.block_bytes)}, its input), and {cost}.")


def policy_cost(saves: Callable[[Any], Any], cfg: GPTConfig | None = None, *, record: BlockRecord | None = None,
                device: torch.device | str = "cpu", dtype: torch.dtype | None = None, batch: int = 4,
                seq_len: int | None = None, attention: str = "sdpa") -> PolicyCost:
    """Ask ``saves(op)`` about every op of one block's forward pass (``record``, or one recorded now from ``cfg``)
    and count what it keeps and recomputes (module docstring). Each answer is read with ``bool()``; an exception
    from ``saves`` propagates."""
    if record is None:
        if cfg is None:
            raise ValueError("policy_cost needs a GPTConfig (cfg=...) or a recorded block (record=block_ops(...)).")
        record = block_ops(cfg, device=device, dtype=dtype, batch=batch, seq_len=seq_len, attention=attention)
    kept = tuple(bool(saves(op.op)) for op in record.ops)
    storages = {record.input_storage: record.input_bytes}
    for op, keep in zip(record.ops, kept):
        if keep:
            storages.update({s: record.storage_bytes[s] for s in op.storages if s not in record.weights})
    recompute = sum(op.flops for op, keep in zip(record.ops, kept) if not keep)
    fwd = sum(op.flops for op in record.ops)
    return PolicyCost(kept_bytes=sum(storages.values()), none_bytes=record.none_bytes,
                      block_bytes=record.input_bytes, recompute_flops=recompute, training_flops=3 * fwd,
                      ops=record.ops, kept=kept)


def attention_memory(seq_lens: list[int], *, cfg: GPTConfig | None = None, device: torch.device | str | None = None,
                     dtype: torch.dtype | None = None, batch: int = 1) -> "pandas.DataFrame":  # noqa: F821
    """One block of ``cfg``'s width and heads (GPT-2 small's at full scale, the smoke model's on a CPU) trained at
    each sequence length, with attention written out and fused: the bytes kept for backward (saved-tensor hooks,
    exact on any device) and, on a GPU, the allocator's peak over the forward and backward pass. Stops at the
    ``attention_sweep`` time box."""
    import pandas as pd

    dev = torch.device(device) if device is not None else env.device()
    base = cfg or env.pick(smoke=GPTConfig.smoke(), full=GPTConfig.full())
    shape = dataclasses.replace(base, n_layer=1, vocab_size=256, block_size=max(seq_lens))
    rows = []
    win = timebox.window("attention_sweep", planned=len(seq_lens), unit="sequence lengths",
                         left_out="the longer sequences are left out")
    for T in seq_lens:
        if not win.more():
            break
        row: dict[str, Any] = {"tokens": T}
        for attention in ("manual", "sdpa"):
            model, block, x = _block_and_input(shape, dev, batch, T, attention, 0)
            fn = lambda: block._both(x, attention)  # noqa: E731
            with _autocast(dev, dtype):
                kept = saved_activation_bytes(fn, unique_params(model))
            peak = None
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
                before = torch.cuda.memory_allocated(dev)
                torch.cuda.reset_peak_memory_stats(dev)
                with _autocast(dev, dtype):
                    out = fn()
                out.float().sum().backward()
                torch.cuda.synchronize(dev)
                peak = (torch.cuda.max_memory_allocated(dev) - before) / 2**20
                del out
            row[f"{attention} kept MiB"] = kept / 2**20
            row[f"{attention} peak MiB"] = peak
            del model, block, x
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        elem = 2 if dtype in (torch.bfloat16, torch.float16) else 4
        row["scores MiB"] = batch * shape.n_head * T * T * elem / 2**20  # one T×T matrix per head
        rows.append(row)
        win.tick()
    df = pd.DataFrame(rows).set_index("tokens")
    df["manual ÷ fused kept ×"] = df["manual kept MiB"] / df["sdpa kept MiB"]
    df.attrs["ratio_of"] = {"manual ÷ fused kept ×": ("manual kept MiB", "sdpa kept MiB", "column/column")}
    if dev.type != "cuda":
        df = df.drop(columns=["manual peak MiB", "sdpa peak MiB"])
    df.attrs["what"] = (f"one block of width {shape.n_embd} with {shape.n_head} heads, batch {batch}, "
                        f"{'fp32' if dtype is None else str(dtype).removeprefix('torch.')}")
    return df


def growth(df: "pandas.DataFrame", column: str) -> float:  # noqa: F821
    """How ``column`` grows with the sequence: the exponent p of ``column ∝ tokensᵖ`` between the first and last
    rows (2 for memory that grows with the square of the sequence, 1 for memory that grows with it)."""
    t0, t1 = df.index[0], df.index[-1]
    if t1 == t0:
        return float("nan")
    return math.log(df[column].iloc[-1] / df[column].iloc[0]) / math.log(t1 / t0)
