"""Checks a figure can fail before a learner sees it: does every axis show its data, and every label sit on it?

A cell that runs can still draw the wrong picture. The classic one: on a log axis plotly reads an annotation's
coordinate as an exponent, so a label placed at x=255 (a ridge at 255 FLOP/byte) is drawn at 10^255 and the
axis stretches to hold it, squeezing every point against its edge::

    from helpers import figure_check
    figure_check.problems(fig)          # [] when every axis holds its data and every label lies near it
    figure_check.log_marker(fig, x=255, text="ridge 255 FLOP/byte")   # a dotted line and its label, placed right
    figure_check.readable_log_axes(fig)  # log axes ticked 1, 2, 5, 10, 20 ... 10k: not plotly's bare "2" and "5"

The notebook runs (the repository's conftest.py) fail a cell whose plotly figure has a problem, saying which.
The bottom of the helpers' layers: it imports none of them.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["problems", "log_marker", "log_ticks", "readable_log_axes", "short_number", "text_width", "legend_width", "label_rows", "label_clashes", "shade_phases", "SLACK_DECADES", "MAX_DECADE", "DEFAULT_WIDTH"]

#: How far (in powers of ten) a label on a log axis may lie outside the data before it is called misplaced.
SLACK_DECADES = 2.0


def _as_dict(fig: Any) -> dict:
    return fig.to_plotly_json() if hasattr(fig, "to_plotly_json") else dict(fig)


def _axis_key(ref: str) -> str:
    """'x' → 'xaxis', 'x2' → 'xaxis2', 'x2 domain' → 'xaxis2'."""
    ref = ref.split()[0]
    return f"{ref[0]}axis{ref[1:]}"


def _values(trace: dict, letter: str) -> list[float]:
    """The numbers a trace puts on its ``letter`` axis. A bar drawn from a ``base`` (a timeline's bars: base = start,
    length = duration) spans base to base + length on its value axis: both ends count, not the length alone."""
    along = "x" if trace.get("orientation") == "h" else "y"
    if trace.get("type") == "bar" and letter == along and trace.get("base") is not None:
        lengths = _numbers(trace.get(letter))
        base = trace.get("base")
        starts = [float(base)] * len(lengths) if isinstance(base, (int, float)) else _numbers(base)
        if len(starts) == len(lengths):
            return starts + [b + v for b, v in zip(starts, lengths)]
    return _numbers(trace.get(letter))


def _numbers(raw) -> list[float]:
    """The finite numbers of a trace's array (a list, or plotly 6's base64 ``bdata``)."""
    if raw is None:
        return []
    if isinstance(raw, dict) and "bdata" in raw:  # plotly 6 stores arrays as base64: decode with numpy
        import base64

        import numpy as np

        arr = np.frombuffer(base64.b64decode(raw["bdata"]), dtype=np.dtype(raw.get("dtype", "f8")))
        raw = arr.tolist()
    out = []
    for v in raw if isinstance(raw, (list, tuple)) else list(raw):
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out.append(f)
    return out


def _bare_digits(layout: dict, key: str, axis: dict, decades: float) -> bool:
    """Whether plotly's own ticks on this log axis, ``decades`` long, label the ticks between its powers of ten with
    a bare digit ("10, 2, 5, 100"). Its autotick does so where a tick would span under 0.7 decades, over a decade or
    more (over less it ticks evenly, labelled whole); it aims at a tick every 80 px across, every 40 px up."""
    if axis.get("tickmode") == "array" or isinstance(axis.get("dtick"), (int, float)) or decades < 1:
        return False
    if axis.get("showticklabels", True) is False:
        return False
    width, height, m = _frame(layout)
    dom = axis.get("domain") or [0, 1]
    length = ((width - m["l"] - m["r"]) if key[0] == "x" else (height - m["t"] - m["b"])) * (dom[1] - dom[0])
    ticks = min(max(length / (80 if key[0] == "x" else 40), 4), 9) + 1
    return axis.get("nticks") is None and decades / ticks <= 0.7

#: Beyond this power of ten a tick label is no longer a number a reader can use (and plotly's reach NaN×10^Infinity).
MAX_DECADE = 15
#: Plotly's defaults, used where a figure sets none: its size in a static export (the narrowest it is drawn)
#: and its margins.
DEFAULT_WIDTH, _HEIGHT = 700, 450
_MARGIN = {"l": 80, "r": 80, "t": 100, "b": 80}
_TEXT_W = 0.58  # a sans-serif character's mean width, as a share of the font size: enough to catch overlaps


def _title_text(title: Any) -> str:
    return (title.get("text") if isinstance(title, dict) else title) or ""


def _plain(text: str) -> str:
    return re.sub(r"<[^>]+>", "", text or "")


def text_width(text: str, size: float) -> float:
    """Pixels a label needs, estimated: its longest line (``<br>`` breaks one) at font ``size``. What the check
    measures overlaps with, and what a figure that places its own labels (the monitor's phases, the roofline's
    points) should use to keep them apart."""
    lines = re.split(r"<br\s*/?>", text or "", flags=re.I)
    return max(len(_plain(line)) for line in lines) * size * _TEXT_W


Box = tuple[float, float, float, float]  # a label's (left, right, top, bottom) in pixels, y down


def label_clashes(box: Box, *, bounds: Box, lines: list[tuple[float, float]], taken: list[Box]) -> int:
    """How badly a label placed at ``box`` sits, 0 where nothing is in its way: 4 where it leaves ``bounds`` (into
    the axes' ticks or the legend), 2 where a line runs through it (``lines``: points along the lines, a few px
    apart), and 3 for each box of ``taken`` (other labels, markers) it covers. A figure that places its own labels
    (the roofline's, in plotly and in the report's SVG) picks the place that scores least::

        pos = min(candidates, key=lambda b: label_clashes(b, bounds=plot, lines=pts, taken=placed))
    """
    l, r, t, b = box
    outside = l < bounds[0] or r > bounds[1] or t < bounds[2] or b > bounds[3]
    crossed = any(l <= x <= r and t <= y <= b for x, y in lines)
    # a label written over another label (or a marker) is worse than one a line runs through
    covered = sum(not (r < l2 or l > r2 or b < t2 or t > b2) for l2, r2, t2, b2 in taken)
    return 4 * outside + 2 * crossed + 3 * covered


def legend_width(names: list[str]) -> float:
    """Pixels a vertical legend of these entries takes at the figure's right (its widest entry, the symbol)."""
    return max((text_width(n, 12) for n in names), default=0.0) + 40


def label_rows(spans: list[tuple[float, float]]) -> list[int]:
    """For labels side by side, each given as its (left, right) in pixels, in the order they are placed: the row
    each goes on, the lowest where it clears every label already there (0 for all when none overlap)::

        label_rows([(0, 60), (50, 90), (100, 140)]) == [0, 1, 0]
    """
    rows: list[list[tuple[float, float]]] = []
    out = []
    for left, right in spans:
        k = next((i for i, taken in enumerate(rows) if all(right < l or left > r for l, r in taken)), len(rows))
        if k == len(rows):
            rows.append([])
        rows[k].append((left, right))
        out.append(k)
    return out


def shade_phases(fig: Any, phases, xs, *, colors: dict[str, str], height: float, legend_w: float,
                 size: float = 12, row_px: float = 19) -> tuple[float, float]:
    """Shade each ``(name, start, end)`` of ``phases`` on ``fig`` and name it at its band's top left, on the lowest
    row where it clears the others (a short optimizer phase and the next forward would be drawn over one another).
    Rows are ``row_px`` apart: a line of text at 12 px stands about 15 px tall, and at 16 apart 04's "optimizer"
    touched the "forward" on the row under it. Returns (the x axis's span, running on past the last of ``xs`` as far
    as the last label needs to stay inside the plot; the share of the plot's height the labels' rows take, for the curves to stay under)::

        span, band = shade_phases(fig, tl.phases, tl.t_ms, colors=BANDS, height=380, legend_w=legend_width(names))
        fig.update_xaxes(range=[0, span]); fig.update_yaxes(range=[0, top / (1 - min(band, 0.6))])
    """
    plot_w, plot_h = DEFAULT_WIDTH - 160 - legend_w, height - 180
    span = max([*xs, *(end for _n, _s, end in phases), 1e-9])
    widths = [text_width(name, size) + 4 for name, _s, _e in phases]
    span = max([span] + [start * plot_w / (plot_w - w) for (_n, start, _e), w in zip(phases, widths) if w < plot_w])
    lefts = [start / span * plot_w for _n, start, _e in phases]
    rows = label_rows([(left, left + w + 4) for left, w in zip(lefts, widths)])
    for (name, start, end), row in zip(phases, rows):
        fig.add_vrect(x0=start, x1=end, fillcolor=colors.get(name, "rgba(0,0,0,0.06)"), line_width=0)
        fig.add_annotation(x=start, xanchor="left", y=1 - row_px * row / plot_h, yref="paper", yanchor="top",
                           text=name, showarrow=False, font=dict(size=size))
    return span, ((row_px * (max(rows) + 1) + 6) / plot_h if rows else 0.0)


def _frame(layout: dict) -> tuple[float, float, dict]:
    margin = {**_MARGIN, **{k: v for k, v in (layout.get("margin") or {}).items() if k in _MARGIN}}
    return float(layout.get("width") or DEFAULT_WIDTH), float(layout.get("height") or _HEIGHT), margin


def _extent(layout: dict, key: str, values: list[float]) -> tuple[float, float] | None:
    """The span an axis shows, in its own units (log10 for a log axis): its explicit range, else its data's."""
    axis = layout.get(key) or {}
    rng = axis.get("range")
    if rng and all(isinstance(v, (int, float)) for v in rng):
        return float(rng[0]), float(rng[1])
    if axis.get("type") == "log":
        values = [math.log10(v) for v in values if v > 0]
    if not values:
        return None
    lo, hi = min(values), max(values)
    pad = 0.05 * (hi - lo) if hi > lo else 0.5
    return lo - pad, hi + pad


def problems(fig: Any) -> list[str]:
    """What is wrong with ``fig`` (a plotly figure or its JSON) as a reader would see it; empty when nothing.

    * an axis whose explicit range leaves its data out, or a log axis running past 10^15 (NaN and Infinity ticks);
    * a label or line (annotation, shape) placed far outside its axis's data: on a log axis more than
      :data:`SLACK_DECADES` away (an annotation's coordinate there is an exponent: x=255 is drawn at 10^255), on a
      linear one further from the data than the data's own span (it stretches the axis and squeezes the data);
    * a title wider than the figure, a vertical legend taller than the figure can hold, a y axis's title longer
      than its axis (it runs into the titles above), and labels drawn over one another (subplot titles, phase
      labels) or past the figure's edge, each estimated from its font size and the figure's size;
    * tick labels given as NaN or Infinity, and category tick labels wider than their slot (they run together);
    * a second axis over another (``overlaying``) left to plotly's ticks, which follow the other axis's gridlines.
    """
    d = _as_dict(fig)
    layout = d.get("layout", {})
    data: dict[str, list[float]] = {}
    for trace in d.get("data", []):
        for letter in ("x", "y"):
            key = _axis_key(trace.get(f"{letter}axis", letter))
            data.setdefault(key, []).extend(_values(trace, letter))
    out = []
    axes = {key: axis for key, axis in layout.items() if re.fullmatch(r"[xy]axis\d*", key) and isinstance(axis, dict)}
    for key, axis in axes.items():
        name = _title_text(axis.get("title")) or key
        for label in list(axis.get("ticktext") or []) + list(axis.get("tickvals") or []):
            if re.search(r"nan|inf", str(label), flags=re.I):
                out.append(f"the axis '{name}' has a tick label '{label}': give it finite values")
                break
        if axis.get("overlaying") and axis.get("showticklabels", True) is not False and (
                axis.get("tickmode") not in ("linear", "array") and not isinstance(axis.get("dtick"), (int, float))):
            out.append(f"the axis '{name}' lies over another and plotly ticks it at the other's gridlines (values "
                       "such as 720 and 1,440): give it tickmode='linear' and a round dtick")
        if axis.get("type") != "log":
            rng = axis.get("range")
            vals = data.get(key, [])
            if rng and vals and all(isinstance(v, (int, float)) for v in rng):
                lo, hi = min(vals), max(vals)
                # a millionth of the span: float32 timestamps round a range computed from them (05's timeline read
                # 61.7745849609 against data to 61.7745851562), far below a pixel
                slack = 1e-6 * max(hi - lo, abs(hi), abs(lo), 1e-12)
                if min(rng) > lo + slack or max(rng) < hi - slack:
                    out.append(f"the axis '{name}' shows {min(rng):g}…{max(rng):g} but its data run {lo:g}…{hi:g}: "
                               "widen the range")
            continue
        positive = [v for v in data.get(key, []) if v > 0]
        if not positive:
            continue
        lo, hi = math.log10(min(positive)), math.log10(max(positive))
        rng = axis.get("range")
        if rng and (rng[0] > lo + 1e-9 or rng[1] < hi - 1e-9):
            out.append(f"the log axis '{name}' shows 10^{rng[0]:.3g}…10^{rng[1]:.3g} but its data run "
                       f"10^{lo:.3g}…10^{hi:.3g}: widen the range")
        if rng and max(abs(rng[0]), abs(rng[1])) > MAX_DECADE:
            out.append(f"the log axis '{name}' runs to 10^{max(abs(rng[0]), abs(rng[1])):.3g}: its tick labels "
                       "turn to NaN and Infinity; set a range near the data")
        if _bare_digits(layout, key, axis, rng[1] - rng[0] if rng else (hi - lo) * 1.1):
            out.append(f"the log axis '{name}' spans {hi - lo:.2g} decades: plotly labels the ticks between its "
                       "powers of ten with bare digits ('10, 2, 5, 100'); give it tickvals and ticktext "
                       "(figure_check.readable_log_axes)")
    far = _placed_far(layout, axes, data)
    out += [message for _text, message in far]
    # a label placed far off is drawn past the edge too: said once, with its cause
    out += _cut_or_overlapping(d, layout, axes, data, placed_far={text for text, _message in far})
    return list(dict.fromkeys(out))


def _placed_far(layout: dict, axes: dict, data: dict[str, list[float]]) -> list[tuple[str, str]]:
    """Annotations and shapes in data coordinates placed far outside their axis's data: (its text, what is wrong)."""
    out = []
    items = [("label", a, _plain(a.get("text", ""))) for a in layout.get("annotations", [])]
    items += [("line", s, s.get("name") or s.get("type", "shape")) for s in layout.get("shapes", [])]
    for kind, item, text in items:
        for letter in ("x", "y"):
            ref = item.get(f"{letter}ref", letter) or letter
            if "paper" in ref or "domain" in ref:
                continue
            key = _axis_key(ref)
            axis = axes.get(key, {})
            name = _title_text(axis.get("title")) or key
            coords = [item.get(letter)] if kind == "label" else [item.get(f"{letter}0"), item.get(f"{letter}1")]
            coords = [float(v) for v in coords if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if not coords:
                continue
            if axis.get("type") == "log":
                positive = [v for v in data.get(key, []) if v > 0]
                if not positive:
                    continue
                lo, hi = math.log10(min(positive)), math.log10(max(positive))
                # a label's coordinate on a log axis is an exponent, a shape's is the value itself
                exps = coords if kind == "label" else [math.log10(v) for v in coords if v > 0]
                for v in exps:
                    if v < lo - SLACK_DECADES or v > hi + SLACK_DECADES:
                        shown = f"{letter}={v:g}" if kind == "label" else f"{letter}=10^{v:.3g}"
                        fix = ("place it at math.log10 of the value (figure_check.log_marker does)" if kind == "label"
                               else "draw it near the data")
                        out.append((text, f"the {kind} '{text}' on the log axis '{name}' sits at {shown}, which "
                                          f"plotly draws at 10^{v:g} while the data run 10^{lo:.3g}…10^{hi:.3g}: {fix}"))
                continue
            if axis.get("type") == "category":  # a shape's coordinate is a category's position (0, 1, ...), not a value
                continue
            vals = data.get(key, [])
            if not vals:
                continue
            lo, hi = min(vals), max(vals)
            reach = max(hi - lo, abs(hi), abs(lo))
            for v in coords:
                if v < lo - reach or v > hi + reach:
                    out.append((text, f"the {kind} '{text}' on the axis '{name}' sits at {letter}={v:g}, far outside "
                                      f"the data ({lo:g}…{hi:g}): it stretches the axis and squeezes the data"))
    return out


def _cut_or_overlapping(d: dict, layout: dict, axes: dict, data: dict[str, list[float]],
                        placed_far: set[str] = frozenset()) -> list[str]:
    """A title wider than the figure, a vertical legend taller than it, labels drawn over one another, and labels that
    run past the figure's edge."""
    out = []
    width, height, m = _frame(layout)
    plot_w, plot_h = width - m["l"] - m["r"], height - m["t"] - m["b"]
    title = layout.get("title")
    text = _title_text(title)
    size = ((title.get("font") or {}).get("size") if isinstance(title, dict) else None) or 17
    if text and text_width(text, size) > width - 20:
        out.append(f"the title '{_plain(text)}' needs about {text_width(text, size):.0f} px of a {width:.0f} px wide "
                   "figure: shorten it or break it with <br>")
    legend = layout.get("legend") or {}
    shown = [t for t in d.get("data", []) if t.get("name") and t.get("showlegend", True) is not False]
    if layout.get("showlegend", len(shown) > 1) is not False and legend.get("orientation", "v") == "v" and shown:
        plot_w -= legend_width([t["name"] for t in shown])  # a vertical legend takes its width from the plot area
        need = 19 * len(shown) + 10  # plotly scrolls a vertical legend taller than the plot area: a picture cuts it
        if need > plot_h + 12:
            out.append(f"the legend's {len(shown)} entries need about {need} px, and the plot area is "
                       f"{plot_h:.0f} px high: make the figure taller or the legend horizontal")

    for key, axis in axes.items():  # written sideways, a y axis's title longer than the axis runs past its ends
        text = _title_text(axis.get("title"))
        if key.startswith("yaxis") and text:
            title = axis.get("title")
            size = ((title.get("font") or {}).get("size") if isinstance(title, dict) else None) or 14
            dom = axis.get("domain") or [0, 1]
            if text_width(text, size) > plot_h * (dom[1] - dom[0]):
                out.append(f"the title of the axis '{_plain(text)}' needs about {text_width(text, size):.0f} px "
                           f"along an axis {plot_h * (dom[1] - dom[0]):.0f} px long: it runs into the titles above "
                           "it; name the unit there and say the rest in the figure's title")

    # plotly's autorange takes in lines drawn in data coordinates (a ridge past the last point): so does the estimate
    drawn: dict[str, list[float]] = {}
    for sh in layout.get("shapes", []):
        for letter in ("x", "y"):
            ref = sh.get(f"{letter}ref", letter) or letter
            if "paper" not in ref and "domain" not in ref:
                drawn.setdefault(_axis_key(ref), []).extend(
                    float(v) for v in (sh.get(f"{letter}0"), sh.get(f"{letter}1")) if isinstance(v, (int, float)))

    def box(a: dict) -> tuple[float, float, float, float] | None:
        """(left, right, top, bottom) in pixels from the figure's top-left."""
        size = float((a.get("font") or {}).get("size") or 12)
        spans = {}
        for letter, lo_px, span_px in (("x", m["l"], plot_w), ("y", m["t"], plot_h)):
            ref = a.get(f"{letter}ref", letter) or letter
            v = a.get(letter)
            if not isinstance(v, (int, float)):
                return None
            if "paper" in ref:
                frac = float(v)
            else:
                key = _axis_key(ref)
                axis = axes.get(key, {})
                dom = axis.get("domain") or [0, 1]
                if "domain" in ref:
                    frac = dom[0] + float(v) * (dom[1] - dom[0])
                else:
                    ext = _extent(layout, key, data.get(key, []) + drawn.get(key, [])
                                  + ([] if axis.get("type") == "log" else [float(v)]))
                    if ext is None or ext[1] == ext[0] or axis.get("type") == "category":
                        return None
                    frac = dom[0] + (float(v) - ext[0]) / (ext[1] - ext[0]) * (dom[1] - dom[0])
            spans[letter] = lo_px + (frac if letter == "x" else 1 - frac) * span_px
        w = text_width(a.get("text", ""), size)
        anchor = a.get("xanchor", "auto")
        if anchor == "auto":
            anchor = "center"
        left = {"left": spans["x"], "right": spans["x"] - w}.get(anchor, spans["x"] - w / 2)
        top = {"bottom": spans["y"] - size, "top": spans["y"]}.get(a.get("yanchor", "auto"), spans["y"] - size / 2)
        return left, left + w, top, top + size

    labels = [(a, box(a)) for a in layout.get("annotations", []) if _plain(a.get("text", "")).strip()]
    labels = [(a, b) for a, b in labels if b is not None and not a.get("showarrow", True) is True]
    for i, (a, (l1, r1, t1, b1)) in enumerate(labels):
        for b, (l2, r2, t2, b2) in labels[i + 1:]:
            if min(b1, b2) - max(t1, t2) > 3 and min(r1, r2) - max(l1, l2) > 2:  # boxes meet by more than a hair
                out.append(f"the labels '{_plain(a.get('text'))}' and '{_plain(b.get('text'))}' are drawn over one "
                           "another: shorten them, move one, or make the figure wider")
    for a, (left, right, _t, _b) in labels:
        if (left < -2 or right > width + 2) and _plain(a.get("text", "")) not in placed_far:
            side = "right" if right > width + 2 else "left"
            out.append(f"the label '{_plain(a.get('text'))}' runs past the figure's {side} edge and is cut: move it "
                       "inside, or shorten it")
    out += _crowded_categories(d, axes, plot_w)
    return out


def _crowded_categories(d: dict, axes: dict, plot_w: float) -> list[str]:
    """Category tick labels on an x axis wider than each category's slot: drawn level, they run into one another
    (04's anatomy chart read "weightsgradientsoptimizer state"). Angled ticks are left to plotly."""
    cats: dict[str, list[str]] = {}
    for trace in d.get("data", []):
        raw = trace.get("x")
        if trace.get("orientation") == "h" or not isinstance(raw, (list, tuple)):
            continue
        names = [str(v) for v in raw if isinstance(v, str)]
        if names:
            key = _axis_key(trace.get("xaxis", "x"))
            cats.setdefault(key, [])
            cats[key] += [n for n in names if n not in cats[key]]
    out = []
    for key, names in cats.items():
        axis = axes.get(key, {})
        if axis.get("tickangle") not in (None, 0) or len(names) < 2:
            continue
        dom = axis.get("domain") or [0, 1]
        slot = plot_w * (dom[1] - dom[0]) / len(names)
        size = float((axis.get("tickfont") or {}).get("size") or 12)
        widest = max(names, key=lambda n: text_width(n, size))
        if text_width(widest, size) > slot:
            shown = _plain(re.sub(r"<br\s*/?>", " / ", widest, flags=re.I))
            out.append(f"the tick labels of the axis '{_title_text(axis.get('title')) or key}' run into one another: "
                       f"'{shown}' needs about {text_width(widest, size):.0f} px of a {slot:.0f} px slot; "
                       "break them with <br>, angle them, or make the figure wider")
    return out


def short_number(v: float) -> str:
    """A tick label a reader takes in at a glance: 0.5, 2, 500, 2k, 10k, 1.5M (not 1e4, not 10000)::

        [short_number(v) for v in (0.02, 5, 2000, 1e4, 2.5e6)] == ["0.02", "5", "2k", "10k", "2.5M"]
    """
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:.3g}"


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Ticks for a log axis showing ``lo``…``hi`` (data values, not exponents), with readable labels: 1, 2, 5 in
    every decade over up to three decades, powers of ten over more (every other one over more than eight)::

        log_ticks(8, 300) == ([10, 20, 50, 100, 200], ["10", "20", "50", "100", "200"])
    """
    lo_e, hi_e = math.log10(lo), math.log10(hi)
    span = hi_e - lo_e
    steps = (1, 2, 5) if span <= 3 else (1,)
    every = 2 if span > 8 else 1
    vals = [float(m * 10.0 ** e) for e in range(math.floor(lo_e), math.ceil(hi_e) + 1) if e % every == 0
            for m in steps]
    vals = [v for v in vals if lo_e - 1e-9 <= math.log10(v) <= hi_e + 1e-9]
    if len(vals) < 3:  # within a decade or so: evenly spaced round values, as plotly would draw them
        step = 10 ** math.floor(math.log10((hi - lo) / 4))
        step *= next(m for m in (1, 2, 5, 10) if (hi - lo) / (step * m) <= 6)
        vals = [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1) if k > 0]
    return vals, [short_number(v) for v in vals]


def readable_log_axes(fig: Any) -> Any:
    """Give every log axis of ``fig`` ticks from :func:`log_ticks` over the span it shows (its range, else its
    data's with plotly's padding), instead of plotly's, which label the ticks between powers of ten with a bare
    digit ("10, 2, 5, 100") and large powers as 1e4. Call it once the traces are in. Returns ``fig``."""
    d = _as_dict(fig)
    data: dict[str, list[float]] = {}
    for trace in d.get("data", []):
        for letter in ("x", "y"):
            data.setdefault(_axis_key(trace.get(f"{letter}axis", letter)), []).extend(_values(trace, letter))
    for key, axis in d.get("layout", {}).items():
        if not (re.fullmatch(r"[xy]axis\d*", key) and isinstance(axis, dict) and axis.get("type") == "log"):
            continue
        rng = axis.get("range")
        if rng and all(isinstance(v, (int, float)) for v in rng):
            lo, hi = 10 ** min(rng), 10 ** max(rng)
        else:
            positive = [v for v in data.get(key, []) if v > 0]
            if not positive:
                continue
            pad = 0.05 * max(math.log10(max(positive) / min(positive)), 0.5)  # near plotly's own padding
            lo, hi = min(positive) / 10 ** pad, max(positive) * 10 ** pad
        vals, text = log_ticks(lo, hi)
        fig.update_layout({key: dict(tickmode="array", tickvals=vals, ticktext=text)})
    return fig


def log_marker(fig: Any, *, x: float | None = None, y: float | None = None, text: str, row: int | None = None,
               col: int | None = None, dash: str = "dot", side: str = "right") -> Any:
    """A dotted line at data value ``x`` (vertical) or ``y`` (horizontal) with its label, right on a log axis too
    (there the label's coordinate is the value's log10). Set the axes' types first. ``side``: a vertical line's
    label to the ``"right"`` of it or the ``"left"`` (near the plot's right edge). Returns ``fig``."""
    if (x is None) == (y is None):
        raise ValueError("log_marker: give x (a vertical line) or y (a horizontal one), not both.")
    sub = {"row": row, "col": col} if row is not None else {}
    axes = fig.get_subplot(row, col) if row is not None else None
    xaxis = axes.xaxis if axes is not None else fig.layout.xaxis
    yaxis = axes.yaxis if axes is not None else fig.layout.yaxis
    xref, yref = xaxis.plotly_name.replace("axis", ""), yaxis.plotly_name.replace("axis", "")
    if x is not None:
        fig.add_vline(x=x, line_dash=dash, **sub)
        fig.add_annotation(x=math.log10(x) if xaxis.type == "log" else x, xref=xref, y=1, yref=f"{yref} domain",
                           text=text, showarrow=False, xanchor="left" if side == "right" else "right", yanchor="top")
    else:
        fig.add_hline(y=y, line_dash=dash, **sub)
        fig.add_annotation(y=math.log10(y) if yaxis.type == "log" else y, yref=yref, x=1, xref=f"{xref} domain",
                           text=text, showarrow=False, xanchor="right", yanchor="bottom")
    return fig
