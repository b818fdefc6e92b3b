"""Drawing a monitor: a live plotly widget while it runs, a static figure when it ends.

Four panels on one time axis: utilisation beside SM activity; memory (NVML
used, PyTorch allocated and reserved); power and SM clock; training
throughput. Phases are shaded bands across all panels.

The live widget (``plotly.graph_objects.FigureWidget``, which needs
``anywidget``) is redrawn at most ``refresh_hz`` times a second, in one
batched update, over the last ``window_s`` seconds. When the run ends, the
widget's output is replaced in place by a static figure of the whole run, and
a one-line summary is printed: a saved notebook, nbconvert and nbval (which
have no widget front end) keep that, not an empty widget.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

import numpy as np

from .record import MonitorRecord, MonitorSummary

__all__ = ["in_notebook", "build_figure", "compare_figure", "LiveSource", "LiveView"]

_PANELS = ("utilisation (%)", "memory (GiB)", "power (W) · SM clock (MHz)", "throughput (img/s)")
_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where a widget can be displayed)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and hasattr(ip, "kernel")


def _trace_specs(record: MonitorRecord) -> list[tuple[int, str, str, Any, bool]]:
    """(panel row, trace name, sample key, device, on the secondary axis) for every line the view draws."""
    specs: list[tuple[int, str, str, Any, bool]] = []
    if record.source == "nvml":
        for d in record.devices or [None]:
            tag = f" GPU{d}" if len(record.devices) > 1 else ""
            specs += [
                (1, f"NVML utilisation{tag}", "util_pct", d, False),
                (1, f"SM activity (GPM){tag}", "sm_active_pct", d, False),
                (1, f"tensor-core activity (GPM){tag}", "tensor_active_pct", d, False),
                (2, f"NVML used{tag}", "mem_used_gib", d, False),
                (2, f"PyTorch allocated{tag}", "alloc_gib", d, False),
                (2, f"PyTorch reserved{tag}", "reserved_gib", d, False),
                (3, f"power{tag}", "power_w", d, False),
                (3, f"SM clock{tag}", "sm_clock_mhz", d, True),
            ]
    else:
        specs += [(1, "CPU utilisation", "cpu_pct", None, False), (2, "process memory (RSS)", "host_mem_gib", None, False)]
    return specs


def _xy(samples: list[dict], key: str, device: Any) -> tuple[np.ndarray, np.ndarray]:
    # numpy arrays, not lists: plotly validates a list element by element, an array at once.
    pts = [(s["t_s"], s[key]) for s in samples if s.get("gpu") == device and s.get(key) is not None]
    if not pts:
        return np.empty(0), np.empty(0)
    arr = np.asarray(pts, dtype=float)
    return arr[:, 0], arr[:, 1]


def _binned(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points: means of equal-count bins (fast steps would flood the widget)."""
    if len(x) <= max_points:
        return x, y
    edges = np.linspace(0, len(x), max_points + 1).astype(int)
    return np.add.reduceat(x, edges[:-1]) / np.diff(edges), np.add.reduceat(y, edges[:-1]) / np.diff(edges)


def _empty_figure(record: MonitorRecord, title: str):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.06, subplot_titles=_PANELS,
        specs=[[{}], [{}], [{"secondary_y": True}], [{}]],
    )
    for i, (row, name, _key, _dev, secondary) in enumerate(_trace_specs(record)):
        fig.add_trace(
            go.Scatter(x=[], y=[], name=name, mode="lines", line=dict(color=_COLORS[i % len(_COLORS)])),
            row=row, col=1, secondary_y=secondary if row == 3 else None,
        )
    fig.add_trace(go.Scatter(x=[], y=[], name="img/s per step", mode="lines+markers", marker=dict(size=3),
                             line=dict(color="#000000")), row=4, col=1)
    fig.update_yaxes(range=[0, 105], row=1, col=1)
    fig.update_layout(title=title, height=720, margin=dict(l=50, r=20, t=70, b=40),
                      legend=dict(orientation="h", y=-0.08), uirevision="monitor")
    fig.update_xaxes(title_text="seconds since the monitor started", row=4, col=1)
    return fig


def _apply(fig, cols: "_Columns", phases: list[dict], window_s: float | None, max_step_points: int = 600) -> None:
    """Show the last ``window_s`` seconds of ``cols`` (all of it when None) and the phases in ``fig``."""
    t_end = max(cols.cols[0][0][-1:] + cols.cols[-1][0][-1:] + [0.0])
    t_from = t_end - window_s if window_s else -np.inf
    n = len(cols.specs)
    for i, trace in enumerate(fig.data[:n]):
        trace.x, trace.y = cols.window(i, t_from)
    fig.data[n].x, fig.data[n].y = _binned(*cols.window(n, t_from), max_step_points)
    _draw_phases(fig, phases, t_end)


def _draw_phases(fig, phases: list[dict], t_end: float) -> None:
    """Shaded bands and labels for the phases. They change rarely: redraw only when they do
    (an open band grows in whole seconds)."""
    bands = tuple((ph["name"], ph["start_s"], ph["end_s"] if ph["end_s"] is not None else round(t_end))
                  for ph in phases)
    if getattr(fig, "_phase_bands", None) == bands:
        return
    fig._phase_bands = bands
    fig.layout.shapes = [
        dict(type="rect", xref="x", yref="paper", x0=start, x1=end, y0=0, y1=1,
             fillcolor=_COLORS[i % len(_COLORS)], opacity=0.08, line_width=0, layer="below")
        for i, (_name, start, end) in enumerate(bands)
    ]
    fig.layout.annotations = [a for a in fig.layout.annotations if a.text in _PANELS] + [
        dict(x=(start + end) / 2, y=1.02, xref="x", yref="paper", text=name, showarrow=False, font=dict(size=10))
        for name, start, end in bands
    ]


def build_figure(record: MonitorRecord, *, title: str = "GPU monitor", window_s: float | None = None):
    """A static ``go.Figure`` of a record (the whole run when ``window_s`` is None)."""
    fig = _empty_figure(record, title)
    cols = _Columns(record)
    cols.add(record.samples, record.steps)
    _apply(fig, cols, record.phases, window_s)
    return fig


def compare_figure(before: MonitorRecord, after: MonitorRecord, *, labels=("before", "after"),
                   title: str = "Before and after"):
    """Two runs overlaid, each from its own start: utilisation, SM activity and img/s per step."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=("utilisation (%)", "throughput (img/s)"))
    for rec, label, dash in zip((before, after), labels, ("dot", "solid")):
        key = "util_pct" if rec.source == "nvml" else "cpu_pct"
        dev = rec.devices[0] if rec.devices else None
        for k, name in ((key, "utilisation"), ("sm_active_pct", "SM activity")):
            xs, ys = _xy(rec.samples, k, dev)
            if len(ys):
                fig.add_trace(go.Scatter(x=xs, y=ys, name=f"{label}: {name}", line=dict(dash=dash)), row=1, col=1)
        steps = [s for s in rec.steps if s.get("img_per_s") is not None]
        fig.add_trace(go.Scatter(x=[s["t_s"] for s in steps], y=[s["img_per_s"] for s in steps],
                                 name=f"{label}: img/s", line=dict(dash=dash)), row=2, col=1)
    fig.update_layout(title=title, height=520)
    fig.update_xaxes(title_text="seconds since each run started", row=2, col=1)
    return fig


class _Columns:
    """Per-trace columns that grow by the rows added since the last redraw: a redraw costs O(new rows)."""

    def __init__(self, record: MonitorRecord) -> None:
        self.specs = _trace_specs(record)
        self.cols: list[tuple[list[float], list[float]]] = [([], []) for _ in range(len(self.specs) + 1)]
        self.n_samples = self.n_steps = 0

    def add(self, samples: list[dict], steps: list[dict]) -> None:
        for s in samples:
            g, t = s.get("gpu"), s["t_s"]
            for (xs, ys), (_row, _name, key, dev, _sec) in zip(self.cols, self.specs):
                v = s.get(key)
                if dev == g and v is not None:
                    xs.append(t)
                    ys.append(v)
        xs, ys = self.cols[-1]
        for s in steps:
            if s.get("img_per_s") is not None:
                xs.append(s["t_s"])
                ys.append(s["img_per_s"])
        self.n_samples += len(samples)
        self.n_steps += len(steps)

    def window(self, i: int, t_from: float) -> tuple[np.ndarray, np.ndarray]:
        import bisect

        xs, ys = self.cols[i]
        k = bisect.bisect_left(xs, t_from)
        return np.asarray(xs[k:], dtype=float), np.asarray(ys[k:], dtype=float)


class LiveSource(Protocol):
    """What a live view reads from the thing it draws (a :class:`~helpers.monitor.Monitor`)."""

    title: str
    window_s: float | None
    refresh_interval_s: float

    def snapshot(self) -> MonitorRecord: ...

    def rows_since(self, n_samples: int, n_steps: int) -> tuple[list[dict], list[dict], list[dict]]: ...

    def summary(self) -> MonitorSummary: ...

    def summary_text(self) -> str: ...

    def figure(self): ...


class LiveView:
    """The live widget of one :class:`~helpers.monitor.Monitor` (any :class:`LiveSource`)."""

    def __init__(self, monitor: LiveSource, *, thread_refresh: bool = True) -> None:
        self.monitor = monitor
        self.thread_refresh = thread_refresh
        self._widget = None
        self._handle = None
        self._last = 0.0
        self._lock = threading.Lock()
        self._columns: _Columns | None = None

    def show(self, *, display_widget: bool = True) -> None:
        """Create the widget and display it (``display_widget=False``: keep it off screen, for benchmarks)."""
        if self._widget is not None:
            return
        try:
            import plotly.graph_objects as go

            self._widget = go.FigureWidget(_empty_figure(self.monitor.snapshot(), self.monitor.title))
        except ImportError as e:  # plotly ≥ 6 needs anywidget for FigureWidget
            print(f"Live plot unavailable ({e}); install the project's dependencies (make lab) for it. "
                  "The static figure follows when the run ends.")
            self._widget = None
            return
        self._columns = _Columns(self.monitor.snapshot())
        if display_widget:
            from IPython.display import display

            self._handle = display(self._widget, display_id=True)
        self.refresh()

    def maybe_refresh(self) -> None:
        """Redraw if the last redraw is older than the refresh interval (cheap to call every step)."""
        if self._widget is None or time.monotonic() - self._last < self.monitor.refresh_interval_s:
            return
        self.refresh()

    def refresh(self) -> None:
        if self._widget is None or not self._lock.acquire(blocking=False):
            return  # another thread is redrawing: skip, the next call catches up
        try:
            self._last = time.monotonic()
            samples, steps, phases = self.monitor.rows_since(self._columns.n_samples, self._columns.n_steps)
            self._columns.add(samples, steps)
            with self._widget.batch_update():  # one message to the front end per redraw
                _apply(self._widget, self._columns, phases, self.monitor.window_s)
        except Exception:
            pass  # a front end that went away must not break the training loop
        finally:
            self._lock.release()

    def finish(self) -> None:
        """Replace the live widget by a static figure of the whole run, and print the summary."""
        import plotly.io as pio
        from IPython.display import display

        summary = self.monitor.summary_text()
        # A raw mime bundle: plotly's own display hook would ignore the display id and add a new output.
        bundle = pio.renderers["plotly_mimetype"].to_mimebundle(self.monitor.figure())
        bundle["text/plain"] = f"<{self.monitor.title}: {summary}>"
        if self._handle is not None:
            self._handle.update(bundle, raw=True)
        else:
            display(bundle, raw=True)
        print(summary)
