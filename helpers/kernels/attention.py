"""Attention written out by hand vs ``scaled_dot_product_attention`` (flash / memory-efficient kernels).

    sweep([512, 1024, 2048, 4096], batch=4, heads=16, head_dim=64)   # DataFrame: time and memory per length
    sdpa_backend(q, k, v)                                            # which kernel SDPA ran: 'flash', ...
    sweep_figure(df)

The naive version materialises the ``L × L`` score matrix and its softmax, and keeps them for the
backward pass: memory grows with the square of the sequence length. A fused (flash) kernel walks
the scores in tiles that stay on chip and recomputes them in the backward pass: it stores O(L).
"""

from __future__ import annotations

import math
import statistics

import torch
import torch.nn.functional as F

from .. import bench, env, figure_check, tables, timebox
from ..memory.oom_message import allocator_report

__all__ = ["naive_attention", "sdpa", "sdpa_backend", "saved_bytes", "sweep", "sweep_figure"]


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q kᵀ / √d) v, one op at a time (the ``L × L`` scores live in memory)."""
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    return scores.softmax(dim=-1) @ v


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """PyTorch's fused attention; it picks the fastest kernel it has for these inputs."""
    return F.scaled_dot_product_attention(q, k, v)


_BACKENDS = {  # the aten op each SDPA kernel runs as, as the profiler names it
    "_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "memory-efficient",
    "_scaled_dot_product_cudnn_attention": "cuDNN",
    "_scaled_dot_product_fused_attention_overrideable": "fused (device-specific)",
}


def sdpa_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str:
    """Which kernel ``scaled_dot_product_attention`` ran for these inputs, read from the profiler's op names."""
    from torch.profiler import profile

    with torch.no_grad(), profile(acc_events=True) as prof:
        sdpa(q, k, v)
    names = {e.key.removeprefix("aten::") for e in prof.key_averages()}
    for op, backend in _BACKENDS.items():
        if op in names:
            return backend
    return "math (unfused ops)"


def saved_bytes(fn, *args) -> int:
    """Bytes of the tensors autograd keeps from ``fn(*args)``'s forward for its backward (any device)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()  # a tensor saved twice is stored once
        return t.detach()  # not t: a node saving its own output would hold its graph in an uncollectable cycle

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return sum(seen.values())


def _peak_gib(fn, dev: torch.device) -> float | None:
    """Peak memory PyTorch's allocator held above what was live before, for one forward + backward."""
    if dev.type != "cuda":
        return None
    torch.cuda.synchronize(dev)
    base = torch.cuda.memory_allocated(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    fn()
    torch.cuda.synchronize(dev)
    return (torch.cuda.max_memory_allocated(dev) - base) / 2**30


def sweep(seq_lens: list[int], *, batch: int, heads: int, head_dim: int = 64, dtype: torch.dtype | None = None,
          device: torch.device | str | None = None, repeats: int = 10,
          warmup_s: float | None = None, rounds: int | None = None) -> "pandas.DataFrame":  # noqa: F821
    """Forward + backward of naive attention and SDPA at each sequence length: time, memory, backend.

    Both are checked to agree (outputs and input gradients) at the shortest length before anything
    is timed. Each variant at each length runs for ``warmup_s`` seconds before it is timed (a quarter of a second
    at full scale): after two warm-up calls alone, the shortest length, timed first, read slower than the next one
    (on an H100, naive attention 1.42 ms at L=512 and 1.14 ms at L=1024). A length where the naive version runs out
    of memory gets NaN, not a crash. The lengths stop at the ``attention_sweep`` time box (the longest go first to
    be left out); ``df.attrs["cut"]`` keeps the cut.

    ``rounds``: the two variants are timed in alternating rounds (three at full scale) and each keeps the median of
    its rounds. At the shortest lengths a call's kernels take less GPU time than the host takes to launch them (on an
    H100 at L=1024, SDPA's forward and backward ran 0.18 ms of kernels in 0.38 ms per call: scripts/probes/
    attention_launch_bound.py, results/archive/probe-03-attention-launch-bound...), so the times there are
    the host's, and a moment of host jitter in one timing would move a whole row: the rounds spread it.
    """
    import pandas as pd

    dev = torch.device(device) if device is not None else env.device()
    warmup_s = env.pick(smoke=0.05, full=0.25) if warmup_s is None else warmup_s
    rounds = env.pick(smoke=1, full=3) if rounds is None else rounds
    if rounds < 1:
        raise ValueError(f"attention.sweep needs rounds ≥ 1 (got {rounds}).")
    dtype = dtype or (env.autocast_dtype(torch.bfloat16, dev) if dev.type == "cuda" else torch.float32)
    rows = []
    need: dict[tuple[str, int], float] = {}  # (variant, length) that ran out of memory: GiB held + asked, at least
    said: dict[tuple[str, int], dict[str, float]] = {}  # and the sizes PyTorch's message gave
    lengths = sorted(seq_lens)
    headroom_gib = _headroom_gib(dev)
    box = timebox.window("attention_sweep", planned=len(lengths), unit="sequence lengths",
                         left_out="the longest lengths are not measured here")
    for i, L in enumerate(lengths):
        if not box.more():
            break
        g = torch.Generator(device="cpu").manual_seed(L)
        q, k, v = (torch.randn(batch, heads, L, head_dim, generator=g, dtype=dtype).to(dev).requires_grad_()
                   for _ in range(3))
        dout = torch.randn(batch, heads, L, head_dim, generator=g, dtype=dtype).to(dev)
        if i == 0:
            _check_agree(q, k, v, dout)
        backend = sdpa_backend(q, k, v)
        row = {"seq_len": L, "SDPA kernel": backend}
        variants = {"naive": naive_attention, "SDPA": sdpa}
        steps = {}
        for name, fn in variants.items():
            def step(fn=fn):
                out = fn(q, k, v)
                out.backward(dout)
                q.grad = k.grad = v.grad = None
            steps[name] = step
        times: dict[str, list[float]] = {name: [] for name in steps}
        inputs = torch.cuda.memory_allocated(dev) if dev.type == "cuda" else 0  # what _peak_gib counts above
        for r in range(rounds):
            for name, step in steps.items():
                if r and not times[name]:
                    continue  # out of memory in the first round: it will not fit in the next
                try:
                    times[name].append(bench.time_it(step, warmup=2, repeats=repeats, device=dev,
                                                     warmup_s=warmup_s if r == 0 else 0.0).median_ms)
                except torch.OutOfMemoryError as e:
                    if not times[name]:
                        needed = need_at_failure_gib(str(e), inputs)
                        if needed is not None:
                            need[(name, L)] = needed
                        said[(name, L)] = allocator_report(str(e))
                    torch.cuda.empty_cache()
        for name, fn in variants.items():
            out_of_memory = {f"{name} {c}": float("nan") for c in ("ms", "peak GiB", "kept for backward MiB")}
            if not times[name]:  # it ran out of memory in its first round
                row.update(out_of_memory)
                continue
            try:
                row[f"{name} ms"] = statistics.median(times[name])
                row[f"{name} peak GiB"] = _peak_gib(steps[name], dev)
                row[f"{name} kept for backward MiB"] = saved_bytes(fn, q, k, v) / 2**20
            except torch.OutOfMemoryError:
                row.update(out_of_memory)
                torch.cuda.empty_cache()
        rows.append(row)
        box.tick()
    df = pd.DataFrame(rows)
    df.attrs["cut"] = box.cut
    df.attrs["headroom_gib"] = headroom_gib
    df.attrs["oom_need_gib"] = need
    df["SDPA speed-up"] = df["naive ms"] / df["SDPA ms"]
    mem = "peak GiB" if dev.type == "cuda" else "kept for backward MiB"
    df["memory saved %"] = 100 * (1 - df[f"SDPA {mem}"] / df[f"naive {mem}"])
    oom = "out of memory at this length"
    df.attrs["missing"] = {**{f"{n} {c}": oom for n in ("naive", "SDPA") for c in ("ms", "kept for backward MiB")},
                           **{f"{n} peak GiB": "no GPU allocator on a CPU" if dev.type != "cuda" else oom
                              for n in ("naive", "SDPA")},
                           "SDPA speed-up": oom, "memory saved %": oom}
    df.attrs["notes"] = [n for (name, L), report in said.items() if (n := out_of_memory_note(name, L, report, headroom_gib))]
    return _memory_saved_as_shown(_speedup_as_shown(df), mem)


def _speedup_as_shown(df: "pandas.DataFrame") -> "pandas.DataFrame":  # noqa: F821
    """``df`` (a :func:`sweep`) whose "SDPA speed-up" is naive ms ÷ SDPA ms as the table shows them: 03 read 3.34 at
    L = 1,024 and 5.50 at L = 4,096 from the unrounded times, beside 0.891 ÷ 0.266 (3.35) and 11.8 ÷ 2.14 (5.51). The
    column holds what the table shows, so the figure 03 records from it (``sdpa_speedup``) and its sentence's
    ``tables.times_as_shown`` of the two times, each to three figures, read as the table does.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"naive ms": [0.89063, 11.76], "SDPA ms": [0.2664, 2.1384]})
    >>> list(_speedup_as_shown(df.assign(**{"SDPA speed-up": df["naive ms"] / df["SDPA ms"]}))["SDPA speed-up"])
    [3.35, 5.51]
    """
    df.attrs["ratio_of"] = {"SDPA speed-up": ("naive ms", "SDPA ms", "column/column")}
    return tables.with_ratios_as_shown(df)


def _memory_saved_as_shown(df: "pandas.DataFrame", mem: str) -> "pandas.DataFrame":  # noqa: F821
    """``df`` whose "memory saved %" is 1 − SDPA ÷ naive of its ``mem`` columns ("peak GiB", or on a CPU "kept for
    backward MiB") as the table shows them, as its speed-up is: a reader's own arithmetic on the two cells then gives
    the saving to its last digit.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"naive peak GiB": [0.31649], "SDPA peak GiB": [0.05349]})
    >>> out = _memory_saved_as_shown(df.assign(**{"memory saved %": 100 * (1 - 0.05349 / 0.31649)}), "peak GiB")
    >>> round(float(out["memory saved %"].iloc[0]), 2)  # 1 − 0.0535 ÷ 0.316; from the unrounded peaks, 83.10
    83.07
    """
    naive, fused = (tables.shown_numbers(df, f"{name} {mem}") for name in ("naive", "SDPA"))
    out = df.copy()
    out.attrs = dict(df.attrs)
    out["memory saved %"] = [100 * (1 - f / n) if n and f is not None else float("nan") for n, f in zip(naive, fused)]
    return out


def out_of_memory_note(name: str, seq_len: int, report: dict[str, float], headroom_gib: float | None) -> str:
    """What PyTorch's message said when ``name`` ran out of memory at ``seq_len``, in a sentence under the table
    ("" where it gave too little). 03's cross for naive attention stood at 128 GiB, under the 131.8 GiB free when
    the sweep began, and nothing said why it had failed all the same: the message's sizes do.

        out_of_memory_note("naive", 16384, {"asked_gib": 32.0, "free_gib": 2.5, "live_gib": 96.1,
                                            "cached_gib": 31.0}, 131.8)
    """
    if not {"asked_gib", "free_gib", "live_gib"} <= report.keys():
        return ""
    asked, free, live = report["asked_gib"], report["free_gib"], report["live_gib"]
    cached = report.get("cached_gib")
    text = (f"{name} at L = {seq_len:,} ran out of memory asking for {asked:,.2f} GiB in one block, holding "
            f"{live:,.2f} GiB, with {free:,.2f} GiB free on the GPU"
            + (f" and {cached:,.2f} GiB cached by PyTorch but unallocated" if cached is not None else "")
            + " (PyTorch's message)")
    if cached is not None and free < asked <= free + cached:
        # PyTorch frees cached blocks and retries before it gives up: what stayed cached was in segments still in use
        text += (": free and cached together held enough, but not in one piece, for a cached block cannot be "
                 "released while its segment holds live tensors")
    elif headroom_gib is not None and live + asked <= headroom_gib:
        text += f": held and asked for together stay under the {headroom_gib:,.1f} GiB free when the sweep began"
    return text


def need_at_failure_gib(message: str, inputs_bytes: int) -> float | None:
    """At least what a call that ran out of memory needed above its inputs (GiB), from PyTorch's message: what it
    held when it failed (allocated by PyTorch, less the ``inputs_bytes`` live before the call) plus the block it
    asked for. None where the message gives neither.

        need_at_failure_gib("... Tried to allocate 64.00 GiB. ... 70.00 GiB is allocated by PyTorch ...", 2 * 2**30)
        # 132.0
    """
    said = allocator_report(message)
    if "asked_gib" not in said or "live_gib" not in said:
        return None
    return said["asked_gib"] + said["live_gib"] - inputs_bytes / 2**30


def _headroom_gib(dev: torch.device) -> float | None:
    """GiB this process could still allocate on ``dev`` (free on the GPU, plus what its allocator holds unused):
    the line a length's peak must stay under. None without a GPU."""
    if dev.type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(dev)
    unused = torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)
    return (free + unused) / 2**30


def _check_agree(q, k, v, dout) -> None:
    outs, grads = [], []
    for fn in (naive_attention, sdpa):
        out = fn(q, k, v)
        out.backward(dout)
        outs.append(out.detach().float())
        grads.append([t.grad.float() for t in (q, k, v)])
        q.grad = k.grad = v.grad = None
    tol = dict(atol=2e-2, rtol=2e-2) if q.dtype in (torch.bfloat16, torch.float16) else dict(atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(outs[1], outs[0], **tol, msg=lambda m: f"SDPA and naive attention disagree: {m}")
    for a, b, n in zip(grads[1], grads[0], "qkv"):
        torch.testing.assert_close(a, b, **tol, msg=lambda m, n=n: f"gradients of {n} disagree: {m}")


def _out_of_memory_marks(fig, df: "pandas.DataFrame", name: str, color: str, mem: str) -> None:  # noqa: F821
    """A cross on both panels at each length where ``name`` ran out of memory, drawn where it would have landed had
    it grown with L² from its longest length that ran (a dotted line from there): the scores' L × L set both its
    time and its memory at long lengths. Nothing is drawn where every length ran."""
    import plotly.graph_objects as go

    ran = df[df[f"{name} ms"].notna()]
    lost = df[df[f"{name} ms"].isna()]
    if lost.empty or ran.empty:
        return
    last = ran.iloc[-1]
    need = df.attrs.get("oom_need_gib", {})
    for col, key in ((1, f"{name} ms"), (2, f"{name} {mem}")):
        if not (last[key] == last[key]):  # no figure at its longest length (no allocator on a CPU): nothing to scale
            continue
        grow = [(L / last["seq_len"]) ** 2 for L in lost["seq_len"]]
        ys = [last[key] * g for g in grow]
        if col == 2 and mem == "peak GiB":
            # where the failure proves more than L² growth: it held that much and asked for more when it ran out (03's
            # cross stood at 128 GiB by L² growth, under the 131.8 GiB the sweep could allocate)
            ys = [max(y, need.get((name, int(L)), 0.0)) for y, L in zip(ys, lost["seq_len"])]
        # the dotted line from the last length that ran, then the crosses as a trace of their own: the legend shows a
        # trace's first marker, and a line whose first point is the (hidden) start read as an open circle, not a ×
        fig.add_trace(go.Scatter(x=[last["seq_len"], *lost["seq_len"]], y=[last[key], *ys],
                                 mode="lines", line=dict(color=color, dash="dot", width=1), showlegend=False,
                                 legendgroup=f"{name} oom", hoverinfo="skip"), row=1, col=col)
        proven = need and any(need.get((name, int(L)), 0.0) > last[key] * g for g, L in zip(grow, lost["seq_len"]))
        # the legend reads as a sentence: "(×: L² growth, or held + asked when it failed where more)" had not
        how = ("at its L² growth, or at what it held + asked for when it failed, if more" if need
               else "where L² growth would put it")
        hover = ("L = %{x:,}: out of memory; at least %{y:.3g}" if col == 2 and proven
                 else "L = %{x:,}: out of memory; about %{y:.3g} by L² growth")
        fig.add_trace(go.Scatter(x=list(lost["seq_len"]), y=ys, mode="markers",
                                 marker=dict(symbol="x", size=11, color=color),
                                 name=f"{name}: out of memory (×: {how})",
                                 showlegend=col == 1, legendgroup=f"{name} oom",
                                 hovertemplate=hover + "<extra></extra>"),
                      row=1, col=col)


def sweep_figure(df: "pandas.DataFrame"):  # noqa: F821
    """Time and memory against sequence length, naive vs SDPA, on log axes."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    mem = "peak GiB" if df["naive peak GiB"].notna().any() else "kept for backward MiB"
    what = ("GiB at the allocator's peak, above the inputs" if mem == "peak GiB"
            else "MiB that autograd keeps for the backward pass")
    # short panel titles and one-word axis titles (the units); what the memory is goes under the figure's title: a
    # long vertical axis title between the panels ran up into the panel titles and the subtitle
    fig = make_subplots(rows=1, cols=2, subplot_titles=("forward + backward", "memory"), horizontal_spacing=0.12)
    for name, color in (("naive", "#d62728"), ("SDPA", "#2ca02c")):
        fig.add_trace(go.Scatter(x=df["seq_len"], y=df[f"{name} ms"], name=name, mode="lines+markers",
                                 line=dict(color=color)), row=1, col=1)
        fig.add_trace(go.Scatter(x=df["seq_len"], y=df[f"{name} {mem}"], name=name, mode="lines+markers",
                                 line=dict(color=color), showlegend=False), row=1, col=2)
        _out_of_memory_marks(fig, df, name, color, mem)
    headroom = df.attrs.get("headroom_gib")
    if mem == "peak GiB" and headroom:
        # what a length's peak had to stay under: a cross below it ran out of memory all the same, so its need was
        # more than L² growth from the last length that ran says (another tensor of that size at the same moment)
        fig.add_trace(go.Scatter(x=[df["seq_len"].min(), df["seq_len"].max()], y=[headroom] * 2, mode="lines",
                                 line=dict(color="#7f7f7f", dash="dash", width=1),
                                 name=f"free to the sweep when it began ({headroom:,.1f} GiB)",
                                 hovertemplate=f"free to the sweep when it began: {headroom:,.1f} GiB<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(type="log", title="sequence length")
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="ms", row=1, col=1)
    fig.update_yaxes(title_text=mem.split()[-1], row=1, col=2)
    figure_check.readable_log_axes(fig)  # 1, 2, 5, 10 ... 10k, not plotly's bare "2" and "5"
    fig.update_layout(title=dict(text=f"Attention: naive vs scaled_dot_product_attention<br><sup>SDPA chose the "
                                      f"{df['SDPA kernel'].iloc[-1]} kernel<br>memory: {what}</sup>",
                                 y=0.95, yanchor="top"),  # from the top down: three lines clear of the panel titles
                      # the legend under the panels: at their right its long out-of-memory entry took a third of the
                      # width, and the memory panel's axis title sat in the gap beside the time panel
                      legend=dict(orientation="h", yanchor="top", y=-0.22, x=0),
                      height=520, margin=dict(t=130, b=110))
    return fig
