"""The DDP worker that ``torchrun`` starts once per rank (``python -m helpers.ddp.worker``).

    torchrun --nproc-per-node 2 -m helpers.ddp.worker --mode train --batch 256 --steps 30
    torchrun --nproc-per-node 2 -m helpers.ddp.worker --mode grad-check        # DDP's gradients = one process's

Modes:
- ``train``: the reference CNN under DistributedDataParallel on a batch already on the device; each
  rank prints ``RESULT {json}`` with its step time and img/s (``--no-sync`` skips the gradient
  all-reduce, to measure what communication costs);
- ``grad-check``: the gradients DDP averages over the ranks' shards of one global batch, compared on
  every rank with one process's gradients on the whole batch;
- ``sampler``: the order ``DistributedSampler`` gives each rank, two epochs, with and without ``set_epoch``;
- ``crash`` / ``hang``: rank 1 fails or never returns, to show how a launch ends (course tests).

NCCL on CUDA GPUs (one rank per GPU); gloo on CPUs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ..models import ReferenceCNN
from .launch import RESULT_PREFIX

__all__ = ["main"]


def _say(obj: dict) -> None:
    """One ``RESULT {json}`` line, written with one system call: the ranks share one pipe, and a write of
    under 4 KiB to a pipe is never interleaved with another process's (``print`` writes the newline apart)."""
    line = (RESULT_PREFIX + json.dumps(obj) + "\n").encode()
    if len(line) > 4000:
        raise ValueError(f"a rank's result is {len(line)} bytes; keep it under 4000 so it reaches the notebook whole.")
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line)


def _setup(backend: str, timeout_s: float) -> tuple[int, int, torch.device]:
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s),
                            device_id=device if device.type == "cuda" else None)
    return dist.get_rank(), dist.get_world_size(), device


def _grad_check(args, rank: int, world: int, device: torch.device) -> None:
    torch.manual_seed(0)  # the same weights on every rank (DDP also broadcasts rank 0's)
    model = ReferenceCNN(args.image_size).to(device)
    reference = ReferenceCNN(args.image_size).to(device)
    reference.load_state_dict(model.state_dict())
    g = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch * world, 3, args.image_size, args.image_size, generator=g).to(device)
    y = torch.randint(0, 10, (args.batch * world,), generator=g).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    shard = slice(rank * args.batch, (rank + 1) * args.batch)
    nn.functional.cross_entropy(ddp(x[shard]), y[shard]).backward()  # DDP averages the gradients over the ranks
    nn.functional.cross_entropy(reference(x), y).backward()  # one process, the whole global batch
    worst = max(float((a.grad - b.grad).abs().max() / (b.grad.abs().max() + 1e-12))
                for a, b in zip(model.parameters(), reference.parameters()))
    _say({"rank": rank, "world_size": world, "max_relative_grad_difference": worst})


def _sampler(args, rank: int, world: int) -> None:
    from torch.utils.data.distributed import DistributedSampler

    data = list(range(args.dataset_size))
    out = {"rank": rank}
    for use_set_epoch in (False, True):
        sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
        epochs = []
        for epoch in range(2):
            if use_set_epoch:
                sampler.set_epoch(epoch)  # a new shuffle each epoch; without it every epoch repeats the first
            epochs.append(list(sampler))
        out["with_set_epoch" if use_set_epoch else "without_set_epoch"] = epochs
    _say(out)


def _train(args, rank: int, world: int, device: torch.device) -> None:
    torch.manual_seed(0)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    model = ReferenceCNN(args.image_size).to(device, memory_format=fmt)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None, bucket_cap_mb=args.bucket_cap_mb,
              gradient_as_bucket_view=args.gradient_as_bucket_view, static_graph=args.static_graph)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(rank)  # each rank its own data, as a DistributedSampler shard would be
    x = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=g).to(device).contiguous(memory_format=fmt)
    y = torch.randint(0, 10, (args.batch,), generator=g).to(device)
    dtype = {"fp32": None, "bf16": torch.bfloat16}[args.dtype]

    def step():
        ctx = ddp.no_sync() if args.no_sync else torch.enable_grad()  # no_sync: gradients stay local, no all-reduce
        with ctx, torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = nn.functional.cross_entropy(ddp(x), y)
        with ctx:
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(args.warmup):
        step()
    sync()
    dist.barrier()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        sync()  # note: a CPU-GPU sync point, so each step's time is its own
        times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    _say({"rank": rank, "world_size": world, "device": str(device), "batch_per_rank": args.batch,
          "no_sync": args.no_sync, "step_ms_median": med * 1e3, "img_per_s": args.batch / med,
          "global_img_per_s": args.batch * world / med})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("train", "grad-check", "sampler", "crash", "hang"), default="train")
    ap.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    ap.add_argument("--batch", type=int, default=32, help="images per rank per step")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="bf16")
    ap.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--no-sync", action="store_true", help="skip the gradient all-reduce (measures its cost)")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--gradient-as-bucket-view", action="store_true")
    ap.add_argument("--static-graph", action="store_true")
    ap.add_argument("--dataset-size", type=int, default=16)
    ap.add_argument("--timeout-s", type=float, default=120.0, help="how long a collective may wait for a peer")
    args = ap.parse_args(argv)
    rank, world, device = _setup(args.backend, args.timeout_s)
    try:
        if args.mode in ("crash", "hang") and rank == 1:
            if args.mode == "crash":
                raise RuntimeError("rank 1 failed on purpose (the course's crash test)")
            while True:  # never returns: the launch's time limit must end it
                time.sleep(1)
        if args.mode == "grad-check":
            _grad_check(args, rank, world, device)
        elif args.mode == "sampler":
            _sampler(args, rank, world)
        elif args.mode == "train":
            _train(args, rank, world, device)
        else:
            dist.barrier()  # crash/hang: the other ranks wait for rank 1, as a real job would
    finally:
        if args.mode not in ("crash", "hang"):
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
