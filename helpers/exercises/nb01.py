"""01_baseline's exercises: a prediction of the baseline's wait for data, and the learner's reading of the baseline,
each checked against what was measured.

    from helpers.exercises import nb01 as checks
    my_prediction = checks.predict(waiting_for_data_pct=60)        # before the baseline runs
    started = checks.measuring("the baseline run")                  # the baseline cell's first line
    checks.check_prediction(my_prediction, base, started=started)   # base: the baseline's train.TrainResult
    evidence = checks.BaselineEvidence(util_pct=..., util_source="nvml", img_per_s=..., phase_ms=..., ceiling_img_per_s=...)
    check = checks.check_baseline_analysis(checks.BaselineAnalysis(42.0, ["data_loading", ...], 6.4, 130.0), evidence)

Try the exercise before reading the reference solution below.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import predictions
from .common import CheckResult, WrongForm, as_instance, as_names, as_number, blank, failed, not_done
from .predictions import Prediction, measuring

__all__ = ["BOTTLENECKS", "BaselineEvidence", "BaselineAnalysis", "baseline_analysis", "check_baseline_analysis",
           "predict", "measuring", "check_prediction"]

#: Where a step's time can go, in the names the analysis uses.
BOTTLENECKS = ("data_loading", "host_to_device_copy", "compute", "sync_and_launch_overhead")
_PHASE_TO_BOTTLENECK = {"data": "data_loading", "h2d": "host_to_device_copy", "compute": "compute",
                        "other": "sync_and_launch_overhead"}


@dataclasses.dataclass(frozen=True)
class BaselineEvidence:
    """What the baseline run measured: the check compares the learner's analysis with this."""

    util_pct: float  # mean NVML utilisation (CPU utilisation without NVML)
    util_source: str  # "nvml" or "host"
    img_per_s: float
    phase_ms: dict[str, float]  # median per step: data, h2d, compute, other
    ceiling_img_per_s: float  # compute-bound ceiling from the measured matmul rate

    @property
    def step_ms(self) -> float:
        return sum(self.phase_ms.values())

    def ranked_bottlenecks(self) -> list[str]:
        """Phases from largest to smallest share of a step, by their analysis names."""
        order = sorted(self.phase_ms, key=lambda k: -self.phase_ms[k])
        return [_PHASE_TO_BOTTLENECK[k] for k in order]

    def speedup_if_only_compute(self) -> float:
        """How many times faster a step would be if everything but its compute were hidden: step ÷ compute."""
        return max(1.0, self.step_ms / max(self.phase_ms.get("compute", 0.0), 1e-9))

    def speedup_at_ceiling(self) -> float:
        """How many times faster the compute ceiling allows: ceiling img/s ÷ measured img/s."""
        return self.ceiling_img_per_s / self.img_per_s


#: How far a learner's reading of each figure may be from the measurements' own, as a share of it: the printed
#: numbers are rounded, and a step read as the sum of its phases or as the run's median step differs by a few %.
READING_SPREAD = {"speedup_if_only_compute_x": 0.15, "speedup_at_ceiling_x": 0.10}


@dataclasses.dataclass(frozen=True)
class BaselineAnalysis:
    """The learner's baseline report (the written report an investigation starts with, checked)."""

    gpu_util_pct: float | None = None  # what the monitor measured
    bottlenecks: tuple[str, ...] | list[str] = ()  # ranked, largest first, names from BOTTLENECKS
    speedup_if_only_compute_x: float | None = None  # step ÷ compute: everything but the compute hidden
    speedup_at_ceiling_x: float | None = None  # the compute ceiling's img/s ÷ the measured img/s


# -- the reference solution ----------------------------------------------------------------------------

def baseline_analysis(evidence: BaselineEvidence) -> BaselineAnalysis:
    """Read the baseline's measurements the way the notebook teaches.

    * utilisation: what the monitor measured;
    * bottlenecks: the step's phases ranked by their share of a step;
    * two speed-ups, two different questions: if everything but the compute were hidden (data prepared in the
      background, no syncs), a step would take only its compute time, so ``step / compute``; and what the
      compute ceiling allows, ``ceiling img/s / img/s`` (the compute itself made faster too).
    """
    return BaselineAnalysis(
        gpu_util_pct=round(evidence.util_pct, 1),
        bottlenecks=tuple(evidence.ranked_bottlenecks()),
        # from the phases as 01 prints them (to the hundredth of a ms): the reading a learner's own division of the
        # printed figures gives (4.15 had stood beside 38.49 ÷ 9.26, which is 4.16)
        speedup_if_only_compute_x=round(dataclasses.replace(
            evidence, phase_ms={k: round(v, 2) for k, v in evidence.phase_ms.items()}).speedup_if_only_compute(), 2),
        speedup_at_ceiling_x=round(evidence.speedup_at_ceiling(), 1),
    )


# -- the check -----------------------------------------------------------------------------------------

def _off(got: float, want: float, spread: float) -> str | None:
    """None when ``got`` is within ``spread`` (a share) of ``want``; else how far off, and which way."""
    if abs(got - want) <= spread * want:
        return None
    return f"{abs(got / want - 1):.0%} too {'high' if got > want else 'low'}"


_FORM = ("checks.BaselineAnalysis(gpu_util_pct=42.0, bottlenecks=['data_loading', ...], speedup_if_only_compute_x=3.0, "
         "speedup_at_ceiling_x=40.0)")


def check_baseline_analysis(answer: BaselineAnalysis, evidence: BaselineEvidence) -> CheckResult:
    """Compare the learner's analysis with the measured evidence."""
    name = "01 · baseline analysis"
    ref = baseline_analysis(evidence)
    try:
        answer = as_instance(answer, BaselineAnalysis, what="my_analysis", form=_FORM)
    except WrongForm as e:
        return failed(name, ref, str(e))
    if (answer.gpu_util_pct is None or blank(answer.bottlenecks) or answer.speedup_if_only_compute_x is None
            or answer.speedup_at_ceiling_x is None):
        return not_done(name, ref, "Fill in all four fields of BaselineAnalysis and run this cell again "
                                   "([01-07] measured where a step's time goes, [01-18] how far it is from the roof).")
    try:
        util = as_number(answer.gpu_util_pct, what="my_analysis.gpu_util_pct", form="a utilisation in % from 0 to 100, such as "
                                                                        "42.0", low=0, high=100)
        bottlenecks = as_names(answer.bottlenecks, what="my_analysis.bottlenecks", form="a list of bottleneck names, largest "
                                                                           "first, such as ['data_loading', 'compute']")
        said = {f: as_number(getattr(answer, f), what=f"my_analysis.{f}", form="a speed-up (how many times faster) above 0, such as "
                                                              "3.0", above=0)
                for f in ("speedup_if_only_compute_x", "speedup_at_ceiling_x")}
    except WrongForm as e:
        return failed(name, ref, str(e))
    unknown = [b for b in bottlenecks if b not in BOTTLENECKS]
    if unknown:
        return failed(name, ref, f"{unknown} are not bottleneck names; use these: {', '.join(BOTTLENECKS)}.")
    what = "NVML GPU utilisation" if evidence.util_source == "nvml" else "CPU utilisation (no GPU here)"
    if abs(util - evidence.util_pct) > 10:
        return failed(name, ref, f"You wrote {util:.0f}% utilisation; the monitor measured "
                                 f"{evidence.util_pct:.0f}% mean {what}. Read it from the monitor's summary.")
    ranked = evidence.ranked_bottlenecks()
    if bottlenecks[0] != ranked[0]:
        shares = ", ".join(f"{_PHASE_TO_BOTTLENECK[k]} {v / evidence.step_ms:.0%}" for k, v in evidence.phase_ms.items())
        return failed(name, ref, f"Your first bottleneck is {bottlenecks[0]!r}, but the step breakdown says "
                                 f"{ranked[0]!r} takes the largest share ({shares}).")
    compute = evidence.phase_ms.get("compute", 0.0)
    only, ceiling = evidence.speedup_if_only_compute(), evidence.speedup_at_ceiling()
    figures = {"speedup_if_only_compute_x": only, "speedup_at_ceiling_x": ceiling}
    how = {"speedup_if_only_compute_x": f"with everything but the compute hidden, a step takes its compute time, so "
                                        f"step ÷ compute = {evidence.step_ms:.3g} ms ÷ {compute:.3g} ms",
           "speedup_at_ceiling_x": f"the compute ceiling allows {evidence.ceiling_img_per_s:,.0f} img/s against the "
                                   f"measured {evidence.img_per_s:,.0f}"}
    other = {"speedup_if_only_compute_x": " That is the compute ceiling's figure: this one keeps the compute as it is.",
             "speedup_at_ceiling_x": " That is the figure with only the compute left: the ceiling also makes the "
                                     "compute itself faster."}
    for field, want in figures.items():
        got = said[field]
        off = _off(got, want, READING_SPREAD[field])
        if off:
            (swapped,) = (k for k in figures if k != field)
            mixed = other[field] if _off(got, figures[swapped], READING_SPREAD[swapped]) is None else ""
            return failed(name, ref, f"{field} = {got:g} is {off}: {how[field]}.{mixed}")
    return CheckResult(name, "passed", f"Your reading agrees with the measurements: {only:.1f}× with only the compute "
                                       f"left, {ceiling:.0f}× at the compute ceiling.", answer)


# -- the prediction, written before the baseline runs ------------------------------------------------------

_WAIT = predictions.Question("waiting_for_data_pct", "the share of the baseline's wall time spent waiting for data",
                             "%", example=60)


def predict(*, waiting_for_data_pct: Any = None) -> Prediction:
    """Your prediction, made before the baseline runs: ``my_prediction = checks.predict(waiting_for_data_pct=60)``."""
    return Prediction({"waiting_for_data_pct": waiting_for_data_pct})


def check_prediction(prediction: Any, base, *, started: predictions.MeasurementStart) -> CheckResult:
    """Your prediction beside the baseline's measured wait for data (``base``: its ``train.TrainResult``)."""
    name = "01 · your prediction"
    share = 100 * base.data_wait_share
    if share >= 50:
        note = ("Most of a step is the main process preparing images one at a time; the training step itself is "
                "the smaller part, so a faster GPU alone would not make this loop much faster (02 takes the data off "
                "that path).")
    else:
        note = "Most of a step here is not waiting for data: the breakdown below shows where the rest goes."
    return predictions.check_prediction(name, prediction, {"waiting_for_data_pct": share}, started=started,
                                        cell="01-pred-2", questions=[_WAIT], note=note)
