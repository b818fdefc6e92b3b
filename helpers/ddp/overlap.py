"""Does the all-reduce hide behind the backward pass? One rank's profiler trace, drawn and measured.

    kernels = trace_kernels("runs/05_ddp/trace/rank0.json")    # every GPU kernel: stream, start, duration, kind
    timeline_figure("runs/05_ddp/trace/rank0.json").show()      # compute and NCCL streams, forward/backward shaded
    hta_overlap("runs/05_ddp/trace")      # per rank: % of communication time overlapped by computation (HTA)

The traces come from ``python -m helpers.ddp.worker --profile-dir DIR`` (one ``rank{r}.json`` per rank).
The overlap is Holistic Trace Analysis's ``get_comm_comp_overlap``: of the time NCCL kernels ran,
the share during which a computation kernel ran too. A CPU trace (gloo) has no GPU kernels: nothing to measure.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from .. import figure_check

__all__ = ["trace_kernels", "trace_phases", "has_gpu_kernels", "hta_overlap", "hidden_two_ways", "timeline_figure"]

_KIND_COLORS = {"communication": "#d62728", "computation": "#1f77b4", "memory": "#7f7f7f", "other": "#bcbd22"}


def _kind(name: str) -> str:
    """HTA's own kind of kernel (communication, memory, computation, other): the timeline shows what it counts."""
    from hta.utils.utils import get_kernel_type

    return get_kernel_type(name).lower()


def _events(path: str | Path) -> list[dict]:
    return json.loads(Path(path).read_text())["traceEvents"]


def trace_kernels(path: str | Path):
    """The GPU kernels of one rank's trace: name, stream, start and duration in µs, kind."""
    import pandas as pd

    rows = [{"name": e["name"], "stream": e.get("args", {}).get("stream", e.get("tid")), "start_us": float(e["ts"]),
             "dur_us": float(e["dur"]), "kind": _kind(e["name"])}
            for e in _events(path) if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return pd.DataFrame(rows, columns=["name", "stream", "start_us", "dur_us", "kind"]).sort_values("start_us")


_PHASES = ("forward", "backward", "optimizer")


def trace_phases(path: str | Path):
    """The named ranges as the GPU ran them (``ProfilerStep#N``, forward, backward, optimizer): each range the host
    recorded spans, on the GPU, from the start of the first kernel launched inside it to the end of the last (a
    kernel is matched to its launch by the trace's correlation id, so backward's all-reduces, launched from its
    hooks, are in backward). A range that launched nothing is left out. Where the trace has no launches to match,
    the profiler's own projections of the ranges onto the GPU (``gpu_user_annotation``) are used; on two H200s
    (2026-11-26) those came out as slivers a few µs long, which is why they are not the first choice."""
    import bisect

    import pandas as pd

    events = _events(path)
    launched_at = {e["args"]["correlation"]: float(e["ts"]) for e in events
                   if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
                   and "correlation" in e.get("args", {})}
    kernels = sorted((launched_at[e["args"]["correlation"]], float(e["ts"]), float(e["ts"]) + float(e["dur"]))
                     for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                     and e.get("args", {}).get("correlation") in launched_at)
    ranges = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
              and (e.get("name") in _PHASES or str(e.get("name", "")).startswith("ProfilerStep"))]
    rows = []
    if kernels and ranges:
        launches = [k[0] for k in kernels]
        for r in ranges:
            lo = bisect.bisect_left(launches, float(r["ts"]))
            hi = bisect.bisect_right(launches, float(r["ts"]) + float(r["dur"]))
            if hi > lo:
                start, end = min(k[1] for k in kernels[lo:hi]), max(k[2] for k in kernels[lo:hi])
                rows.append({"name": r["name"], "start_us": start, "dur_us": end - start})
    else:
        rows = [{"name": e["name"], "start_us": float(e["ts"]), "dur_us": float(e["dur"])}
                for e in events if e.get("ph") == "X" and e.get("cat") == "gpu_user_annotation"]
    return pd.DataFrame(rows, columns=["name", "start_us", "dur_us"]).sort_values("start_us")


def has_gpu_kernels(trace_dir: str | Path) -> bool:
    files = sorted(Path(trace_dir).glob("rank*.json"))
    return bool(files) and not trace_kernels(files[0]).empty


def hta_overlap(trace_dir: str | Path):
    """Holistic Trace Analysis's communication/computation overlap of every rank, in %.

    Raises ``ValueError`` for traces without GPU kernels (a CPU run): there is no overlap to measure there.
    """
    if not has_gpu_kernels(trace_dir):
        raise ValueError(f"the traces in {trace_dir} hold no GPU kernels (a CPU run with gloo?): the overlap of "
                         "NCCL kernels with computation is measured on GPUs.")
    from hta.trace_analysis import TraceAnalysis  # holistictraceanalysis

    logging.getLogger("hta").setLevel(logging.ERROR)  # it logs every file it parses
    df = TraceAnalysis(trace_dir=str(trace_dir)).get_comm_comp_overlap(visualize=False)
    return df.rename(columns={"comp_comm_overlap_pctg": "communication overlapped by computation %"}).set_index("rank")


#: Points apart beyond which HTA's overlap and the timed hidden share are said to disagree (timings vary by a few)
AGREE_PTS = 10.0


def hidden_two_ways(hta_pct: float | None, exposed_ms: float, allreduce_ms: float, timed_fraction: float) -> str:
    """What "hidden" measured two ways says, in words generated from the figures: HTA's overlap (``hta_pct``, None
    where the traces hold no GPU kernels) and the timed share (``timed_fraction``, from the ``exposed_ms`` the
    all-reduce added to the step over ``no_sync`` and the ``allreduce_ms`` it takes alone:
    :func:`.scaling.hidden_fraction`), with why they differ, where they do, and which one a prediction should use."""
    timed = (f"timed: {100 * timed_fraction:.0f}% of the all-reduce hidden: the step with it took {exposed_ms:+.2f} ms "
             f"over the same step under no_sync, against {allreduce_ms:.2f} ms for the all-reduce alone (1 − the "
             "ratio, held within 0–100%). This is what the step paid.")
    if hta_pct is None:
        return ("HTA's overlap: not measured (the traces hold no GPU kernels: it is measured on GPUs).\n" + timed +
                "\nThe prediction below uses the timed share.")
    hta = (f"HTA's overlap: {hta_pct:.0f}% of the time NCCL's kernels ran, a computation kernel ran beside them (the "
           "ranks' mean). It says how long the two ran together, not what that cost the step.")
    gap = hta_pct - 100 * timed_fraction
    if abs(gap) <= AGREE_PTS:
        why = f"The two agree within {abs(gap):.0f} points."
    elif gap > 0:
        why = (f"HTA counts {gap:.0f} points more as hidden: an NCCL kernel that overlaps computation shares the SMs "
               "and memory bandwidth with it, so the computation it overlaps runs slower, and an NCCL kernel also "
               "counts as running while it waits for the other rank. The step time pays for both; the overlap "
               "counts neither.")
    else:
        why = (f"The step paid {-gap:.0f} points less than HTA's overlap leaves uncovered: NCCL's kernels ran "
               "beside no computation for longer than the step was delayed (part of that time may be a wait for "
               "the other rank that the step spent anyway).")
    return f"{hta}\n{timed}\n{why} The prediction below uses the timed share: what the step paid is what adds to it."


def timeline_figure(path: str | Path, *, steps: int = 2, title: str | None = None):
    """The last ``steps`` profiled steps of one rank: a row per CUDA stream, kernels coloured by kind."""
    import plotly.graph_objects as go

    kernels, phases = trace_kernels(path), trace_phases(path)
    if kernels.empty:
        raise ValueError(f"{path} holds no GPU kernels: a timeline of streams needs a trace taken on a GPU.")
    step_rows = phases[phases["name"].str.startswith("ProfilerStep")]
    if len(step_rows) >= steps:
        t0 = float(step_rows["start_us"].iloc[-steps])
        last = step_rows.iloc[-1]
        t1 = float(last["start_us"] + last["dur_us"])
    else:
        t0, t1 = float(kernels["start_us"].min()), float((kernels["start_us"] + kernels["dur_us"]).max())
    k = kernels[(kernels["start_us"] >= t0) & (kernels["start_us"] < t1)]
    if not k.empty:  # the axis spans the kernels drawn: a range the GPU ran no kernel of (a step's tail) is left off
        t1 = min(t1, float((k["start_us"] + k["dur_us"]).max()))
    comm_streams = set(k.loc[k["kind"] == "communication", "stream"])
    label = {s: f"stream {s} ({'NCCL' if s in comm_streams else 'compute'})" for s in k["stream"].unique()}
    fig = go.Figure()
    for kind, part in k.groupby("kind"):
        fig.add_trace(go.Bar(y=[label[s] for s in part["stream"]], x=part["dur_us"] / 1e3,
                             base=(part["start_us"] - t0) / 1e3, orientation="h", name=kind,
                             marker_color=_KIND_COLORS.get(kind, "#999"), hovertext=part["name"].str.slice(0, 80),
                             hoverinfo="text+x"))
    bands = [((p["start_us"] - t0) / 1e3, (p["start_us"] - t0 + p["dur_us"]) / 1e3, p["name"])
             for _, p in phases[phases["name"].isin(["forward", "backward", "optimizer"])].iterrows()
             if t0 <= p["start_us"] < t1]
    # each phase named above the plot at its band's left, on the lowest row where it clears the others: on a fast
    # GPU the host's forward range is a sliver and "forward" and "backward" would be drawn over one another
    # rows 17 px apart for text 11 px high: at 14, "forward" and "optimizer" stacked at one time touched, and read
    # as one label "forward optimizer"
    size, row_px, height = 11, 17, 330
    legend_w = figure_check.legend_width([str(kind) for kind in k["kind"].unique()])
    plot_w = figure_check.DEFAULT_WIDTH - 160 - legend_w
    span = max((t1 - t0) / 1e3, 1e-9)
    widths = [figure_check.text_width(name, size) + 4 for _x0, _x1, name in bands]
    rows = figure_check.label_rows([(x0 / span * plot_w, x0 / span * plot_w + w) for (x0, _x1, _n), w in zip(bands, widths)])
    top = 60 + row_px * (max(rows, default=-1) + 1)
    # the plot's own height: the figure's, less the top margin (top + 20, below) and the bottom one (80); planned on
    # 20 px more, the rows stood closer than row_px
    plot_h = height + row_px * (max(rows, default=-1) + 1) - (top + 20) - 80
    for (x0, x1, name), row in zip(bands, rows):
        fig.add_vrect(x0=x0, x1=x1, line_width=0, opacity=0.12,
                      fillcolor={"forward": "#2ca02c", "backward": "#ff7f0e"}.get(name, "#9467bd"))
        fig.add_annotation(x=x0, xanchor="left", xref="x", y=1 + (4 + row_px * row) / plot_h, yref="paper",
                           yanchor="bottom", text=name, showarrow=False, font=dict(size=size))
    fig.update_layout(title=title or f"{Path(path).stem}: the GPU's streams over {steps} steps", barmode="overlay",
                      xaxis_title="ms", height=height + row_px * (max(rows, default=-1) + 1), legend_title="kernels",
                      margin=dict(t=top + 20, b=80))
    fig.update_xaxes(range=[0, span])
    return fig
