"""A training loop that survives running out of memory: it halves the micro-batch, doubles the gradient
accumulation (so the batch the optimizer sees stays the same), and carries on from where it was.

    run = train_with_backoff(model, batch=4096, steps=20, image_size=224, dtype=torch.bfloat16)
    run.events          # each back-off: at which step, from which micro-batch to which
    run.losses          # one per optimizer step, none lost or repeated
    run.img_per_s       # at the setting it settled on: images per second of wall clock over the steps run whole
                        # at it (copying each micro-batch to the GPU included; making the random images not)

Nothing the learner made is lost: the model and the optimizer's state are the same objects all
along, a step that failed is redone from its start with its gradients cleared, and the losses of the
steps already taken are kept. Only when not even a micro-batch of ``min_micro_batch`` fits does it
raise, saying what to change.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable

import torch
from torch import nn

from .. import env
from .search import allocator_report, fragmented, free_memory

__all__ = ["Backoff", "BackoffRun", "train_with_backoff", "settled_reading"]


@dataclasses.dataclass(frozen=True)
class Backoff:
    """One out-of-memory the loop survived: it halved the micro-batch, or (``retried``) redid the same one."""

    step: int
    micro_batch_before: int
    micro_batch_after: int
    grad_accum_after: int
    said: str = ""  # what the allocator reported when the step ran out (the block asked for, free, cached, live)
    # True: the allocator had the memory, in pieces (fragmentation), so the same micro-batch was redone once from an
    # empty cache before any halving
    retried: bool = False
    # True: this failure was the redo's (the event before it was the retry); its allocator figures are the redo's own
    redo_failed: bool = False
    # True: the redo's figures read exactly as the first try's (the same allocations in the same order). 04 printed
    # them twice without a word, and they read as the first failure's, its cache never emptied
    same_as_first: bool = False

    @property
    def move(self) -> str:
        """``"step 0: micro-batch 5,632 → 2,816 (× 2 accumulated)"``, or for a retry
        ``"step 0: micro-batch 5,632 redone from an empty cache"``"""
        if self.retried:
            return f"step {self.step}: micro-batch {self.micro_batch_before:,} redone from an empty cache"
        return (f"step {self.step}: micro-batch {self.micro_batch_before:,} → {self.micro_batch_after:,} "
                f"(× {self.grad_accum_after} accumulated)")

    def __str__(self) -> str:
        """The move, then the failure that caused it in the allocator's figures: for a retry, the first failure
        (the redo comes after it); after a failed redo, the redo's own, which on a GPU that repeats the same
        allocations in the same order can read exactly as the first did."""
        if not self.said:
            return self.move
        if self.retried:
            return f"{self.move}, after it ran out of memory: {self.said}"
        if self.redo_failed and self.same_as_first:
            return (f"{self.move}: the redo ran out of memory too, at the same figures as the first try: from the "
                    "emptied cache it made the same allocations in the same order, so what it held cached it had "
                    "cached itself before the failing request")
        if self.redo_failed:
            return f"{self.move}: the redo ran out of memory too: {self.said}"
        return f"{self.move}; {self.said}"


@dataclasses.dataclass(frozen=True)
class BackoffRun:
    batch: int  # what the optimizer sees per step: micro_batch × grad_accum, unchanged by back-offs
    micro_batch: int
    grad_accum: int
    losses: tuple[float, ...]
    events: tuple[Backoff, ...]
    img_per_s: float  # at the final setting: images ÷ wall clock of the timed_steps steps run whole at it
    timed_steps: int = 0  # the optimizer steps img_per_s is measured over: those since the last back-off

    @property
    def halvings(self) -> tuple[Backoff, ...]:
        """The back-offs that halved the micro-batch (not the retries of the same one)."""
        return tuple(e for e in self.events if not e.retried)

    @property
    def retries(self) -> tuple[Backoff, ...]:
        """The fragmentation failures redone at the same micro-batch from an empty cache."""
        return tuple(e for e in self.events if e.retried)

    def __str__(self) -> str:
        moves = "; ".join(e.move for e in self.events) or "none needed"
        steps = f"{self.timed_steps} step{'s' if self.timed_steps != 1 else ''}"
        # batches with thousands separated, as the back-off moves print them ("10,240 → 5,120")
        return (f"{len(self.losses)} steps of batch {self.batch:,} as {self.grad_accum} × {self.micro_batch:,} "
                f"(accumulated × micro-batch); back-offs: {moves}.\n"
                f"At {self.grad_accum} × {self.micro_batch:,}: {self.img_per_s:,.0f} img/s, wall clock over the {steps} "
                "run whole at that setting, each micro-batch copied from the CPU to the device (the random images' "
                "making not counted)")


def train_with_backoff(model: nn.Module, *, batch: int, steps: int, image_size: int, dtype: torch.dtype | None = None,
                       optimizer: torch.optim.Optimizer | None = None, min_micro_batch: int = 1,
                       device: torch.device | str | None = None, seed: int = 0, channels_last: bool = True,
                       on_backoff: Callable[[Backoff], None] | None = None) -> BackoffRun:
    """Train ``steps`` optimizer steps of ``batch`` random images, backing off on out-of-memory.

    A step that ran out of memory is redone from its start once everything it held is freed (its micro-batch on the
    device too) and the allocator's cache emptied. Where the allocator said it had the memory, in pieces
    (fragmentation), the same micro-batch is redone once before it is halved: from an empty cache it may fit.

    ``channels_last``: each micro-batch is laid out as the search's probes lay theirs (:func:`search.step_probe`),
    so a micro-batch the search found to fit fits here too; in NCHW, a convolution with channels_last weights makes
    a channels_last copy of its input, memory the search's step did not need."""
    dev = torch.device(device) if device is not None else env.device()
    dtype = env.autocast_dtype(dtype, dev)  # bf16 without the hardware for it: fp16 on a GPU, fp32 on a CPU
    model = model.to(dev)
    opt = optimizer or torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator(device="cpu").manual_seed(seed)
    micro, accum = batch, 1
    losses: list[float] = []
    events: list[Backoff] = []
    took: list[float] = []  # seconds of each optimizer step run whole since the last back-off
    retried_at: set[int] = set()  # micro-batches already redone once after fragmentation: the next failure halves
    for step in range(steps):
        x_all = torch.randn(batch, 3, image_size, image_size, generator=g)
        y_all = torch.randint(0, 10, (batch,), generator=g)
        while True:
            failed = False
            t0 = time.perf_counter()  # after the random images are made: their making is no part of training
            try:
                total = 0.0
                for xs, ys in zip(x_all.split(micro), y_all.split(micro)):
                    xs, ys = xs.to(dev, non_blocking=True), ys.to(dev, non_blocking=True)
                    if channels_last:
                        xs = xs.contiguous(memory_format=torch.channels_last)
                    with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
                        loss = nn.functional.cross_entropy(model(xs), ys) / accum
                    loss.backward()
                    total += loss.detach()
                opt.step()
                opt.zero_grad(set_to_none=True)
                break
            except torch.OutOfMemoryError as e:
                failed, message = True, str(e)  # the words only: the exception's traceback pins the step's tensors
            if failed:  # outside the except block: the traceback no longer pins the step's tensors
                opt.zero_grad(set_to_none=True)  # half a step's gradients must not leak into the redo
                # the failed micro-batch on the device too: left bound to xs until the redo's first copy, it would be
                # freed after the cache was emptied, and its block, kept in the cache, cut up the redo's memory
                loss = total = xs = ys = None
                free_memory()
                report = allocator_report(message)
                if (micro not in retried_at and {"asked_gib", "free_gib", "cached_gib"} <= report.keys()
                        and fragmented(report["asked_gib"], report["free_gib"], report["cached_gib"])):
                    retried_at.add(micro)
                    ev = Backoff(step, micro, micro, accum, _said(message), retried=True)
                elif micro // 2 < min_micro_batch or micro % 2:
                    raise torch.OutOfMemoryError(
                        f"step {step}: even a micro-batch of {micro} does not fit. Use dtype=torch.bfloat16, "
                        "activation checkpointing, a smaller image size, or free memory that other tensors or "
                        f"processes hold. {len(losses)} completed steps and the model are kept.")
                else:
                    redo = bool(events) and events[-1].retried and events[-1].micro_batch_before == micro
                    said = _said(message)
                    ev = Backoff(step, micro, micro // 2, accum * 2, said, redo_failed=redo,
                                 same_as_first=redo and bool(said) and said == events[-1].said)
                    micro, accum = micro // 2, accum * 2
                events.append(ev)
                if on_backoff is not None:
                    on_backoff(ev)
                took = []  # time the new setting from its first whole step
        losses.append(float(total))  # note: a CPU-GPU sync point, once per optimizer step: the clock covers the work
        took.append(time.perf_counter() - t0)
    return BackoffRun(batch, micro, accum, tuple(losses), tuple(events),
                      batch * len(took) / max(1e-9, sum(took)), len(took))


def settled_reading(run: BackoffRun, searched: int, *, searched_where: str = "") -> str:
    """One sentence from the run: the micro-batch it settled on beside ``searched`` (the largest batch a search
    fitted, ``searched_where``: how that search's process was set, e.g. ``"in a fresh process with
    expandable_segments:True"``), and, where it settled lower, what happened at the size above, retry included.

        print(settled_reading(run, found["bf16"].largest, searched_where=found["bf16"].where()))
    """
    here = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or "the default allocator"
    where = f" {searched_where}" if searched_where else ""
    ok_after_retry = [e for e in run.retries if e.micro_batch_before == run.micro_batch]
    if run.micro_batch >= searched:
        line = f"It settled on micro-batches of {run.micro_batch:,}: the search{where} fitted {searched:,}"
        if ok_after_retry:
            line += (f"; {len(ok_after_retry)} step{'s' if len(ok_after_retry) != 1 else ''} of {run.micro_batch:,} "
                     "ran out of memory in pieces (fragmentation) and fitted when redone from an empty cache")
        return line + "."
    above = 2 * run.micro_batch
    redone = any(e.micro_batch_before == above for e in run.retries)
    return (f"It settled on micro-batches of {run.micro_batch:,}, below the {searched:,} the search{where} fitted: a "
            f"step of {above:,} ran out of memory here, in this process with {here}"
            + (", again when redone from an empty cache after the allocator reported fragmentation" if redone else "")
            + " (the allocator's words are in the back-off lines above).")


def _said(message: str) -> str:
    """The allocator's out-of-memory report in a few words: the block it asked for and what it had."""
    r = allocator_report(message)
    if "asked_gib" not in r or "free_gib" not in r:
        return ""
    held = "".join(f", {r[k]:.2f} GiB {what}" for k, what in (("cached_gib", "cached"), ("live_gib", "in live tensors"))
                   if k in r)
    split = ("; free and cached together were more than that, in no piece that large (fragmentation)"
             if fragmented(r["asked_gib"], r["free_gib"], r.get("cached_gib", 0.0)) else "")
    return f"it asked for {r['asked_gib']:.2f} GiB with {r['free_gib']:.2f} GiB free{held}{split}"
