"""04_memory's exercises: a batch N× larger in the same memory budget, and mixed precision that trains like fp32.

    from helpers.exercises import nb04 as checks
    my_prediction = checks.predict(activations_over_weights_x=2)   # before the anatomy is measured
    started = checks.measuring("the anatomy")                       # the anatomy cell's first line
    checks.check_prediction(my_prediction, steps[0], started=started)   # steps[0]: SGD in fp32's anatomy.Anatomy
    checks.check_memory_plan(my_plan, budget=budget)        # budget: a MemoryBudget measured in the notebook
    checks.check_amp_step(amp_step, my_amp, device="cuda")
    checks.check_large_batch(my_optimizer, my_lr, device="cuda")   # at 8× the batch, as accurate as the baseline
    checks.check_largest_block(my_largest_block, dtype=torch.bfloat16, device="cuda")   # against the allocator's record

Try the exercises before reading the reference solutions below.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any, Callable

import torch
from torch import nn

from .. import data, env, models
from ..memory import search
from ..train import scheduled_lr
from . import predictions
from .common import (CheckResult, WrongForm, as_choice, as_flag, as_function, as_instance, as_number, as_text,
                     describe, failed, not_done)
from .predictions import Prediction, measuring

__all__ = ["MemoryPlan", "MemoryBudget", "measure_plan", "memory_budget", "memory_plan", "AmpPlan", "amp_plan",
           "amp_step", "check_memory_plan", "check_memory_plans", "check_amp_step", "predict", "measuring", "check_prediction",
           "large_batch_optimizer", "large_batch_lr", "check_large_batch", "LARGEST_BLOCK_CASES", "largest_block_bytes",
           "measure_largest_block", "check_largest_block"]

_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


# -- exercise 1: a larger batch in the same budget -----------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """How to train the reference CNN: the micro-batch, its arithmetic, checkpointing, and accumulation."""

    batch_size: int | None = None  # images per forward/backward pass
    dtype: str = "fp32"  # "fp32", "bf16" or "fp16"
    checkpoint: bool = False  # activation checkpointing per conv block
    grad_accum: int = 1  # micro-batches per optimizer step

    @property
    def effective_batch(self) -> int:
        return (self.batch_size or 0) * self.grad_accum


@dataclasses.dataclass(frozen=True)
class MemoryBudget:
    """The budget: what fp32 needs at ``base_batch`` (allocator peak on a GPU, estimated footprint on a CPU)."""

    base_batch: int
    factor: int
    budget_gib: float
    base_img_per_s: float
    image_size: int

    @property
    def target_batch(self) -> int:
        return self.base_batch * self.factor


def measure_plan(plan: MemoryPlan, *, image_size: int, device=None) -> tuple[float, float]:
    """(peak GiB, img/s) of one plan: its micro-batch trained by :func:`helpers.memory.search.step_probe`."""
    probe = search.step_probe(lambda: models.ReferenceCNN(image_size, checkpoint=plan.checkpoint),
                              image_size=image_size, dtype=_DTYPES[plan.dtype], device=device)
    peak, ips = probe(plan.batch_size)
    return peak / 2**30, ips


def memory_budget(*, base_batch: int, factor: int = 2, image_size: int, device=None) -> MemoryBudget:
    """Measure fp32 at ``base_batch``: its peak is the budget a batch ``factor``× larger must fit in."""
    peak, ips = measure_plan(MemoryPlan(base_batch, "fp32"), image_size=image_size, device=device)
    search.free_memory()
    return MemoryBudget(base_batch, factor, peak, ips, image_size)


def memory_plan(budget: MemoryBudget) -> MemoryPlan:
    """The reference: bf16 halves the activations' bytes; at twice the batch that is about the fp32 footprint, and
    accumulating two micro-batches keeps the peak of one. (bf16 + checkpointing at the full batch fits too, slower.)"""
    return MemoryPlan(batch_size=budget.base_batch, dtype="bf16", checkpoint=False, grad_accum=budget.factor)


#: The largest micro-batch the check measures, in multiples of the batch the exercise asks for.
_MAX_BATCH_X = 64


def check_memory_plan(plan: MemoryPlan | None, *, budget: MemoryBudget, device=None) -> CheckResult:
    """The plan must train ``budget.factor``× the base batch per optimizer step, with a peak within the budget."""
    return _judge_plan(plan, budget=budget, device=device)[0]


def _judge_plan(plan, *, budget: MemoryBudget, device=None) -> tuple[CheckResult, tuple[float, float] | None]:
    """:func:`check_memory_plan`'s verdict, and the plan's (peak GiB, img/s) where it was measured and fit."""
    name = "04 · a larger batch in the same memory budget"
    ref = memory_plan(budget)
    if plan is None or plan is ...:
        return _no(not_done(name, ref, "Fill in my_plan and run this cell again."))
    try:
        plan = as_instance(plan, MemoryPlan, what="my_plan", form="checks.MemoryPlan(batch_size=..., dtype='fp32', "
                                                                  "'bf16' or 'fp16', checkpoint=True or False, "
                                                                  "grad_accum=...)")
    except WrongForm as e:
        return _no(failed(name, ref, str(e)))
    if plan.batch_size is None:
        return _no(not_done(name, ref, "Fill in my_plan and run this cell again."))
    most = _MAX_BATCH_X * budget.target_batch  # a micro-batch past this would only run out of memory, or of time
    try:
        plan = dataclasses.replace(
            plan,
            batch_size=as_number(plan.batch_size, what="my_plan.batch_size", integer=True, low=1, high=most,
                                 form=f"a whole number of images per micro-batch, from 1 to {most:,}"),
            dtype=as_choice(plan.dtype, _DTYPES, what="my_plan.dtype", noun="a precision this exercise offers"),
            checkpoint=as_flag(plan.checkpoint, what="my_plan.checkpoint"),
            grad_accum=as_number(plan.grad_accum, what="my_plan.grad_accum", integer=True, low=1, high=_MAX_BATCH_X,
                                 form=f"a whole number of micro-batches per optimizer step, from 1 to {_MAX_BATCH_X}"))
    except WrongForm as e:
        return _no(failed(name, ref, str(e)))
    if plan.effective_batch < budget.target_batch:
        return _no(failed(name, ref, f"The optimizer would see {plan.effective_batch} images per step; the exercise asks for "
                                 f"{budget.target_batch} ({budget.factor}× {budget.base_batch}). batch_size × grad_accum "
                                 "is the batch the optimizer sees."))
    oom = False
    try:
        peak, ips = measure_plan(plan, image_size=budget.image_size, device=device)
    except torch.OutOfMemoryError:
        oom = True
    search.free_memory()  # outside the except block: the traceback no longer holds the failed step's tensors
    if oom:
        return _no(failed(name, ref, f"A micro-batch of {plan.batch_size} ({plan.dtype}) ran out of GPU memory altogether, "
                                 f"far over the {budget.budget_gib:.2f} GiB budget: make the micro-batch smaller and "
                                 "accumulate (grad_accum), or the activations smaller (bf16, checkpointing)."))
    if peak > budget.budget_gib:
        return _no(failed(name, ref, f"It needs {peak:.2f} GiB at its peak, over the {budget.budget_gib:.2f} GiB that fp32 "
                                 f"needed at batch {budget.base_batch}: the larger batch exceeded the budget. Make the "
                                 "activations smaller (bf16, checkpointing) or the micro-batch smaller (grad_accum)."))
    return CheckResult(name, "passed", f"{plan.effective_batch} images per optimizer step ({_label(plan)}) "
                                       f"peak at {peak:.2f} GiB of the {budget.budget_gib:.2f} GiB budget, at "
                                       f"{ips:,.0f} img/s (fp32 at batch {budget.base_batch}: "
                                       f"{budget.base_img_per_s:,.0f}).", plan), (peak, ips)


def _no(result: CheckResult) -> tuple[CheckResult, None]:
    return result, None


def _label(plan: MemoryPlan) -> str:
    return f"{plan.grad_accum} × {plan.batch_size}, {plan.dtype}{', checkpointed' if plan.checkpoint else ''}"


def check_memory_plans(plans, *, budget: MemoryBudget, device=None) -> CheckResult:
    """The plans you tried, measured side by side: each judged as :func:`check_memory_plan` judges one (twice the
    batch per optimizer step, within the budget); at least two different ones must fit, and the fastest of those
    is your answer (the check's ``value``). Its message lists every plan with its peak and speed, or why it failed."""
    name = "04 · the fastest plan for a batch twice as large, side by side"
    ref = memory_plan(budget)
    if plans is None or plans is ... or (isinstance(plans, (list, tuple)) and not plans):
        return not_done(name, ref, "List the plans you want to compare in my_plans (at least two; [04-07], "
                                   "[04-14] and [04-16] measured what each knob saves) and run this cell "
                                   "again.")
    if isinstance(plans, MemoryPlan):
        return failed(name, ref, "my_plans holds one plan: list at least two (my_plans = [checks.MemoryPlan(...), "
                                 "checks.MemoryPlan(...)]), so they can be compared side by side.")
    if not isinstance(plans, (list, tuple)) or not all(isinstance(p, MemoryPlan) for p in plans):
        return failed(name, ref, f"my_plans should be a list of checks.MemoryPlan(...), such as [checks.MemoryPlan("
                                 f"batch_size=..., dtype='bf16', checkpoint=False, grad_accum=2), ...]; you gave "
                                 f"{describe(plans)}.")
    if all(p.batch_size is None for p in plans):
        return not_done(name, ref, "Fill in my_plans and run this cell again.")
    if len(plans) > 6:
        return failed(name, ref, f"my_plans lists {len(plans)} plans: keep the six you most want to compare (each is "
                                 "measured).")
    lines, fits = [], []
    seen: dict[tuple, str] = {}
    dev = torch.device(device) if device is not None else env.device()
    for plan in plans:
        verdict, measured = _judge_plan(plan, budget=budget, device=device)
        label = _label(verdict.value) if verdict.passed else (_label(plan) if plan.batch_size is not None else "blank")
        if verdict.passed:
            # the step each plan measures: its micro-batch, in the precision it really runs here, checkpointed or
            # not. Accumulation repeats that step, so plans that differ only there are one plan, measured once
            p = verdict.value
            step = (p.batch_size, env.autocast_dtype(_DTYPES[p.dtype], dev), p.checkpoint)
            if step in seen:
                lines.append(f"{label}: the same micro-batch step as {seen[step]} (accumulation repeats a step, and "
                             "on this device a precision may run as another), not compared")
                continue
            seen[step] = label
        if verdict.passed:
            peak, ips = measured
            fits.append((ips, peak, verdict.value, label))
        else:
            why = verdict.message.split(" The notebook carries on")[0].rstrip(".")
            lines.append(f"{label}: does not qualify, {why[:1].lower()}{why[1:]}")
    if len(fits) < 2:
        got = "none" if not fits else f"only {fits[0][3]}"
        return failed(name, ref, f"Of the plans you listed, {got} trained {budget.target_batch} images per step within "
                                 f"the {budget.budget_gib:.2f} GiB budget; compare at least two that do."
                                 + "".join(f" {line}." for line in lines))
    fits.sort(key=lambda f: -f[0])
    best_ips, _peak, best, best_label = fits[0]
    side = [f"{label}: {peak:.2f} GiB, {ips:,.0f} img/s" + (" (fastest)" if plan is best else
                                                            f" ({ips / best_ips:.2f}× the fastest)")
            for ips, peak, plan, label in fits]
    return CheckResult(name, "passed", f"Side by side, {len(fits)} plans fit the {budget.budget_gib:.2f} GiB budget at "
                                       f"{budget.target_batch} images per step: " + "; ".join(side + lines)
                                       + f". Your answer is the fastest: {best_label}.", best)


# -- exercise 2: mixed precision that trains like fp32 -------------------------------------------------

@dataclasses.dataclass(frozen=True)
class AmpPlan:
    """Which low precision to train in, whether to scale the loss, and why."""

    dtype: str | None = None  # "bf16" or "fp16"
    use_scaler: bool | None = None
    why: str = ""


def amp_plan() -> AmpPlan:
    return AmpPlan("bf16", False, "bf16 keeps fp32's exponent range, so gradients do not underflow: no scaler needed.")


def amp_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler, micro_batches, *, dtype: torch.dtype,
             max_norm: float) -> torch.Tensor:
    """One optimizer step over ``micro_batches`` ([(x, y), ...]) in autocast ``dtype``; ``scaler`` or None.

    Each micro-batch's loss is divided by their count (so the gradients are those of the whole batch); the
    gradients are unscaled before clipping (so ``max_norm`` means what it says); the step is skipped by the
    scaler if they overflowed. Returns the batch's mean loss.
    """
    device_type = micro_batches[0][0].device.type
    total = torch.zeros((), device=micro_batches[0][0].device)
    for x, y in micro_batches:
        with torch.autocast(device_type, dtype=dtype):
            loss = nn.functional.cross_entropy(model(x), y) / len(micro_batches)
        (scaler.scale(loss) if scaler is not None else loss).backward()
        total += loss.detach()
    if scaler is not None:
        scaler.unscale_(optimizer)  # the gradients' true size, before the clip compares them with max_norm
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total


def _fp32_step(model, optimizer, scaler, micro_batches, *, dtype, max_norm):
    for x, y in micro_batches:
        (nn.functional.cross_entropy(model(x), y) / len(micro_batches)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _curve(step_fn, *, dtype, use_scaler, steps, max_norm, micro, device, seed, images, labels,
           batch: int = 64) -> tuple[list, list]:
    """Losses of ``steps`` optimizer steps from one seeded start, and the first step's parameter update."""
    torch.manual_seed(seed)
    model = models.ReferenceCNN(32).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type) if use_scaler else None
    losses, first_update = [], None
    for s in range(steps):
        idx = slice((s * batch) % len(images), (s * batch) % len(images) + batch)
        x, y = images[idx], labels[idx]
        with torch.no_grad():
            losses.append(float(nn.functional.cross_entropy(model(x), y)))  # fp32 evaluation: one yardstick for all
        before = [p.detach().clone() for p in model.parameters()] if s == 0 else None
        step_fn(model, opt, scaler, list(zip(x.chunk(micro), y.chunk(micro))), dtype=dtype, max_norm=max_norm)
        if before is not None:
            first_update = [p.detach() - b for p, b in zip(model.parameters(), before)]
    return losses, first_update


def _norm(ts) -> float:
    return float(torch.sqrt(sum((t.float() ** 2).sum() for t in ts)))


def check_amp_step(fn: Callable | None, plan: AmpPlan | None, *, device=None, steps: int = 30,
                   seed: int | None = None, tolerance: float = 0.1) -> CheckResult:
    """``fn`` (like :func:`amp_step`) with ``plan`` must follow fp32's loss curve within ``tolerance`` (mean absolute
    difference over the second half), and take the same first step as fp32, with accumulation and clipping on."""
    name = "04 · mixed precision that trains like fp32"
    ref = (amp_step, amp_plan())
    if fn is None or fn is ... or plan is None or plan is ...:
        return not_done(name, ref, "Write amp_step, fill in my_amp, and run this cell again ([04-07] and "
                                   "[04-09] show the precisions and what the scaler does).")
    try:
        plan = as_instance(plan, AmpPlan, what="my_amp", form="checks.AmpPlan(dtype='bf16' or 'fp16', use_scaler=True "
                                                              "or False, why='...')")
    except WrongForm as e:
        return failed(name, ref, str(e))
    if plan.dtype is None:
        return not_done(name, ref, "Write amp_step, fill in my_amp, and run this cell again ([04-07] and "
                                   "[04-09] show the precisions and what the scaler does).")
    try:
        fn = as_function(fn, what="Your answer", form="the function itself, amp_step (no brackets: the check trains "
                                                      "with it)")
        plan = dataclasses.replace(plan, dtype=as_choice(plan.dtype, ("bf16", "fp16"), what="my_amp.dtype",
                                                         noun="a low precision this exercise offers"),
                                   use_scaler=as_flag(plan.use_scaler, what="my_amp.use_scaler", none_is=False),
                                   why=as_text(plan.why, what="my_amp.why", form="a sentence in quotes", none_is=""))
    except WrongForm as e:
        return failed(name, ref, str(e))
    if plan.dtype == "fp16" and not plan.use_scaler:
        return failed(name, ref, "fp16 without a scaler: fp16's smallest normal number is about 6e-5, and small "
                                 "gradients round to zero. Use torch.amp.GradScaler, or bf16.")
    if plan.dtype == "bf16" and plan.use_scaler and len(plan.why.strip()) < 20:
        return failed(name, ref, "A scaler with bf16, and no reason given: bf16 has fp32's exponent range, so gradients "
                                 "do not underflow and scaling buys nothing. Set use_scaler=False, or say in why what "
                                 "you expect it to fix.")
    dev = torch.device(device) if device is not None else env.device()
    seed = seed if seed is not None else random.randrange(2**31)
    imgs, labs = data.synthetic_images(64 * 8, seed=seed)
    images = data.gpu_resize_normalize(torch.from_numpy(imgs).permute(0, 3, 1, 2).contiguous().to(dev), 32)
    labels = torch.as_tensor(labs, dtype=torch.long, device=dev)
    # A CPU without bf16/fp16 instructions emulates them many times slower than fp32: a quarter of the batch keeps
    # the check within a cell's time budget; the precision's arithmetic, which the check is about, stays the same.
    batch = 64 if env.native_precision(plan.dtype, dev) else 16
    common = dict(steps=steps, micro=4, device=dev, seed=seed, images=images, labels=labels, batch=batch)
    dtype = _DTYPES[plan.dtype]
    try:
        # first, the size of one step: accumulation over 4 micro-batches, clipping far above the gradients' norm
        _, want = _curve(_fp32_step, dtype=None, use_scaler=False, max_norm=1e9, **{**common, "steps": 1})
        _, got = _curve(fn, dtype=dtype, use_scaler=plan.use_scaler, max_norm=1e9, **{**common, "steps": 1})
        ratio = _norm(got) / _norm(want)
        if abs(ratio - 4) < 0.4:
            return failed(name, ref, "The first step is 4× fp32's: with 4 micro-batches, divide each micro-batch's loss "
                                     "by 4, so the accumulated gradients are those of the whole batch.")
        if abs(ratio - 1) > 0.2:
            return failed(name, ref, f"The first step is {ratio:.2f}× fp32's. One optimizer step: each micro-batch's "
                                     "loss ÷ their count, backward, then one optimizer step.")
        # then clipping: a threshold below the gradients' norm must clip the true gradients
        _, want = _curve(_fp32_step, dtype=None, use_scaler=False, max_norm=0.1, **{**common, "steps": 1})
        _, got = _curve(fn, dtype=dtype, use_scaler=plan.use_scaler, max_norm=0.1, **{**common, "steps": 1})
        ratio = _norm(got) / _norm(want)
        if ratio < 0.2 and plan.use_scaler:
            return failed(name, ref, f"With clipping the step is {ratio:.1e}× fp32's: the gradients were clipped while "
                                     "still multiplied by the loss scale. Call scaler.unscale_(optimizer) before "
                                     "clip_grad_norm_.")
        if abs(ratio - 1) > 0.2:
            return failed(name, ref, f"With clipping the step is {ratio:.2f}× fp32's: clip the gradients (after "
                                     "unscaling them, with a scaler) with clip_grad_norm_(model.parameters(), max_norm).")
        fp32, _ = _curve(_fp32_step, dtype=None, use_scaler=False, max_norm=1.0, **common)
        amp, _ = _curve(fn, dtype=dtype, use_scaler=plan.use_scaler, max_norm=1.0, **common)
    except NotImplementedError:
        return not_done(name, ref, "Write amp_step and run this cell again.")
    except AttributeError as e:
        if "NoneType" in str(e) and plan.dtype == "bf16":
            return failed(name, ref, f"It used a scaler that bf16 does not get ({e}): with bf16, call loss.backward() "
                                     "and optimizer.step() directly.")
        return failed(name, ref, f"It raised AttributeError: {e}")
    except Exception as e:
        return failed(name, ref, f"It raised {type(e).__name__}: {str(e)[:300]}")
    half = steps // 2
    gap = sum(abs(a - b) for a, b in zip(amp[half:], fp32[half:])) / (steps - half)
    if not all(map(lambda v: v == v and abs(v) != float("inf"), amp)) or gap > tolerance:
        return failed(name, ref, f"Its loss curve is {gap:.3f} from fp32's on average over the last {steps - half} "
                                 f"steps (tolerance {tolerance}).")
    return CheckResult(name, "passed", f"{plan.dtype}{' with a scaler' if plan.use_scaler else ''}: the first step "
                                       f"matches fp32's, clipping acts on the true gradients, and the loss curve stays "
                                       f"within {gap:.3f} of fp32's over the last {steps - half} steps.", (fn, plan))


# -- the prediction, written before the anatomy is measured ---------------------------------------------------

_RATIO = predictions.Question("activations_over_weights_x", "activations kept for backward ÷ weights (SGD, fp32)",
                              "×", example=2)


def predict(*, activations_over_weights_x: Any = None) -> Prediction:
    """Your prediction, made before the anatomy is measured: ``checks.predict(activations_over_weights_x=2)``."""
    return Prediction({"activations_over_weights_x": activations_over_weights_x})


def check_prediction(prediction: Any, sgd_fp32, *, started: predictions.MeasurementStart) -> CheckResult:
    """Your prediction beside the anatomy's measured ratio (``sgd_fp32``: the SGD, fp32 step's ``anatomy.Anatomy``)."""
    name = "04 · your prediction"
    ratio = sgd_fp32.activations / sgd_fp32.params if sgd_fp32.params else float("nan")
    size = lambda b: f"{b / 2**30:.3g} GiB" if b >= 2**29 else f"{b / 2**20:.3g} MiB"  # noqa: E731  smoke's are MiB
    sizes = f"The activations kept took {size(sgd_fp32.activations)}, the weights {size(sgd_fp32.params)}"
    if ratio >= 1:
        note = (f"{sizes}: at this batch the activations are the larger part. They grow with the batch and the image "
                "size, the weights do not, so the batch decides whether a step fits.")
    else:
        note = (f"{sizes}: at this batch the weights are the larger part. The activations grow with the batch and "
                "the image size, the weights do not.")
    return predictions.check_prediction(name, prediction, {"activations_over_weights_x": ratio}, started=started,
                                        cell="04-pred-2", questions=[_RATIO], note=note)


# -- exercise 3: a batch eight times larger that learns as much ----------------------------------------------

#: The reference solution's peak learning rate (AdamW): measured with the exercise's own runs
#: (scripts/probes/large_batch.py; results/archive/probe-large-batch.*): at full scale its runs from four seeds
#: reached 93.7% to 96.5% against the baseline's 84.6% to 93.0%, at smoke scale 87.7% to 89.9% against 75.2% to 89.3%.
_LARGE_LR = 3e-3


def large_batch_optimizer(params) -> torch.optim.Optimizer:
    """The reference: AdamW. SGD's one step size for every weight did not survive eight times the batch on this
    network (no normalisation layers, one fully connected layer holding almost every weight): with the rate scaled
    it diverged, with warm-up it learned less. AdamW scales each weight's step by its gradients' recent size."""
    return torch.optim.AdamW(params, lr=_LARGE_LR, weight_decay=0.0)


def large_batch_lr(step: int, steps: int) -> float:
    """The reference: a linear warm-up over the first tenth of the steps (the first steps, from random weights, are
    the least stable), then a linear decay to zero at the last step (the last steps settle instead of jumping)."""
    return scheduled_lr(_LARGE_LR, step, steps, warmup_steps=max(1, steps // 10), decay="linear")


def _large_batch_symptom(run, base_runs) -> str:
    """What went wrong in the learner's run, read from its losses and learning rates (the symptom, not the fix)."""
    first = run.curve[0][1] if run.curve else float("nan")
    if run.diverged:
        return "Its training loss became inf or NaN: the steps grew until the weights overflowed."
    early = [loss for seen, loss in run.curve[: max(2, len(run.curve) // 5)]]
    base_final = sum(b.final_loss for b in base_runs) / len(base_runs)
    top = max(run.lrs) if run.lrs else 0.0
    if top == 0:
        return "Its learning rate was zero at every step: nothing was learned."
    if max(early) > 1.5 * first:
        return (f"Its training loss rose in the first steps (from {first:.2f} to {max(early):.2f}) and ended at "
                f"{run.final_loss:.2f}, the baseline's at {base_final:.2f}: the first steps, from random weights, "
                "were too large for them.")
    guess = math.log(10)  # the loss of an even guess among the ten classes
    near = (f" (an even guess among ten classes scores {guess:.2f}: it learned almost nothing)"
            if abs(run.final_loss - guess) < 0.15 else "")
    lrs = (f"its learning rate was {top:.3g} at every step" if min(run.lrs) == top else
           f"its learning rate ran from {run.lrs[0]:.3g} up to {top:.3g} and ended at {run.lrs[-1]:.3g}")
    return (f"Its training loss ended at {run.final_loss:.2f}{near}, the baseline's at {base_final:.2f}, after "
            f"{run.steps} steps against the baseline's {base_runs[0].steps}; {lrs}.")


def check_large_batch(make_optimizer: Callable | None, lr_at: Callable | None, *, setup=None, device=None,
                      seeds: int | None = None) -> CheckResult:
    """Your optimizer and learning-rate schedule at eight times the baseline's batch, trained on the same images from
    fresh seeds, must reach the baseline's held-out accuracy (its mean over its seeds, less the margin two draws of
    held-out images leave). The result's value is ``(runs, baseline_runs)``."""
    from .. import large_batch as lb
    from ..challenge.accuracy import accuracy_margin

    name = "04 · a batch eight times larger that learns as much"
    ref = (large_batch_optimizer, large_batch_lr)
    hint = ("Write my_optimizer and my_lr and run this cell again ([04-lb-2] measured batch 256 at the baseline's "
            "learning rate; [04-lb-1] says what a larger batch changes).")
    if make_optimizer is None or lr_at is None or make_optimizer is ... or lr_at is ...:
        return not_done(name, ref, hint)
    try:
        make_optimizer = as_function(make_optimizer, what="my_optimizer",
                                     form="a function of the model's parameters that returns a torch.optim optimizer")
        lr_at = as_function(lr_at, what="my_lr", form="a function my_lr(step, steps) that returns a learning rate")
    except WrongForm as e:
        return failed(name, ref, str(e))
    setup = setup or lb.setup_for()
    dev = torch.device(device) if device is not None else env.device()
    n = seeds or lb.learner_seeds()
    runs = []
    base_mean = need = None
    for i in range(n):
        seed = random.randrange(3, 2**31)  # fresh each run: not one of the baseline's seeds
        try:
            run = lb.train_run(setup, make_optimizer, lr_at, batch=setup.large_batch, seed=seed, device=dev,
                               name=f"yours, seed {seed}")
        except NotImplementedError:
            return not_done(name, ref, hint)
        except (TypeError, ValueError) as e:
            return failed(name, ref, f"{e}.")
        except Exception as e:  # the learner's code: say what it raised, with the exercise's name
            return failed(name, ref, f"Training with your optimizer and schedule raised {type(e).__name__}: {e}")
        runs.append(run)
        if need is None:  # after the first run: an answer that cannot train is refused before the baseline runs
            base_mean, base_runs = lb.baseline_mean(setup, device=dev)
            margin = accuracy_margin(base_mean, setup.heldout)
            need = base_mean - margin
        # a run far below the target, or one that diverged, settles it: the other seeds would not lift the mean
        if run.diverged or run.accuracy < need - 0.15:
            break
    mean = sum(r.accuracy for r in runs) / len(runs)
    what = (f"batch {setup.large_batch} ({setup.large_steps} steps) reached {100 * mean:.1f}% held-out "
            + (f"(mean of {len(runs)} fresh seeds: {', '.join(f'{100 * r.accuracy:.1f}%' for r in runs)})"
               if len(runs) > 1 else "(from one fresh seed" + (": so far below that the others were not run)"
                                                               if len(runs) < n else ")"))
            + f"; the baseline, batch {setup.base_batch} "
            f"({setup.base_steps} steps) on the same {setup.images:,} images, {100 * base_mean:.1f}% (mean of "
            f"{len(base_runs)} seeds); needed: {100 * need:.1f}% (the baseline less {100 * margin:.1f} points, what two "
            f"draws of {setup.heldout:,} held-out images can differ by)")
    if mean < need:
        worst = min(runs, key=lambda r: r.accuracy)
        return failed(name, ref, f"Your recipe at {what}. {_large_batch_symptom(worst, base_runs)}")
    speed = (sum(r.img_per_s for r in runs) / len(runs)) / (sum(b.img_per_s for b in base_runs) / len(base_runs))
    return CheckResult(name, "passed", f"Your recipe at {what}. It trained at {speed:.1f}× the baseline's img/s.",
                       (runs, base_runs))


# -- exercise 5: the largest block of one training step ----------------------------------------------------------

#: (batch, image size) where the check compares your answer with the step itself: sizes the notebook never shows,
#: one where an activation is the largest block and one where a weight (and what Adam keeps for it) is, in bf16 and
#: in fp32 alike (no size where the two tie).
LARGEST_BLOCK_CASES: tuple[tuple[int, int], ...] = ((96, 96), (24, 160))
_BLOCK_TOLERANCE = 0.01  # the allocator rounds each block up (to 512 bytes; 2 MiB above 10 MiB): under 1% here


def largest_block_bytes(batch: int, image_size: int, dtype: torch.dtype) -> int:
    """Reference: the bytes of the largest block one training step of the reference CNN (channels_last, Adam,
    autocast in ``dtype``, or none where it is ``torch.float32``) keeps past the phase that made it: an activation
    kept for backward, a parameter, a gradient or optimizer state (not a temporary, such as a workspace cuDNN takes
    for one convolution and gives back at once).

    Two tensors compete. The first convolution's output has a value per pixel for each of its 64 channels, in the
    precision the step computes in, and what the forward keeps of that size (the ReLU's output; in a 2-byte
    precision also the first max-pool's int64 indices: a quarter as many values, 8 bytes each) lives until the
    backward. The first fully connected layer's weight has 256 × side² × 512 values in fp32 (autocast casts a copy;
    the weight stays fp32), and its gradient and Adam's two moments are as large. Which wins depends on the batch
    and the image size.
    """
    activation = batch * 64 * image_size * image_size * dtype.itemsize
    side = models.feature_size(image_size)
    fc1_weight = 256 * side * side * 512 * torch.float32.itemsize
    return max(activation, fc1_weight)


def measure_largest_block(batch: int, image_size: int, dtype: torch.dtype, *, device) -> int:
    """The largest block of one recorded training step (after a warm-up step) that outlived the phase that made
    it, read from the CUDA allocator's own history: the step's phases marked as 04's are, each block's kind from
    when it lived (:func:`helpers.memory.snapshot.timeline`)."""
    from .. import profiling
    from ..memory import snapshot

    dev = torch.device(device)
    net = models.ReferenceCNN(image_size).to(dev, memory_format=torch.channels_last)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.randn(batch, 3, image_size, image_size, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device=dev)

    def step() -> None:
        with profiling.nvtx_range("forward"), torch.autocast(dev.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = nn.functional.cross_entropy(net(x), y)
        with profiling.nvtx_range("backward"):
            loss.backward()
        with profiling.nvtx_range("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    try:
        snap = snapshot.record_snapshot(step, device=dev)
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        tl = snapshot.timeline(snap, kinds=snapshot.tensor_kinds(net, opt), device=index)
    finally:
        del net, opt, x, y
        search.free_memory()
    # the step's own: not its temporaries, and not a block some earlier code allocated that the step happened to free
    kept = [b.size for b in tl.blocks if b.kind not in ("temporaries", "allocated before the step")]
    if not kept:
        raise RuntimeError("the allocator's history held no block kept past its phase: were the phases marked?")
    return max(kept)


def check_largest_block(fn: Callable | None, *, dtype: torch.dtype | None = None, device=None) -> CheckResult:
    """Your ``fn(batch, image_size, dtype) -> bytes`` for the largest block one training step keeps past the phase
    that made it, judged at :data:`LARGEST_BLOCK_CASES`: on a GPU against the allocator's own record of the step
    (the reference CNN, channels_last, Adam, autocast ``dtype``); on a CPU, which has no such record, against the
    reference solution. Within 1% passes."""
    name = "04 · the largest block of a training step"
    dev = torch.device(device) if device is not None else env.device()
    dtype = dtype or torch.float32
    hint = ("Write my_largest_block(batch, image_size, dtype): the bytes of the largest block one training step "
            "keeps past the phase that made it, for any batch and image size ([04-snap-2] lists one step's largest "
            "blocks at one size, with their kinds). Which tensors grow with the batch, which with the model, and how "
            "many bytes does each value take?")
    if fn is None or fn is ...:
        return not_done(name, largest_block_bytes, hint)
    try:
        fn = as_function(fn, what="my_largest_block", form="a function of (batch, image_size, dtype)")
    except WrongForm as e:
        return failed(name, largest_block_bytes, str(e))
    lines = []
    on_gpu = dev.type == "cuda"
    for batch, size in LARGEST_BLOCK_CASES:
        try:
            got = fn(batch, size, dtype)
        except NotImplementedError:
            return not_done(name, largest_block_bytes, hint)
        except Exception as e:  # the learner's code: say what it raised
            return failed(name, largest_block_bytes, f"my_largest_block({batch}, {size}, {dtype}) raised "
                                                     f"{type(e).__name__}: {e}")
        try:
            got = as_number(got, what=f"my_largest_block({batch}, {size}, {dtype})", form="a number of bytes",
                            above=0)
        except WrongForm as e:
            return failed(name, largest_block_bytes, str(e))
        want = measure_largest_block(batch, size, dtype, device=dev) if on_gpu else largest_block_bytes(batch, size,
                                                                                                         dtype)
        what = f"batch {batch} at {size}×{size}: yours {got / 2**20:,.1f} MiB, " + (
            "the allocator's largest kept block" if on_gpu else "the reference's") + f" {want / 2**20:,.1f} MiB"
        if abs(got - want) > _BLOCK_TOLERANCE * want:
            side = "too small: a larger tensor is kept in the step" if got < want else (
                "too large: the step keeps no tensor that big")
            return failed(name, largest_block_bytes, f"At {what}, {side}. Count the values of the tensors that grow "
                                                     "with the batch and of the largest weight, and the bytes of "
                                                     "each value in this precision.")
        lines.append(what)
    where = "" if on_gpu else " (a CPU keeps no allocator history: on a GPU the step itself is measured)"
    return CheckResult(name, "passed", "; ".join(lines) + f"{where}. At one size an activation is the largest block "
                       "(conv1's output as the ReLU keeps it, and in a 2-byte precision the first pool's int64 "
                       "indices too), at the other fc1's fp32 weight (and its gradient and Adam's two moments).", fn)
