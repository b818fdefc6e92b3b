"""The course's changes, one on top of the other, each judged by the harness: the final challenge's comparison
table, up to its top rung (every change at once). The reference solution, the answer key of the learner's own
training, is another run: :mod:`.recipes`.

    rungs = ladder()                       # [Rung("baseline", ...), Rung("+ input pipeline", ...), ...]
    verdicts = climb(rungs, session)       # each judged against the first (the same session's baseline)
    top = top_rung()                       # the top rung as a Submission: what instructors and CI run

Every rung keeps what the rungs before it changed and adds one thing. On a GPU with more than 24 GiB the batch
size rung takes a batch 8× the baseline's, doubles the learning rate and decays it linearly to zero over the run:
scaling the rate with the batch (the linear rule) made this network diverge, and a constant rate at a larger batch
learned less than the baseline from some seeds (rules.SIZES says what was measured, and where it is recorded).
On a smaller GPU the challenge's 4,096 images leave too few steps for a larger batch: the rung is listed, with the
reason, and not run (rules.SIZES).
The custom-kernel rung swaps each block's bias, ReLU and max-pool for one Triton kernel forward and one backward
(:mod:`helpers.kernels.relu_pool_triton`); the next adds SGD's fused implementation, and the last pads conv1's
input to eight channels (tensor cores' granularity), the same function: one change each, so each is measured.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from torch import nn

from .. import env, notices, tables
from ..models import pad_first_conv
from ..train import TrainConfig
from .harness import Session, Submission, Verdict, judge, speedup_as_shown
from .rules import Rules

__all__ = ["Rung", "ladder", "top_rung", "climb", "costs_beside_gains", "COST_LIMITS"]


def _fused(model: nn.Module) -> nn.Module:
    from ..kernels.relu_pool_triton import fuse_relu_pool  # imports Triton: only when a rung uses it

    return fuse_relu_pool(model, keep="argmax")  # the argmax kept for the backward, not the conv's output


def _fused_padded(model: nn.Module) -> nn.Module:
    return _fused(pad_first_conv(model))


@dataclasses.dataclass(frozen=True)
class Rung:
    """One row of the comparison: what it adds, and the submission that runs it."""

    name: str
    adds: str  # in words, for the table
    submission: Submission
    needs_gpu: bool = False  # CUDA graphs: on a CPU the rung would only repeat the one before
    left_out: str = ""  # why this size of the challenge does not run it (climb says so instead)
    slow_on_cpu: str = ""  # why this rung is slower than the one before on a CPU (climb prints it beside the rung)
    why: str = ""  # why it is done this way, where that is not obvious (the notebook prints it under the rungs)


#: Why the rungs with Triton kernels lose speed on a CPU: printed beside them (when slower than the rung judged
#: before them in the same call, or than the baseline), not two sections later.
_INTERPRETED = ("slow here because, with no GPU, Triton's interpreter runs the fused kernels one "
                "program at a time in Python (correct, and many times slower than a GPU's compiled kernel)")
_AS_OPS = ("slower here because, with no GPU, the fused bias, ReLU and pool run as several PyTorch ops (the same "
           "function: Triton has no CPU backend), outside the compiled graph")


def _why_slow_on_cpu() -> str:
    from ..kernels.relu_pool_triton import on_cpu  # imports Triton: only when the ladder is made

    return _INTERPRETED if on_cpu() == "interpreter" else _AS_OPS


def ladder(scale: env.Scale | None = None, rules: Rules | None = None) -> list[Rung]:
    """The cumulative rungs from the classic loop to the top rung, every change at once (the top rungs' batch and
    learning rate from ``rules``, by default this machine's: :meth:`Rules.at_scale`). Where that size keeps the
    baseline's batch (a small GPU), the batch rung is there with the reason, and :func:`climb` says it instead of
    running it."""
    scale = scale or env.scale()
    final = (rules or Rules.at_scale(scale)).final
    base = TrainConfig.reference_baseline(scale)
    kept = final.final_batch == base.batch_size and final.final_lr == base.lr and final.final_lr_decay == "none"
    lr_words = "doubled to" if final.final_lr == 2 * base.lr else "set to"
    decay_words = f", decayed {final.final_lr_decay}ly to zero" if final.final_lr_decay != "none" else ""
    batch_adds = ("the baseline's batch and learning rate, kept" if kept else
                  f"batch {final.final_batch} with the learning rate {lr_words} {final.final_lr:g}{decay_words}")
    steps: list[tuple[str, str, Callable[[TrainConfig], TrainConfig], Callable | None, bool]] = [
        ("baseline", f"batch {base.batch_size}, PIL resize per image, a sync and loss.item() every step, fp32",
         lambda c: c, None, False),
        ("+ input pipeline", "the data set on the GPU as uint8, resized and normalised there; no syncs",
         lambda c: dataclasses.replace(c, data="gpu", sync_each_step=False, item_each_step=False), None, False),
        ("+ bf16", "autocast to bfloat16", lambda c: dataclasses.replace(c, dtype="bf16"), None, False),
        ("+ channels_last", "NHWC activations and weights, cuDNN's autotuner",
         lambda c: dataclasses.replace(c, channels_last=True, cudnn_benchmark=True), None, False),
        ("+ compile", "torch.compile (Inductor's fused kernels)",
         lambda c: dataclasses.replace(c, compile=True, compile_backend=env.compile_backend()), None, False),
        ("+ CUDA graphs", "compile mode reduce-overhead: the compiled model's forward and backward each replayed as a "
         "CUDA graph (the loss and the optimizer step still run eagerly)",
         lambda c: dataclasses.replace(c, compile_mode="reduce-overhead"), None, True),
        ("+ batch size", batch_adds,
         lambda c: dataclasses.replace(c, batch_size=final.final_batch, lr=final.final_lr,
                                       lr_decay=final.final_lr_decay), None, False),
        ("+ custom kernels", "bias, ReLU and max-pool fused in one Triton kernel, forward and backward (which reads "
         "the argmax the forward kept, a byte per output)",
         lambda c: c, _fused, False),
        ("+ fused optimizer", ("SGD(fused=True): the whole update (momentum and step) fused into one kernel, "
                               "launched over chunks of the parameters (a large weight takes several launches), where "
                               "the default (foreach) runs a kernel per operation of the update"),
         lambda c: dataclasses.replace(c, fused_optimizer=True), _fused, False),
        ("+ padded conv1", "conv1's input padded from 3 to 8 channels with zeros (the same function)",
         lambda c: c, _fused_padded, False),
    ]
    rungs, cfg, why_slow = [], base, _why_slow_on_cpu()
    for name, adds, change, build, needs_gpu in steps:
        cfg = change(cfg)
        left_out = (final.why_final or "it changes nothing at this size") if name == "+ batch size" and kept else ""
        # said beside the rung that brings the fused op in: the rungs after it keep it, so it cannot explain them
        slow = why_slow if name == "+ custom kernels" else ""
        why = final.why_lr if name == "+ batch size" and not kept else ""
        rungs.append(Rung(name, adds, Submission(name, cfg, build_model=build), needs_gpu, left_out, slow, why))
    return rungs


def top_rung(scale: env.Scale | None = None, rules: Rules | None = None) -> Submission:
    """The top rung, every change of the ladder at once, as a Submission."""
    return ladder(scale, rules)[-1].submission


def climb(rungs: list[Rung], session: Session, *, on_verdict: Callable[[Verdict], None] | None = None,
          monitor=None, profile: tuple[str, ...] = (), baseline: Verdict | None = None) -> list[Verdict]:
    """Judge each rung in order, against the first rung's verdict (the baseline). A rung that needs a GPU is left
    out on a CPU, said once. ``on_verdict`` sees each verdict as it comes (to print it, say); the rungs named in
    ``profile`` are profiled after judging (``Verdict.profile``). ``baseline``: judge every rung against this
    verdict (to climb in parts, one notebook cell each); the verdicts returned are the new ones only."""
    verdicts: list[Verdict] = []
    on_gpu = env.has_cuda()
    if not on_gpu and any(r.submission.config.compile_backend == "aot_eager" for r in rungs):
        notices.say_once("ladder-aot-eager", "On a CPU the compiled rungs capture their graphs (forward, backward, "
                         "custom kernels) with torch.compile(backend='aot_eager') and run PyTorch's kernels: "
                         "Inductor's C++ would take minutes here.")
    for rung in rungs:
        if rung.needs_gpu and not on_gpu:
            print(f"{rung.name}: left out here (CUDA graphs need a CUDA GPU; on a CPU it would repeat the rung before)")
            continue
        if rung.left_out:
            print(f"{rung.name}: left out here (the batch stays {rung.submission.config.batch_size}: {rung.left_out})")
            continue
        first = baseline or (verdicts[0] if verdicts else None)
        v = judge(rung.submission, session, baseline=first, monitor=monitor, profile=rung.name in profile)
        if on_gpu and (why := stall(v)):
            # a stall is not the rung's change: a rung whose timing it took would credit the next rung with this
            # one's gain. Judged once more, and that run kept whatever it reads (no best of two), said either way
            print(f"  ({rung.name}: {why}. Judged again, and the second run kept:)", flush=True)
            v = judge(rung.submission, session, baseline=first, monitor=monitor, profile=rung.name in profile)
            if again := stall(v):
                print(f"  ({rung.name}, judged again: {again}: the stall came back, so it belongs to this rung)",
                      flush=True)
        verdicts.append(v)
        if on_verdict is not None:
            on_verdict(v)
        before = verdicts[-2] if len(verdicts) > 1 else first
        if rung.slow_on_cpu and not on_gpu and before is not None and v.img_per_s < before.img_per_s:
            print(f"  ({rung.name}: {rung.slow_on_cpu})")
    return verdicts


#: A trained rung whose img/s reads more than this share below what its median step gives lost that time to a
#: stall outside its usual steps. 06 on one H200 read "+ custom kernels" at 15,698 img/s beside a 12.2 ms median
#: step of 256 images (20,984 img/s): 0.31 s of its 1.24 s timed, where the same rung read 20,808 in the run
#: before; every other GPU rung read 1-3% below, and the host-bound baseline, whose data waits vary, 9%.
STALL_SHARE = 0.15


def stall(v: Verdict) -> str:
    """Why ``v``'s img/s reads more than :data:`STALL_SHARE` below its images per step over its median step, in
    words written from its figures as printed (the time beyond its steps at the median, and its slowest step);
    "" where it does not, or where it did not train.

        if why := stall(verdict):
            print(why)   # "15,698 img/s against the 20,984 that 256 images per 12.2 ms median step give: …"
    """
    t = v.train
    if t is None or not (v.img_per_s > 0) or not (t.step_ms_median > 0) or not t.records:
        return ""
    images = v.config.batch_size * v.config.grad_accum
    step_ms = tables.sig(t.step_ms_median)  # the step as the table beside the line prints it
    from_steps = 1e3 * tables.rate_as_shown(images, t.step_ms_median)
    if v.img_per_s >= (1 - STALL_SHARE) * from_steps:
        return ""
    beyond = t.wall_s - t.steps * t.step_ms_median / 1e3
    slowest = max(r.step_ms for r in t.records)
    return (f"{v.img_per_s:,.0f} img/s against the {from_steps:,.0f} that {images:,} images per {step_ms} ms median "
            f"step give: {beyond:.2f} s of its {t.wall_s:.2f} s timed went beyond {t.steps} steps at the median, "
            f"and its slowest step took {slowest:,.0f} ms")


#: What a rung may cost beside its gain before :func:`costs_beside_gains` names it: peak memory up a fifth, energy
#: per image up 5%, NVML utilisation down 3 points (each beyond a rerun's usual spread on one GPU).
COST_LIMITS = {"memory_pct": 20.0, "energy_pct": 5.0, "nvml_pts": 3.0}


def costs_beside_gains(verdicts: list[Verdict]) -> list[str]:
    """One sentence for each rung that, beside its change in img/s over the rung before, cost memory, energy per
    image or utilisation beyond :data:`COST_LIMITS`, written from the two verdicts:

        for line in costs_beside_gains(verdicts):
            print(line)

    A speed-up is one column of a trade: 06's "+ padded conv1" on one H200 gained 2.7% img/s and took peak memory
    from 3.75 to 6.61 GiB. Rungs that did not train, and figures a machine cannot measure (energy on a CPU), are
    left out."""
    out = []
    for prev, cur in zip(verdicts, verdicts[1:]):
        if prev.train is None or cur.train is None or not (prev.img_per_s > 0):
            continue
        costs = []
        # each change in % from the two figures as printed: "1.64 → 5.56 GiB (+240%)" had come from unrounded ones
        a, b = prev.peak_mem_gib, cur.peak_mem_gib
        if a and b and 100 * (b / a - 1) >= COST_LIMITS["memory_pct"]:
            costs.append(f"peak memory {a:.2f} → {b:.2f} GiB ({tables.change_as_shown(f'{a:.2f}', f'{b:.2f}')})")
        a, b = prev.j_per_image, cur.j_per_image
        if a and b and 100 * (b / a - 1) >= COST_LIMITS["energy_pct"]:
            costs.append(f"energy per image {1e3 * a:.1f} → {1e3 * b:.1f} mJ "
                         f"({tables.change_as_shown(f'{1e3 * a:.1f}', f'{1e3 * b:.1f}')})")
        a, b = prev.nvml_util_pct, cur.nvml_util_pct
        if a is not None and b is not None and a - b >= COST_LIMITS["nvml_pts"]:
            costs.append(f"NVML utilisation {a:.0f}% → {b:.0f}%")
        if costs:
            # from the two img/s as their lines print them (harness.speedup_as_shown), as the speed-ups above are
            gain = 100 * (speedup_as_shown(cur.img_per_s, prev.img_per_s) - 1)
            out.append(f"{cur.name}: {gain:+.1f}% img/s over {prev.name}, and " + ", ".join(costs) + ".")
    return out
