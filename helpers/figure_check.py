"""Checks a figure can fail before a learner sees it: does every axis show its data, and every label sit on it?

A cell that runs can still draw the wrong picture. The classic one: on a log axis plotly reads an annotation's
coordinate as an exponent, so a label placed at x=255 (a ridge at 255 FLOP/byte) is drawn at 10^255 and the
axis stretches to hold it, squeezing every point against its edge::

    from helpers import figure_check
    figure_check.problems(fig)          # [] when every axis holds its data and every label lies near it
    figure_check.log_marker(fig, x=255, text="ridge 255 FLOP/byte")   # a dotted line and its label, placed right

The notebook runs (the repository's conftest.py) fail a cell whose plotly figure has a problem, saying which.
The bottom of the helpers' layers: it imports none of them.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["problems", "log_marker", "SLACK_DECADES"]

#: How far (in powers of ten) a label on a log axis may lie outside the data before it is called misplaced.
SLACK_DECADES = 2.0


def _as_dict(fig: Any) -> dict:
    return fig.to_plotly_json() if hasattr(fig, "to_plotly_json") else dict(fig)


def _axis_key(ref: str) -> str:
    """'x' → 'xaxis', 'x2' → 'xaxis2', 'x2 domain' → 'xaxis2'."""
    ref = ref.split()[0]
    return f"{ref[0]}axis{ref[1:]}"


def _values(trace: dict, letter: str) -> list[float]:
    raw = trace.get(letter)
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


def problems(fig: Any) -> list[str]:
    """What is wrong with ``fig`` (a plotly figure or its JSON) as a reader would see it; empty when nothing.

    For every log axis: its data's span (in powers of ten), an explicit range that leaves data out, and each
    annotation placed on it more than :data:`SLACK_DECADES` outside the data (an annotation's coordinate on a log
    axis is an exponent: x=255 is drawn at 10^255)."""
    d = _as_dict(fig)
    layout = d.get("layout", {})
    data: dict[str, list[float]] = {}
    for trace in d.get("data", []):
        for letter in ("x", "y"):
            key = _axis_key(trace.get(f"{letter}axis", letter))
            data.setdefault(key, []).extend(_values(trace, letter))
    out = []
    for key, axis in layout.items():
        if not re.fullmatch(r"[xy]axis\d*", key) or not isinstance(axis, dict) or axis.get("type") != "log":
            continue
        title = axis.get("title", {})
        name = (title.get("text") if isinstance(title, dict) else title) or key
        positive = [v for v in data.get(key, []) if v > 0]
        if not positive:
            continue
        lo, hi = math.log10(min(positive)), math.log10(max(positive))
        rng = axis.get("range")
        if rng and (rng[0] > lo + 1e-9 or rng[1] < hi - 1e-9):
            out.append(f"the log axis '{name}' shows 10^{rng[0]:.3g}…10^{rng[1]:.3g} but its data run "
                       f"10^{lo:.3g}…10^{hi:.3g}: widen the range")
        letter = key[0]
        for ann in layout.get("annotations", []):
            ref = ann.get(f"{letter}ref", letter)
            if "paper" in ref or _axis_key(ref) != key or ann.get(letter) is None:
                continue
            v = float(ann[letter])
            if v < lo - SLACK_DECADES or v > hi + SLACK_DECADES:
                out.append(f"the label '{ann.get('text', '')}' on the log axis '{name}' sits at {letter}={v:g}, which "
                           f"plotly draws at 10^{v:g} while the data run 10^{lo:.3g}…10^{hi:.3g}: place it at "
                           f"math.log10 of the value (figure_check.log_marker does)")
    return out


def log_marker(fig: Any, *, x: float | None = None, y: float | None = None, text: str, row: int | None = None,
               col: int | None = None, dash: str = "dot") -> Any:
    """A dotted line at data value ``x`` (vertical) or ``y`` (horizontal) with its label, right on a log axis too
    (there the label's coordinate is the value's log10). Set the axes' types first. Returns ``fig``."""
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
                           text=text, showarrow=False, xanchor="left", yanchor="top")
    else:
        fig.add_hline(y=y, line_dash=dash, **sub)
        fig.add_annotation(y=math.log10(y) if yaxis.type == "log" else y, yref=yref, x=1, xref=f"{xref} domain",
                           text=text, showarrow=False, xanchor="right", yanchor="bottom")
    return fig
