"""06_final_challenge's exercises: your own training to the target, spot the runs that break the rules, and what to
change next in the final step.

    from helpers.exercises import nb06 as checks
    checks.check_own_training(my_run, answer)            # within 3× the answer key's time to the target
    runs = checks.suspects(session, baseline)            # four runs, shuffled, named "run A" … "run D"
    checks.evidence_table(runs)                          # what was measured of each, without the verdicts
    checks.check_spot_the_cheat({"run A": None, "run B": "same_function", ...}, runs)
    checks.check_next_change(("fully connected", 31.0), kernels, final, session.ceilings)

Try the exercises before reading the reference solutions below.
"""

from __future__ import annotations

import dataclasses
import math
import random

from torch import nn

from .. import bench, env, tables
from ..challenge.harness import Session, Submission, Verdict, judge
from ..challenge.start import start_model
from ..challenge.to_target import TrainingVerdict
from ..leaderboard import CHECKS
from . import predictions
from .predictions import Prediction, measuring
from .common import (CheckResult, WrongForm, as_choice, as_instance, as_mapping, as_number, as_pair, as_text, describe,
                     failed, not_done)

__all__ = ["check_own_training", "OWN_TRAINING_WITHIN", "suspects", "Suspects", "Evidence", "evidence_table",
           "check_spot_the_cheat", "cheats_solution", "check_next_change", "next_change_solution",
           "NEXT_CHANGE_TOLERANCE_PTS", "predict", "measuring", "check_prediction"]

# -- exercise 0: your own training, to the target -------------------------------------------------------------

#: Exercise 06.0 passes when the learner's run reaches the target within this many times the reference solution's
#: time to it (judged in the same session, on the same machine).
OWN_TRAINING_WITHIN = 3.0


def check_own_training(mine, reference) -> CheckResult:
    """``mine``: the learner's run judged by :func:`~helpers.challenge.to_target.judge_training`; ``reference``: the
    reference solution's, judged in the same session. Passed when ``mine`` reached the target in at most
    :data:`OWN_TRAINING_WITHIN` times the reference's time to it."""
    name = "06.0 · your training, to the target"
    truth = reference.time_to_target_s
    if mine is None or mine is ...:
        return not_done(name, truth, "Judge your training function with judge_training first ([06-03] "
                                     "gives the rules).")
    try:
        mine = as_instance(mine, TrainingVerdict, what="my_run", form="the verdict judge_training returned "
                                                                      "(my_run = judge_training(my_training, ...))")
    except WrongForm as e:
        return failed(name, truth, str(e))
    if reference.time_to_target_s is None:
        return failed(name, truth, "The reference solution did not reach the target here, so there is no time to "
                                   "compare with: " + "; ".join(reference.reasons))
    # the bar is 3 × the reference's time as the table beside it prints it, and is printed whole: 06.0 read "within
    # 4.80 s (3× the reference solution's 1.599 s)" beside the table's 1.60 s and 23,040 img/s (36,864 ÷ 1.60), and
    # before that "within 4.90 s (3× … 1.63 s)", where 3 × 1.63 is 4.89
    ref_text = tables.sig(reference.time_to_target_s)
    decimals = len(ref_text.split(".")[1]) if "." in ref_text else 0
    bar = round(OWN_TRAINING_WITHIN * tables.as_shown(ref_text), decimals)
    bar_text = f"{bar:,.{decimals}f}"
    if not mine.reached:
        why = "; ".join(mine.reasons)
        return not_done(name, truth, f"Your run has not reached the target yet ({why}). Reach it within "
                                     f"{bar_text} s ({OWN_TRAINING_WITHIN:g}× the reference solution's {ref_text} s).")
    if mine.time_to_target_s > bar:
        mine_text = tables.sig(mine.time_to_target_s)
        if tables.as_shown(mine_text) <= bar:  # a figure more, so that it reads past the bar as it is
            mine_text = tables.sig(mine.time_to_target_s, 5)
        return not_done(name, truth, f"It reaches the target, in {mine_text} s: "
                                     f"{mine.time_to_target_s / reference.time_to_target_s:.1f}× the reference "
                                     f"solution's {ref_text} s. "
                                     f"Bring it within {bar_text} s: "
                                     f"read its img/s ({mine.img_per_s:,.0f}) beside the reference's "
                                     f"({reference.img_per_s:,.0f}), and its images ({mine.images:,}) beside "
                                     f"{reference.images:,}.")
    faster = mine.time_to_target_s <= reference.time_to_target_s
    return CheckResult(name, "passed", f"Reached the target in {tables.sig(mine.time_to_target_s)} s against the reference "
                                       f"solution's {ref_text} s"
                                       + (": faster than the answer key." if faster else "."), mine.time_to_target_s)


# -- exercise 1: spot the runs that cheat -----------------------------------------------------------------


def _one_by_one_conv3(model: nn.Module) -> nn.Module:
    # A 1×1 convolution where the reference has 3×3: nine times fewer FLOPs, and another function
    model.conv3 = nn.Conv2d(model.conv3.in_channels, model.conv3.out_channels, 1).to(model.conv3.weight.device)
    return model


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What the harness measured of one suspect, without its verdict: the raw figures a judge reads."""

    run: str
    images: int  # trained on (0: it was not trained)
    gflop_per_image: float  # of the network it trains, forward and backward (FlopCounterMode)
    logits_gap_pct: float  # its logits against the reference network's on the same weights before training, in %
    accuracy: float  # held-out (NaN: not trained)
    loss_first: float  # mean training loss over the first quarter of its measured steps (NaN: not trained)
    loss_last: float  # ... and over the last quarter
    img_per_s: float


class Suspects(dict):
    """The suspects' verdicts by name (``"run A"`` …), and what was measured of each (``.evidence``)."""

    evidence: dict[str, Evidence]


def _evidence(name: str, sub: Submission, v: Verdict, session: Session) -> Evidence:
    rules = session.rules
    if sub.build_model is None:  # it trains the reference network itself: the session counted its FLOPs, no gap
        gflop, gap = session.flops_per_image / 1e9, 0.0
    else:  # a network of its own: counted and compared here (about a second each on a small GPU's host)
        model = sub.build_model(start_model(rules))
        gflop = bench.flops_per_image(model, rules.image_size) / 1e9
        gap = _logits_gap_pct(model, start_model(rules), rules.image_size)
    if v.train is None:  # stopped before training: trained here all the same, so every row has the same figures
        images, accuracy, losses, img_per_s = _trained_anyway(sub, session)
    else:
        images, accuracy, losses, img_per_s = v.images_seen, v.accuracy, list(v.train.losses), v.img_per_s
    quarter = max(1, len(losses) // 4)
    return Evidence(name, images, gflop, gap, accuracy, _mean(losses[:quarter]), _mean(losses[-quarter:]), img_per_s)


def _trained_anyway(sub: Submission, session: Session) -> tuple[int, float, list[float], float]:
    """A run the harness refused before its first step, trained without the harness (no checks) for the evidence
    table alone: a row of dashes would tell which rule it broke before the learner has read the figures. Returns
    its images trained, held-out accuracy, losses and img/s."""
    import torch

    from ..challenge.accuracy import heldout_accuracy
    from ..train import Trainer

    rules = session.rules
    cfg = rules.fit(sub.config) if sub.fit else sub.config
    torch._dynamo.reset()
    model = sub.build_model(start_model(rules)) if sub.build_model is not None else start_model(rules)
    trainer = Trainer(cfg, model=model.to(env.device()))
    result = trainer.run(boxed=False)
    accuracy = heldout_accuracy(trainer.model, image_size=rules.image_size, precision=trainer.precision,
                                n=rules.heldout)
    return trainer.images_trained, accuracy, list(result.losses), result.img_per_s


def _logits_gap_pct(model: nn.Module, reference: nn.Module, image_size: int) -> float:
    """The largest difference of ``model``'s logits from ``reference``'s (the same weights), over the largest of
    the reference's, in %: fp32 on the CPU, evaluation mode, four images drawn from a fixed seed."""
    import torch

    x = torch.randn(4, 3, image_size, image_size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got, want = model.float().eval()(x), reference.float().eval()(x)
    return 100 * float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def evidence_table(runs: "Suspects"):
    """The suspects' raw figures side by side, as a person reads them (no verdict, no rule's name)."""
    import pandas as pd

    def num(v, fmt):
        return tables.MISSING if v is None or not math.isfinite(v) else format(v, fmt)

    rows = []
    for e in runs.evidence.values():
        rows.append({"run": e.run, "images trained": f"{e.images:,}" if e.images else tables.MISSING,
                     "GFLOP per image": tables.sig(e.gflop_per_image),
                     "logits gap vs the reference %": ("< 0.001" if e.logits_gap_pct < 1e-3
                                                       else tables.sig(e.logits_gap_pct)),
                     "held-out accuracy %": num(100 * e.accuracy, ".1f"),
                     "loss, first quarter": num(e.loss_first, ".3g"), "loss, last quarter": num(e.loss_last, ".3g"),
                     "img/s": num(e.img_per_s, ",.0f")})
    ev = runs.evidence.values()
    # a diverged run's loss becomes inf or NaN: that dash is itself evidence, and says so
    notes = (("— not measured for that run",) if any(not e.images or math.isnan(e.accuracy) or math.isnan(e.img_per_s)
                                                      for e in ev) else ()) + (
        ("— in a loss column: the loss was not a finite number in that quarter (the run diverged)",)
        if any(not math.isfinite(x) for e in ev if e.images for x in (e.loss_first, e.loss_last)) else ())
    data = pd.DataFrame([dataclasses.asdict(e) for e in runs.evidence.values()]).set_index("run")
    return tables.Table(data=data, shown=pd.DataFrame(rows).set_index("run"), notes=notes)


def suspects(session: Session, baseline: Verdict, *, seed: int | None = None) -> Suspects:
    """Four runs judged by the harness, in a shuffled order as "run A" … "run D": one honest, one with a cheaper
    network, one that trains on half the images, one with the learning rate scaled 16× (with the batch, where it
    fits). Which break a rule (and which rule) is for the learner to find from what was measured of each
    (:func:`evidence_table`), not from the verdicts."""
    base = baseline.config
    fast = dataclasses.replace(base, data="gpu", sync_each_step=False, item_each_step=False, dtype="bf16",
                               channels_last=True, cudnn_benchmark=True, warmup_steps=5)
    # 16× the baseline's batch; on a small GPU batch 512 does not fit in its memory, and at smoke scale it would be
    # the whole run in one step: there the batch is the reference solution's
    big = session.rules.final_batch if session.rules.size in ("small-gpu", "smoke") else 16 * base.batch_size
    fitted = session.rules.fit(fast)
    half = dataclasses.replace(fitted, steps=max(1, (fitted.steps + fitted.warmup_steps) // 2 - fitted.warmup_steps))
    subs = [
        Submission("honest", fast),
        Submission("cheaper network", fast, build_model=_one_by_one_conv3),
        Submission("half the images", half, fit=False),
        Submission("learning rate ×16", dataclasses.replace(fast, batch_size=big, lr=base.lr * 16)),
    ]
    random.Random(seed).shuffle(subs)
    out = Suspects()
    out.evidence = {}
    for letter, sub in zip("ABCD", subs):
        name = f"run {letter}"
        out[name] = judge(dataclasses.replace(sub, name=name), session, baseline=baseline)
        out.evidence[name] = _evidence(name, sub, out[name], session)
    return out


def _all_broken(v: Verdict) -> list[str]:
    """Every rule the run broke, in the harness's order (a run can break several: fewer images and worse accuracy)."""
    return [k for k, (ok, _) in v.checks.items() if not ok]


def _broken(v: Verdict) -> str | None:
    broken = _all_broken(v)
    return broken[0] if broken else None


def cheats_solution(runs: dict[str, Verdict]) -> dict[str, str | None]:
    """The reference answer: each run's first broken rule, or None (read from the harness's own checks). Naming any
    other rule the run broke is right too."""
    return {name: _broken(v) for name, v in runs.items()}


_CHEATS_FORM = 'a dict with one entry per run, such as {"run A": None, "run B": "same_function", ...}'


def check_spot_the_cheat(answer: dict[str, str | None] | None, runs: dict[str, Verdict]) -> CheckResult:
    """``answer`` maps each run to a rule it broke (one of the leaderboard's CHECKS; any of them when it broke several)
    or None if it broke none."""
    name = "06.1 · spot the cheat"
    truth = cheats_solution(runs)
    if answer is None or answer is ...:
        return not_done(name, truth, "Map each run to the rule it breaks (or None; [06-03] lists the rules), "
                                     "from what the harness measured "
                                     "of it.")
    try:
        answer = as_mapping(answer, what="my_cheats", form=_CHEATS_FORM)
    except WrongForm as e:
        return failed(name, truth, str(e))
    if set(answer) != set(runs):
        missing = [r for r in runs if r not in answer]
        others = [k for k in answer if k not in runs]
        yours = "; yours " + " and ".join(
            ([f"has no entry for {', '.join(missing)}"] if missing else [])
            + ([f"has {len(others)} other key{'s' * (len(others) > 1)} ("
                + ", ".join(repr(k) if isinstance(k, str) else describe(k) for k in others[:3])
                + (", …" if len(others) > 3 else "") + ")"] if others else []))
        return failed(name, truth, f"Give one entry per run: {', '.join(runs)}{yours}.")
    said = {}
    for run in runs:
        try:
            said[run] = as_choice(answer[run], CHECKS, what=f"my_cheats[{run!r}]", allow_none=True, noun="a rule")
        except WrongForm as e:
            several = isinstance(answer[run], (list, tuple, set, frozenset))  # two rules named at once, say
            return failed(name, truth, str(e) + (" Name one rule per run: any rule the run broke is right."
                                                 if several else ""))
    wrong = []
    for run, rule in said.items():
        v = runs[run]
        broken = _all_broken(v)
        if rule in broken or (rule is None and not broken):
            continue
        why = dict(v.checks)
        if not broken:
            wrong.append(f"{run} broke no rule ({v.img_per_s:,.0f} img/s is fast, and fast is allowed), "
                         f"you said {rule}")
        elif len(broken) == 1:
            real = broken[0]
            wrong.append(f"{run} broke {real}: {why[real][1]}" if rule is None else
                         f"{run} broke {real}, not {rule}: {why[real][1]}")
        else:
            each = " and ".join(f"{k} ({why[k][1]})" for k in broken)
            wrong.append(f"{run} broke {each}" + ("" if rule is None else f", not {rule}; naming any of them is right"))
    if wrong:
        return failed(name, truth, "; ".join(wrong) + ".")
    n = sum(v is not None for v in truth.values())
    return CheckResult(name, "passed", f"All four right: {n} of them broke a rule, and the harness refused "
                                       "exactly those.", answer)


# -- exercise 2: what to change next, and the most it can gain ---------------------------------------------------

#: How far (MFU percentage points) the answer's MFU may be from the roofline's own: the table rounds to three figures.
NEXT_CHANGE_TOLERANCE_PTS = 1.0


def next_change_solution(kernels, final, ceil) -> tuple[str, float]:
    """The reference answer: the group of the final step's kernels that would save the most time at its roof, and
    the MFU the final run would reach then (:meth:`~helpers.challenge.step_roofline.StepKernels.largest_saving`)."""
    s = kernels.largest_saving(ceil, step_ms=final.step_ms, mfu_pct=final.mfu_pct)
    return s.group, s.mfu_pct_then


def check_next_change(answer: tuple[str, float] | None, kernels, final, ceil) -> CheckResult:
    """``answer``: (the group of kernels to make faster next, the MFU the final run would reach at most if that group
    ran at its roof, everything else as it is, in %)."""
    name = "06.2 · what to change next"
    truth = next_change_solution(kernels, final, ceil)
    groups = [p.name for p in kernels.points]
    if answer is None or answer is ...:
        return not_done(name, truth, "Name the group to make faster next and the MFU it could bring at most "
                                     "(from the roofline table [06-15c] and the comparison table [06-10]).")
    try:
        group, pct = as_pair(answer, what="my_next_change", form="a (group, MFU in %) pair such as "
                                                                  "('fully connected', 31.0)")
        group = as_choice(group, groups, what="The group in my_next_change", noun="a group of the roofline table")
        pct = as_number(pct, what="The MFU in my_next_change", form="an MFU in % from 0 to 100, such as 31.0",
                        low=0, high=100)
    except WrongForm as e:
        return failed(name, truth, str(e))
    if 0 < pct <= 1 and truth[1] > 1:
        return failed(name, truth, f"{pct} looks like a fraction; give the MFU in % (0 to 100).")
    table = kernels.table(ceil).set_index("kernels")
    if group != truth[0]:
        yours = table.loc[group]
        return failed(name, truth, f"{group} take {yours['ms per step']:.3g} ms per step at "
                                   f"{yours['% of roof']:.0f}% of their roof: at the roof they would save "
                                   f"{yours['ms per step'] * (1 - yours['% of roof'] / 100):.3g} ms. Another group "
                                   "would save more: compare what each would save, not how far each is from its roof.")
    off = pct - truth[1]
    if abs(off) > NEXT_CHANGE_TOLERANCE_PTS:
        way = "high" if off > 0 else "low"
        return failed(name, truth, f"Right group, but {pct:.1f}% is {abs(off):.1f} points too {way}: MFU grows as the "
                                   f"step's time shrinks ({tables.sig(final.step_ms)} ms now, MFU "
                                   f"{tables.percent(final.mfu_pct)}%), and the group saves its time now less the "
                                   "least its FLOPs and bytes allow.")
    return CheckResult(name, "passed", f"Yes: {group} at their roof would lift MFU to at most "
                                       f"{tables.percent(truth[1])}% (you said {pct:.1f}%). That is the most this "
                                       "change can gain: the rest of the step stays as it is.", answer)


# -- the prediction, written before the ladder ---------------------------------------------------------------------

_TOP = predictions.Question("top_rung_speedup_x", "the ladder's top rung over the baseline", "×", 10.0)


def predict(*, top_rung_speedup_x=None) -> Prediction:
    """Your prediction, made before the ladder climbs: ``my_prediction = checks.predict(top_rung_speedup_x=10)``."""
    return Prediction({"top_rung_speedup_x": top_rung_speedup_x})


def check_prediction(prediction, final: Verdict, *, started: predictions.MeasurementStart) -> CheckResult:
    """Your prediction beside the top rung's measured speed-up over the baseline judged in the same session."""
    name = "06 · your prediction"
    bound = final.speedup_bound
    note = (f"The most any run could gain over this baseline here is {tables.times(bound)} (the compute ceiling over "
            "the baseline's speed): how much of that gap did the ladder close?" if bound else "")
    return predictions.check_prediction(name, prediction, {"top_rung_speedup_x": final.speedup}, started=started,
                                        cell="06-pred-2", questions=[_TOP], note=note)
