"""What every notebook's exercises share: the result of a check, and the full-scale targets.

Every check returns a :class:`CheckResult` whose ``value`` is what the
notebook carries on with: the learner's answer when it passed, the reference
solution when it is not done yet or wrong. So an unsolved exercise never
breaks the rest of a notebook::

    res = checks.check_ceiling_img_per_s(ceiling_img_per_s)
    res                      # shows ✅ / ❌ / ⏳ and what to change
    ceiling_fn = res.value   # yours if it passed, else the reference

A notebook's promises at full scale are :class:`Target` rows, checked together
by :func:`check_targets` (asserted on a GPU node, shown at smoke scale).
"""

from __future__ import annotations

import dataclasses
import html
import math
from typing import Any, Literal

from .. import env, results, timebox

__all__ = ["Status", "CheckResult", "not_done", "failed", "Target", "check_targets"]

Status = Literal["passed", "failed", "not done"]


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The outcome of one exercise check."""

    exercise: str
    status: Status
    message: str
    value: Any = dataclasses.field(default=None, repr=False)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        icon = {"passed": "✅", "failed": "❌", "not done": "⏳"}[self.status]
        return f"{icon} {self.exercise}: {self.status}. {self.message}"

    def _repr_html_(self) -> str:
        color = {"passed": "#1a7f37", "failed": "#cf222e", "not done": "#6e7781"}[self.status]
        return (
            f'<div style="border-left:4px solid {color};padding:4px 10px;margin:4px 0">'
            f"{html.escape(str(self))}</div>"
        )


def not_done(exercise: str, reference: Any, hint: str) -> CheckResult:
    """The exercise is not attempted yet: say what to do, carry on with ``reference``."""
    return CheckResult(exercise, "not done", f"{hint} The notebook carries on with the reference solution.", reference)


def failed(exercise: str, reference: Any, why: str) -> CheckResult:
    """The answer is wrong: say why, carry on with ``reference``."""
    return CheckResult(exercise, "failed", f"{why} The notebook carries on with the reference solution.", reference)


@dataclasses.dataclass(frozen=True)
class Target:
    """A figure a notebook promises at full scale: ``figures[figure] >= at_least``.

    ``required=False`` shows the target without asserting it, for a figure that depends on more than
    this course's code (a speed-up over a baseline bound by the node's CPU, say); ``why`` says so, and
    ``bound`` is the most that figure can reach on this node (shown beside it).
    """

    figure: str
    at_least: float
    why: str
    required: bool = True
    bound: float | None = None


def check_targets(figures: dict[str, float], targets: list[Target], *, scale: str | None = None):
    """A table of each target against what was measured; at full scale a missed required target raises.

        table = check_targets(figures, [Target("loader_tuned_share_of_ceiling", 0.85, "the GPU is fed")])

    At smoke scale (a CPU, tiny images) the speed-ups of a GPU course do not apply: the table only informs.
    A figure that a time box left unmeasured (:func:`helpers.timebox.not_measured`) is shown as not measured
    here, with the reason, and never asserted.
    """
    import pandas as pd

    scale = scale or env.scale()
    rows, missed = [], []
    for t in targets:
        if t.figure not in figures:
            raise KeyError(f"no figure named {t.figure!r} was measured; measured: {', '.join(sorted(figures))}.")
        value = float(figures[t.figure])
        met = math.isfinite(value) and value >= t.at_least
        unmeasured = timebox.why_not_measured(t.figure) if math.isnan(value) else None
        rows.append({"figure": t.figure, "unit": results.figure_unit(t.figure)[0], "measured": value,
                     "at least": t.at_least, "most on this node": t.bound, "met": met,
                     "asserted": t.required and scale == "full" and unmeasured is None,
                     "why": t.why if unmeasured is None else f"not measured here: {unmeasured}"})
        if t.required and not met and unmeasured is None:
            missed.append(f"{t.figure} = {value:.3g}, wanted ≥ {t.at_least:g} ({t.why})")
    if missed and scale == "full":
        raise AssertionError("full-scale target missed: " + "; ".join(missed))
    df = pd.DataFrame(rows)
    as_named = lambda row: results.figure_unit(row["figure"])[1]  # noqa: E731  each figure as its name reads
    df.attrs["formats"] = {"measured": as_named, "at least": as_named, "most on this node": as_named}
    df.attrs["missing"] = {"measured": "not measured here (why says what stopped it)",
                           "most on this node": "only a figure this machine bounds (its CPU, say) has a most"}
    return df
