"""Memory over time, from the allocator's events that ``torch.profiler`` records, drawn with plotly.

    tl = memory_timeline(step, steps=2)      # step() runs one training step with NVTX ranges per phase
    timeline_figure(tl).show()               # allocated (and reserved) against time, phases shaded

The curve climbs through the forward pass (activations kept for backward), falls through the
backward pass as they are freed and gradients appear, and steps up at the first optimizer step
(its state). It renders with no internet: plotly draws it in the notebook.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from .. import env, figure_check, profiling

__all__ = ["MemoryTimeline", "memory_timeline", "timeline_figure"]

_PHASES = ("forward", "backward", "optimizer")


@dataclasses.dataclass(frozen=True)
class MemoryTimeline:
    """Allocated bytes after each allocator event, and the spans of the step's phases."""

    device: str  # the GPU's name as reports name it (env.device_label), "cpu" without one
    t_ms: tuple[float, ...]
    allocated: tuple[int, ...]
    reserved: tuple[int, ...]
    phases: tuple[tuple[str, float, float], ...]  # (name, start ms, end ms)

    @property
    def peak(self) -> int:
        return max(self.allocated) if self.allocated else 0


def memory_timeline(step: Callable[[], object], *, steps: int = 2,
                    device: torch.device | str | None = None) -> MemoryTimeline:
    """Profile ``steps`` calls of ``step`` with memory recording; keep the allocator's events of ``device``.

    Phases are read from ranges named forward, backward and optimizer (``profiling.nvtx_range``).
    """
    dev = torch.device(device) if device is not None else env.device()
    prof = profiling.profile_steps(step, wait=0, warmup=1, active=steps, profile_memory=True)
    events = [e for e in prof.memory_events() if e["device"] == dev.type]
    if not events:
        raise RuntimeError("the profiler recorded no memory events: pass a step that allocates tensors on "
                           f"{dev.type}, and run it on that device.")
    t0 = events[0]["ts"]
    phases = sorted(((e["name"], max(0.0, (e["ts"] - t0) / 1e3), (e["ts"] + e["dur"] - t0) / 1e3)
                     for e in prof.trace_events() if e["cat"] == "user_annotation" and e["name"] in _PHASES
                     and e["ts"] + e["dur"] >= t0), key=lambda p: p[1])
    name = env.device_label(torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu")  # as the title says
    return MemoryTimeline(name, tuple((e["ts"] - t0) / 1e3 for e in events), tuple(e["allocated"] for e in events),
                          tuple(e["reserved"] for e in events), tuple(phases))


def timeline_figure(tl: MemoryTimeline, *, title: str | None = None):
    """Allocated (and, on a GPU, reserved) GiB against time, with the phases shaded and named."""
    import plotly.graph_objects as go

    gib = 2**30
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=tl.t_ms, y=[b / gib for b in tl.allocated], mode="lines", line_shape="hv",
                             name="allocated (live tensors)"))
    if any(tl.reserved):
        fig.add_trace(go.Scatter(x=tl.t_ms, y=[b / gib for b in tl.reserved], mode="lines", line_shape="hv",
                                 name="reserved (allocator's pool)", line=dict(dash="dot")))
    colors = {"forward": "rgba(31,119,180,0.12)", "backward": "rgba(255,127,14,0.12)",
              "optimizer": "rgba(44,160,44,0.15)"}
    height = 380
    legend_w = figure_check.legend_width([t.name for t in fig.data]) if len(fig.data) > 1 else 0  # at the right
    # the labels' rows get a band of their own at the top: the curves stay under it, so no line crosses a label
    span, band = figure_check.shade_phases(fig, tl.phases, tl.t_ms, colors=colors, height=height, legend_w=legend_w)
    top = max([b / gib for b in (*tl.allocated, *tl.reserved)] + [1e-9]) * 1.02
    fig.update_layout(title=title or f"Memory over time: peak {tl.peak / gib:.2f} GiB allocated<br><sup>{tl.device}</sup>",
                      xaxis_title="ms since the first allocation, host clock", yaxis_title="GiB", height=height)
    fig.update_xaxes(range=[0, span])  # from the first allocation, the span the phase labels were planned on
    fig.update_yaxes(range=[0, top / (1 - min(band, 0.6))])
    return fig
