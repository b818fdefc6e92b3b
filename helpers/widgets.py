"""Live knobs for instructors: change a setting, run a short measurement, watch a bar appear.

    panel = LoaderPanel(measure, batch_sizes=[32, 128, 256], max_workers=env.usable_cpus())
    panel.show()                                  # sliders, toggles, a Run button and a live bar chart
    panel.run(batch_size=256, num_workers=8, pin_memory=True, gpu_decode=False)   # the same, from code
    panel.add(5_500.0, batch_size=256, num_workers=8, pin_memory=True, source="grid")  # a bar measured already

``measure(settings) → img/s`` is any short measurement (the notebook passes one
that times the loader). Every run adds a bar, so a room can compare settings
side by side; ``panel.figure()`` is a static copy for saved notebooks.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

__all__ = ["LoaderPanel", "PanelRun"]


@dataclasses.dataclass(frozen=True)
class PanelRun:
    label: str
    settings: dict
    img_per_s: float
    source: str = "panel"  # where the figure was measured: by the panel's Run, or earlier (e.g. "grid")


def _label(s: dict) -> str:
    how = "GPU decode" if s.get("gpu_decode") else ("pinned" if s.get("pin_memory") else "pageable")
    return f"b{s['batch_size']} · {s['num_workers']}w · {how}"


class LoaderPanel:
    """Batch size, workers, pinned memory and GPU decode, with a Run button and a live comparison chart."""

    def __init__(self, measure: Callable[[dict], float], *, batch_sizes: list[int], max_workers: int,
                 title: str = "Loader settings compared (img/s)") -> None:
        if not batch_sizes:
            raise ValueError("batch_sizes must list at least one batch size.")
        self.measure = measure
        self.batch_sizes = list(batch_sizes)
        self.max_workers = max(0, int(max_workers))
        self.title = title
        self.runs: list[PanelRun] = []
        self._chart = None
        self._status = None

    # -- the widgets ----------------------------------------------------------------------------
    def show(self) -> None:
        """Display the panel (needs ipywidgets and anywidget, which the project installs)."""
        import ipywidgets as w
        import plotly.graph_objects as go
        from IPython.display import display

        self._batch = w.Dropdown(options=self.batch_sizes, value=self.batch_sizes[0], description="batch")
        self._workers = w.IntSlider(value=0, min=0, max=self.max_workers, description="workers")
        self._pin = w.Checkbox(value=False, description="pin_memory")
        self._gpu = w.Checkbox(value=False, description="GPU decode")
        button = w.Button(description="Run", button_style="primary", icon="play")
        self._status = w.Label("")
        self._chart = go.FigureWidget(self.figure())
        button.on_click(lambda _b: self.run(batch_size=self._batch.value, num_workers=self._workers.value,
                                            pin_memory=self._pin.value, gpu_decode=self._gpu.value))
        display(w.VBox([w.HBox([self._batch, self._workers]), w.HBox([self._pin, self._gpu, button, self._status]),
                        self._chart]))

    # -- runs -----------------------------------------------------------------------------------
    def _settings(self, batch_size: int, num_workers: int, pin_memory: bool, gpu_decode: bool) -> dict:
        if batch_size not in self.batch_sizes:
            raise ValueError(f"batch_size={batch_size} is not one of the panel's {self.batch_sizes}.")
        if not 0 <= num_workers <= self.max_workers:
            raise ValueError(f"num_workers={num_workers}: the panel allows 0 to {self.max_workers} "
                             "(the cores this process may use).")
        return dict(batch_size=batch_size, num_workers=num_workers, pin_memory=pin_memory, gpu_decode=gpu_decode)

    def run(self, *, batch_size: int, num_workers: int, pin_memory: bool = False, gpu_decode: bool = False) -> PanelRun:
        """Measure one setting and add its bar."""
        settings = self._settings(batch_size, num_workers, pin_memory, gpu_decode)
        if self._status is not None:
            self._status.value = f"running {_label(settings)} …"
        return self._append(PanelRun(_label(settings), settings, float(self.measure(settings))))

    def add(self, img_per_s: float, *, batch_size: int, num_workers: int, pin_memory: bool = False,
            gpu_decode: bool = False, source: str = "earlier") -> PanelRun:
        """Add a bar for a setting measured already (say, by the loader grid), instead of measuring it twice."""
        settings = self._settings(batch_size, num_workers, pin_memory, gpu_decode)
        return self._append(PanelRun(f"{_label(settings)} ({source})", settings, float(img_per_s), source))

    def _append(self, run: PanelRun) -> PanelRun:
        self.runs.append(run)
        if self._status is not None:
            self._status.value = f"{run.label}: {run.img_per_s:,.0f} img/s"
        if self._chart is not None:
            with self._chart.batch_update():
                self._chart.data[0].x = [r.label for r in self.runs]
                self._chart.data[0].y = [r.img_per_s for r in self.runs]
                self._chart.data[0].text = [f"{r.img_per_s:,.0f}" for r in self.runs]
        return run

    def figure(self):
        """A static bar chart of every run so far."""
        import plotly.graph_objects as go

        fig = go.Figure(go.Bar(x=[r.label for r in self.runs], y=[r.img_per_s for r in self.runs],
                               text=[f"{r.img_per_s:,.0f}" for r in self.runs], textposition="outside"))
        # thousands separated, as every other chart and table of the course reads them ("6,000", not "6000")
        fig.update_layout(title=self.title, yaxis_title="img/s", yaxis_tickformat=",", height=360,
                          margin=dict(t=60, b=60))
        return fig
