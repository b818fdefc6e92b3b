"""Exercise checks: correctness first, then the target; friendly text either way.

Every check returns a :class:`CheckResult` whose ``value`` is what the
notebook carries on with: the learner's answer when it passed, the reference
solution (from :mod:`helpers.solutions`) when it is not done yet or wrong. So
an unsolved exercise never breaks the rest of a notebook::

    def ceiling_img_per_s(matmul_tflops, gflop_per_image):
        raise NotImplementedError   # your code here

    res = checks.check_ceiling_img_per_s(ceiling_img_per_s)
    res                      # shows ✅ / ❌ / ⏳ and what to change
    ceiling_fn = res.value   # yours if it passed, else the reference
"""

from __future__ import annotations

import dataclasses
import html
import math
import random
from typing import Any, Callable, Literal

from . import solutions

__all__ = [
    "CheckResult",
    "BOTTLENECKS",
    "BaselineEvidence",
    "BaselineAnalysis",
    "check_ceiling_img_per_s",
    "check_baseline_analysis",
]

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


def _not_done(exercise: str, reference: Any, hint: str) -> CheckResult:
    return CheckResult(exercise, "not done", f"{hint} The notebook carries on with the reference solution.", reference)


def _failed(exercise: str, reference: Any, why: str) -> CheckResult:
    return CheckResult(exercise, "failed", f"{why} The notebook carries on with the reference solution.", reference)


# -- 00_setup: the compute ceiling of a workload ---------------------------------------------------------

def check_ceiling_img_per_s(fn: Callable[[float, float], float], *, trials: int = 20, seed: int | None = None) -> CheckResult:
    """Check ``fn(matmul_tflops, gflop_per_image) → img/s`` against the reference on fresh random inputs."""
    name = "00 · compute ceiling in img/s"
    ref = solutions.nb00.ceiling_img_per_s
    rng = random.Random(seed)
    for _ in range(trials):
        tflops, gflop = rng.uniform(0.05, 1000.0), rng.uniform(0.1, 50.0)
        try:
            got = fn(tflops, gflop)
        except NotImplementedError:
            return _not_done(name, ref, "Write ceiling_img_per_s and run this cell again.")
        except Exception as e:
            return _failed(name, ref, f"Calling it with ({tflops:.3g}, {gflop:.3g}) raised {type(e).__name__}: {e}.")
        want = ref(tflops, gflop)
        if not isinstance(got, (int, float)) or isinstance(got, bool) or not math.isfinite(got):
            return _failed(name, ref, f"It returned {got!r}; return the number of images per second (a float).")
        if not math.isclose(got, want, rel_tol=1e-6):
            ratio = got / want if want else float("inf")
            hint = ""
            for power in (3, 6, 9, 12):
                if math.isclose(ratio, 10.0**power, rel_tol=1e-3) or math.isclose(ratio, 10.0**-power, rel_tol=1e-3):
                    hint = f" It is off by exactly 10^{power if ratio > 1 else -power}: check the units (TFLOP = 1e12, GFLOP = 1e9)."
            if math.isclose(got * want, 1.0, rel_tol=1e-3):
                hint = " It looks upside down: images per second is FLOP/s divided by FLOP per image."
            return _failed(name, ref, f"For {tflops:.3g} TFLOP/s and {gflop:.3g} GFLOP/image it gave {got:.6g}, expected {want:.6g}.{hint}")
    return CheckResult(name, "passed", f"It matches the reference on {trials} random inputs.", fn)


# -- 01_baseline: the learner's reading of the baseline -------------------------------------------------

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
    """The learner's baseline report (the seed lab's ``baseline_analysis.txt``, checked)."""

    gpu_util_pct: float | None = None  # what the monitor measured
    bottlenecks: tuple[str, ...] | list[str] = ()  # ranked, largest first, names from BOTTLENECKS
    estimated_headroom_x: float | None = None  # how many times faster this could get


def check_baseline_analysis(answer: BaselineAnalysis, evidence: BaselineEvidence) -> CheckResult:
    """Compare the learner's analysis with the measured evidence."""
    name = "01 · baseline analysis"
    ref = solutions.nb01.baseline_analysis(evidence)
    if answer.gpu_util_pct is None or not answer.bottlenecks or answer.estimated_headroom_x is None:
        return _not_done(name, ref, "Fill in all three fields of BaselineAnalysis and run this cell again.")
    unknown = [b for b in answer.bottlenecks if b not in BOTTLENECKS]
    if unknown:
        return _failed(name, ref, f"{unknown} are not bottleneck names; use these: {', '.join(BOTTLENECKS)}.")
    what = "NVML GPU utilisation" if evidence.util_source == "nvml" else "CPU utilisation (no GPU here)"
    if abs(answer.gpu_util_pct - evidence.util_pct) > 10:
        return _failed(name, ref, f"You wrote {answer.gpu_util_pct:.0f}% utilisation; the monitor measured "
                                  f"{evidence.util_pct:.0f}% mean {what}. Read it from the monitor's summary.")
    ranked = evidence.ranked_bottlenecks()
    if answer.bottlenecks[0] != ranked[0]:
        shares = ", ".join(f"{_PHASE_TO_BOTTLENECK[k]} {v / evidence.step_ms:.0%}" for k, v in evidence.phase_ms.items())
        return _failed(name, ref, f"Your first bottleneck is {answer.bottlenecks[0]!r}, but the step breakdown says "
                                  f"{ranked[0]!r} takes the largest share ({shares}).")
    low, high = evidence.headroom_bounds()
    x = answer.estimated_headroom_x
    if not (0.8 * low <= x <= high * 1.05):
        return _failed(name, ref, f"An estimated headroom of {x:.1f}× is outside what the measurements allow: hiding "
                                  f"everything but compute gives about {low:.1f}×, and the compute ceiling caps it at "
                                  f"{high:.1f}×.")
    return CheckResult(name, "passed", f"Your reading agrees with the measurements (headroom between {low:.1f}× and "
                                       f"{high:.1f}×).", answer)
