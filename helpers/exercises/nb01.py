"""01_baseline's exercise: the learner's reading of the baseline, checked against what was measured.

    from helpers.exercises import nb01 as checks
    evidence = checks.BaselineEvidence(util_pct=..., util_source="nvml", img_per_s=..., phase_ms=..., ceiling_img_per_s=...)
    check = checks.check_baseline_analysis(checks.BaselineAnalysis(42.0, ["data_loading", ...], 3.0), evidence)

Try the exercise before reading the reference solution below.
"""

from __future__ import annotations

import dataclasses

from .common import CheckResult, failed, not_done

__all__ = ["BOTTLENECKS", "BaselineEvidence", "BaselineAnalysis", "baseline_analysis", "check_baseline_analysis"]

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

    def headroom_bounds(self) -> tuple[float, float]:
        """(low, high): hiding everything but compute gives at least ``low``×; the roofline caps it at ``high``×."""
        compute = max(self.phase_ms.get("compute", 0.0), 1e-9)
        low = max(1.0, self.step_ms / compute)
        high = max(1.0, self.ceiling_img_per_s / self.img_per_s)
        return (min(low, high), max(low, high))


@dataclasses.dataclass(frozen=True)
class BaselineAnalysis:
    """The learner's baseline report (the written report an investigation starts with, checked)."""

    gpu_util_pct: float | None = None  # what the monitor measured
    bottlenecks: tuple[str, ...] | list[str] = ()  # ranked, largest first, names from BOTTLENECKS
    estimated_headroom_x: float | None = None  # how many times faster this could get


# -- the reference solution ----------------------------------------------------------------------------

def baseline_analysis(evidence: BaselineEvidence) -> BaselineAnalysis:
    """Read the baseline's measurements the way the notebook teaches.

    * utilisation: what the monitor measured;
    * bottlenecks: the step's phases ranked by their share of a step;
    * headroom: if everything but the compute were hidden (data prepared in the
      background, no syncs), a step would take only its compute time, so
      ``step / compute`` is a first estimate; the compute ceiling caps it.
    """
    low, high = evidence.headroom_bounds()
    return BaselineAnalysis(
        gpu_util_pct=round(evidence.util_pct, 1),
        bottlenecks=tuple(evidence.ranked_bottlenecks()),
        estimated_headroom_x=round(min(low, high), 2),
    )


# -- the check -----------------------------------------------------------------------------------------

def check_baseline_analysis(answer: BaselineAnalysis, evidence: BaselineEvidence) -> CheckResult:
    """Compare the learner's analysis with the measured evidence."""
    name = "01 · baseline analysis"
    ref = baseline_analysis(evidence)
    if answer.gpu_util_pct is None or not answer.bottlenecks or answer.estimated_headroom_x is None:
        return not_done(name, ref, "Fill in all three fields of BaselineAnalysis and run this cell again.")
    unknown = [b for b in answer.bottlenecks if b not in BOTTLENECKS]
    if unknown:
        return failed(name, ref, f"{unknown} are not bottleneck names; use these: {', '.join(BOTTLENECKS)}.")
    what = "NVML GPU utilisation" if evidence.util_source == "nvml" else "CPU utilisation (no GPU here)"
    if abs(answer.gpu_util_pct - evidence.util_pct) > 10:
        return failed(name, ref, f"You wrote {answer.gpu_util_pct:.0f}% utilisation; the monitor measured "
                                 f"{evidence.util_pct:.0f}% mean {what}. Read it from the monitor's summary.")
    ranked = evidence.ranked_bottlenecks()
    if answer.bottlenecks[0] != ranked[0]:
        shares = ", ".join(f"{_PHASE_TO_BOTTLENECK[k]} {v / evidence.step_ms:.0%}" for k, v in evidence.phase_ms.items())
        return failed(name, ref, f"Your first bottleneck is {answer.bottlenecks[0]!r}, but the step breakdown says "
                                 f"{ranked[0]!r} takes the largest share ({shares}).")
    low, high = evidence.headroom_bounds()
    x = answer.estimated_headroom_x
    if not (0.8 * low <= x <= high * 1.05):
        return failed(name, ref, f"An estimated headroom of {x:.1f}× is outside what the measurements allow: hiding "
                                 f"everything but compute gives about {low:.1f}×, and the compute ceiling caps it at "
                                 f"{high:.1f}×.")
    return CheckResult(name, "passed", f"Your reading agrees with the measurements (headroom between {low:.1f}× and "
                                       f"{high:.1f}×).", answer)
