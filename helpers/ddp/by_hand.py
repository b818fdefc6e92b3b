"""Data parallelism written by hand, checked against PyTorch's DistributedDataParallel, in three steps (as Stanford
CS336's systems assignment builds it): every gradient all-reduced after backward, one by one; then packed into
buckets, one all-reduce each; then each bucket's all-reduce started during backward, from a gradient hook, so that
communication hides behind the backward pass still running.

The learner's file (05 writes it with ``%%writefile``) defines the three, each used after ``loss.backward()``::

    def sync_each(model): ...                 # 1: every parameter's gradient averaged over the ranks, one by one
    def sync_bucketed(model, bucket_mb): ...  # 2: gradients packed into buckets of at most bucket_mb, one each
    class Overlapped:                         # 3: a bucket's all-reduce starts (async_op=True) as its last gradient
        def __init__(self, model, bucket_mb): ...  # is ready, from a hook registered here
        def finish(self): ...                 # after backward: wait for every bucket, write the averages back

``torchrun --nproc-per-node 2 -m helpers.ddp.by_hand FILE each`` (or ``bucketed``, ``overlapped``) runs it: each rank
trains the course's network (:class:`~helpers.models.ReferenceCNN`, the same start weights on every rank) on its own
shard of the same global batches twice, with the learner's synchronisation and under DDP, and compares the gradients
after every step's synchronisation and the weights after every optimizer step. Every ``dist.all_reduce`` the learner's
code calls is recorded (its size, whether it was asynchronous, whether backward was still running), so that a
bucketed version that does not pack, or an overlapped one that waits inside backward, is refused with what it did.
``--time`` then times steps of both (medians), the learner's against DDP's: on GPUs (NCCL) that is the lesson; on a
CPU (gloo) only the mechanics. Each rank prints one ``RESULT`` line (:func:`.protocol.report`);
:func:`helpers.exercises.nb05.check_sync` launches it and reads them.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from ..models import ReferenceCNN
from .protocol import exit_now, report, shutdown

__all__ = ["STEPS", "RTOL", "Recorder", "run", "run_steps", "arguments", "main"]

#: The three steps, in the order 05 asks for them: (name, what the learner's file defines for it).
STEPS = {"each": "sync_each(model)", "bucketed": "sync_bucketed(model, bucket_mb)",
         "overlapped": "Overlapped(model, bucket_mb) with .finish()"}
#: Gradients are compared with DDP's after each step within this (relative to the largest): with two ranks the sums
#: are the same floating-point additions, so a correct version matches to rounding, and a wrong one misses by far more
RTOL = 1e-5


class Recorder:
    """Every ``dist.all_reduce`` called while it is on: its element count, whether asynchronous, and whether backward
    was still running (``in_backward``, set by the trainer around ``loss.backward()``)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.in_backward = False
        self._real: Callable | None = None

    @contextlib.contextmanager
    def on(self):
        self._real = dist.all_reduce
        real = self._real

        def recorded(tensor, *args, **kwargs):
            async_op = bool(kwargs.get("async_op", args[2] if len(args) > 2 else False))
            self.calls.append({"numel": int(tensor.numel()), "bytes": int(tensor.numel() * tensor.element_size()),
                               "async": async_op, "in_backward": self.in_backward})
            return real(tensor, *args, **kwargs)

        dist.all_reduce = recorded
        try:
            yield self
        finally:
            dist.all_reduce = real


def _load(path: Path):
    spec = importlib.util.spec_from_file_location("my_sync", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _batches(steps: int, world: int, batch: int, image_size: int):
    """The same global batches on every rank (seeded), each rank taking its own shard."""
    g = torch.Generator().manual_seed(1234)
    for _ in range(steps):
        x = torch.randn(batch * world, 3, image_size, image_size, generator=g)
        y = torch.randint(0, 10, (batch * world,), generator=g)
        yield x, y


def _largest_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = max(float(b.abs().max()), 1e-12)
    return float((a - b).abs().max()) / scale


def _problem(step: str, calls_per_step: list[list[dict]], params: list[torch.nn.Parameter],
             bucket_bytes: int) -> str | None:
    """What the recorded all-reduces (of each step) say is wrong with ``step``'s structure; ``None`` when nothing
    is."""
    sizes = {p.numel() for p in params}
    for calls in calls_per_step:
        if not calls:
            return ("it called dist.all_reduce not once in a step: the gradients must be averaged over the ranks "
                    "with dist.all_reduce (a sum; divide by dist.get_world_size())")
        if step == "bucketed":
            big = [c for c in calls if c["bytes"] > bucket_bytes and c["numel"] not in sizes]
            if big:
                return (f"one all-reduce carried {big[0]['bytes'] / 2**20:.2f} MB, more than a bucket of "
                        f"{bucket_bytes / 2**20:g} MB: close a bucket before it would pass bucket_mb (a single "
                        "gradient larger than a bucket goes alone)")
            if len(calls) >= len(params):
                return (f"it made {len(calls)} all-reduces for {len(params)} gradients: nothing was packed. Put "
                        "gradients side by side in one flat buffer (torch.cat of their views, or "
                        "torch._utils._flatten_dense_tensors) until the bucket is full, and all-reduce the buffer once")
        if step == "overlapped":
            during = [c for c in calls if c["in_backward"]]
            if not during:
                return ("every all-reduce ran after backward had finished: nothing overlaps. Start each bucket's "
                        "all-reduce from a hook (p.register_post_accumulate_grad_hook) as its last gradient is "
                        "ready, while backward still runs")
            blocking = [c for c in during if not c["async"]]
            if blocking:
                return ("its all-reduces inside backward wait for themselves (async_op=False): backward stops until "
                        "each finishes, so nothing overlaps. Call dist.all_reduce(buffer, async_op=True), keep the "
                        "handle, and wait for it in finish()")
            if len(during) >= len(params):
                return (f"it made {len(during)} all-reduces for {len(params)} gradients: nothing was packed. Pack "
                        "the gradients in buckets of bucket_mb, and start a bucket when its last gradient is ready")
    return None


def _synchronise(args, module, model, sync) -> None:
    """The learner's step ``args.step`` after ``loss.backward()``: sync_each, sync_bucketed, or the Overlapped
    object's finish()."""
    if args.step == "each":
        module.sync_each(model)
    elif args.step == "bucketed":
        module.sync_bucketed(model, args.bucket_mb)
    else:
        sync.finish()


def _trial(args, module, rank: int, world: int, device: torch.device, recorder: Recorder) -> dict[str, Any]:
    # the two networks must compute the same local gradients for the comparison to see only the synchronisation: on
    # a GPU, deterministic algorithms in full fp32 (TF32 and cuDNN's choice of algorithm differ between two modules
    # by about 1e-4 of a gradient on one H200); the timing after the check runs with PyTorch's defaults again
    defaults = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32,
                torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        out, timing = _checked(args, module, rank, world, device, recorder)
    finally:
        (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32,
         torch.backends.cuda.matmul.allow_tf32) = defaults
    if out["ok"] and args.time:
        out.update(_timed(args, module, *timing, rank, world, device))
    return out


def _checked(args, module, rank: int, world: int, device: torch.device, recorder: Recorder):
    """The check of ``args.step`` against DDP: (its result, what the timing goes on with)."""
    torch.manual_seed(0)
    mine = ReferenceCNN(args.image_size).to(device)
    theirs = copy.deepcopy(mine)
    ddp = DDP(theirs, bucket_cap_mb=args.bucket_mb, device_ids=[device.index] if device.type == "cuda" else None)
    opt_mine = torch.optim.SGD(mine.parameters(), lr=0.05, momentum=0.9)
    opt_ddp = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    params = list(mine.parameters())
    with recorder.on():
        sync = module.Overlapped(mine, args.bucket_mb) if args.step == "overlapped" else None
    worst_grad = worst_weight = 0.0
    calls_per_step = []
    for i, (x, y) in enumerate(_batches(args.steps, world, args.batch, args.image_size)):
        shard = slice(rank * args.batch, (rank + 1) * args.batch)
        xs, ys = x[shard].to(device), y[shard].to(device)
        loss = F.cross_entropy(ddp(xs), ys)
        opt_ddp.zero_grad(set_to_none=True)
        loss.backward()
        recorder.calls = []
        with recorder.on():
            opt_mine.zero_grad(set_to_none=True)
            loss = F.cross_entropy(mine(xs), ys)
            recorder.in_backward = True
            loss.backward()
            recorder.in_backward = False
            _synchronise(args, module, mine, sync)
        calls_per_step.append(recorder.calls)
        # what the all-reduces made says more than the gradients they left (none at all, a bucket too large)
        structure = _problem(args.step, [recorder.calls], params, int(args.bucket_mb * 2**20))
        if structure:
            return {"ok": False, "calls": [len(c) for c in calls_per_step], "why": structure}, None
        for (name, p), q in zip(mine.named_parameters(), theirs.parameters()):
            if p.grad is None:
                return {"ok": False, "why": f"after step {i + 1}, {name} has no gradient: keep every gradient"}, None
            worst_grad = max(worst_grad, _largest_gap(p.grad, q.grad))
        if worst_grad > RTOL:
            name = max(((n, _largest_gap(p.grad, q.grad)) for (n, p), q in
                        zip(mine.named_parameters(), theirs.parameters())), key=lambda t: t[1])[0]
            ratio = float(next(p for n, p in mine.named_parameters() if n == name).grad.abs().max()) / max(
                float(dict(theirs.named_parameters())[name].grad.abs().max()), 1e-12)
            return {"ok": False, "grad_gap": worst_grad, "calls": [len(c) for c in calls_per_step],
                    "why": f"after step {i + 1}'s synchronisation, {name}'s gradient differs from DDP's by "
                           f"{worst_grad:.2g} of its largest value (its largest value is {ratio:.3g}× DDP's): each "
                           "rank's gradient must become the mean over the ranks, the same on every rank"}, None
        opt_mine.step()
        opt_ddp.step()
        for p, q in zip(mine.parameters(), theirs.parameters()):
            worst_weight = max(worst_weight, _largest_gap(p.detach(), q.detach()))
    out = {"ok": worst_weight <= RTOL, "grad_gap": worst_grad, "weight_gap": worst_weight,
           "calls": [len(c) for c in calls_per_step], "calls_in_backward": [sum(d["in_backward"] for d in c)
                                                                          for c in calls_per_step],
           "why": "" if worst_weight <= RTOL else
                  f"the weights after the optimizer's steps differ from DDP's by {worst_weight:.2g}"}
    return out, (mine, ddp, opt_mine, opt_ddp, sync)


def _timed(args, module, mine, ddp, opt_mine, opt_ddp, sync, rank, world, device) -> dict[str, float]:
    """Median step time (ms) of the learner's version and of DDP's, alternating, after warm-up."""
    def step_mine(xs, ys):
        opt_mine.zero_grad(set_to_none=True)
        F.cross_entropy(mine(xs), ys).backward()
        _synchronise(args, module, mine, sync)
        opt_mine.step()

    def step_ddp(xs, ys):
        opt_ddp.zero_grad(set_to_none=True)
        F.cross_entropy(ddp(xs), ys).backward()
        opt_ddp.step()

    g = torch.Generator().manual_seed(rank)
    xs = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=g).to(device)
    ys = torch.randint(0, 10, (args.batch,), generator=g).to(device)
    times: dict[str, list[float]] = {"mine": [], "ddp": []}
    for i in range(args.warmup + args.repeats):
        for name, fn in (("mine", step_mine), ("ddp", step_ddp)):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            dist.barrier()
            t = time.perf_counter()
            fn(xs, ys)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i >= args.warmup:
                times[name].append(1000 * (time.perf_counter() - t))
    return {"ms_mine": statistics.median(times["mine"]), "ms_ddp": statistics.median(times["ddp"]),
            "ms_mine_spread": max(times["mine"]) - min(times["mine"]),
            "ms_ddp_spread": max(times["ddp"]) - min(times["ddp"])}


def run(path: str | Path, step: str, *, nproc: int = 2, backend: str = "gloo", bucket_mb: float = 1.0,
        time_steps: bool = False, image_size: int = 32, batch: int = 4, timeout_s: float = 120.0,
        on_line: Callable[[str], None] | None = None):
    """Launch ``nproc`` ranks (``torchrun``) that check, and with ``time_steps`` time, ``step`` of the learner's file
    at ``path`` against DDP; returns the :class:`~helpers.ddp.launch.LaunchResult` (one result per rank)::

        res = run("runs/05_ddp/my_sync.py", "bucketed")
        res.results[0]["ok"], res.results[0]["why"]
    """
    from .launch import LaunchSpec, launch

    args = arguments(path, step, backend=backend, bucket_mb=bucket_mb, time_steps=time_steps, image_size=image_size,
                     batch=batch)
    return launch(LaunchSpec(nproc_per_node=nproc, module="helpers.ddp.by_hand", args=args, timeout_s=timeout_s),
                  on_line=on_line)


def run_steps(jobs: dict[str, str | Path], *, nproc: int = 2, backend: str = "gloo", bucket_mb: float = 1.0,
              time_steps: bool = False, image_size: int = 32, batch: int = 4, timeout_s: float = 300.0,
              on_line: Callable[[str], None] | None = None):
    """:func:`run` for several steps in one launch of ``nproc`` ranks, one after another (``jobs``: ``{step: the file
    that writes it}``): one process group started instead of one for each (on a 2-core CPU each start costs about
    9 s). Each rank reports once per step, its ``"step"`` saying which::

        res = run_steps({"each": "runs/05_ddp/my_sync.py", "bucketed": "runs/05_ddp/my_sync.py"}, time_steps=True)
        [r for r in res.results if r["rank"] == 0 and r["step"] == "bucketed"]
    """
    from .launch import LaunchSpec, launch

    if not jobs:
        raise ValueError("run_steps needs at least one {step: file}.")
    (step, path), *rest = jobs.items()
    args = arguments(path, step, backend=backend, bucket_mb=bucket_mb, time_steps=time_steps, image_size=image_size,
                     batch=batch)
    for step, path in rest:  # each checked as arguments() checks the first: the same words
        args += ("--job", *arguments(path, step)[:2])
    return launch(LaunchSpec(nproc_per_node=nproc, module="helpers.ddp.by_hand", args=args, timeout_s=timeout_s),
                  on_line=on_line)


def arguments(path: str | Path, step: str, *, backend: str = "gloo", bucket_mb: float = 1.0, time_steps: bool = False,
              image_size: int = 32, batch: int = 4) -> tuple[str, ...]:
    """The command line each rank of :func:`run` is given (``python -m helpers.ddp.by_hand`` and these)."""
    if step not in STEPS:
        raise ValueError(f"step={step!r}: one of {', '.join(STEPS)}.")
    return (str(path), step, "--backend", backend, "--bucket-mb", str(bucket_mb), "--image-size", str(image_size),
            "--batch", str(batch), *(["--time"] if time_steps else []))


def main(argv: list[str] | None = None) -> int:
    from .worker import _setup  # the process group as every worker of the course starts it

    ap = argparse.ArgumentParser(prog="python -m helpers.ddp.by_hand")
    ap.add_argument("file", help="the learner's file (sync_each, sync_bucketed, Overlapped)")
    ap.add_argument("step", choices=list(STEPS))
    ap.add_argument("--bucket-mb", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--backend", default="gloo", help="gloo (CPU ranks), nccl (one GPU each) or auto")
    ap.add_argument("--time", action="store_true", help="also time steps of the learner's version and DDP's")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--job", nargs=2, action="append", default=[], metavar=("FILE", "STEP"),
                    help="another step to check after the first, in the same process group (run_steps)")
    args = ap.parse_args(argv)
    for _, step in args.job:
        if step not in STEPS:
            ap.error(f"--job: step {step!r} is not one of {', '.join(STEPS)}")
    rank, world, device = _setup(args.backend, 30)  # a rank that stops early leaves the other waiting: not for long
    try:
        for file, step in [(args.file, args.step), *args.job]:
            job = argparse.Namespace(**{**vars(args), "file": file, "step": step})
            recorder = Recorder()  # each step's all-reduces counted apart
            try:
                module = _load(Path(file))
                out = _trial(job, module, rank, world, device, recorder)
            except NotImplementedError as e:
                out = {"ok": False, "not_done": True, "why": f"{STEPS[step]} is not written yet ({e})"}
            except Exception as e:  # noqa: BLE001 - the learner's code: its failure is the check's reason
                where = traceback.extract_tb(e.__traceback__)[-1]
                out = {"ok": False, "why": f"it raised {type(e).__name__}: {e} (line {where.lineno} of "
                                           f"{Path(where.filename).name})"}
            out.setdefault("calls", [])
            report({"rank": rank, "world": world, "step": step, "device": device.type, **{
                k: v for k, v in out.items() if not isinstance(v, list) or k in ("calls", "calls_in_backward")}})
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    exit_now(main())  # an exception raised in main() ends the rank as usual: its traceback, a failed status
