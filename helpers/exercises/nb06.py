"""06_final_challenge's exercises: spot the runs that break the rules, and read the final run's profile.

    from helpers.exercises import nb06 as checks
    runs = checks.suspects(session, baseline)            # four runs, shuffled, named "run A" … "run D"
    checks.check_spot_the_cheat({"run A": None, "run B": "same_function", ...}, runs)
    checks.check_read_the_profile(("convolution", 48.0), final.profile)

Try the exercises before reading the reference solutions below.
"""

from __future__ import annotations

import copy
import dataclasses
import random

from torch import nn

from ..challenge.harness import Session, Submission, Verdict, judge
from ..leaderboard import CHECKS
from .common import CheckResult, failed, not_done

__all__ = ["suspects", "check_spot_the_cheat", "cheats_solution", "kind_shares", "check_read_the_profile",
           "profile_solution", "PROFILE_TOLERANCE_PTS"]

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
    # 16× the baseline's batch; on a small GPU batch 512 does not fit in its memory: there the batch stays its own
    big = session.rules.final_batch if session.rules.size == "small-gpu" else 16 * base.batch_size
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


def _broken(v: Verdict) -> str | None:
    failed_checks = [k for k, (ok, _) in v.checks.items() if not ok]
    return failed_checks[0] if failed_checks else None


def cheats_solution(runs: dict[str, Verdict]) -> dict[str, str | None]:
    """The reference answer: each run's first broken rule, or None (read from the harness's own checks)."""
    return {name: _broken(v) for name, v in runs.items()}


def check_spot_the_cheat(answer: dict[str, str | None] | None, runs: dict[str, Verdict]) -> CheckResult:
    """``answer`` maps each run to the rule it broke (one of the leaderboard's CHECKS) or None if it broke none."""
    name = "06.1 · spot the cheat"
    truth = cheats_solution(runs)
    if answer is None or answer is ...:
        return not_done(name, truth, "Map each run to the rule it breaks (or None), from what the harness printed.")
    if not isinstance(answer, dict) or set(answer) != set(runs):
        return failed(name, truth, f"Give one entry per run: {', '.join(runs)}.")
    bad = [v for v in answer.values() if v is not None and v not in CHECKS]
    if bad:
        return failed(name, truth, f"{bad[0]!r} is not a rule; the rules are {', '.join(CHECKS)} (or None).")
    wrong = []
    for run, said in answer.items():
        real = truth[run]
        if said == real:
            continue
        v = runs[run]
        if real is None:
            wrong.append(f"{run} broke no rule ({v.img_per_s:,.0f} img/s is fast, and fast is allowed), "
                         f"you said {said}")
        elif said is None:
            wrong.append(f"{run} broke {real}: {dict(v.checks)[real][1]}")
        else:
            wrong.append(f"{run} broke {real}, not {said}: {dict(v.checks)[real][1]}")
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
        kind, pct = answer
        pct = float(pct)
    except (TypeError, ValueError):
        return failed(name, truth, "Answer with a pair: (kind, share in %), such as ('GEMM', 12.5).")
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
