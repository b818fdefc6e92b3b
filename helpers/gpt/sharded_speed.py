"""ZeRO and FSDP2 against DDP in speed and memory: one rank per GPU over NCCL (gloo ranks on a CPU, for the mechanics).

    r = measure_speed(nproc=2)                       # torchrun from Python: GPT-2 small, bf16, SDPA, fused AdamW
    r.variant("fsdp2").tokens_per_s                  # every rank's tokens together, per second of the slowest rank
    r.over("fsdp2", "ddp"), r.variant("zero").peak_gib, r.table()

    torchrun --nproc-per-node 2 -m helpers.gpt.sharded_speed --variants ddp,zero,fsdp2   # the worker, by hand

Each variant (:data:`VARIANTS`, as in :mod:`helpers.gpt.sharded`) trains the same GPT from the same weights on the
same batches, each rank on its own ``batch`` sequences: ``warmup`` untimed steps (the allocator, cuDNN and NCCL's
buffers settle there), then ``steps`` steps, each timed on every rank (CUDA events around the step on a GPU,
``perf_counter`` on a CPU). The ranks wait for each other in every collective, so a step takes as long as its slowest
rank: the step's time is the largest over the ranks, and tokens/s is every rank's tokens over its median. On GPUs the
variants run in two rounds, in turn, and the second is timed: in one round, the variant that ran first took the
machine's warm-up (2 × H200, 2026-11-28: DDP first, its steps 13.6% apart, and ZeRO-1 read 1.16× DDP; two later runs,
0.94× and 0.95×).

Every variant computes the same arithmetic, so that only the sharding differs: bf16 autocast on a GPU with bf16
(fp32 elsewhere), fp32 weights, fp32 gradients reduced in fp32, ``scaled_dot_product_attention``, AdamW fused on a
GPU (ZeRO's AdamW too, each rank over its share). FSDP2's ``MixedPrecisionPolicy`` would gather bf16 weights and
halve its traffic; it is left off here so that FSDP2 moves the bytes DDP moves, in other collectives.

Peak memory is the allocator's peak on each rank over the variant's whole run (its model, optimizer state, batches
and steps), after the previous variant's memory was freed; the fullest rank's is what a job must fit.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import time
from typing import Callable

import torch
import torch.distributed as dist

from ..bench import Measurement
from ..ddp.launch import LaunchSpec, launch
from ..ddp.protocol import exit_now
from .data import MarkovSource
from .model import GPT, GPTConfig, unique_params
from .sharded import VARIANTS, by_variant, run_variants, variant_named

__all__ = ["VARIANTS", "LR", "FIGURES", "RankSpeed", "VariantSpeed", "SpeedResult", "measure_speed", "figures",
           "reading", "main"]

LR = 6e-4  # the ladder's: the speed does not depend on it, the losses shown beside it do
#: The figures :func:`figures` records (``gpt_shard_gpus``: how many ranks, one per GPU, measured them).
FIGURES = ("gpt_shard_gpus", "gpt_shard_ddp_tok_per_s", "gpt_shard_zero_vs_ddp_x", "gpt_shard_fsdp2_vs_ddp_x",
           "gpt_shard_ddp_peak_gib", "gpt_shard_zero_peak_gib", "gpt_shard_fsdp2_peak_gib")
_NAMES = {"ddp": "DDP", "zero": "DDP + ZeRO-1 (ZeroRedundancyOptimizer)", "fsdp2": "FSDP2 (fully_shard)"}


@dataclasses.dataclass(frozen=True)
class RankSpeed:
    """One rank's record of one variant."""

    variant: str
    rank: int
    world_size: int
    step_ms: tuple[float, ...]  # each timed step, as this rank saw it
    peak_bytes: int  # the allocator's peak over the variant's run (0 on a CPU: no allocator statistics)
    losses: tuple[float, ...]  # the global batch's mean loss at each step, warm-up steps included
    device: str  # what this rank ran on: "NVIDIA H100 80GB HBM3", "cpu"
    backend: str  # "nccl" or "gloo"
    dtype: str  # what autocast computed in: "bfloat16", or "float32" without autocast


@dataclasses.dataclass(frozen=True)
class VariantSpeed:
    """One variant over all ranks (``error``: why it did not run here, in one line)."""

    variant: str
    ranks: tuple[RankSpeed, ...]
    tokens_per_step: int  # over all ranks
    error: str | None = None

    @property
    def name(self) -> str:
        return _NAMES[self.variant]

    @property
    def step(self) -> Measurement:
        """Each step's time on its slowest rank, as a :class:`~helpers.bench.Measurement`."""
        per_step = zip(*(r.step_ms for r in self.ranks))
        return Measurement.of([max(t) for t in per_step])

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / (self.step.median_ms / 1e3)

    @property
    def peak_gib(self) -> float:
        """The fullest rank's allocator peak, GiB (0 on a CPU)."""
        return max(r.peak_bytes for r in self.ranks) / 2**30

    @property
    def last_loss(self) -> float:
        return self.ranks[0].losses[-1]


@dataclasses.dataclass(frozen=True)
class SpeedResult:
    nproc: int
    cfg: GPTConfig
    batch_per_rank: int
    seq_len: int
    variants: tuple[VariantSpeed, ...]
    wall_s: float
    rounds: int = 1  # each variant ran this many times in turn; the last round is the one measured

    def variant(self, name: str) -> VariantSpeed:
        return variant_named(self.variants, name)

    def over(self, variant: str, baseline: str = "ddp") -> float:
        """``variant``'s tokens/s over ``baseline``'s (above 1: faster)."""
        return self.variant(variant).tokens_per_s / self.variant(baseline).tokens_per_s

    @property
    def ran(self) -> tuple[VariantSpeed, ...]:
        return tuple(v for v in self.variants if not v.error)

    def table(self) -> "pandas.DataFrame":  # noqa: F821
        """One row per variant that ran: tokens/s, its step's median and spread, × DDP, the fullest rank's peak."""
        import pandas as pd

        base = next((v for v in self.ran if v.variant == "ddp"), None)
        rows = []
        for v in self.ran:
            m = v.step
            rows.append({"variant": v.name, "tok/s": v.tokens_per_s, "step ms": m.median_ms,
                         "spread %": m.spread_pct, "× DDP": v.tokens_per_s / base.tokens_per_s if base else None,
                         "peak GiB, fullest rank": v.peak_gib if v.ranks[0].backend == "nccl" else None,
                         "last loss": v.last_loss, "steps timed": m.repeats})
        df = pd.DataFrame(rows).set_index("variant")
        df.attrs["formats"] = {"tok/s": "whole", "step ms": "sig", "spread %": "percent", "× DDP": "sig",
                               "peak GiB, fullest rank": "sig", "last loss": "sig", "steps timed": "whole"}
        df.attrs["notes"] = {"peak GiB, fullest rank": "a CPU keeps no allocator statistics"}
        return df


def measure_speed(nproc: int = 2, *, cfg: GPTConfig | None = None, variants: tuple[str, ...] = VARIANTS,
                  batch_per_rank: int = 8, seq_len: int | None = None, warmup: int = 3, steps: int = 10,
                  rounds: int | None = None, timeout_s: float = 300.0,
                  on_line: Callable[[str], None] | None = None) -> SpeedResult:
    """Launch ``nproc`` ranks with ``torchrun`` (one per GPU where there are that many, else gloo on the CPU) and
    collect each variant's timings. ``cfg``: GPT-2 small by default. ``rounds``: how many times each variant runs,
    in turn, the last round measured (default: 2 on GPUs, where the first round warms the machine up; 1 on gloo
    ranks, which time no figure). A variant that fails on every rank comes back with its ``error``; a launch that
    fails as a whole raises with the failing rank's own words."""
    cfg = cfg or GPTConfig.full()
    unknown = set(variants) - set(VARIANTS)
    if unknown or not variants:
        raise ValueError(f"variants={variants!r}: use some of {', '.join(VARIANTS)}.")
    if batch_per_rank < 1 or warmup < 0 or steps < 1:
        raise ValueError(f"batch_per_rank={batch_per_rank}, warmup={warmup}, steps={steps}: give at least one "
                         "sequence per rank, no negative warm-up, and one timed step or more.")
    if rounds is None:
        rounds = 2 if torch.cuda.is_available() and torch.cuda.device_count() >= nproc else 1
    if rounds < 1:
        raise ValueError(f"rounds={rounds}: each variant runs once at least (the last round is measured).")
    seq = seq_len or cfg.block_size
    args = ["--variants", ",".join(variants), "--batch", str(batch_per_rank), "--seq-len", str(seq),
            "--warmup", str(warmup), "--steps", str(steps), "--config", json.dumps(dataclasses.asdict(cfg)),
            "--timeout-s", str(max(30.0, timeout_s / 2)), "--rounds", str(rounds)]
    res = launch(LaunchSpec(nproc_per_node=nproc, module="helpers.gpt.sharded_speed", args=tuple(args),
                            timeout_s=timeout_s), on_line=on_line)
    if not res.ok:
        raise RuntimeError(f"the launch of {nproc} ranks failed: {res.error}")
    out = [VariantSpeed(name, ranks, tokens_per_step=batch_per_rank * seq * nproc,
                        error=error or (None if ranks else "no rank reported"))
           for name, ranks, error in by_variant(res.results, variants, RankSpeed)]
    return SpeedResult(nproc=nproc, cfg=cfg, batch_per_rank=batch_per_rank, seq_len=seq, variants=tuple(out),
                       wall_s=res.wall_s, rounds=rounds)


def figures(r: SpeedResult) -> dict[str, float]:
    """The figures to record from a run on GPUs (:data:`FIGURES`; a variant that did not run is left out)."""
    if not r.ran or r.ran[0].ranks[0].backend != "nccl":
        return {}  # gloo ranks on a CPU show the mechanics; their speed is no figure of the GPUs'
    ran = {v.variant: v for v in r.ran}
    out = {"gpt_shard_gpus": float(r.nproc)}
    if "ddp" in ran:
        out["gpt_shard_ddp_tok_per_s"] = ran["ddp"].tokens_per_s
    for name in ("zero", "fsdp2"):
        if name in ran and "ddp" in ran:
            out[f"gpt_shard_{name}_vs_ddp_x"] = r.over(name)
    for name, v in ran.items():
        out[f"gpt_shard_{name}_peak_gib"] = v.peak_gib
    return out


def reading(r: SpeedResult) -> str:
    """What the run measured, in sentences chosen from its numbers: each variant's speed beside DDP's (within the
    spread of the two steps, it is "about the same") and the fullest rank's peak."""
    ran = {v.variant: v for v in r.ran}
    if "ddp" not in ran:
        return "DDP did not run here, so nothing is compared with it (the lines above say why)."
    ddp = ran["ddp"]
    where = f"{r.nproc} × {ddp.ranks[0].device}" if ddp.ranks[0].backend == "nccl" else f"{r.nproc} gloo ranks"
    said = [f"On {where}, {r.batch_per_rank} sequences of {r.seq_len:,} tokens per rank: DDP "
            f"{ddp.tokens_per_s:,.0f} tok/s"]
    for name in ("zero", "fsdp2"):
        if name not in ran:
            continue
        v, x = ran[name], r.over(name)
        noise = max(v.step.spread_pct, ddp.step.spread_pct) / 100
        verdict = "about the same" if abs(x - 1) <= noise else ("faster" if x > 1 else "slower")
        said.append(f"{v.name} {x:.2f}× DDP ({verdict})")
    text = "; ".join(said) + "."
    if r.rounds > 1:
        text += (f" Each variant ran {r.rounds} times in turn and the last round was timed: the first took the "
                 "machine's warm-up, whichever variant it fell on.")
    if ddp.ranks[0].backend == "nccl":
        peaks = ", ".join(f"{v.name.split(' (')[0]} {v.peak_gib:.1f} GiB" for v in ran.values())
        text += f" The fullest rank's peak: {peaks}."
    return text


# ---- the worker: one copy per rank ------------------------------------------------------------------------------

def _build(variant: str, cfg: GPTConfig, dev: torch.device, world: int):
    """The model on this rank, the module to call, and its optimizer (fused AdamW on a GPU)."""
    torch.manual_seed(0)  # the same initial weights on every rank and for every variant
    with dev:
        model = GPT(cfg, attention="sdpa")
    fused = {"fused": True} if dev.type == "cuda" else {}
    if variant == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(dev.type, (world,))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)  # each block's weights gathered for its own forward and backward only
        fully_shard(model, mesh=mesh)  # the rest: embeddings, the tied output layer, the last LayerNorm
        return model, torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), **fused)
    from torch.nn.parallel import DistributedDataParallel as DDP

    net = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    if variant == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return net, ZeroRedundancyOptimizer(unique_params(model), optimizer_class=torch.optim.AdamW, lr=LR,
                                            betas=(0.9, 0.95), **fused)
    return net, torch.optim.AdamW(unique_params(model), lr=LR, betas=(0.9, 0.95), **fused)


def _run(variant: str, cfg: GPTConfig, batches, warmup: int, dev: torch.device, low: torch.dtype | None,
         rank: int, world: int, backend: str) -> dict:
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()  # the previous variant's cached blocks are not this one's peak
        torch.cuda.reset_peak_memory_stats(dev)
    net, opt = _build(variant, cfg, dev, world)
    losses, times = [], []
    for i, (x, y) in enumerate(batches):
        timed = i >= warmup
        if cuda and timed:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=low, enabled=low is not None):
            _, loss = net(x, y)
        loss.backward()  # DDP all-reduces the gradients; FSDP2 reduce-scatters them
        opt.step()  # ZeRO: each rank updates its share of the parameters and broadcasts it
        opt.zero_grad(set_to_none=True)
        if timed:
            if cuda:
                end.record()
                times.append((start, end))
            else:
                times.append(time.perf_counter() - t0)
        losses.append(loss.detach())
    if cuda:
        torch.cuda.synchronize(dev)  # note: a CPU-GPU sync point; the events are read once the GPU reached them
        step_ms = [s.elapsed_time(e) for s, e in times]
    else:
        step_ms = [1e3 * t for t in times]
    mean = torch.stack(losses).float()
    dist.all_reduce(mean)  # equal shares: the mean of the ranks' means is the global batch's
    out = {"variant": variant, "rank": rank, "world_size": world, "step_ms": step_ms,
           "peak_bytes": int(torch.cuda.max_memory_allocated(dev)) if cuda else 0,
           "losses": [float(v) / world for v in mean.tolist()],
           "device": torch.cuda.get_device_name(dev) if cuda else "cpu", "backend": backend,
           "dtype": str(low).removeprefix("torch.") if low is not None else "float32"}
    del net, opt, losses, mean
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"some of {', '.join(VARIANTS)}, comma-separated")
    ap.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    ap.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default: block_size)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--config", default=None, help="GPTConfig fields as JSON (default: GPTConfig.full())")
    ap.add_argument("--timeout-s", type=float, default=120.0, help="how long a collective may wait for a peer")
    ap.add_argument("--rounds", type=int, default=1, help="times each variant runs in turn; the last is reported")
    args = ap.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or set(variants) - set(VARIANTS):
        ap.error(f"--variants {args.variants!r}: use some of {', '.join(VARIANTS)}, comma-separated.")
    cfg = GPTConfig(**json.loads(args.config)) if args.config else GPTConfig.full()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    world_env = int(os.environ.get("WORLD_SIZE", "1"))
    # one rank per GPU, over NCCL; with fewer GPUs than ranks, gloo ranks on the CPU (the mechanics, not the speed)
    cuda = torch.cuda.is_available() and torch.cuda.device_count() >= world_env
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    backend = "nccl" if cuda else "gloo"
    if cuda:
        torch.cuda.set_device(dev)
        torch.backends.cuda.matmul.allow_tf32 = True  # fp32 where autocast leaves it: as the ladder runs
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout_s),
                            **({"device_id": dev} if cuda else {}))
    rank, world = dist.get_rank(), dist.get_world_size()
    if not cuda and world > 1 and int(os.environ.get("OMP_NUM_THREADS", "0") or 0) == 0:
        torch.set_num_threads(1)  # ranks sharing a few cores: one thread each, or they fight over them
    low = torch.bfloat16 if cuda and torch.cuda.is_bf16_supported(including_emulation=False) else None
    it = MarkovSource(vocab_size=cfg.vocab_size).batches(args.batch, args.seq_len or cfg.block_size, seed=1 + rank,
                                                         device=dev)
    batches = [next(it) for _ in range(args.warmup + args.steps)]  # this rank's own, drawn before any clock starts
    run_variants(variants, lambda variant: _run(variant, cfg, batches, args.warmup, dev, low, rank, world, backend),
                 rank, rounds=max(1, args.rounds))
    return 0


if __name__ == "__main__":
    exit_now(main())
