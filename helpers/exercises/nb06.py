"""06_final_challenge's exercises: spot the runs that break the rules, and read the final run's profile.

    from helpers.exercises import nb06 as checks
    runs = checks.suspects(session, baseline)            # four runs, shuffled, named "run A" … "run D"
    checks.check_spot_the_cheat({"run A": None, "run B": "same_function", ...}, runs)
    checks.check_read_the_profile(("convolution", 48.0), final.profile)

Try the exercises before reading the reference solutions below.
"""

from __future__ import annotations

import dataclasses
import random

from torch import nn

from ..challenge.harness import Session, Submission, Verdict, judge
from ..challenge.to_target import TrainingVerdict
from ..leaderboard import CHECKS
from .common import (CheckResult, WrongForm, as_choice, as_instance, as_mapping, as_number, as_pair, as_text, describe,
                     failed, not_done)

__all__ = ["check_own_training", "OWN_TRAINING_WITHIN", "suspects", "check_spot_the_cheat", "cheats_solution", "kind_shares", "check_read_the_profile",
           "profile_solution", "PROFILE_TOLERANCE_PTS"]

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
        return not_done(name, truth, "Judge your training function with judge_training first.")
    try:
        mine = as_instance(mine, TrainingVerdict, what="my_run", form="the verdict judge_training returned "
                                                                      "(my_run = judge_training(my_training, ...))")
    except WrongForm as e:
        return failed(name, truth, str(e))
    if reference.time_to_target_s is None:
        return failed(name, truth, "The reference solution did not reach the target here, so there is no time to "
                                   "compare with: " + "; ".join(reference.reasons))
    bar = OWN_TRAINING_WITHIN * reference.time_to_target_s
    if not mine.reached:
        why = "; ".join(mine.reasons)
        return not_done(name, truth, f"Your run has not reached the target yet ({why}). Reach it within "
                                     f"{bar:.3g} s ({OWN_TRAINING_WITHIN:g}× the reference solution's "
                                     f"{reference.time_to_target_s:.3g} s).")
    if mine.time_to_target_s > bar:
        return not_done(name, truth, f"It reaches the target, in {mine.time_to_target_s:.3g} s: "
                                     f"{mine.time_to_target_s / reference.time_to_target_s:.1f}× the reference "
                                     f"solution's {reference.time_to_target_s:.3g} s. Bring it within {bar:.3g} s: "
                                     f"read its img/s ({mine.img_per_s:,.0f}) beside the reference's "
                                     f"({reference.img_per_s:,.0f}), and its images ({mine.images:,}) beside "
                                     f"{reference.images:,}.")
    faster = mine.time_to_target_s <= reference.time_to_target_s
    return CheckResult(name, "passed", f"Reached the target in {mine.time_to_target_s:.3g} s against the reference "
                                       f"solution's {reference.time_to_target_s:.3g} s"
                                       + (": faster than the answer key." if faster else "."), mine.time_to_target_s)


# -- exercise 1: spot the runs that cheat -----------------------------------------------------------------


def _one_by_one_conv3(model: nn.Module) -> nn.Module:
    # A 1×1 convolution where the reference has 3×3: nine times fewer FLOPs, and another function
    model.conv3 = nn.Conv2d(model.conv3.in_channels, model.conv3.out_channels, 1).to(model.conv3.weight.device)
    return model


def suspects(session: Session, baseline: Verdict, *, seed: int | None = None) -> dict[str, Verdict]:
    """Four runs judged by the harness, in a shuffled order as "run A" … "run D": one honest, one with a cheaper
    network, one that trains on half the images, one with the learning rate scaled 16× (with the batch, where it
    fits). Which break a rule (and which rule) is for the learner to find from what each printed."""
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
    out: dict[str, Verdict] = {}
    for letter, sub in zip("ABCD", subs):
        name = f"run {letter}"
        out[name] = judge(dataclasses.replace(sub, name=name), session, baseline=baseline)
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
        return not_done(name, truth, "Map each run to the rule it breaks (or None), from what the harness printed.")
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


# -- exercise 2: read the final run's profile -----------------------------------------------------------

#: How far (percentage points) a share read off the table may be from the profile's own.
PROFILE_TOLERANCE_PTS = 5.0


def kind_shares(prof) -> dict[str, float]:
    """Share (%) of the profiled time per kind of kernel, largest first (:meth:`ProfileResult.kind_shares`)."""
    return prof.kind_shares()


def profile_solution(prof) -> tuple[str, float]:
    """The reference answer: the kind with the most time, and its share in %."""
    shares = kind_shares(prof)
    kind = next(iter(shares))
    return kind, shares[kind]


def check_read_the_profile(answer: tuple[str, float] | None, prof) -> CheckResult:
    """``answer``: (the kind of kernel that takes the most of the final run's time, its share in %)."""
    name = "06.2 · read the profile"
    shares = kind_shares(prof)
    truth = profile_solution(prof)
    if answer is None or answer is ...:
        return not_done(name, truth, "Group the final run's kernels by kind and give the largest with its share (%).")
    try:
        kind, pct = as_pair(answer, what="my_profile_answer", form="a (kind, share in %) pair such as ('GEMM', 12.5)")
        kind = as_text(kind, what="The kind in my_profile_answer", form="a kind's name as the table writes it, "
                                                                       "such as 'GEMM'")
        pct = as_number(pct, what="The share in my_profile_answer", form="a share in % from 0 to 100, such as 12.5",
                        low=0, high=100)
    except WrongForm as e:
        return failed(name, truth, str(e))
    kind = {k.casefold(): k for k in shares}.get(kind.casefold(), kind)  # 'gemm' names the table's 'GEMM'
    if 0 < pct <= 1 and truth[1] > 1:
        return failed(name, truth, f"{pct} looks like a fraction; give the share in % (0 to 100).")
    if kind != truth[0]:
        said = f"{shares[kind]:.0f}%" if kind in shares else "nothing"
        return failed(name, truth, f"{kind!r} takes {said} of the time; another kind takes more. Sum the table's "
                                   "time per kind before comparing.")
    off = pct - truth[1]
    if abs(off) > PROFILE_TOLERANCE_PTS:
        way = "high" if off > 0 else "low"
        return failed(name, truth, f"Right kind, but {pct:.0f}% is {abs(off):.0f} points too {way}: share of the "
                                   "summed kernel time of the profiled steps, not of one kernel.")
    return CheckResult(name, "passed", f"Yes: {kind} takes {truth[1]:.0f}% of the final step's time"
                                       f" (you said {pct:.0f}%). That is where the next gain must come from.", answer)
