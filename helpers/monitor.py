"""GPU telemetry sampled in the background while a cell runs.

    with GpuSampler(period_s=0.25) as mon:
        result = train(cfg)
    print(mon.summary())        # mean NVML utilisation, peak memory, mean power
    mon.to_frame()              # every sample as a pandas DataFrame

Without NVML (a CPU machine) the sampler records the process's CPU
utilisation and host memory instead, and says once why.

NVML "GPU utilization" is the share of time in which *any* kernel was
running, not how busy the SMs were: a stream of tiny kernels reads high while
most of the chip idles. Later notebooks add NVML GPM's SM activity beside it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from . import nvml

__all__ = ["Sample", "SamplerSummary", "GpuSampler"]


@dataclasses.dataclass(frozen=True)
class Sample:
    """One reading. GPU fields are None when read from the host instead."""

    t_s: float  # seconds since the sampler started
    util_pct: float  # NVML GPU utilisation, or CPU utilisation without NVML
    mem_used_gib: float  # device memory used (NVML), or this process's resident memory
    power_w: float | None
    source: str  # "nvml" or "host"


@dataclasses.dataclass(frozen=True)
class SamplerSummary:
    """Averages over a sampled interval."""

    source: str
    samples: int
    duration_s: float
    mean_util_pct: float
    peak_mem_gib: float
    mean_power_w: float | None

    def __str__(self) -> str:
        what = "GPU utilisation (NVML)" if self.source == "nvml" else "CPU utilisation (no NVML)"
        power = f", mean power {self.mean_power_w:.0f} W" if self.mean_power_w is not None else ""
        return (
            f"{what} {self.mean_util_pct:.0f}% mean over {self.duration_s:.1f} s ({self.samples} samples), "
            f"peak memory {self.peak_mem_gib:.2f} GiB{power}"
        )


class GpuSampler:
    """Background sampler of one GPU (matched to CUDA ``device_index`` by UUID), or of the host.

    ``backend`` replaces the ``pynvml`` module (tests pass a fake); ``handle`` its device handle.
    """

    def __init__(self, device_index: int = 0, *, period_s: float = 0.25, backend: Any = None, handle: Any = None):
        if not (period_s > 0):
            raise ValueError(f"period_s={period_s!r}: use a positive number of seconds (0.25 is the default).")
        self.period_s = period_s
        if backend is not None:
            self._nv, self._handle = backend, handle
        else:
            self._nv = nvml.load()
            self._handle = nvml.handle_for_cuda_device(device_index) if self._nv is not None else None
        self.source = "nvml" if (self._nv is not None and self._handle is not None) else "host"
        self.samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._power_ok = True
        self._proc = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> "GpuSampler":
        """Start sampling (a second start while running does nothing)."""
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stop.clear()
        self._t0 = time.perf_counter()
        if self.source == "host":
            import psutil

            self._proc = psutil.Process()
            psutil.cpu_percent(None)  # the first call only sets the reference point
        self._read()  # one sample now, so even a short block has data
        self._thread = threading.Thread(target=self._loop, name="gpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> "GpuSampler":
        """Stop and wait for the thread (safe to call twice, or without start)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.period_s + 1)
            self._thread = None
        return self

    def __enter__(self) -> "GpuSampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self._read()  # a last sample at the end of the block
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- sampling -----------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._read()

    def _read(self) -> None:
        t = time.perf_counter() - self._t0
        try:
            sample = self._read_nvml(t) if self.source == "nvml" else self._read_host(t)
        except Exception:  # a failed read skips one sample; it must never kill the thread
            return
        with self._lock:
            self.samples.append(sample)

    def _read_nvml(self, t: float) -> Sample:
        nv, h = self._nv, self._handle
        util = nv.nvmlDeviceGetUtilizationRates(h).gpu
        mem = nv.nvmlDeviceGetMemoryInfo(h).used / 2**30
        power = None
        if self._power_ok:
            try:
                power = nv.nvmlDeviceGetPowerUsage(h) / 1e3  # milliwatts
            except Exception:
                self._power_ok = False  # unsupported here: stop asking
        return Sample(t_s=t, util_pct=float(util), mem_used_gib=mem, power_w=power, source="nvml")

    def _read_host(self, t: float) -> Sample:
        import psutil

        rss = self._proc.memory_info().rss / 2**30 if self._proc is not None else 0.0
        return Sample(t_s=t, util_pct=float(psutil.cpu_percent(None)), mem_used_gib=rss, power_w=None, source="host")

    # -- results ------------------------------------------------------------------------------
    def to_frame(self) -> "pandas.DataFrame":  # noqa: F821
        import pandas as pd

        with self._lock:
            rows = [dataclasses.asdict(s) for s in self.samples]
        return pd.DataFrame(rows, columns=[f.name for f in dataclasses.fields(Sample)])

    def summary(self) -> SamplerSummary:
        with self._lock:
            s = list(self.samples)
        if not s:
            return SamplerSummary(self.source, 0, 0.0, float("nan"), float("nan"), None)
        powers = [x.power_w for x in s if x.power_w is not None]
        return SamplerSummary(
            source=self.source,
            samples=len(s),
            duration_s=s[-1].t_s - s[0].t_s,
            mean_util_pct=sum(x.util_pct for x in s) / len(s),
            peak_mem_gib=max(x.mem_used_gib for x in s),
            mean_power_w=sum(powers) / len(powers) if powers else None,
        )
