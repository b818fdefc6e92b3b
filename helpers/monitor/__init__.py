"""The live GPU monitor: telemetry beside what the training loop is doing, on one time axis.

    from helpers.monitor import Monitor, diagnose, format_findings
    with Monitor() as mon:                      # a live plot appears in the notebook
        result = train(cfg, monitor=mon)        # per-step img/s and the run's phases feed it
    s = mon.summary(phase="measured")           # NVML utilisation, GPM SM activity, memory, img/s
    print(format_findings(diagnose(s, result))) # the likely bottleneck, in words
    compare_figure(before.snapshot(), mon.snapshot())   # two runs overlaid

NVML "GPU utilisation" is the share of time in which *any* kernel was running,
not how busy the SMs were: a stream of tiny kernels reads high while most of
the chip idles. GPM's SM activity is the measure to trust; the plot shows both.

Its parts, bottom to top (each imports only the ones above it in this list):

* :mod:`~helpers.monitor.telemetry`: one reading of a GPU (NVML, GPM) or of the host;
* :mod:`~helpers.monitor.energy`: the board's energy counter, timed to its own steps;
* :mod:`~helpers.monitor.record`: what a run saw (:class:`MonitorRecord`) and its :class:`MonitorSummary`;
* :mod:`~helpers.monitor.view`: the live plotly widget and the static figures;
* :mod:`~helpers.monitor.exporters`: a Prometheus endpoint and TensorBoard scalars;
* :mod:`~helpers.monitor.diagnosis`: the likely bottleneck, in plain words;
* :mod:`~helpers.monitor.sampling`: :class:`Monitor`, the sampler thread that ties them together.
"""

from . import diagnosis, energy, exporters, record, sampling, telemetry, view
from .diagnosis import Finding, diagnose, format_findings
from .record import (ROLLING_S, MonitorRecord, MonitorSummary, load_record, rolling_img_per_s, step_end_s,
                     whole_run_window_s)
from .sampling import Monitor, stop_all
from .view import build_figure, compare_figure

__all__ = [
    "Monitor",
    "MonitorRecord",
    "MonitorSummary",
    "Finding",
    "diagnose",
    "format_findings",
    "compare_figure",
    "build_figure",
    "load_record",
    "rolling_img_per_s",
    "whole_run_window_s",
    "step_end_s",
    "ROLLING_S",
    "stop_all",
    "telemetry",
    "record",
    "energy",
    "view",
    "exporters",
    "diagnosis",
    "sampling",
]
