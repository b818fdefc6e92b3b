"""Monitor exports that production users expect: a Prometheus endpoint and TensorBoard scalars.

    url = mon.serve_prometheus(port=0)      # http://127.0.0.1:<free port>/metrics, updated every sample
    read_metrics(url)                       # one scrape, read as Prometheus reads it: [Metric(...), ...]
    mon.write_tensorboard("runs/monitor")   # tensorboard --logdir runs/monitor

    log = TensorBoardLog("runs/train")      # a long job's own scalars, written while it trains
    result = trainer.run(on_step=log.on_step); log.finish(result)
    read_scalars("runs/train")              # {"train/loss": [(step, value), ...], ...}: what TensorBoard plots

The endpoint binds to 127.0.0.1 only: telemetry is not for the whole network.
Reach it from elsewhere through an ssh tunnel, or put it behind your own proxy.
"""

from __future__ import annotations

import dataclasses
import errno
from pathlib import Path
from typing import Any

from .record import ROLLING_S, MonitorRecord, RollingRate, rolling_img_per_s
from .telemetry import HOST_FIELDS

__all__ = ["PrometheusExporter", "write_tensorboard", "METRIC_HELP", "Metric", "read_metrics", "TensorBoardLog",
           "read_scalars"]

#: sample key → (metric name, help text)
METRIC_HELP = {
    # each help says over which window its gauge was read: one scrape can find SM activity above NVML's utilisation
    # (01's read 14 beside 9): two readings of different windows
    "util_pct": ("gpu_utilization_percent", "NVML GPU utilisation: share of time any kernel ran, over the driver's "
                                            "last sample period (1/6 s to 1 s, by the GPU)"),
    "sm_active_pct": ("gpu_sm_active_percent", "GPM SM activity: share of SMs busy, over the monitor's last "
                                               "sampling interval"),
    "sm_occupancy_pct": ("gpu_sm_occupancy_percent", "GPM SM occupancy: resident warps vs maximum"),
    "tensor_active_pct": ("gpu_tensor_active_percent", "GPM tensor-core activity"),
    "dram_bw_pct": ("gpu_dram_bandwidth_percent", "GPM DRAM bandwidth vs peak"),
    "mem_used_gib": ("gpu_memory_used_gib", "NVML device memory used"),
    "alloc_gib": ("torch_memory_allocated_gib", "PyTorch allocator: memory in tensors"),
    "reserved_gib": ("torch_memory_reserved_gib", "PyTorch allocator: memory reserved"),
    "power_w": ("gpu_power_watts", "board power"),
    "energy_j": ("gpu_energy_joules", "board energy since the driver loaded (a counter)"),
    "temp_c": ("gpu_temperature_celsius", "GPU temperature"),
    "sm_clock_mhz": ("gpu_sm_clock_mhz", "SM clock"),
    "clock_reasons": ("gpu_clock_event_reasons", "NVML clock-event reason bit mask"),
    "pcie_tx_mb_s": ("gpu_pcie_tx_mb_per_second", "PCIe traffic out of the GPU"),
    "pcie_rx_mb_s": ("gpu_pcie_rx_mb_per_second", "PCIe traffic into the GPU"),
    "cpu_pct": ("host_cpu_percent", "host CPU utilisation, all cores averaged (on a GPU run too)"),
    "host_mem_gib": ("host_process_memory_gib", "resident memory of this process"),
}


class PrometheusExporter:
    """Gauges for every sampled field, served at ``http://127.0.0.1:<port>/metrics``."""

    def __init__(self, port: int = 0, *, addr: str = "127.0.0.1") -> None:
        try:
            import prometheus_client as pc
        except ImportError as e:
            raise ImportError(
                "the Prometheus endpoint needs prometheus-client: pip install prometheus-client "
                "(the project's own setup installs it: make lab)"
            ) from e
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port={port!r}: use 0 (pick a free port) or a port number from 1 to 65535.")
        self.registry = pc.CollectorRegistry()
        self._gauges = {
            key: pc.Gauge(name, text, ["gpu"], registry=self.registry) for key, (name, text) in METRIC_HELP.items()
        }
        self._steps = pc.Counter("train_steps", "training steps seen by the monitor", registry=self.registry)
        self._images = pc.Counter("train_images", "training images seen by the monitor", registry=self.registry)
        # images over the last second of wall time, as the monitor's plot draws it: one asynchronous step's
        # images over its host time spikes far above what the GPU trains
        self._rate = RollingRate()
        self._img_per_s = pc.Gauge("train_images_per_second",
                                   f"images trained over the last {ROLLING_S:g} s of wall time (since the first step "
                                   "until that much has passed)", registry=self.registry)
        try:
            self._server, self._thread = pc.start_http_server(port, addr=addr, registry=self.registry)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise RuntimeError(
                    f"port {port} on {addr} is already in use (another monitor or server?). "
                    "Pass another port, or port=0 to let the system pick a free one."
                ) from None
            raise
        self.port = self._server.server_port
        self.url = f"http://{addr}:{self.port}/metrics"

    def on_sample(self, row: dict[str, Any]) -> None:
        gpu = str(row.get("gpu"))
        for key, value in row.items():
            gauge = self._gauges.get(key)
            if gauge is not None and value is not None:
                gauge.labels(gpu=gpu).set(value)

    def on_step(self, row: dict[str, Any]) -> None:
        self._steps.inc()
        self._images.inc(row["images"])
        point = self._rate.add(row["t_s"], row.get("images") or 0) or self._rate.so_far()
        if point is not None:
            self._img_per_s.set(point[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def write_tensorboard(record: MonitorRecord, log_dir: str | Path) -> Path:
    """Every sample and step of ``record`` as TensorBoard scalars, the x axis in milliseconds since start."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        raise ImportError("TensorBoard scalars need the tensorboard package: pip install tensorboard "
                          "(the project's own setup installs it: make lab)") from e
    log_dir = Path(log_dir)
    writer = SummaryWriter(log_dir=str(log_dir))
    first = record.devices[0] if record.devices else None
    try:
        for s in record.samples:
            step = int(round(s["t_s"] * 1000))
            tag_gpu = f"gpu{s['gpu']}" if s.get("gpu") is not None else "host"
            for key, (name, _text) in METRIC_HELP.items():
                if s.get(key) is None:
                    continue
                if key in HOST_FIELDS:  # the host's figures once, under host/, beside each GPU's row or alone
                    if s.get("gpu") == first:
                        writer.add_scalar(f"host/{name}", s[key], step)
                else:
                    writer.add_scalar(f"{tag_gpu}/{name}", s[key], step)
        for t, ips in zip(*rolling_img_per_s(record.steps)):  # images over the last second, as the plot shows
            writer.add_scalar("train/images_per_second", ips, int(round(t * 1000)))
    finally:
        writer.close()
    return log_dir


@dataclasses.dataclass(frozen=True)
class Metric:
    """One sample of one scrape: ``gpu_power_watts{gpu="0"} 312.5``."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    help: str

    def __str__(self) -> str:
        labels = ",".join(f'{k}="{v}"' for k, v in self.labels)
        return f"{self.name}{{{labels}}} {self.value:g}" if labels else f"{self.name} {self.value:g}"


def read_metrics(url: str, *, timeout_s: float = 2.0) -> list[Metric]:
    """One scrape of a Prometheus endpoint (``mon.serve_prometheus()``'s URL), parsed as Prometheus parses it: the
    check that what a long job serves is what a dashboard will read. Raises a clear error where nothing answers."""
    import urllib.error
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:  # noqa: S310 - a URL the caller served
            text = r.read().decode("utf-8")
    except (urllib.error.URLError, OSError) as e:
        raise RuntimeError(f"nothing answered at {url} ({e}): is the monitor serving it? url = "
                           "mon.serve_prometheus() starts the endpoint and returns its URL") from None
    return [Metric(sample.name, tuple(sorted(sample.labels.items())), float(sample.value), family.documentation)
            for family in text_string_to_metric_families(text) for sample in family.samples]


class TensorBoardLog:
    """A training run's own scalars in TensorBoard, written while it trains, as a long job writes them: each step's
    host time and the images per second over the last second (host figures: writing them never waits for the GPU),
    and, at the end, the loss of every step (the Trainer keeps the losses on the GPU, so reading each one as it
    trains would wait for the GPU at every step: the sync 02 removes).

        log = TensorBoardLog("runs/train", flush_s=10)
        result = Trainer(cfg).run(on_step=log.on_step)
        log.finish(result)                    # tensorboard --logdir runs
    """

    def __init__(self, log_dir: str | Path, *, flush_s: float = 10.0) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise ImportError("TensorBoard scalars need the tensorboard package: pip install tensorboard "
                              "(the project's own setup installs it: make lab)") from e
        import time

        self.log_dir = Path(log_dir)
        self._writer = SummaryWriter(log_dir=str(self.log_dir), flush_secs=max(1, int(flush_s)))
        self._clock = time.perf_counter
        self._rate = RollingRate()
        self._indices: list[int] = []  # the steps seen: the losses are plotted at the same steps

    def on_step(self, rec: Any) -> None:
        """A :class:`helpers.train.StepRecord` (``index``, ``images``, ``step_ms``)."""
        self._writer.add_scalar("train/step_ms", rec.step_ms, rec.index)
        point = self._rate.add(self._clock(), rec.images)
        if point is not None:
            self._writer.add_scalar("train/images_per_second", point[1], rec.index)
        self._indices.append(rec.index)

    def finish(self, result: Any | None = None) -> Path:
        """Write ``result``'s losses (a :class:`helpers.train.TrainResult`: one per step) and close the file."""
        try:
            if result is not None:
                # one loss per measured step, the steps on_step saw (the warm-up's are in neither)
                steps = self._indices if len(self._indices) == len(result.losses) else range(len(result.losses))
                for step, loss in zip(steps, result.losses):
                    self._writer.add_scalar("train/loss", loss, step)
        finally:
            self._writer.close()
        return self.log_dir


def read_scalars(log_dir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files under ``log_dir``, read as TensorBoard reads them: tag → [(step, value)]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[tuple[int, float]]] = {}
    for events in sorted(Path(log_dir).rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})  # 0: keep every point
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out
