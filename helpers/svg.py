"""Static charts as SVG text: for files that must open anywhere, offline, with no script (the challenge's report).

    svg.line_chart([svg.Series("baseline", xs, ys)], title="GPU utilisation", x_label="s", y_label="%")
    svg.bar_chart(["baseline", "+ bf16"], [0.8, 5.5], title="MFU", unit="%")
    svg.timeline({"GPU kernels": [(0.0, 1.5, "conv"), ...]}, title="one step")
    svg.roofline(points, roof=lambda x: min(peak, x * bw), title="Roofline")

Each returns one ``<svg>`` element as a string, sized in pixels, with its text escaped. Axes may be logarithmic.
Plotly's figures need its JavaScript to draw; these need nothing.
"""

from __future__ import annotations

import dataclasses
import html
import math
from typing import Callable, Sequence

from . import figure_check

__all__ = ["Series", "line_chart", "bar_chart", "timeline", "roofline", "PALETTE"]

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
_FONT = 'font-family="sans-serif" font-size="11"'


@dataclasses.dataclass(frozen=True)
class Series:
    """One line: its label, points, and how it is drawn."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: str | None = None
    dashed: bool = False


class _Scale:
    """Maps data to pixels along one axis, linear or log10, with round ticks."""

    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool = False, pad: tuple[float, float] = (0, 0)):
        """``pad``: room added below ``lo`` and above ``hi``, as shares of the span (in log10 on a log scale), so a
        point at the end of the data is drawn whole inside the frame, not halved by it."""
        if log:
            lo, hi = math.log10(max(lo, 1e-30)), math.log10(max(hi, 1e-30))
        if hi <= lo:
            hi = lo + 1.0
        span = hi - lo
        lo, hi = lo - pad[0] * span, hi + pad[1] * span
        self.lo, self.hi, self.a, self.b, self.log = lo, hi, a, b, log

    def __call__(self, v: float) -> float:
        v = math.log10(max(v, 1e-30)) if self.log else v
        return self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a)

    def ticks(self) -> list[float]:
        if self.log:  # powers of ten; over fewer than three decades, 2× and 5× them too
            steps = (1, 2, 5) if self.hi - self.lo < 3 else (1,)
            out = [m * 10.0 ** e for e in range(math.floor(self.lo), math.ceil(self.hi) + 1) for m in steps]
            return [t for t in out if self.lo - 1e-9 <= math.log10(t) <= self.hi + 1e-9]
        span = self.hi - self.lo
        step = 10 ** math.floor(math.log10(span / 5))
        for m in (1, 2, 5, 10):
            if span / (step * m) <= 6:
                step *= m
                break
        first = math.ceil(self.lo / step) * step
        return [first + i * step for i in range(int((self.hi - first) / step + 1e-9) + 1)]


def _tick_labels(ticks: list[float]) -> list[str]:
    """One style per axis: where it reaches 10,000, every tick from 1,000 on reads 1k, 2k, 5k, 10k (as the notebooks'
    charts do), not "5,000" beside "10k"; below that, 1,000 and 5,000."""
    thousands = any(abs(t) >= 1e4 for t in ticks)
    return [figure_check.short_number(t) if thousands and abs(t) >= 1e3 else _num(t) for t in ticks]


def _num(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e4:  # 10k, 20k, 1M: not 1e4
        return figure_check.short_number(v)
    if abs(v) < 1e-2:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{v:,.0f}" if abs(v) >= 10 else f"{v:.3g}"


def _esc(s: object) -> str:
    return html.escape(str(s), quote=True)


#: The fonts' sizes (px): the labels', and the bold title's as a regular font's of the same width. Their widths
#: come from :func:`helpers.figure_check.text_width`, the estimate the plotly figures' labels are placed by, so that
#: no label is cut at the frame's edge (the report's titles ran off both sides).
LABEL_FONT_PX = 11
TITLE_FONT_PX = 14
_TITLE_LINE_PX = 16


def wrap_title(title: str, width: int) -> list[str]:
    """``title`` in lines that fit ``width`` px at the title's font, broken between words.

    >>> wrap_title("a short title", 400)
    ['a short title']
    """
    lines: list[str] = []
    for word in title.split(" "):
        if lines and figure_check.text_width(f"{lines[-1]} {word}", TITLE_FONT_PX) <= width - 20:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _frame(width: int, height: int, title: str, body: list[str]) -> str:
    """The chart in its frame under its title; a title too long for one line takes more, and the chart moves down."""
    lines = wrap_title(title, width)
    extra = _TITLE_LINE_PX * (len(lines) - 1)
    head = "".join(f'<tspan x="{width / 2:.0f}" dy="{0 if i == 0 else _TITLE_LINE_PX}">{_esc(line)}</tspan>'
                   for i, line in enumerate(lines))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + extra}" '
            f'viewBox="0 0 {width} {height + extra}" role="img" aria-label="{_esc(title)}">'
            f'<rect width="{width}" height="{height + extra}" fill="white"/>'
            f'<text x="{width / 2:.0f}" y="16" text-anchor="middle" font-family="sans-serif" font-size="13" '
            f'font-weight="bold">{head}</text><g transform="translate(0 {extra})">' + "".join(body) + "</g></svg>")


def _axes(xs: _Scale, ys: _Scale | None, x_label: str, y_label: str, left: int, top: int, right: int,
          bottom: int) -> list[str]:
    """The frame, grid lines and tick labels (``ys`` None: no y ticks, the rows are named instead), axis labels."""
    out = [f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#999"/>']
    for t, text in zip(xs.ticks(), _tick_labels(xs.ticks())):
        x = xs(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#eee"/>'
                   f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle" {_FONT}>{text}</text>')
    y_ticks = ys.ticks() if ys is not None else []
    for t, text in zip(y_ticks, _tick_labels(y_ticks)):
        y = ys(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" {_FONT}>{text}</text>')
    out.append(f'<text x="{(left + right) / 2:.0f}" y="{bottom + 30}" text-anchor="middle" {_FONT}>{_esc(x_label)}</text>'
               f'<text x="14" y="{(top + bottom) / 2:.0f}" text-anchor="middle" {_FONT} '
               f'transform="rotate(-90 14 {(top + bottom) / 2:.0f})">{_esc(y_label)}</text>')
    return out


def _legend(labels: list[tuple[str, str, bool]], x: int, y: int) -> list[str]:
    out = []
    for i, (label, color, dashed) in enumerate(labels):
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        yy = y + 14 * i
        out.append(f'<line x1="{x}" y1="{yy}" x2="{x + 18}" y2="{yy}" stroke="{color}" stroke-width="2"{dash}/>'
                   f'<text x="{x + 22}" y="{yy + 4}" {_FONT}>{_esc(label)}</text>')
    return out


def line_chart(series: list[Series], *, title: str, x_label: str, y_label: str, width: int = 820, height: int = 300,
               x_log: bool = False, y_log: bool = False, y_min: float | None = None,
               hline: tuple[float, str] | None = None, spans: Sequence[tuple[float, float]] = (),
               span_label: str = "") -> str:
    """Lines (with a dot per point when there are few), a legend to the right; ``hline``: (y, label), dotted;
    ``spans``: stretches of x shaded behind the lines (the timed steps), named ``span_label`` in the legend."""
    pts = [(x, y) for s in series for x, y in zip(s.xs, s.ys) if y is not None and math.isfinite(y)]
    if not pts:
        return _frame(width, height, title + " (nothing recorded)", [])
    left, top, right, bottom = 56, 28, width - 280, height - 40
    ys_all = [y for _, y in pts] + ([hline[0]] if hline else [])
    lo_y = y_min if y_min is not None else min(ys_all)
    dots = len(pts) <= 12 * len(series)  # few points get a dot each: room for the dots at the data's ends
    edge = 0.04 if dots else 0.0
    xs = _Scale(min(x for x, _ in pts), max(x for x, _ in pts), left, right, x_log, pad=(edge, edge))
    ys = _Scale(lo_y, max(ys_all) * (1.05 if not y_log else 1.5), bottom, top, y_log,
                pad=(edge if y_min is None else 0.0, 0.0))
    body = _axes(xs, ys, x_label, y_label, left, top, right, bottom)
    for a, b in spans:  # clipped to the frame: a span may start before the first sample
        x0, x1 = max(left, min(right, xs(a))), max(left, min(right, xs(b)))
        if x1 > x0:
            body.append(f'<rect x="{x0:.1f}" y="{top}" width="{x1 - x0:.1f}" height="{bottom - top}" '
                        f'fill="#2ca02c" fill-opacity="0.10"/>')
    legend = []
    for i, s in enumerate(series):
        color = s.color or PALETTE[i % len(PALETTE)]
        coords = [(xs(x), ys(y)) for x, y in zip(s.xs, s.ys) if y is not None and math.isfinite(y)]
        if not coords:
            continue
        dash = ' stroke-dasharray="5,3"' if s.dashed else ""
        body.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5"{dash} points="'
                    + " ".join(f"{x:.1f},{y:.1f}" for x, y in coords) + '"/>')
        if len(coords) <= 12:
            body += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in coords]
        legend.append((s.label, color, s.dashed))
    if hline:
        y = ys(hline[0])
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#555" stroke-dasharray="2,3"/>'
                    f'<text x="{right - 4}" y="{y - 4:.1f}" text-anchor="end" {_FONT}>{_esc(hline[1])}</text>')
    body += _legend(legend, right + 12, top + 6)
    if spans and span_label:
        yy = top + 6 + 14 * len(legend)
        body.append(f'<rect x="{right + 12}" y="{yy - 6}" width="18" height="12" fill="#2ca02c" fill-opacity="0.25"/>'
                    f'<text x="{right + 34}" y="{yy + 4}" {_FONT}>{_esc(span_label)}</text>')
    return _frame(width, height, title, body)


def bar_chart(labels: list[str], values: list[float], *, title: str, unit: str = "", width: int = 720,
              marks: list[tuple[float, str]] = (), fmt: Callable[[float], str] | None = None) -> str:
    """Horizontal bars, one per label, each with its value written beside it (``fmt``: how, to round it as the
    table beside the chart does; a short general format by default); ``marks``: dotted lines (x, label)."""
    fmt = fmt or _num
    values = [v if v is not None and math.isfinite(v) else None for v in values]  # NaN: not measured, no bar
    row = 22
    height = 40 + row * len(labels) + 24
    left, right, top = 190, width - 70, 28
    hi = max([v for v in values if v is not None] + [m for m, _ in marks] + [1e-9])
    xs = _Scale(0, hi * 1.05, left, right)
    body = []
    for i, (label, v) in enumerate(zip(labels, values)):
        y = top + row * i
        body.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end" {_FONT}>{_esc(label)}</text>')
        if v is not None:
            body.append(f'<rect x="{left}" y="{y + 3}" width="{max(0.5, xs(v) - left):.1f}" height="{row - 6}" '
                        f'fill="{PALETTE[0]}"/><text x="{xs(v) + 4:.1f}" y="{y + 15}" {_FONT}>{_esc(fmt(v))}{_esc(unit)}</text>')
    bottom = top + row * len(labels)
    for m, label in marks:
        x = xs(m)
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#d62728" stroke-dasharray="3,3"/>'
                    f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle" {_FONT}>{_esc(label)}</text>')
    return _frame(width, height, title, body)


def timeline(rows: dict[str, list[tuple[float, float, str]]], *, title: str, unit: str = "ms", width: int = 900,
             max_per_row: int = 3000, colors: dict[str, str] | None = None) -> str:
    """One band per row; each item (start, duration, name) a box. Hover a box for its name (SVG ``<title>``);
    only the ``max_per_row`` longest items of a row are drawn (the rest are too short to see). ``colors``: a
    colour per row name (the palette's, in order, for a row it does not name)."""
    items = [it for r in rows.values() for it in r]
    if not items:
        return _frame(width, 60, title + " (nothing recorded)", [])
    band = 26
    # room for the longest row name ("GPU ranges (NVTX, steps)" was cut to "ges (NVTX, steps)" at a fixed 100 px)
    left = max(100, int(12 + max(figure_check.text_width(str(name), LABEL_FONT_PX) for name in rows)))
    right, top = width - 20, 28
    height = top + band * len(rows) + 40
    xs = _Scale(min(s for s, _, _ in items), max(s + d for s, d, _ in items), left, right)
    body = _axes(xs, None, f"time ({unit})", "", left, top, right, top + band * len(rows))
    for i, (name, its) in enumerate(rows.items()):
        y = top + band * i
        color = (colors or {}).get(name) or PALETTE[i % len(PALETTE)]
        body.append(f'<text x="{left - 6}" y="{y + 17}" text-anchor="end" {_FONT}>{_esc(name)}</text>')
        for s, d, label in sorted(its, key=lambda it: -it[1])[:max_per_row]:
            body.append(f'<rect x="{xs(s):.2f}" y="{y + 4}" width="{max(0.3, xs(s + d) - xs(s)):.2f}" '
                        f'height="{band - 8}" fill="{color}"><title>{_esc(label)}</title></rect>')
    return _frame(width, height, title, body)


def roofline(points: list[tuple[str, float, float]], *, roof: Callable[[float], float], ridge: float, title: str,
             width: int = 720, height: int = 360, y_unit: str = "TFLOP/s", colors: Sequence[str] | None = None) -> str:
    """Log-log: the roof (``y_unit`` against FLOP/byte) and each point (label, intensity, achieved rate in
    ``y_unit``). A point's label goes where no line crosses it and it covers no other label or marker: beside its
    point where there is room, else further out on a thin leader line.
    ``colors``: one per point (else the palette's, in order)."""
    if not points:
        return _frame(width, 60, title + " (no points)", [])
    left, top, right, bottom = 60, 28, width - 20, height - 40
    xs_v = [p[1] for p in points] + [ridge]
    lo, hi = min(xs_v) / 4, max(xs_v) * 4
    ys_v = [p[2] for p in points] + [roof(lo), roof(hi)]
    xs = _Scale(lo, hi, left, right, log=True)
    ys = _Scale(min(ys_v) / 3, max(ys_v) * 3, bottom, top, log=True)
    body = _axes(xs, ys, "arithmetic intensity (FLOP per byte moved)", y_unit, left, top, right, bottom)
    curve = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    body.append('<polyline fill="none" stroke="black" stroke-width="2" points="'
                + " ".join(f"{xs(x):.1f},{ys(roof(x)):.1f}" for x in curve) + '"/>')
    body.append(f'<line x1="{xs(ridge):.1f}" y1="{top}" x2="{xs(ridge):.1f}" y2="{bottom}" stroke="#777" '
                f'stroke-dasharray="2,3"/><text x="{xs(ridge) + 4:.1f}" y="{top + 12}" {_FONT}>ridge '
                f'{_num(ridge)} FLOP/byte</text>')
    # each label where no line crosses it and it covers no other label or marker, beside its point or, where there is
    # no such place, further out on a thin leader line (the report drew "fully connected (GEMM)" and "fused pool
    # forward" across the roof): the lines as points every 2 px, the markers as boxes
    line_pts = [(xs(x), ys(roof(x))) for x in (lo * (hi / lo) ** (i / 400) for i in range(401))]
    line_pts += [(xs(ridge), float(v)) for v in range(int(top), int(bottom) + 1, 2)]
    taken = [(xs(x) - 6, xs(x) + 6, ys(y) - 6, ys(y) + 6) for _l, x, y in points]
    ridge_w = figure_check.text_width(f"ridge {_num(ridge)} FLOP/byte", 11)
    taken.append((xs(ridge) + 4, xs(ridge) + 4 + ridge_w, top, top + 14))
    for i, (label, x, y) in enumerate(points):
        color = colors[i] if colors is not None else PALETTE[(i + 1) % len(PALETTE)]
        px, py = xs(x), ys(y)
        w, h = figure_check.text_width(label, 11), 12.0
        spots = [(7, 4), (-7, 4), (0, -9), (0, 17), (7, -6), (-7, -6), (7, 14), (-7, 14)]
        spots += [(ox, oy) for ox in range(-150, 151, 15) for oy in range(-60, 61, 15) if abs(ox) > 20 or abs(oy) > 20]

        def box(dx: float, dy: float) -> tuple[float, float, float, float]:
            # the text's box: anchored at its start (right of the point), its end (left) or its middle
            x0 = px + dx if dx > 0 else px + dx - w if dx < 0 else px - w / 2
            return x0, x0 + w, py + dy - h + 2, py + dy + 2

        def cost(spot: tuple[int, int]) -> tuple[float, float]:  # the least in the way, then the nearest
            return (figure_check.label_clashes(box(*spot), bounds=(left, right, top, bottom), lines=line_pts,
                                               taken=taken), math.hypot(*spot))

        dx, dy = min(spots, key=cost)
        taken.append(box(dx, dy))
        anchor = "start" if dx > 0 else "end" if dx < 0 else "middle"
        lead = ""
        if math.hypot(dx, dy) > 20:  # far from its point: a thin line says whose it is
            l, r, t, b = box(dx, dy)
            lead = (f'<line x1="{px:.1f}" y1="{py:.1f}" x2="{min(max(px, l), r):.1f}" y2="{min(max(py, t), b):.1f}" '
                    'stroke="#666" stroke-width="1"/>')
        body.append(f'{lead}<circle cx="{px:.1f}" cy="{py:.1f}" r="5" fill="{color}"><title>{_esc(label)}: '
                    f'{x:.3g} FLOP/byte, {y:.3g} {_esc(y_unit)}</title></circle>'
                    f'<text x="{px + dx:.1f}" y="{py + dy:.1f}" text-anchor="{anchor}" {_FONT}>{_esc(label)}</text>')
    return _frame(width, height, title, body)
