"""Measuring input pipelines: loader throughput, the batch × workers × pinned-memory grid, copies.

    spec = LoaderSpec(batch_size=256, num_workers=8, pin_memory=True)
    loader_img_per_s(dataset, spec)                 # batches/s × batch, copied to the GPU
    df = grid(dataset, batch_sizes=[32, 256], workers=[0, 4, 8], pins=[False, True])
    best_spec(df); heatmap(df)                      # pick from the data; plot it
    worker_sweep(dataset, batch_size=256, known=df) # img/s against workers (the grid's cells reused, not re-measured)
    host_to_device_gb_per_s(batch, pinned=True)     # host-to-device bandwidth, pageable vs pinned

The loader is measured alone (no model): what it can deliver is the ceiling
of any training loop fed by it. Each measurement warms up first (worker
start-up and the first batches stay out of the timing) and synchronises the
GPU before reading the clock. Each stops at its time box as well as at its count
(:mod:`helpers.timebox`: ``loader_window``, ``loader_grid``, ``worker_sweep``); a grid or sweep the box
cut short keeps the cut in ``df.attrs["cut"]``.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Iterable, NamedTuple

import torch
from torch.utils.data import DataLoader, Dataset

from . import env, timebox

__all__ = [
    "SAME_WITHIN",
    "worker_sweep_reading",
    "LoaderSpec",
    "make_loader",
    "MeasurementBatches",
    "measurement_batches",
    "loader_img_per_s",
    "stream_img_per_s",
    "grid",
    "best_spec",
    "heatmap",
    "pinning_reading",
    "worker_sweep",
    "worker_sweep_figure",
    "worker_sweep_table",
    "host_to_device_gb_per_s",
    "check_workers",
]


@dataclasses.dataclass(frozen=True)
class LoaderSpec:
    """The DataLoader knobs the course turns."""

    batch_size: int = 32
    num_workers: int = 0
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"LoaderSpec.batch_size={self.batch_size!r}: use an integer ≥ 1.")
        if isinstance(self.num_workers, bool) or not isinstance(self.num_workers, int) or self.num_workers < 0:
            raise ValueError(f"LoaderSpec.num_workers={self.num_workers!r}: use an integer ≥ 0 (0 = main process).")
        if self.num_workers == 0 and (self.persistent_workers or self.prefetch_factor is not None):
            raise ValueError("LoaderSpec: persistent_workers and prefetch_factor only apply with num_workers ≥ 1.")

    def label(self) -> str:
        extra = (", persistent" if self.persistent_workers else "") + (
            f", prefetch {self.prefetch_factor}" if self.prefetch_factor else "")
        return f"batch {self.batch_size}, {self.num_workers} workers, {'pinned' if self.pin_memory else 'pageable'}{extra}"


def check_workers(num_workers: int, *, stacklevel: int = 3) -> None:
    """Warn when ``num_workers`` exceeds the cores this process may use, with the measured alternative if any."""
    cores = env.usable_cpus()
    if num_workers <= cores:
        return
    alternative = f"use num_workers ≤ {cores}"
    try:
        from . import results

        header = results.device_header()
        data = results.load(results.results_path(header))
        best = data["figures"].get("loader_best_workers")
        # Only a figure this host measured: the same CPU with the same usable cores (a results file may come from
        # another machine with the same GPU, or from this one before its cores were limited).
        if best is not None and data.get("host_cpu") == header["host_cpu"] and best <= cores:
            # "within": 02's sweep may find more workers past the cores reading higher still (24 on 16 cores, one
            # H200); the figure is the best count within them, and the warning must not call it the best of all
            alternative = (f"02_dataloader's worker sweep measured the most img/s within this machine's {cores} usable "
                           f"cores with num_workers={int(best)}")
    except Exception:
        pass
    warnings.warn(
        f"num_workers={num_workers} exceeds the {cores} cores this process may use (os.sched_getaffinity): the workers "
        f"past them share those cores, each with its own memory and start-up time (whether they still gain depends on "
        f"how long each waits: 02_dataloader's worker sweep measures it); {alternative}.",
        stacklevel=stacklevel,
    )


def make_loader(dataset: Dataset, spec: LoaderSpec, *, shuffle: bool = True, seed: int = 0, **kwargs) -> DataLoader:
    """A DataLoader for ``spec`` (pinning only where a GPU exists; a warning for too many workers)."""
    check_workers(spec.num_workers)
    return DataLoader(
        dataset,
        batch_size=spec.batch_size,
        shuffle=shuffle,
        drop_last=True,
        num_workers=spec.num_workers,
        pin_memory=spec.pin_memory and torch.cuda.is_available(),
        persistent_workers=spec.persistent_workers,
        prefetch_factor=spec.prefetch_factor,
        generator=torch.Generator().manual_seed(seed),
        **kwargs,
    )


class MeasurementBatches(NamedTuple):
    """How many batches timing a loader takes (:func:`measurement_batches`)."""

    warmup: int  # drains the workers' prefetched backlog before the clock starts
    least: int  # timed: one round of that backlog at least
    wanted: int  # timed: two rounds, where the dataset holds them

    @property
    def needed(self) -> int:
        """The fewest batches the dataset must hold: the warm-up and the least timing."""
        return self.warmup + self.least


def measurement_batches(spec: LoaderSpec, *, batches: int, warmup: int = 3) -> MeasurementBatches:
    """``(warmup, least, wanted)`` batches for timing ``spec``: the warm-up drains the workers' backlog first,
    then the timing spans at least one round of that backlog and ``batches``, two rounds where the dataset
    holds them.

    Workers start by preparing prefetch_factor batches each, all at once: timed before that backlog is drained,
    or over less than a round of it, the figure measures a queue being emptied. Many workers (32 cores' worth
    and more) make a backlog that two rounds of would need more images than the dataset holds; one round past
    the drained backlog still times the workers producing batches.

        warmup, least, wanted = measurement_batches(LoaderSpec(256, 16), batches=10)  # (34, 32, 64)
    """
    backlog = spec.num_workers * (spec.prefetch_factor or 2)
    return MeasurementBatches(max(warmup, backlog + 2), max(batches, backlog), max(batches, 2 * backlog))


def loader_img_per_s(
    dataset: Dataset,
    spec: LoaderSpec,
    *,
    batches: int = 30,
    warmup: int = 3,
    device: torch.device | str | None = None,
) -> float:
    """Images per second that ``spec`` delivers onto ``device`` (copies included, no model)."""
    dev = torch.device(device) if device is not None else env.device()
    plan = measurement_batches(spec, batches=batches, warmup=warmup)
    held = len(dataset) // spec.batch_size
    if held < plan.needed:
        raise ValueError(
            f"the dataset holds {len(dataset)} images: {plan.needed} batches of {spec.batch_size} need "
            f"{plan.needed * spec.batch_size}; use a larger dataset or fewer batches."
        )
    warmup, batches = plan.warmup, min(plan.wanted, held - plan.warmup)  # two rounds where the dataset holds them
    return stream_img_per_s(make_loader(dataset, spec), warmup=warmup, batches=batches, device=dev)


def stream_img_per_s(batches_of: Iterable, *, warmup: int, batches: int,
                     device: torch.device | str | None = None) -> float:
    """Images per second that any iterable of ``(images, labels)`` batches delivers onto ``device``.

    Batches already on the device (a GPU decoder's) are counted as they come; host batches are
    copied, without blocking when they are pinned. The GPU is synchronised before each clock read.
    """
    dev = torch.device(device) if device is not None else env.device()
    it = iter(batches_of)

    def take() -> int:
        x, _y = next(it)
        x.to(dev, non_blocking=x.is_pinned())
        return x.shape[0]

    for _ in range(warmup):  # worker start-up, decoder set-up and the first batches stay out of the timing
        take()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    win = timebox.window("loader_window", planned=batches, minimum=min(batches, 5), keep_minimum=True,
                         unit="batches", say="once")
    start = time.perf_counter()
    images = 0
    while win.more():
        images += take()
        win.tick()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)  # note: the copies must have landed before the clock is read
    return images / (time.perf_counter() - start)  # the iterator, and its workers, end with this call


def grid(
    dataset: Dataset,
    *,
    batch_sizes: Iterable[int],
    workers: Iterable[int],
    pins: Iterable[bool] = (False, True),
    persistent_workers: bool = False,
    prefetch_factor: int | None = None,
    batches: int = 20,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> "pandas.DataFrame":  # noqa: F821
    """Loader img/s for every combination, one row each (the benchmark grid, measured right: warm-up, steady state, synchronised clock)."""
    import pandas as pd

    cells = [(bs, nw, pin) for bs in batch_sizes for nw in workers for pin in pins]
    box = timebox.window("loader_grid", planned=len(cells), unit="grid cells",
                         left_out="the cells not measured are missing from the table and the heatmap")
    rows = []
    for bs, nw, pin in cells:
        if not box.more():
            break
        spec = LoaderSpec(bs, nw, pin, persistent_workers and nw > 0, prefetch_factor if nw > 0 else None)
        ips = loader_img_per_s(dataset, spec, batches=batches, device=device)
        box.tick()
        rows.append({"batch_size": bs, "num_workers": nw, "pin_memory": pin, "img_per_s": ips})
        if progress:
            print(f"{spec.label():45s} {ips:10,.0f} img/s", flush=True)
    df = pd.DataFrame(rows)
    df.attrs["cut"] = box.cut
    return df


def best_spec(df: "pandas.DataFrame", *, batch_size: int | None = None,  # noqa: F821
              max_workers: int | None = None, pin_memory: bool | None = None) -> LoaderSpec:
    """The grid's fastest configuration (at ``batch_size``, with at most ``max_workers`` and with
    ``pin_memory`` as given, for each one given)."""
    if batch_size is not None:
        df = df[df["batch_size"] == batch_size]
    if max_workers is not None:
        df = df[df["num_workers"] <= max_workers]
    if pin_memory is not None:
        df = df[df["pin_memory"] == pin_memory]
    if df.empty:
        raise ValueError(f"no grid row has batch_size={batch_size}, num_workers ≤ {max_workers} "
                         f"and pin_memory={pin_memory}.")
    row = df.loc[df["img_per_s"].idxmax()]
    return LoaderSpec(int(row.batch_size), int(row.num_workers), bool(row.pin_memory))


def pinning_reading(df: "pandas.DataFrame") -> str:  # noqa: F821
    """What pinning did in a :func:`grid`: pinned ÷ pageable in each batch × workers cell, the median over batch
    sizes at each worker count of the grid, and the cells where pinning was slower. A cell a time box cut short
    has no pair: it is left out, and a median with nothing to take reads "not measured" (never "nan%").

        print(loaders.pinning_reading(grid_df))
    """
    pairs = df.pivot_table(index=["batch_size", "num_workers"], columns="pin_memory", values="img_per_s")
    if True not in pairs.columns or False not in pairs.columns:
        return "pinning: not measured (the grid's time box ended before a cell was measured both ways)"
    gain = (pairs[True] / pairs[False] - 1).dropna()

    def median_at(workers: int) -> str:
        g = gain[gain.index.get_level_values("num_workers") == workers]
        return f"{g.median():+.0%}" if len(g) else "not measured (the grid's time box cut it short)"

    # every worker count the grid has, not only its two ends: pinning can gain in the middle and lose at both
    counts = sorted(int(w) for w in df.num_workers.unique())
    lines = ["pinning, median over batch sizes of pinned ÷ pageable: "
             + ", ".join(f"{median_at(w)} with {w} worker{'' if w == 1 else 's'}" for w in counts)]
    if len(gain):
        (worst_b, worst_w), worst = gain.idxmin(), gain.min()
        lines.append(f"pinning was slower in {int((gain < 0).sum())} of the grid's {len(gain)} batch × workers cells "
                     f"measured both ways" + (f"; most at batch {worst_b} with {worst_w} workers ({worst:+.0%})"
                                              if worst < 0 else ""))
    return "\n".join(lines)


def heatmap(df: "pandas.DataFrame", *, title: str = "Loader throughput (img/s)"):  # noqa: F821
    """Batch size × workers heatmaps, one panel per pin_memory setting, the best cell outlined and starred (★)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    pins = sorted(df["pin_memory"].unique())
    fig = make_subplots(rows=1, cols=len(pins), subplot_titles=[f"pin_memory={p}" for p in pins], shared_yaxes=True)
    zmax = df["img_per_s"].max()
    best = df.loc[df["img_per_s"].idxmax()]
    for i, pin in enumerate(pins, start=1):
        sub = df[df["pin_memory"] == pin].pivot(index="batch_size", columns="num_workers", values="img_per_s")
        here = bool(best.pin_memory) == bool(pin)
        bi, bj = (list(sub.index).index(best.batch_size), list(sub.columns).index(best.num_workers)) if here else (-1, -1)
        # the best cell keeps its value readable: a star beside the number and a red outline, not a marker on it
        text = [[f"★ {v:,.0f}" if (i_, j) == (bi, bj) else f"{v:,.0f}" for j, v in enumerate(r)]
                for i_, r in enumerate(sub.values)]
        fig.add_trace(go.Heatmap(
            z=sub.values, x=[str(c) for c in sub.columns], y=[str(r) for r in sub.index], zmin=0, zmax=zmax,
            colorscale="Viridis", showscale=i == len(pins), text=text,
            colorbar=dict(title=dict(text="img/s"), tickformat=","),  # named, and 3,000 as the cells write it
            texttemplate="%{text}", hovertemplate="batch %{y}, %{x} workers: %{z:,.0f} img/s<extra></extra>",
        ), row=1, col=i)
        if here:  # category axes place cell k at k: its outline runs from k - 0.5 to k + 0.5
            fig.add_shape(type="rect", x0=bj - 0.5, x1=bj + 0.5, y0=bi - 0.5, y1=bi + 0.5, row=1, col=i,
                          line=dict(color="red", width=3), fillcolor="rgba(0,0,0,0)")
    fig.update_xaxes(title_text="num_workers", type="category")
    fig.update_yaxes(type="category")  # every panel's: the outline's coordinates are category positions
    fig.update_yaxes(title_text="batch size", row=1, col=1)
    fig.update_layout(title=title, height=380)
    return fig


def worker_sweep(
    dataset: Dataset,
    *,
    batch_size: int,
    workers: Iterable[int] | None = None,
    pin_memory: bool = True,
    batches: int = 20,
    device: torch.device | str | None = None,
    known: "pandas.DataFrame | None" = None,  # noqa: F821
) -> "pandas.DataFrame":  # noqa: F821
    """img/s against num_workers, up to the usable cores (and one step past them, to show the cost).

    ``known``: a grid's rows (:func:`grid`); every worker count it measured at this batch size and pinning is
    in the sweep, taken from it (``source`` says "grid") instead of being measured a second time (a sweep without
    the grid's best cell would contradict the grid above it).
    """
    import pandas as pd

    cores = env.usable_cpus()
    if workers is None:
        workers = sorted({0, 1, 2, 4, 8, 16, 32, cores, cores + max(1, cores // 2)} & set(range(0, cores * 2 + 1)))
        workers = [w for w in workers if w <= cores + max(1, cores // 2)]
    seen: dict[int, float] = {}
    if known is not None and not known.empty:
        same = known[(known["batch_size"] == batch_size) & (known["pin_memory"] == pin_memory)]
        seen = {int(r.num_workers): float(r.img_per_s) for r in same.itertuples()}
    rows = []
    workers = sorted(set(workers) | set(seen))  # walked twice: what to measure, then the sweep
    # a count whose backlog the dataset cannot drain and then time (48 workers at batch 256 on a 32-core host)
    # is left out and said, not measured over a queue being emptied
    held = len(dataset) // batch_size
    unfit = [nw for nw in workers if nw not in seen
             and held < measurement_batches(LoaderSpec(batch_size, nw, pin_memory), batches=batches).needed]
    workers = [nw for nw in workers if nw not in unfit]
    todo = [nw for nw in workers if nw not in seen]
    box = timebox.window("worker_sweep", planned=len(todo), unit="worker counts",
                         left_out="the larger worker counts are not measured here")
    for nw in workers:
        if nw in seen:
            rows.append({"num_workers": nw, "img_per_s": seen[nw], "beyond_cores": nw > cores, "source": "grid"})
            continue
        if not box.more():
            continue  # keep the grid's cells past the cut: they cost nothing
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the sweep goes past the cores on purpose
            ips = loader_img_per_s(dataset, LoaderSpec(batch_size, nw, pin_memory), batches=batches, device=device)
        box.tick()
        rows.append({"num_workers": nw, "img_per_s": ips, "beyond_cores": nw > cores, "source": "measured"})
    df = pd.DataFrame(rows)
    df.attrs["cut"] = box.cut
    df.attrs["unfit"] = {"workers": unfit, "images": len(dataset), "batch_size": batch_size}
    return df


def worker_sweep_figure(sweep: "pandas.DataFrame", *, cores: int, batch_size: int):  # noqa: F821
    """img/s against num_workers (a :func:`worker_sweep`), the usable cores a dashed line named at the plot's top,
    above the data (a label beside the line's middle sat on the measured curve)."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=sweep.num_workers, y=sweep.img_per_s, mode="lines", name="img/s",
                               line=dict(color="#1f77b4"), showlegend=False))
    # where each point comes from, told apart: measured by the sweep, or read from the grid above it
    source = sweep["source"] if "source" in sweep else ["measured"] * len(sweep)
    for src, symbol, name in (("measured", "circle", "measured by the sweep"), ("grid", "circle-open",
                                                                              "from the grid above")):
        pick = [s == src for s in source]
        if any(pick):
            fig.add_trace(go.Scatter(x=sweep.num_workers[pick], y=sweep.img_per_s[pick], mode="markers", name=name,
                                     marker=dict(symbol=symbol, size=9, color="#1f77b4", line=dict(width=2))))
    fig.add_vline(x=cores, line_dash="dash", layer="below")  # under the points: the marker at that count shows
    fig.add_annotation(x=cores, y=1, yref="paper", yanchor="bottom", xanchor="center", showarrow=False,
                       text=f"{cores} usable cores")
    fig.update_layout(title=f"Loader img/s against num_workers (batch {batch_size})", xaxis_title="num_workers",
                      yaxis_title="img/s", height=340, margin=dict(t=80))
    fig.update_yaxes(rangemode="tozero", tickformat=",")  # 4,000 img/s, as every other chart of the course
    return fig


def worker_sweep_table(sweep: "pandas.DataFrame"):  # noqa: F821
    """The sweep to read, with each row's gain over the one before it; the first row has none ("—", said why).

        display(worker_sweep_table(sweep))   # num_workers · img/s · beyond cores · source · gain over previous %

    Each gain is computed from the img/s as the table shows them (:func:`_gains_as_shown`), so the reader's own
    division of two rows agrees with it to its last digit.
    """
    from . import tables

    df = sweep.set_index("num_workers")
    df = df.assign(gain_over_previous_pct=_gains_as_shown(tables.shown_numbers(df, "img_per_s")))
    return tables.readable(df, missing={"gain_over_previous_pct": "the first row has no row before it"})


def _gains_as_shown(rates: list[float | None]) -> list[float]:
    """Each row's gain (%) over the row before it, from the rates as the table shows them (None where a cell shows
    no number): NaN for the first row, or where either rate is missing. From the rates as shown, not as measured:
    02's table read 73.8 / 113.8 / 78.2 beside 671, 1,165, 2,492 and 4,439 img/s, which give 73.6, 113.9 and 78.1.

    >>> [round(g, 1) for g in _gains_as_shown([671.0, 1165.0, None, 4439.0])[1:]]
    [73.6, nan, nan]
    """
    gains = [float("nan")]
    for before, now in zip(rates, rates[1:]):
        gains.append(100 * (now / before - 1) if before and now is not None else float("nan"))
    return gains


#: Two loader rates closer than this share of the faster are "about the same": a loader's img/s moves by a few
#: percent from one measurement to the next on a busy host.
SAME_WITHIN = 0.05


def worker_sweep_reading(sweep: "pandas.DataFrame", *, cores: int) -> str:  # noqa: F821
    """What a :func:`worker_sweep` shows about workers against cores, in sentences written from its rows: whether
    the counts past the usable cores gained or lost against the most workers within them (and, where the fastest
    count within them read more still, that the fall came before the cores ran out), and how one worker compares
    with none (the main process loading each batch itself). A sweep without a count past the cores (or without
    0 and 1) says nothing of that part.

        print(worker_sweep_reading(sweep, cores=16))
    """
    from . import tables

    within, beyond = sweep[~sweep.beyond_cores], sweep[sweep.beyond_cores]
    said = []
    if not within.empty and not beyond.empty:
        # past the cores against the count just within them: 02 set 24 workers against the best within (15, a
        # grid cell timed earlier) and blamed the cores for a fall that was already there at 16, within them
        last_in = within.loc[within.num_workers.idxmax()]
        best_in = within.loc[within.img_per_s.idxmax()]
        best_out = beyond.loc[beyond.img_per_s.idxmax()]
        # each change from the two rates as the sentence (and the table's gain column) print them, whole: 02 read
        # "4,892 img/s against 4,570 … 7.1% more" beside the table's 7.0, where 4,892 ÷ 4,570 is 1.0705
        change = tables.ratio_as_shown(best_out.img_per_s, last_in.img_per_s) - 1
        head = (f"Past the {cores} usable cores, {int(best_out.num_workers)} workers read "
                f"{best_out.img_per_s:,.0f} img/s against {last_in.img_per_s:,.0f} for {int(last_in.num_workers)}, "
                "the largest count within them")
        # tables.percent: as the table's gain column rounds it (9.5, where ":.0%" read "10% less" beside -9.5)
        if change > SAME_WITHIN:
            said.append(head + f": {tables.percent(100 * change)}% more. A worker does not keep its core busy all "
                        "the time (it waits to hand its batch to the main process, and on memory), so more workers "
                        "than cores can still fill the gaps; each one past the cores costs memory and switching, and "
                        "the gain ends.")
        elif change < -SAME_WITHIN:
            # what the rows show, not why: the sweep cannot tell switching from memory
            said.append(head + f": {tables.percent(-100 * change)}% less. Past the cores the workers share them, "
                        "and here the ones added did not make up for sharing them.")
        else:
            said.append(head + f": about the same (within {SAME_WITHIN:.0%}). Past the cores the workers share "
                        "them: what one worker leaves idle while it waits, another fills, and nothing more.")
        fell_within = tables.ratio_as_shown(last_in.img_per_s, best_in.img_per_s) - 1
        if int(best_in.num_workers) != int(last_in.num_workers) and fell_within < -SAME_WITHIN:
            where = (", read from the grid, timed apart from the sweep"
                     if "source" in sweep and best_in.get("source") == "grid" else "")
            said.append(f"The most img/s within the cores came at {int(best_in.num_workers)} workers "
                        f"({best_in.img_per_s:,.0f}{where}); {int(last_in.num_workers)} read "
                        f"{tables.percent(-100 * fell_within)}% less, still within the cores, so sharing cores does "
                        "not explain that fall: loaders timed apart also differ by their run-to-run spread, and "
                        "more workers than a loader needs cost start-up and memory.")
    rate = {int(r.num_workers): float(r.img_per_s) for r in sweep.itertuples()}
    if 0 in rate and 1 in rate:
        one, none = rate[1], rate[0]
        if one < none * (1 - SAME_WITHIN):
            said.append(f"One worker reads {one:,.0f} img/s, below no workers' {none:,.0f}: with num_workers=0 the "
                        "main process loads each batch itself; with one, another process does the same work and "
                        "hands the batch over through shared memory while the main process waits. All that one "
                        "worker overlaps here is the main process's copy of the batch before (no model runs), "
                        "less than the hand-over costs: the gain starts when two or more load at once (in training, "
                        "one worker also overlaps the step).")
        elif one > none * (1 + SAME_WITHIN):
            said.append(f"One worker reads {one:,.0f} img/s, above no workers' {none:,.0f}: the main process copies "
                        "one batch to the device while the worker loads the next, which gains more than the "
                        "hand-over between the two processes costs.")
        else:
            said.append(f"One worker reads {one:,.0f} img/s, about what no workers read ({none:,.0f}): the same work "
                        "in another process, plus the hand-over.")
    unfit = sweep.attrs.get("unfit", {})
    if unfit.get("workers"):
        counts = " and ".join(str(nw) for nw in unfit["workers"])
        said.append(f"{counts} workers were not measured: each worker prepares its batches ahead, and draining "
                    f"that backlog before the timing, then timing one round of it, needs more than the dataset's "
                    f"{unfit['images']:,} images at batch {unfit['batch_size']}.")
    return " ".join(said)


def host_to_device_gb_per_s(
    batch: torch.Tensor, *, pinned: bool, non_blocking: bool = False, repeats: int = 10,
    device: torch.device | str | None = None, pin_each_copy: bool = False,
) -> tuple[float, float]:
    """Host-to-device copy of ``batch``: (GB/s on the GPU's clock, ms the host spent issuing one copy).

    From pageable memory the driver first copies into a pinned staging buffer,
    and the host waits; from pinned memory the GPU reads host memory directly,
    and with ``non_blocking=True`` the host returns at once (so it can prepare
    the next batch while the copy runs). ``pin_each_copy=True`` pins the batch
    again before every copy, as pinning a tensor that is copied only once does:
    the timing then includes the host's own copy into pinned memory.
    """
    from .bench import time_it

    dev = torch.device(device) if device is not None else env.device()
    pin = dev.type == "cuda"  # pinning needs a CUDA driver; on a CPU every variant is the same plain copy
    src = batch.pin_memory() if (pinned and pin and not pin_each_copy) else batch
    host_ms = []

    def copy():
        t0 = time.perf_counter()
        (src.pin_memory() if (pin_each_copy and pin) else src).to(dev, non_blocking=non_blocking)
        host_ms.append((time.perf_counter() - t0) * 1e3)

    m = time_it(copy, warmup=2, repeats=repeats, device=dev)
    gbs = src.numel() * src.element_size() / (m.median_ms * 1e-3) / 1e9
    host_ms.sort()
    return gbs, host_ms[len(host_ms) // 2]
