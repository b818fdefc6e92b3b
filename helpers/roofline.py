"""The roofline: where each op sits between this device's memory roof and its compute roof.

An op's **arithmetic intensity** is the FLOPs it does per byte it must move to and from memory.
Below the ridge point (peak FLOP/s ÷ bandwidth) an op is memory-bound: the most it can reach
is intensity × bandwidth. Above it, compute-bound: the most is the peak::

    ceil = bench.session_ceilings()
    pts = reference_ops(ReferenceCNN(224), batch=256, dtype=torch.bfloat16, device="cuda")   # timed, on a GPU
    roofline_figure(pts, ceil).show()
    points_table(pts, ceil)      # intensity, attainable and achieved TFLOP/s, share of the roof

Bytes here are the least an op must move (every input, weight and output once); caches can only
help an op reach that, so the roof is an honest upper bound.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch
from torch import nn

from . import bench, env, figure_check, tables
from .bench import Ceilings

__all__ = ["KIND_COLORS", "kind_colors", "RooflinePoint", "attainable_tflops", "ceilings_as_shown", "ridge_intensity",
           "reference_ops", "points_table", "roofline_figure", "conv_layouts", "shares_of_roof"]


#: One colour per kind of op, on every roofline (03's ops, 06's step): a kind keeps its colour from one to the next.
KIND_COLORS = {"convolution": "#1f77b4", "GEMM": "#d62728", "elementwise": "#2ca02c", "pooling": "#ff7f0e"}
_MORE_COLORS = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]  # kinds not in the map, in order of name


#: A dtype's short name, for a subtitle that must fit one line.
_SHORT_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "tf32": "tf32"}


def kind_colors(kinds) -> dict[str, str]:
    """A colour for each of ``kinds``: :data:`KIND_COLORS`' own, then the spare colours in order of name, so every
    roofline (the notebooks' plotly ones, the challenge report's SVG one) colours a kind alike."""
    ordered = sorted(set(kinds), key=lambda kd: (kd not in KIND_COLORS, list(KIND_COLORS).index(kd)
                                                 if kd in KIND_COLORS else 0, kd))
    more = iter(_MORE_COLORS * len(ordered))
    return {kd: KIND_COLORS.get(kd) or next(more) for kd in ordered}


@dataclasses.dataclass(frozen=True)
class RooflinePoint:
    """One op: its FLOPs and the bytes it must move; ``ms`` once it has been timed."""

    name: str
    flops: float
    bytes: float
    kind: str = ""
    ms: float | None = None
    read_bytes: float | None = None  # of ``bytes``, those read (the rest written); None where not counted apart

    @property
    def intensity(self) -> float:
        """FLOPs per byte."""
        return self.flops / self.bytes

    @property
    def achieved_tflops(self) -> float | None:
        return None if self.ms is None else self.flops / (self.ms * 1e-3) / 1e12

    def bound(self, ceil: Ceilings) -> str:
        """``"memory"`` or ``"compute"``: which roof is lower at this intensity."""
        return "memory" if self.intensity < ridge_intensity(ceil) else "compute"


def ceilings_as_shown(ceil: Ceilings) -> tuple[float, float]:
    """The two ceilings as the notebooks and the roofline's title print them: (TFLOP/s, GB/s), the matmul rate as
    :attr:`~helpers.bench.Ceilings.matmul_rate` reads (three figures) and the copy bandwidth whole, so a figure
    computed from them is the reader's own arithmetic on what they read.

    >>> ceilings_as_shown(Ceilings("a GPU", 786.53, "bfloat16", 8192, 4263.8, 1))
    (787.0, 4264.0)

    A bandwidth that would print as 0 GB/s (none measured does) is kept as measured: nothing divides by 0.
    """
    gb_per_s = tables.as_shown(f"{ceil.copy_gb_per_s:,.0f}") or ceil.copy_gb_per_s
    return bench.flops_rate_as_shown(ceil.matmul_tflops), gb_per_s


def ridge_intensity(ceil: Ceilings) -> float:
    """FLOPs per byte where the memory roof meets the compute roof: peak ÷ bandwidth, both as printed
    (:func:`ceilings_as_shown`), so the ridge a notebook prints is the reader's division of the ceilings beside it.
    03 printed "this GPU's ridge point: 184 FLOP/byte" (and its charts "ridge 184") beside 787 TFLOP/s and
    4,264 GB/s, where 787 ÷ 4.264 is 184.6: the unrounded 786.5 and 4,263.8 had given 184.5.

    >>> round(ridge_intensity(Ceilings("a GPU", 786.53, "bfloat16", 8192, 4263.8, 1)), 1)
    184.6

    The roofs themselves (:func:`attainable_tflops`) stay as measured: the two differ by less than the last printed
    digit of either ceiling, and an op that close to the ridge is bound by both alike.
    """
    tflops, gb_per_s = ceilings_as_shown(ceil)
    return tflops * 1e12 / (gb_per_s * 1e9)


def attainable_tflops(intensity: float, ceil: Ceilings) -> float:
    """The roof at ``intensity``: min(peak TFLOP/s, intensity × bandwidth)."""
    return min(ceil.matmul_tflops, intensity * ceil.copy_gb_per_s * 1e9 / 1e12)


def _op_cost(module: nn.Module, inp: torch.Tensor, out: torch.Tensor, *,
             pool_indices: bool = True) -> tuple[str, float, float]:
    """(kind, FLOPs, bytes) of one leaf module's forward on ``inp`` giving ``out``.

    ``pool_indices``: a max-pool also writes an int64 index per output (``max_pool2d_with_indices``), for its
    backward to route each gradient to the input that won: 8 bytes per output, four times a bf16 output's 2. PyTorch
    writes them on a GPU always, and on a CPU when the forward records for backward; without counting them, the
    pool's point sat at a quarter of the bytes it moves and looked slower than it was."""
    size = inp.element_size()
    weights = sum(p.numel() for p in module.parameters(recurse=False)) * size
    moved = inp.numel() * size + out.numel() * size + weights
    if isinstance(module, nn.Conv2d):
        per_out = module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]
        return "convolution", 2.0 * out.numel() * per_out, moved
    if isinstance(module, nn.Linear):
        return "GEMM", 2.0 * out.numel() * module.in_features, moved
    if isinstance(module, nn.MaxPool2d):
        k = module.kernel_size if isinstance(module.kernel_size, int) else module.kernel_size[0]
        indices = out.numel() * 8 if pool_indices else 0  # int64 per output, written for the backward
        return "pooling", float(out.numel() * (k * k - 1)), moved + indices  # comparisons
    return "elementwise", float(out.numel()), moved


def reference_ops(model: nn.Module, *, batch: int, dtype: torch.dtype | None = None,
                  device: torch.device | str | None = None, time_ops: bool = True,
                  channels_last: bool = True, repeats: int = 20) -> list[RooflinePoint]:
    """Every op of ``model``'s forward pass (leaf modules, in call order) with its FLOPs and bytes.

    With ``time_ops`` each op is run again alone on the input it saw and timed (CUDA events on a
    GPU); the model runs in ``dtype`` (bf16 on a GPU, fp32 on a CPU by default) so bytes match.
    A module called several times (the reference CNN reuses one ReLU and one pool) gets a
    number per call: ``relu·1``, ``relu·2``... ``model`` is moved to the device and dtype (pass a fresh one).
    """
    dev = torch.device(device) if device is not None else env.device()
    dtype = dtype or (env.autocast_dtype(torch.bfloat16, dev) if dev.type == "cuda" else torch.float32)
    model = model.to(dev, dtype=dtype)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    size = getattr(model, "image_size", 224)
    x = torch.randn(batch, 3, size, size, device=dev, dtype=dtype).contiguous(memory_format=fmt)
    calls: list[tuple[str, nn.Module, torch.Tensor, torch.Tensor]] = []

    def hook(name):
        def record(mod, inputs, output):
            calls.append((name, mod, inputs[0].detach(), output.detach()))
        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if not list(m.children())]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    uses = {name: sum(1 for c in calls if c[0] == name) for name, *_ in calls}
    seen: dict[str, int] = {}
    labelled = []
    for name, mod, inp, out in calls:  # a module called several times gets a number per call
        seen[name] = seen.get(name, 0) + 1
        labelled.append((f"{name}·{seen[name]}" if uses[name] > 1 else name, mod, inp, out))
    points = []
    for label, mod, inp, out in labelled:
        # timed without autograd: a GPU's max-pool writes its indices all the same, a CPU's does not
        kind, flops, moved = _op_cost(mod, inp, out, pool_indices=dev.type != "cpu")
        read = (inp.numel() + sum(p.numel() for p in mod.parameters(recurse=False))) * inp.element_size()
        ms = None
        if time_ops:
            with torch.no_grad():
                ms = bench.time_it(lambda: mod(inp), warmup=3, repeats=repeats, device=dev).median_ms
        points.append(RooflinePoint(label, flops, moved, kind, ms, read_bytes=float(read)))
    return points


def points_table(points: list[RooflinePoint], ceil: Ceilings) -> "pandas.DataFrame":  # noqa: F821
    """One row per op: intensity, which roof bounds it, attainable vs achieved TFLOP/s, share of the roof.

    Each derived column is the reader's arithmetic on the cells as the table shows them (``tables``' ``derived``):
    the roof is the lower of the compute ceiling and FLOP/byte × the copy bandwidth as printed
    (:func:`ceilings_as_shown`), achieved is GFLOP ÷ ms, the share is achieved ÷ roof. The counts and those rates
    print four figures, so GFLOP ÷ MB meets FLOP/byte, and MB ÷ ms over the bandwidth meets a memory-bound share, to
    their last digit or within the rounding of the cells they divide. The columns are kept
    as shown: a figure recorded from them, and :func:`shares_of_roof`'s sentence, read as the table does (03 read
    conv1 9.6% beside 10.5 ÷ 110, which is 9.5%, and "0.206 GFLOP … 0.195 ms … 1.05 TFLOP/s", where 0.206 ÷ 0.195
    is 1.06).
    """
    import pandas as pd

    peak, gb_per_s = ceilings_as_shown(ceil)
    rows = []
    for p in points:
        roof = attainable_tflops(p.intensity, ceil)
        rows.append({"op": p.name, "kind": p.kind, "GFLOP": p.flops / 1e9, "MB moved": p.bytes / 1e6,
                     "FLOP/byte": p.intensity, "bound": p.bound(ceil), "ms": p.ms,
                     "roof TFLOP/s": roof, "achieved TFLOP/s": p.achieved_tflops,
                     "share of roof": None if p.ms is None else p.achieved_tflops / roof})
    df = pd.DataFrame(rows)
    # four figures for the counts and the rates derived from them: a chain of three-figure cells (FLOP/byte → roof →
    # share) had drifted up to a point from the share the counts give (03's relu·3 read 99.1%, where 822 MB in
    # 0.197 ms over 4,243 GB/s is 98.3%; "given: matmul" read 1,356 FLOP/byte from 137 ÷ 101, where 4,096 ÷ 3 is
    # 1,365). FLOP/byte is the op's own (its counts are exact, not measured), so the exercise's arithmetic meets it.
    df.attrs["formats"] = {c: "sig4" for c in ("GFLOP", "MB moved", "FLOP/byte", "roof TFLOP/s", "achieved TFLOP/s")}
    df.attrs["derived"] = {
        "roof TFLOP/s": lambda r: min(peak, r["FLOP/byte"] * gb_per_s / 1e3),
        "achieved TFLOP/s": lambda r: r["GFLOP"] / r["ms"],
        "share of roof": lambda r: r["achieved TFLOP/s"] / r["roof TFLOP/s"],
    }
    df = tables.with_ratios_as_shown(df)
    reason = _above_roof_reason([p for p, share in zip(points, df["share of roof"]) if (share or 0) > 1], ceil)
    if reason:
        df.attrs["above_roof"] = {"share of roof": reason}
    return df


#: How far above its roof a point may sit and be read as the spread of two measurements of one rate.
NOISE = 0.05


def _above_roof_reason(over: list[RooflinePoint], ceil: Ceilings) -> str | None:
    """Why these points pass their roof, where the course knows: a CPU's ceilings are stand-ins; on a GPU an op whose
    bytes fit in the L2 cache reads them from there, a memory-bound op that reads more than it writes passes a roof
    measured with a copy (as many bytes written as read), and a point within :data:`NOISE` of its roof is the two
    measurements' spread. None where a point passes its roof for none of these (the table's note then says so)."""
    if not over:
        return None
    if not ceil.bounds:
        return ("a CPU's ceilings are small stand-ins measured in a moment: a share above 100% says the stand-in "
                "underestimates this CPU, not that an op beat it")
    l2 = 0
    if torch.cuda.is_available():
        l2 = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or 0)
    why = []
    for p in over:
        share = p.achieved_tflops / attainable_tflops(p.intensity, ceil)
        if share <= 1 + NOISE:
            why.append(f"{p.name} is within {NOISE:.0%} of its roof, the spread of two measurements of one rate")
        elif l2 and p.bytes <= l2:
            why.append(f"{p.name} moved {p.bytes / 1e6:,.1f} MB, within this GPU's {l2 / 2**20:.0f} MiB L2 cache, "
                       "which serves a repeated op's bytes faster than the copy roof measured through memory")
        elif p.bound(ceil) == "memory" and p.read_bytes is not None and p.read_bytes > 0.55 * p.bytes:
            why.append(f"{p.name} reads more bytes than it writes, and the memory roof is a copy's (as many written "
                       "as read): memory likely serves reads faster than that even mix (no read-only rate is "
                       "measured here)")
        else:
            return None
    return "; ".join(why)


def shares_of_roof(table: "pandas.DataFrame", bound: str) -> str:  # noqa: F821
    """One line: each op of ``table`` (:func:`points_table`) that ``bound`` ("memory", "compute") bounds, and its
    share of its roof, rounded as the table shows it (``tables.percent``: fc2 0.21%, not 0%), the table's own share
    from its rates as shown (pool·1 35.4%, as 0.252 ÷ 0.711 gives, not the unrounded rates' 35.5%)::

        print(shares_of_roof(ops_table, "memory"))   # memory-bound: relu·1 61.3%, pool·1 44.0% of their roofs
    """
    rows = table[table.bound == bound]
    return (f"{bound}-bound: " + ", ".join(f"{r.op} {tables.percent(100 * r['share of roof'])}%"
                                           for _, r in rows.iterrows()) + " of their roofs")


def _ridge_side(ridge: tuple[float, str], x_span: tuple[float, float], width: float = 440.0) -> str:
    """Which side of its line the ridge's label goes: the right, unless it would run past the plot's right edge."""
    a, b = math.log10(x_span[0]), math.log10(x_span[1])
    x = (math.log10(ridge[0]) - a) / ((b - a) or 1.0) * width
    return "right" if x + figure_check.text_width(ridge[1], 12) + 4 <= width else "left"


def _labels(points: list[RooflinePoint], ys: dict[int, float], *, x_span: tuple[float, float],
            y_span: tuple[float, float], ridge: tuple[float, str] | None = None, width: float = 440.0,
            height: float = 300.0, roof: Callable[[float], float] | None = None) -> dict[int, tuple[str, str]]:
    """Each point's label and where it goes (plotly's ``textposition``), so that no two are drawn over one another.
    Points that land on one another (the same layer repeated: relu·1, relu·2) share one label on the first of them;
    a label goes above its point where there is room, else below, right or left, and clear of the ridge's label
    (``ridge``: its intensity and text, in the head room at the top of the plot, right of the ridge's line) and of
    the lines drawn across the plot: the ridge's dotted line and the roof (``roof``: intensity → the roof's y, in
    the points' units), which a label written across is hard to read.
    Estimated on the plot area of a 700 × 480 figure with its legend, the smallest it is drawn."""
    def px(v: float, span: tuple[float, float], size: float) -> float:
        a, b = math.log10(max(span[0], 1e-30)), math.log10(max(span[1], 1e-30))
        return (math.log10(max(v, 1e-30)) - a) / ((b - a) or 1.0) * size

    at = {id(p): (px(p.intensity, x_span, width), height - px(ys[id(p)], y_span, height)) for p in points}
    groups: list[list[RooflinePoint]] = []
    for p in sorted(points, key=lambda p: (p.intensity, ys[id(p)])):
        near = next((g for g in groups if g[0].kind == p.kind and any(math.dist(at[id(q)], at[id(p)]) < 8 for q in g)),
                    None)
        if near is not None:
            near.append(p)
        else:
            groups.append([p])
    # every marker is taken, and so is the ridge's label (log_marker draws it from the line's top, to the right)
    taken = [(x - 6, x + 6, y - 6, y + 6) for x, y in at.values()]
    if ridge is not None:
        x, w = px(ridge[0], x_span, width), figure_check.text_width(ridge[1], 12) + 4
        taken.append((x, x + w, -2.0, 16.0) if _ridge_side(ridge, x_span, width) == "right" else (x - w, x, -2.0, 16.0))
    # the lines, as points every 2 px along them: a label box holding any of them is written across a line
    lines: list[tuple[float, float]] = []
    if ridge is not None:
        xr = px(ridge[0], x_span, width)
        lines += [(xr, float(y)) for y in range(0, int(height) + 1, 2)]
    if roof is not None:
        a, b = math.log10(x_span[0]), math.log10(x_span[1])
        on_roof = [(float(i), height - px(roof(10 ** (a + (b - a) * i / width)), y_span, height))
                   for i in range(int(width) + 1)]
        lines += on_roof
        # where the roof climbs more than a pixel or two per pixel across, points in between as well
        lines += [(x0 + (x1 - x0) * j / 8, y0 + (y1 - y0) * j / 8)
                  for (x0, y0), (x1, y1) in zip(on_roof, on_roof[1:]) if abs(y1 - y0) > 2 for j in range(1, 8)]
    out = {id(p): ("", "top center") for p in points}
    for g in groups:
        name = ", ".join(p.name for p in g)
        x, y = at[id(g[0])]
        w, h = figure_check.text_width(name, 12), 14.0
        boxes = {"top center": (x - w / 2, x + w / 2, y - 8 - h, y - 8),
                 "bottom center": (x - w / 2, x + w / 2, y + 8, y + 8 + h),
                 "middle right": (x + 8, x + 8 + w, y - h / 2, y + h / 2),
                 "middle left": (x - 8 - w, x - 8, y - h / 2, y + h / 2),
                 "bottom right": (x + 4, x + 4 + w, y + 8, y + 8 + h),
                 "bottom left": (x - 4 - w, x - 4, y + 8, y + 8 + h),
                 "top right": (x + 4, x + 4 + w, y - 8 - h, y - 8),
                 "top left": (x - 4 - w, x - 4, y - 8 - h, y - 8)}

        others = [xy for q, xy in at.items() if all(q != id(p) for p in g)]

        def clashes(pos: str) -> int:
            l, r, t, b = boxes[pos]
            # a label beside its point but nearer another point reads as that one's (03's conv2 and conv3, 12 px
            # apart, each labelled on the other's side); a leader line says whose a far label is
            gap = lambda px_, py_: math.hypot(max(l - px_, 0, px_ - r), max(t - py_, 0, py_ - b))  # noqa: E731
            astray = not pos.startswith("far") and any(gap(*xy) < gap(x, y) for xy in others)
            return astray + figure_check.label_clashes(boxes[pos], bounds=(-4, width + 4, -2, height + 2),
                                                       lines=lines, taken=taken)

        pos = min(boxes, key=clashes)  # the first free place, else the one that covers the fewest
        if clashes(pos):
            # no free place beside the point (a long name just under the roof's corner, where the roof and the
            # ridge's line fence it in: 06's "fully connected (GEMM)" was written across both): further out, joined
            # to its point by a thin line, its box centred (dx, dy) px from the point: "far dx dy"
            for ox in range(-160, 161, 16):
                for oy in range(-64, 65, 16):
                    if abs(ox) < w / 2 + 10 and abs(oy) < 16:  # over its own point
                        continue
                    boxes[f"far {ox} {oy}"] = (x + ox - w / 2, x + ox + w / 2, y + oy - h / 2, y + oy + h / 2)
            # the least in the way, and of those the nearest: the leader line stays short
            far = min((k for k in boxes if k.startswith("far")),
                      key=lambda k: (clashes(k), math.hypot(*map(int, k.split()[1:]))))
            if clashes(far) < clashes(pos):
                pos = far
        taken.append(boxes[pos])
        out[id(g[0])] = (name, pos)
    return out


def _far_offset(pos: str) -> tuple[int, int] | None:
    """A label placed away from its point (:func:`_labels`' "far dx dy"): its offset in px, else None."""
    if not pos.startswith("far "):
        return None
    dx, dy = pos.split()[1:]
    return int(dx), int(dy)


def roofline_figure(points: list[RooflinePoint], ceil: Ceilings, *, title: str | None = None):
    """Log-log roofline: the roofs measured on this device, and each timed op where it landed."""
    import plotly.graph_objects as go

    ridge = ridge_intensity(ceil)  # from the ceilings as the title prints them: "ridge 185" beside 787 and 4,264
    lo = min([p.intensity for p in points] + [ridge]) / 6
    hi = max([p.intensity for p in points] + [ridge]) * 6
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    # a CPU's roof is a fraction of a TFLOP/s: there the axis reads in GFLOP/s
    k, unit = (1.0, "TFLOP/s") if ceil.matmul_tflops >= 1 else (1e3, "GFLOP/s")
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=xs, y=[k * attainable_tflops(x, ceil) for x in xs], mode="lines", name="roof",
                             line=dict(color="black"),
                             hovertemplate=f"%{{x:.3g}} FLOP/byte → at most %{{y:.3g}} {unit}<extra>roof</extra>"))
    colors = kind_colors(p.kind for p in points)
    kinds = list(colors)
    ys = {id(p): k * (p.achieved_tflops if p.ms is not None else attainable_tflops(p.intensity, ceil)) for p in points}
    # the y axis: from below the lowest point to the flat roof and head room above it, where the ridge's label
    # goes (drawn from the top down, it lay on the flat roof)
    y_lo = min([*ys.values(), k * attainable_tflops(lo, ceil)]) / 2
    y_hi = max([*ys.values(), k * ceil.matmul_tflops])
    y_hi *= (y_hi / y_lo) ** 0.12
    ridge_text = f"ridge {ridge:.0f} FLOP/byte"
    labels = _labels(points, ys, x_span=(lo, hi), ridge=(ridge, ridge_text), y_span=(y_lo, y_hi),
                     roof=lambda x: k * attainable_tflops(x, ceil))
    for kind in kinds:
        pts = [p for p in points if p.kind == kind]
        fig.add_trace(go.Scatter(
            x=[p.intensity for p in pts], y=[ys[id(p)] for p in pts], mode="markers+text", name=kind,
            # a label placed away from its point is an annotation with a leader line (below), not the marker's text
            text=["" if _far_offset(labels[id(p)][1]) else labels[id(p)][0] for p in pts],
            textposition=["top center" if _far_offset(labels[id(p)][1]) else labels[id(p)][1] for p in pts],
            marker=dict(size=10, color=colors[kind]), cliponaxis=False,  # a label near an edge is not cut off
            hovertext=[f"{p.name}: {p.intensity:.3g} FLOP/byte, "
                       + (f"{k * p.achieved_tflops:.3g} {unit} = {p.achieved_tflops / attainable_tflops(p.intensity, ceil):.0%} of its roof"
                          if p.ms is not None else "not timed: drawn on the roof") for p in pts],
            hovertemplate="%{hovertext}<extra></extra>"))
    for p in points:
        name, pos = labels[id(p)]
        if (off := _far_offset(pos)) is not None and name:
            # on a log axis an annotation's coordinate is an exponent; ax, ay: where its text goes, in px from it
            fig.add_annotation(x=math.log10(p.intensity), y=math.log10(ys[id(p)]), text=name, showarrow=True,
                               ax=off[0], ay=off[1], arrowhead=0, arrowwidth=1, arrowcolor="#666",
                               font=dict(size=12), standoff=5)
    fig.update_layout(
        title=title or f"Roofline of {ceil.device_name}<br><sup>{ceil.matmul_rate} "
                       f"{_SHORT_DTYPE.get(ceil.matmul_dtype, ceil.matmul_dtype)} matmul, "
                       f"{ceil.copy_gb_per_s:,.0f} GB/s copy, measured {'this session' if ceil.reused else 'now'}</sup>",
        xaxis=dict(type="log", title="arithmetic intensity (FLOP per byte moved)",
                   range=[math.log10(lo), math.log10(hi)]),
        yaxis=dict(type="log", title=unit, range=[math.log10(y_lo), math.log10(y_hi)]), height=480)
    figure_check.readable_log_axes(fig)  # 0.1, 1, 10 ... 1k, not plotly's bare "2" and "5"
    # on a log axis a label's coordinate is an exponent: log_marker places the ridge's label at its log10
    figure_check.log_marker(fig, x=ridge, text=ridge_text, side=_ridge_side((ridge, ridge_text), (lo, hi)))
    return fig


def conv_layouts(model: nn.Module, *, batch: int, dtype: torch.dtype | None = None,
                 device: torch.device | str | None = None, repeats: int = 20) -> "pandas.DataFrame":  # noqa: F821
    """Each convolution of ``model``'s forward timed in NCHW and in channels_last (forward only, same input)."""
    import pandas as pd

    dev = torch.device(device) if device is not None else env.device()
    dtype = dtype or (env.autocast_dtype(torch.bfloat16, dev) if dev.type == "cuda" else torch.float32)
    model = model.to(dev, dtype=dtype, memory_format=torch.contiguous_format)
    convs = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    inputs: dict[str, torch.Tensor] = {}  # the input each convolution sees in a forward pass

    def keep(name):
        def hook(mod, args, out) -> None:  # a forward hook that returns something replaces the output
            inputs.setdefault(name, args[0].detach())
        return hook

    handles = [m.register_forward_hook(keep(n)) for n, m in convs]
    size = getattr(model, "image_size", 224)
    try:
        with torch.no_grad():
            model(torch.randn(batch, 3, size, size, device=dev, dtype=dtype))
    finally:
        for h in handles:
            h.remove()
    rows = []
    for name, conv in convs:
        times = {}
        for layout, fmt in (("NCHW", torch.contiguous_format), ("channels_last", torch.channels_last)):
            conv_l = conv.to(memory_format=fmt)
            x = inputs[name].contiguous(memory_format=fmt)
            with torch.no_grad():
                times[layout] = bench.time_it(lambda: conv_l(x), warmup=3, repeats=repeats, device=dev).median_ms
        rows.append({"conv": name, "channels": f"{conv.in_channels}→{conv.out_channels}", "NCHW ms": times["NCHW"],
                     "channels_last ms": times["channels_last"], "speed-up": times["NCHW"] / times["channels_last"]})
    model.to(memory_format=torch.contiguous_format)
    return _speed_ups_as_shown(pd.DataFrame(rows))


def _speed_ups_as_shown(df: "pandas.DataFrame") -> "pandas.DataFrame":  # noqa: F821
    """:func:`conv_layouts`' table with its speed-up column the NCHW time over the channels_last time as the table
    shows them, kept as shown, so the median 03 records reads as the table does (03 read conv3 "1.76 … 1.16 … 1.51",
    where 1.76 ÷ 1.16 is 1.52: the unrounded times had given 1.51).

    >>> import pandas as pd
    >>> df = pd.DataFrame({"conv": ["conv3"], "NCHW ms": [1.7558], "channels_last ms": [1.1635], "speed-up": [1.509]})
    >>> float(_speed_ups_as_shown(df)["speed-up"].iloc[0])
    1.52
    """
    df.attrs["ratio_of"] = {"speed-up": ("NCHW ms", "channels_last ms", "column/column")}
    return tables.with_ratios_as_shown(df)
