"""The optimizer's state sharded across ranks, measured: DDP, DDP + ZeRO, FSDP2, on gloo ranks (a CPU suffices).

    r = measure_sharding(nproc=2)                        # torchrun from Python; one JSON line per rank per variant
    r.variant("zero").optimizer_state_bytes              # per rank: about half of DDP's at 2 ranks
    r.state_ratio("zero", "ddp"), r.as_rows(), r.variant("fsdp2").error

    torchrun --nproc-per-node 2 -m helpers.gpt.sharded --variants ddp,zero,fsdp2    # the worker, by hand

Each variant trains the same GPT (same seed, same batches) for a few AdamW steps, each rank on its share of one
global batch, and reports per rank: bytes of optimizer state (per-element moments, and the step counters apart),
bytes of parameters and gradients held, its losses, and how far its parameters are from those of one process
that trained on the whole global batch (the unsharded run, repeated on every rank) and from rank 0's.

- ``ddp``: ``DistributedDataParallel`` + ``AdamW``: every rank keeps all weights, gradients and moments.
  (DDP also keeps its gradient buckets, a second copy of the gradients that this walk does not see;
  ``gradient_as_bucket_view=True`` makes the gradients views of them.)
- ``zero``: DDP + ``ZeroRedundancyOptimizer(AdamW)`` (ZeRO stage 1): each rank keeps the moments of the
  parameters assigned to it, and broadcasts those parameters after its step. Parameters are assigned *whole*
  (largest first, to the least-loaded rank), so the shares are near, not exactly, 1/ranks.
- ``fsdp2``: ``torch.distributed.fsdp.fully_shard`` on each block and on the whole model (ZeRO stage 3):
  parameters, gradients and moments are sharded along their first dimension (DTensors); each block's full
  weights are gathered for its forward and backward and freed after.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
from typing import Callable

import torch
import torch.distributed as dist

from ..ddp.launch import LaunchSpec, launch
from ..ddp.protocol import exit_now, report, shutdown
from .data import MarkovSource
from .memory import tensor_bytes
from .model import GPT, GPTConfig, unique_params

__all__ = ["VARIANTS", "RankSharding", "VariantSharding", "ShardingResult", "measure_sharding", "variant_named",
           "by_variant", "run_variants", "main"]

VARIANTS = ("ddp", "zero", "fsdp2")
_LR = 1e-3


@dataclasses.dataclass(frozen=True)
class RankSharding:
    """One rank's figures for one variant (bytes held by this rank after its last step)."""

    variant: str
    rank: int
    world_size: int
    optimizer_state_bytes: int  # Adam's exp_avg and exp_avg_sq held here
    step_counter_bytes: int
    param_bytes: int  # parameters held between steps (a shard of each under FSDP2)
    grad_bytes: int
    losses: tuple[float, ...]  # the global batch's mean loss at each step, as this run computed it
    reference_losses: tuple[float, ...]  # the same, one process on the whole global batch
    max_param_diff_vs_reference: float  # largest |weight - unsharded run's weight| after the last step
    max_param_diff_vs_rank0: float

    @property
    def max_loss_diff(self) -> float:
        return max(abs(a - b) for a, b in zip(self.losses, self.reference_losses))


@dataclasses.dataclass(frozen=True)
class VariantSharding:
    variant: str
    ranks: tuple[RankSharding, ...]
    error: str | None = None  # why this variant did not run here, in one line

    @property
    def optimizer_state_bytes(self) -> tuple[int, ...]:
        return tuple(r.optimizer_state_bytes for r in self.ranks)

    @property
    def param_bytes(self) -> tuple[int, ...]:
        return tuple(r.param_bytes for r in self.ranks)


@dataclasses.dataclass(frozen=True)
class ShardingResult:
    nproc: int
    cfg: GPTConfig
    variants: tuple[VariantSharding, ...]
    wall_s: float

    def variant(self, name: str) -> VariantSharding:
        return variant_named(self.variants, name)

    def state_ratio(self, variant: str, baseline: str = "ddp") -> float:
        """The largest rank's optimizer state under ``variant`` over the largest under ``baseline`` (0.5 would be
        a perfect halving at 2 ranks: the largest rank is what sets the memory a job needs)."""
        return max(self.variant(variant).optimizer_state_bytes) / max(self.variant(baseline).optimizer_state_bytes)

    def as_rows(self) -> list[dict]:
        rows = []
        for v in self.variants:
            if v.error:
                rows.append({"variant": v.variant, "rank": None, "error": v.error})
            for r in v.ranks:
                rows.append({"variant": v.variant, "rank": r.rank, "optimizer state B": r.optimizer_state_bytes,
                             "step counters B": r.step_counter_bytes, "parameters B": r.param_bytes,
                             "gradients B": r.grad_bytes, "loss diff vs unsharded": r.max_loss_diff,
                             "weight diff vs unsharded": r.max_param_diff_vs_reference,
                             "weight diff vs rank 0": r.max_param_diff_vs_rank0})
        return rows


def measure_sharding(nproc: int = 2, *, cfg: GPTConfig | None = None, variants: tuple[str, ...] = VARIANTS,
                     steps: int = 2, batch_per_rank: int = 2, seq_len: int | None = None, timeout_s: float = 300.0,
                     on_line: Callable[[str], None] | None = None) -> ShardingResult:
    """Launch ``nproc`` gloo ranks with ``torchrun`` (:func:`helpers.ddp.launch.launch`) and collect their lines.

    A variant that fails on every rank comes back with its ``error``; a launch that fails as a whole raises.
    """
    cfg = cfg or GPTConfig.smoke()
    unknown = set(variants) - set(VARIANTS)
    if unknown or not variants:
        raise ValueError(f"variants={variants!r}: use some of {', '.join(VARIANTS)}.")
    args = ["--variants", ",".join(variants), "--steps", str(steps), "--batch", str(batch_per_rank),
            "--seq-len", str(seq_len or cfg.block_size), "--config", json.dumps(dataclasses.asdict(cfg)),
            "--timeout-s", str(max(30.0, timeout_s / 2))]
    res = launch(LaunchSpec(nproc_per_node=nproc, module="helpers.gpt.sharded", args=tuple(args), timeout_s=timeout_s),
                 on_line=on_line)
    if not res.ok:
        raise RuntimeError(f"the sharding launch failed: {res.error}")
    out = [VariantSharding(name, ranks, error) for name, ranks, error in by_variant(res.results, variants, RankSharding)]
    return ShardingResult(nproc=nproc, cfg=cfg, variants=tuple(out), wall_s=res.wall_s)


def variant_named(variants, name: str):
    """The variant ``name`` of a launch's results (anything with a ``.variant``); a clear KeyError otherwise."""
    for v in variants:
        if v.variant == name:
            return v
    raise KeyError(f"variant {name!r} was not measured; measured: {[v.variant for v in variants]}.")


def by_variant(results, variants, row) -> list[tuple[str, tuple, str | None]]:
    """``(name, ranks, error)`` for each of ``variants``: the ranks' result lines made into ``row`` dataclasses (JSON
    lists as tuples), and the ranks' errors joined in one line (None where every rank reported)."""
    out = []
    for name in variants:
        lines = [r for r in results if r.get("variant") == name]
        errors = sorted({r["error"] for r in lines if "error" in r})
        ranks = tuple(row(**{k: tuple(v) if isinstance(v, list) else v for k, v in r.items()})
                      for r in lines if "error" not in r)
        out.append((name, ranks, "; ".join(errors) or None))
    return out


def run_variants(variants, run_one: Callable[[str], dict], rank: int, *, rounds: int = 1) -> None:
    """The worker's loop: each variant run and reported, or its error reported in one line (one variant that
    cannot run here must not stop the others), the ranks meeting after each; the process group ended at last.
    ``rounds``: the variants run that many times in turn (ddp, zero, fsdp2, ddp, zero, fsdp2) and only the last
    round is reported: the first absorbs what a fresh process pays once (NCCL's connections, the GPU's clocks
    rising), which would otherwise fall on whichever variant ran first. A variant that failed is not run again."""
    failed: set[str] = set()
    try:
        for round_ in range(rounds):
            last = round_ == rounds - 1
            for variant in variants:
                if variant in failed:
                    continue
                try:
                    out = run_one(variant)
                    if last:
                        report(out)
                except Exception as exc:  # noqa: BLE001 -- said in one line, and the next variant runs
                    said = (str(exc).strip().splitlines() or [""])[0][:300]
                    report({"variant": variant, "rank": rank, "error": f"{type(exc).__name__}: {said}"})
                    failed.add(variant)
                dist.barrier()
    finally:
        shutdown()


# ---- the worker: one copy per rank ------------------------------------------------------------------------------

def _global_batches(cfg: GPTConfig, steps: int, batch: int, seq_len: int, world: int):
    """The same ``steps`` global batches on every rank (``batch × world`` sequences each)."""
    it = MarkovSource(vocab_size=cfg.vocab_size).batches(batch * world, seq_len, seed=1)
    return [next(it) for _ in range(steps)]


def _local(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``t``: the local shard of a DTensor, the tensor itself otherwise."""
    return t.to_local() if hasattr(t, "to_local") else t


def _full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor, gathered from every rank's shard when ``t`` is a DTensor (a collective)."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _reference(cfg: GPTConfig, batches) -> tuple[list[float], list[torch.Tensor]]:
    torch.manual_seed(0)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=_LR)
    losses = []
    for x, y in batches:
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, [p.detach().clone() for p in unique_params(model)]


def _build(variant: str, cfg: GPTConfig, world: int):
    torch.manual_seed(0)  # the same initial weights on every rank, and as the reference's
    model = GPT(cfg)
    if variant == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (world,))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)  # each block's weights gathered for its own forward/backward only
        fully_shard(model, mesh=mesh)  # the rest (embeddings, tied output layer, final LayerNorm)
        return model, model, torch.optim.AdamW(model.parameters(), lr=_LR)
    from torch.nn.parallel import DistributedDataParallel as DDP

    net = DDP(model)
    if variant == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return model, net, ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.AdamW, lr=_LR)
    return model, net, torch.optim.AdamW(net.parameters(), lr=_LR)


def _run(variant: str, cfg: GPTConfig, batches, reference: tuple[list[float], list[torch.Tensor]],
         rank: int, world: int) -> dict:
    model, net, opt = _build(variant, cfg, world)
    losses = []
    for x, y in batches:
        share = slice(rank * (len(x) // world), (rank + 1) * (len(x) // world))
        _, loss = net(x[share], y[share])
        loss.backward()  # DDP all-reduces (averages) the gradients; FSDP2 reduce-scatters them
        opt.step()  # ZeRO: each rank updates its own parameters, then broadcasts them to the others
        mean = loss.detach().clone()
        dist.all_reduce(mean)  # equal shares: the mean of the ranks' means is the global batch's mean
        losses.append(mean.item() / world)
        if len(losses) < len(batches):
            opt.zero_grad(set_to_none=True)  # the last step's gradients stay, to be counted
    local_opt = opt.optim if variant == "zero" else opt  # ZeRO's own AdamW holds this rank's share of the state
    moments, counters = [], []
    for state in local_opt.state.values():
        for v in state.values():
            if isinstance(v, torch.Tensor):
                (counters if v.dim() == 0 else moments).append(_local(v))
    params = unique_params(model)
    full = [_full(p.detach()) for p in params]
    diff_ref = max(float((a - b).abs().max()) for a, b in zip(full, reference[1]))
    flat = torch.cat([f.reshape(-1) for f in full])
    rank0 = flat.clone()
    dist.broadcast(rank0, src=0)
    return {"variant": variant, "rank": rank, "world_size": world, "optimizer_state_bytes": tensor_bytes(moments),
            "step_counter_bytes": tensor_bytes(counters), "param_bytes": tensor_bytes(_local(p) for p in params),
            "grad_bytes": tensor_bytes(_local(p.grad) for p in params if p.grad is not None),
            "losses": losses, "reference_losses": reference[0], "max_param_diff_vs_reference": diff_ref,
            "max_param_diff_vs_rank0": float((flat - rank0).abs().max())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"some of {', '.join(VARIANTS)}, comma-separated")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2, help="sequences per rank per step")
    ap.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default: block_size)")
    ap.add_argument("--config", default=None, help="GPTConfig fields as JSON (default: GPTConfig.smoke())")
    ap.add_argument("--timeout-s", type=float, default=120.0, help="how long a collective may wait for a peer")
    args = ap.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or set(variants) - set(VARIANTS):
        ap.error(f"--variants {args.variants!r}: use some of {', '.join(VARIANTS)}, comma-separated.")
    cfg = GPTConfig(**json.loads(args.config)) if args.config else GPTConfig.smoke()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    if world > 1 and int(os.environ.get("OMP_NUM_THREADS", "0") or 0) == 0:
        torch.set_num_threads(1)  # ranks sharing a few cores: one thread each, or they fight over them
    batches = _global_batches(cfg, args.steps, args.batch, args.seq_len or cfg.block_size, world)
    reference = _reference(cfg, batches)  # every rank runs it: no collective, and each rank has it to compare
    run_variants(variants, lambda variant: _run(variant, cfg, batches, reference, rank, world), rank)
    return 0


if __name__ == "__main__":
    exit_now(main())
