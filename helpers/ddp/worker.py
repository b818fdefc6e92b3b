"""The DDP worker that ``torchrun`` starts once per rank (``python -m helpers.ddp.worker``).

    torchrun --nproc-per-node 2 -m helpers.ddp.worker --mode train --batch 256
    torchrun --nproc-per-node 2 -m helpers.ddp.worker --mode grad-check,sampler     # modes run in order
    torchrun --nproc-per-node 2 -m helpers.ddp.worker --mode train --variants '[{"label": "no_sync", "sync": "none"}]'

Modes (several, comma-separated, run one after another in one process group: one start-up for all):

- ``train``: the reference CNN under DistributedDataParallel on batches already on the device. Each
  :class:`Variant` (``--variants``, a JSON list; by default one built from the flags) prints one
  ``RESULT {json}`` line per rank with its step time and img/s. ``sync="none"`` skips the gradient
  all-reduce, to measure what communication costs; ``accumulate`` micro-batches per optimizer step
  with ``sync="last"`` (``no_sync`` on all but the last) or ``sync="every"``. One process alone
  (``--nproc-per-node 1``) trains the plain model, without DDP: the baseline of a scaling table.
  ``--profile-dir`` writes a profiler trace of each rank for the first variant (for Holistic Trace Analysis);
- ``allreduce``: ``dist.all_reduce`` of a buffer the size of the model's gradients, alone: the time one
  synchronisation takes when nothing hides it, and the bandwidth it reached;
- ``grad-check``: the gradients DDP averages over the ranks' shards of one global batch, compared on
  every rank with one process's gradients on the whole batch;
- ``sampler``: the order ``DistributedSampler`` gives each rank, two epochs, with and without ``set_epoch``;
- ``crash`` / ``hang``: rank 1 fails or never returns, to show how a launch ends.

NCCL on CUDA GPUs (one rank per GPU); gloo on CPUs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import gc
import io
import json
import os
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import record_function

from .. import env, timebox
from ..models import ReferenceCNN
from .protocol import exit_now, Variant, log as _log, report, shutdown

__all__ = ["main"]

def _setup(backend: str, timeout_s: float) -> tuple[int, int, torch.device]:
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        if local >= torch.cuda.device_count():
            raise RuntimeError(f"local rank {local} has no GPU: this node has {torch.cuda.device_count()}. "
                               "Start at most that many processes per node (--nproc-per-node).")
        torch.cuda.set_device(device)
        env.apply_profile(local)  # a learner-machine profile limits each rank's GPU as it limits a notebook's
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s),
                            device_id=device if device.type == "cuda" else None)
    return dist.get_rank(), dist.get_world_size(), device


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
    with torch.backends.cudnn.flags(enabled=True, deterministic=True), _no_tf32():
        nn.functional.cross_entropy(ddp(x[shard]), y[shard]).backward()  # DDP averages the gradients over the ranks
        nn.functional.cross_entropy(reference(x), y).backward()  # one process, the whole global batch
    worst = max(float((a.grad - b.grad).abs().max() / (b.grad.abs().max() + 1e-12))
                for a, b in zip(model.parameters(), reference.parameters()))
    _log(rank, world, f"grad-check on {device}: DDP's gradients within {worst:.1e} of one process's")
    report({"mode": "grad-check", "rank": rank, "world_size": world, "device": str(device),
            "batch_per_rank": args.batch, "max_relative_grad_difference": worst})


@contextlib.contextmanager
def _no_tf32():
    """fp32 all through: TF32 rounds products at 1e-3, which would hide what the gradient check compares."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _sampler(args, rank: int, world: int) -> None:
    from torch.utils.data.distributed import DistributedSampler

    data = list(range(args.dataset_size))
    out = {"mode": "sampler", "rank": rank, "world_size": world}
    for use_set_epoch in (False, True):
        sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
        epochs = []
        for epoch in range(2):
            if use_set_epoch:
                sampler.set_epoch(epoch)  # a new shuffle each epoch; without it every epoch repeats the first
            epochs.append(list(sampler))
        out["with_set_epoch" if use_set_epoch else "without_set_epoch"] = epochs
    report(out)


def _allreduce(args, rank: int, world: int, device: torch.device) -> None:
    numel = sum(p.numel() for p in ReferenceCNN(args.image_size).parameters())  # DDP reduces fp32 gradients
    buf = torch.ones(numel, device=device)
    for _ in range(3):
        dist.all_reduce(buf)
    _sync(device)
    times = []
    for _ in range(args.repeats * 2):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        _sync(device)
        times.append(time.perf_counter() - t0)
    times.sort()
    med, nbytes = times[len(times) // 2], numel * 4
    _log(rank, world, f"all-reduce of {nbytes / 1e6:.0f} MB alone: {med * 1e3:.2f} ms")
    # the bandwidth each GPU's link carried: a ring all-reduce moves 2(n-1)/n of the buffer through each
    report({"mode": "allreduce", "rank": rank, "world_size": world, "device": str(device), "bytes": nbytes,
            "ms_median": med * 1e3, "ms_min": times[0] * 1e3, "algbw_gb_s": nbytes / med / 1e9,
            "busbw_gb_s": nbytes / med / 1e9 * 2 * (world - 1) / world})


def _make_step(v: Variant, args, rank: int, world: int, device: torch.device):
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    torch.manual_seed(0)
    model = ReferenceCNN(args.image_size).to(device, memory_format=fmt)
    use_ddp = v.ddp if v.ddp is not None else world > 1
    net = (DDP(model, device_ids=[device.index] if device.type == "cuda" else None, bucket_cap_mb=v.bucket_cap_mb,
               gradient_as_bucket_view=v.gradient_as_bucket_view, static_graph=v.static_graph)
           if use_ddp else model)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(rank)  # each rank its own data, as a DistributedSampler shard would be
    x = torch.randn(v.batch, 3, args.image_size, args.image_size, generator=g).to(device).contiguous(memory_format=fmt)
    y = torch.randint(0, 10, (v.batch,), generator=g).to(device)
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[_precision(args.dtype, device, rank)]
    # fp16 (bf16 on a GPU without it) keeps small gradients from rounding to zero by scaling the loss; with DDP the
    # scaled gradients are all-reduced and unscaled after, the same on every rank. A no-op in bf16 and fp32.
    scaler = torch.amp.GradScaler(device.type, enabled=dtype is torch.float16)

    def no_sync(micro: int):
        skip = v.sync == "none" or (v.sync == "last" and micro < v.accumulate - 1)
        return net.no_sync() if use_ddp and skip else contextlib.nullcontext()  # no_sync: gradients stay local

    def step() -> None:
        for micro in range(v.accumulate):
            with no_sync(micro):
                # named ranges: a profiler trace shows where on the GPU each phase ran
                with record_function("forward"), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                    loss = nn.functional.cross_entropy(net(x), y) / v.accumulate
                with record_function("backward"):
                    scaler.scale(loss).backward()  # with DDP, each full bucket's all-reduce starts here, in backward
        with record_function("optimizer"):
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)

    return step, use_ddp


def _precision(dtype: str, device: torch.device, rank: int) -> str:
    """What ``dtype`` runs as here (:func:`helpers.env.resolve_dtype`); rank 0 alone says why when it differs."""
    if rank == 0:
        return env.resolve_dtype(dtype, device)
    with contextlib.redirect_stdout(io.StringIO()):  # one notice per launch, not one per rank
        return env.resolve_dtype(dtype, device)


def _more(win: timebox.Window, device: torch.device) -> bool:
    """Whether every rank has time for another block: the ranks must agree, or one would wait at a barrier for a
    peer that stopped. The box is the ``training_window``'s; a rank whose box ran out stops all of them."""
    go = torch.tensor([1.0 if win.more() else 0.0], device=device)
    dist.all_reduce(go, op=dist.ReduceOp.MIN)
    return bool(go.item())


def _time(step, device: torch.device, *, steps: int, repeats: int, warmup: int) -> tuple[list[float], list[float]]:
    """Seconds per step, one figure per block of ``steps`` (synchronised at each block's ends, not each step), and
    the wall-clock times (``time.time()``) the timed blocks began and ended: a monitor in the launching process
    shades them as this launch's measured steps.

    The blocks stop at ``repeats`` or at the ``training_window`` time box, never below three (a median).
    """
    for _ in range(warmup):
        step()
    _sync(device)
    out = []
    win = timebox.window("training_window", planned=repeats, minimum=min(3, repeats), keep_minimum=True,
                         unit="timed blocks", say="once")
    wall = [time.time(), time.time()]
    while _more(win, device):
        dist.barrier()  # every rank starts the block together
        _sync(device)
        if not out:
            wall[0] = time.time()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        _sync(device)
        out.append((time.perf_counter() - t0) / steps)
        wall[1] = time.time()
        win.tick()
    return sorted(out), wall


def _profile(step, device: torch.device, rank: int, out_dir: Path) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    out_dir.mkdir(parents=True, exist_ok=True)
    # one cycle (repeat=1), exported once at the end: its warning about events cleared between cycles does not apply
    warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle.*")
    with profile(activities=activities, schedule=schedule(wait=1, warmup=2, active=3, repeat=1)) as prof:
        for _ in range(7):  # the last active step is often cut short: 1 + 2 + 3, and one more to close it
            step()
            prof.step()
    prof.export_chrome_trace(str(out_dir / f"rank{rank}.json"))
    dist.barrier()  # every rank's trace is written before any rank goes on


def step_line(label: str, median_s: float, images: int) -> str:
    """A rank's timed step in words, its img/s the reader's division of the step as printed (05 printed "31.02 ms
    per step, 8,252 img/s" for 256 images, where 256 ÷ 31.02 ms is 8,253).

    >>> step_line("all-reduce", 0.031024, 256)
    'all-reduce: 31.02 ms per step, 8,253 img/s on this rank'
    """
    shown_ms = f"{median_s * 1e3:.2f}"
    return f"{label}: {shown_ms} ms per step, {images / (float(shown_ms) / 1e3):,.0f} img/s on this rank"


def _train(args, rank: int, world: int, device: torch.device) -> None:
    variants = ([Variant(**v) for v in json.loads(args.variants)] if args.variants else
                [Variant(batch=args.batch, sync="none" if args.no_sync else "every", bucket_cap_mb=args.bucket_cap_mb,
                         gradient_as_bucket_view=args.gradient_as_bucket_view, static_graph=args.static_graph)])
    for i, v in enumerate(variants):
        step, use_ddp = _make_step(v, args, rank, world, device)
        times, wall = _time(step, device, steps=args.steps, repeats=args.repeats, warmup=args.warmup)
        med = times[len(times) // 2]
        images = v.batch * v.accumulate
        _log(rank, world, step_line(v.label, med, images))
        report({"mode": "train", "rank": rank, "world_size": world, "device": str(device), **dataclasses.asdict(v),
                "ddp": use_ddp, "images_per_step": images, "step_ms_median": med * 1e3, "step_ms_min": times[0] * 1e3,
                "step_ms_max": times[-1] * 1e3, "img_per_s": images / med, "global_img_per_s": images * world / med,
                "precision": _precision(args.dtype, device, rank), "timed_blocks": len(times),
                "measured_wall_s": wall})
        if i == 0 and args.profile_dir:
            _profile(step, device, rank, Path(args.profile_dir))
        del step
        gc.collect()  # this variant's DDP (its reference cycles) before the next one's
        if device.type == "cuda":
            torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", default="train", help="train, allreduce, grad-check, sampler, crash or hang; "
                                                    "several, comma-separated, run in order")
    ap.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    ap.add_argument("--batch", type=int, default=32, help="images per rank per step")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=10, help="steps per timed block")
    ap.add_argument("--repeats", type=int, default=5, help="timed blocks (the median is reported)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="bf16",
                    help="bf16 runs as fp16 with a GradScaler on a GPU without bf16, fp32 on a CPU without it")
    ap.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--variants", default=None, help="a JSON list of Variant fields, one timed run each")
    ap.add_argument("--no-sync", action="store_true", help="skip the gradient all-reduce (measures its cost)")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--gradient-as-bucket-view", action="store_true")
    ap.add_argument("--static-graph", action="store_true")
    ap.add_argument("--profile-dir", default=None, help="write each rank's profiler trace of the first variant here")
    ap.add_argument("--dataset-size", type=int, default=16)
    ap.add_argument("--timeout-s", type=float, default=120.0, help="how long a collective may wait for a peer")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    known = {"train", "allreduce", "grad-check", "sampler", "crash", "hang"}
    if not modes or set(modes) - known:
        ap.error(f"--mode {args.mode!r}: use one or more of {', '.join(sorted(known))}, comma-separated.")
    rank, world, device = _setup(args.backend, args.timeout_s)
    failing = {"crash", "hang"} & set(modes)
    try:
        for mode in modes:
            if mode in ("crash", "hang"):
                if rank == 1:
                    if mode == "crash":
                        raise RuntimeError("rank 1 failed on purpose (the course's crash test)")
                    while True:  # never returns: the launch's time limit must end it
                        time.sleep(1)
                dist.barrier()  # the other ranks wait for rank 1, as a real job would
            elif mode == "grad-check":
                _grad_check(args, rank, world, device)
            elif mode == "sampler":
                _sampler(args, rank, world)
            elif mode == "allreduce":
                _allreduce(args, rank, world, device)
            else:
                _train(args, rank, world, device)
        dist.barrier()  # no rank tears the group down while another still uses it
    finally:
        if not failing:
            shutdown()
    return 0


if __name__ == "__main__":
    exit_now(main())  # an exception raised in main() ends the rank as usual: its traceback, a failed status
