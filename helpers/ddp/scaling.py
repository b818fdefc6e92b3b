"""Scaling and communication, measured by launching the worker: tables and plots from the ranks' results.

    runs = measure_scaling([1, 2], [256, 32], image_size=224)   # one launch per GPU count, every batch in it
    table = scaling_table(runs)          # img/s, speed-up and efficiency against one GPU, per batch
    scaling_figure(table).show()

    comm = measure_variants(2, [Variant("all-reduce", 256), Variant("no_sync", 256, sync="none")])
    comm_share_pct(comm["all-reduce"], comm["no_sync"])     # the share of the step spent waiting on communication

A step of a data-parallel job is as slow as its slowest rank: every figure here is the slowest rank's.
One GPU is the plain model without DDP, the baseline a scaling efficiency is measured against.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Iterable, Sequence

from .. import timebox
from .launch import LaunchResult, LaunchSpec, launch
from .protocol import Variant

__all__ = ["RunStats", "WorkerSettings", "summarize", "measured_spans", "variants_json", "run_worker", "measure_scaling", "measure_variants",
           "efficiency_pct", "comm_share_pct", "hidden_fraction", "scaling_table", "scaling_figure", "variants_table",
           "variants_figure", "steady_state_text"]


@dataclasses.dataclass(frozen=True)
class RunStats:
    """One variant of one launch, as its slowest rank saw it."""

    label: str
    world_size: int
    batch_per_rank: int
    images_per_step: int  # per rank: batch × accumulated micro-batches
    step_ms: float  # the slowest rank's median step
    step_ms_min: float
    step_ms_max: float
    ddp: bool
    precision: str = ""  # what the worker's dtype ran as here (bf16 runs as fp16 on a T4): env.resolve_dtype

    @property
    def global_img_per_s(self) -> float:
        return self.images_per_step * self.world_size / (self.step_ms / 1e3)


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """What every timed launch shares: the image size, the precision, and how long to time."""

    image_size: int = 224
    dtype: str = "bf16"
    steps: int = 10
    repeats: int = 5
    warmup: int = 5
    timeout_s: float = 240.0

    def args(self) -> list[str]:
        return ["--image-size", str(self.image_size), "--dtype", self.dtype, "--steps", str(self.steps),
                "--repeats", str(self.repeats), "--warmup", str(self.warmup)]


def measured_spans(results: Iterable[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """``{label: (start, end)}``: the wall-clock span in which the ranks timed each variant (earliest start, latest end)."""
    spans: dict[str, tuple[float, float]] = {}
    for r in results:
        if r.get("mode") == "train" and r.get("measured_wall_s"):
            a, b = r["measured_wall_s"]
            label = r.get("label", "train")
            old = spans.get(label)
            spans[label] = (a, b) if old is None else (min(old[0], a), max(old[1], b))
    return spans


def summarize(results: Iterable[dict[str, Any]]) -> dict[str, RunStats]:
    """``{label: RunStats}`` from a launch's ``RESULT`` lines of mode ``train`` (the slowest rank of each)."""
    by_label: dict[str, list[dict]] = {}
    for r in results:
        if r.get("mode") == "train":
            by_label.setdefault(r["label"], []).append(r)
    out = {}
    for label, ranks in by_label.items():
        slow = max(ranks, key=lambda r: r["step_ms_median"])
        # the times to the hundredth of a millisecond, as each rank's line prints them (:func:`.worker.step_line`), so
        # every figure made from them (img/s, speed-up, efficiency, a share of the step) is the reader's arithmetic
        # on the figures printed: 05's table read 8,557 img/s under a rank's "29.92 ms per step, 8,556 img/s"
        out[label] = RunStats(label, slow["world_size"], slow["batch"], slow["images_per_step"],
                              round(slow["step_ms_median"], 2), round(min(r["step_ms_min"] for r in ranks), 2),
                              round(max(r["step_ms_max"] for r in ranks), 2), slow["ddp"], slow.get("precision", ""))
    return out


def variants_json(variants: Sequence[Variant]) -> str:
    """The worker's ``--variants`` argument; labels must differ, since the results are matched by label."""
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        raise ValueError(f"variant labels must differ (got {labels}): the results are matched by label.")
    return json.dumps([dataclasses.asdict(v) for v in variants])


def run_worker(nproc: int, mode: str, *, settings: WorkerSettings = WorkerSettings(), extra: Sequence[str] = (),
               on_line: Callable[[str], None] | None = print, monitor: Any = None, phase: str | None = None
               ) -> LaunchResult:
    """Launch the worker on ``nproc`` ranks; raise with the failing rank's own words if it fails.

    ``monitor``: a :class:`helpers.monitor.Monitor`; the launch is shaded on it as ``phase``.
    """
    spec = LaunchSpec(nproc_per_node=nproc, args=("--mode", mode, *settings.args(), *extra), timeout_s=settings.timeout_s)
    if monitor is not None:
        name = phase or f"{nproc} rank{'s' * (nproc > 1)}: {mode}"
        with monitor.phase(name):
            res = launch(spec, on_line=on_line)
        # inside the launch (start-up, NCCL, cuDNN's first calls), the ranks' timed steps: its steady state
        for label, (start, end) in measured_spans(res.results).items():
            monitor.add_phase(f"{name}: {label} measured", start, end)
    else:
        res = launch(spec, on_line=on_line)
    if not res.ok:
        raise RuntimeError(f"the {nproc}-rank launch failed: {res.error}")
    return res


def measure_variants(nproc: int, variants: Sequence[Variant], *, settings: WorkerSettings = WorkerSettings(),
                     extra: Sequence[str] = (), **kw) -> dict[str, RunStats]:
    """Time each variant in one launch of ``nproc`` ranks (one start-up, the same GPUs, one after another)."""
    res = run_worker(nproc, "train", settings=settings, extra=("--variants", variants_json(variants), *extra), **kw)
    return summarize(res.results)


def measure_scaling(gpu_counts: Sequence[int], batches: Sequence[int], *, settings: WorkerSettings = WorkerSettings(),
                    **kw) -> dict[int, dict[str, RunStats]]:
    """``{GPUs: {"batch 256": RunStats, ...}}``: one launch per GPU count, each batch in it.

    The launches stop at the ``ddp_launches`` time box: GPU counts left out are missing from the result.
    """
    out = {}
    box = timebox.window("ddp_launches", planned=len(gpu_counts), unit="launches",
                         left_out="the larger GPU counts are not measured here")
    for n in gpu_counts:
        if not box.more():
            break
        box.tick()
        variants = [Variant(f"batch {b}", b) for b in batches]
        out[n] = measure_variants(n, variants, settings=settings, phase=f"{n} GPU{'s' * (n > 1)}", **kw)
    return out


def efficiency_pct(one: RunStats, many: RunStats) -> float:
    """Scaling efficiency: the img/s of ``many`` ranks against ``world_size`` times one rank's, in %."""
    return 100 * many.global_img_per_s / (many.world_size * one.global_img_per_s)


def comm_share_pct(synced: RunStats, local: RunStats) -> float:
    """The share of ``synced``'s step that waits on communication: what ``local`` (``no_sync``) did not spend."""
    return 100 * (synced.step_ms - local.step_ms) / synced.step_ms


def hidden_fraction(synced: RunStats, local: RunStats, allreduce_ms: float) -> float:
    """The share of the all-reduce that the step did not pay for, timed: 1 − (``synced``'s step − ``local``'s, the
    ``no_sync`` run of the same shape) / ``allreduce_ms`` (the all-reduce alone), held within [0, 1].

    It is what the step time says was hidden; HTA's overlap (:func:`.overlap.hta_overlap`) says how long the NCCL
    kernels ran beside computation, which can be far more: compute slowed by the kernels it overlaps costs time too.
    """
    if allreduce_ms <= 0:
        raise ValueError(f"allreduce_ms={allreduce_ms}: the all-reduce alone must have taken some time.")
    exposed = synced.step_ms - local.step_ms
    return min(max(1 - exposed / allreduce_ms, 0.0), 1.0)


def scaling_table(runs: dict[int, dict[str, RunStats]]):
    """One row per (batch, GPUs): step, img/s, speed-up and efficiency against one GPU at the same batch."""
    import pandas as pd

    if 1 not in runs:
        raise ValueError("a scaling table needs the one-GPU run as its baseline (gpu_counts must include 1).")
    rows = []
    for label, one in runs[1].items():
        for n, stats in sorted(runs.items()):
            s = stats[label]
            # the step and its range to the hundredth, as the ranks' lines print them: at three figures the median
            # read 5.68 beside a range of "5.7–5.7"
            rows.append({"batch per GPU": s.batch_per_rank, "GPUs": n, "step ms": _ms(s.step_ms),
                         "step ms (min–max)": f"{_ms(s.step_ms_min)}–{_ms(s.step_ms_max)}",
                         "img/s": s.global_img_per_s, "speed-up ×": s.global_img_per_s / one.global_img_per_s,
                         "efficiency %": efficiency_pct(one, s)})
    df = pd.DataFrame(rows).set_index(["batch per GPU", "GPUs"])
    df.attrs["formats"] = {"step ms": "text", "step ms (min–max)": "text"}
    return df


def _ms(v: float) -> str:
    """A step's milliseconds as the ranks print them: ``_ms(5.6812) == '5.68'``, ``_ms(1234.5) == '1,234.50'``."""
    return f"{v:,.2f}"


def scaling_figure(table, *, title: str = "Data-parallel scaling"):
    """img/s against GPUs for each batch, beside the ideal (one GPU's img/s times the GPUs); efficiency beside."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("img/s (dashed: perfect scaling)", "efficiency %"))
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    for i, (batch, part) in enumerate(table.groupby(level="batch per GPU", sort=False)):
        gpus = part.index.get_level_values("GPUs")
        c = colors[i % len(colors)]
        one = float(part["img/s"].iloc[0])
        fig.add_trace(go.Scatter(x=list(gpus), y=part["img/s"], mode="lines+markers", name=f"batch {batch} per GPU",
                                 line_color=c), row=1, col=1)
        fig.add_trace(go.Scatter(x=list(gpus), y=[one * g for g in gpus], mode="lines", line=dict(color=c, dash="dash"),
                                 showlegend=False, hoverinfo="skip"), row=1, col=1)
        fig.add_trace(go.Bar(x=[f"{g} GPU{'s' * (g > 1)}" for g in gpus], y=part["efficiency %"], marker_color=c,
                             name=f"batch {batch}", showlegend=False), row=1, col=2)
    fig.update_xaxes(title_text="GPUs", dtick=1, row=1, col=1)
    fig.update_yaxes(range=[0, 105], row=1, col=2)
    fig.update_layout(title=title, height=380, barmode="group")
    return fig


def _shape(s: RunStats) -> tuple[int, int]:
    """(images per micro-batch, micro-batches per optimizer step): what a no_sync baseline must share with a row."""
    return s.batch_per_rank, s.images_per_step // s.batch_per_rank


#: The variants table's columns: a rank's images and time per image, and the img/s of all ranks together.
PER_RANK_IMAGES = "images per optimizer step, per rank"
PER_RANK_MS = "ms per image, per rank"
ALL_RANKS_RATE = "img/s, all ranks"
NOT_HIDDEN = "communication not hidden, ms per image, per rank"


def variants_table(stats: dict[str, RunStats], *, local: str | Sequence[str] | None = None):
    """Each variant's step and img/s; with ``local`` (the ``no_sync`` run, or several of different shapes), the time
    each adds for communication, against the ``no_sync`` run of its own micro-batch shape (``against`` names it).

    Four micro-batches of 64 take longer than one of 256 without any communication: measured against ``no_sync`` at
    256, an accumulation that all-reduces once per step would count that compute as communication. A row whose shape
    has no ``no_sync`` run is left empty there.
    """
    import pandas as pd

    bases = {_shape(stats[name]): stats[name] for name in ([local] if isinstance(local, str) else local or ())}
    rows = []
    for label, s in stats.items():
        # per rank and all ranks, said in the names: 05's table read 256 images, 31.0 ms, 0.121 ms per image beside
        # 16,497 img/s, which is the two ranks' together (8,258 each)
        row = {"variant": label, PER_RANK_IMAGES: s.images_per_step, "step ms": _ms(s.step_ms),
               PER_RANK_MS: s.step_ms / s.images_per_step, ALL_RANKS_RATE: s.global_img_per_s}
        if local is not None:
            base = bases.get(_shape(s))
            exposed = float("nan") if base is None else (s.step_ms - base.step_ms) / s.images_per_step
            row["against"] = "" if base is None else base.label
            row[NOT_HIDDEN] = exposed
            row["share of the step %"] = 100 * exposed / (s.step_ms / s.images_per_step)
        rows.append(row)
    df = pd.DataFrame(rows).set_index("variant")
    why = "no no_sync run of this row's micro-batch shape to measure it against"
    df.attrs["missing"] = {NOT_HIDDEN: why, "share of the step %": why}
    df.attrs["formats"] = {"step ms": "text"}
    return df


def variants_figure(table, *, title: str):
    """Time per image of each variant, as horizontal bars: the variants' names read along their bars, first on top."""
    import plotly.graph_objects as go

    names = list(table.index)
    fig = go.Figure(go.Bar(y=names, x=table[PER_RANK_MS] * 1e3, orientation="h", marker_color="#1f77b4"))
    fig.update_layout(title=title, xaxis_title="µs per image (slowest rank)", height=160 + 28 * len(names),
                      yaxis=dict(autorange="reversed"), margin=dict(l=20 + 7 * max(map(len, names), default=0)))
    return fig


def steady_state_text(record: Any, gpus: int) -> str:
    """What the monitor saw over the timed steps of the ``gpus``-GPU launch alone, each GPU it used on its own:
    mean utilisation (and SM activity where GPM reports it), over the summed time of those steps and the number of
    moments sampled in it (the monitor samples every GPU at each moment: one row each).

    ``record``: a :class:`helpers.monitor.MonitorRecord` whose phases :func:`run_worker` named (``"2 GPUs: batch 256
    measured"``). The monitor's own steady-state line spans every launch's timed steps and every GPU of the node, so
    a second GPU idle through the one-GPU launch lowers its mean, and its time runs from the first of those steps to
    the last, the gap between launches included. The ranks use the node's first ``gpus`` GPUs (LOCAL_RANK 0 … n−1).
    """
    prefix = f"{gpus} GPU{'s' * (gpus > 1)}: "
    spans = [(float(p["start_s"]), float(p["end_s"])) for p in record.phases
             if str(p["name"]).startswith(prefix) and str(p["name"]).endswith(" measured") and p.get("end_s")]
    if not spans:
        return f"the {gpus}-GPU launch's timed steps: none recorded (a time box, or a launch not monitored)"
    inside = [r for r in record.samples if any(a <= r["t_s"] <= b for a, b in spans)]
    moments, seconds = len({r["t_s"] for r in inside}), sum(b - a for a, b in spans)
    nvml = record.source == "nvml"
    watched = sorted(record.devices)[:gpus] if nvml else [None]  # a host record: one row per moment, gpu None

    def mean(rows: list[dict], key: str) -> float | None:
        vals = [r[key] for r in rows if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    parts = []
    for g in watched:
        rows = [r for r in inside if r.get("gpu") == g]
        util, sm = mean(rows, "util_pct" if nvml else "cpu_pct"), mean(rows, "sm_active_pct")
        what = f"GPU {g}: utilisation (NVML)" if nvml else "CPU utilisation"
        text = f"{what} {'not sampled' if util is None else f'{util:.0f}%'}"
        parts.append(text + ("" if sm is None else f", SM activity (GPM) {sm:.0f}%"))
    launch = f"{gpus}-GPU" if nvml else f"{gpus}-rank"
    return f"the {launch} launch's timed steps alone ({seconds:.1f} s, {moments} moment{'s' * (moments != 1)} sampled): " + "; ".join(parts)
