"""Reference solutions for notebooks/01_baseline."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # checks imports this module; import its types lazily to avoid a cycle
    from ..checks import BaselineAnalysis, BaselineEvidence

__all__ = ["baseline_analysis"]


def baseline_analysis(evidence: "BaselineEvidence") -> "BaselineAnalysis":
    """Read the baseline's measurements the way the notebook teaches.

    * utilisation: what the monitor measured;
    * bottlenecks: the step's phases ranked by their share of a step;
    * headroom: if everything but the compute were hidden (data prepared in the
      background, no syncs), a step would take only its compute time, so
      ``step / compute`` is a first estimate; the compute ceiling caps it.
    """
    from ..checks import BaselineAnalysis

    low, high = evidence.headroom_bounds()
    return BaselineAnalysis(
        gpu_util_pct=round(evidence.util_pct, 1),
        bottlenecks=tuple(evidence.ranked_bottlenecks()),
        estimated_headroom_x=round(min(low, high), 2),
    )
