"""One reading of a GPU (NVML and, on Hopper and newer, GPM) or of the host.

The monitor's sampler thread calls ``read()`` on one reader per device every
period. Each field that the device or driver does not support is found out
on its first failure and never asked again, so a sample costs only what
works::

    r = NvmlReader(pynvml, handle, gpu=0)
    r.read()    # {'util_pct': 97.0, 'mem_used_gib': 5.5, ..., 'sm_active_pct': 96.8, ...}

GPM metrics are rates over an interval: they need two GPM samples at least
100 ms apart, so the first reading has none and a reading sooner than 100 ms
after the last one reuses it.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from .. import nvml
from ..notices import say_once

__all__ = ["CLOCK_EVENT_REASONS", "decode_clock_reasons", "NvmlReader", "GpmReader", "HostReader", "GPU_FIELDS",
           "HOST_FIELDS"]

GPU_FIELDS = (
    "util_pct", "mem_used_gib", "mem_total_gib", "power_w", "energy_j", "temp_c", "sm_clock_mhz", "clock_reasons",
    "pcie_tx_mb_s", "pcie_rx_mb_s", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_bw_pct",
)
HOST_FIELDS = ("cpu_pct", "host_mem_gib")

#: NVML clock-event ("throttle") reason bits and what they mean for a learner.
CLOCK_EVENT_REASONS = {
    0x1: "idle",
    0x2: "application clocks setting",
    0x4: "power cap (software)",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake (hardware)",
    0x100: "display clock setting",
}
#: Reasons that mean the GPU was slowed down while it had work (idle and settings are not).
SLOWDOWN_BITS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def decode_clock_reasons(mask: int | None) -> list[str]:
    """Names of the set bits of a clock-event reason mask."""
    if not mask:
        return []
    return [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]


class GpmReader:
    """GPM SM activity, SM occupancy, tensor-core activity and DRAM bandwidth of one GPU."""

    METRICS = {  # NVML_GPM_METRIC_* ids
        "sm_active_pct": 2,  # SM_UTIL: share of SMs busy, averaged over time
        "sm_occupancy_pct": 3,  # SM_OCCUPANCY: resident warps vs the maximum
        "tensor_active_pct": 5,  # ANY_TENSOR_UTIL
        "dram_bw_pct": 10,  # DRAM_BW_UTIL
    }
    MIN_INTERVAL_S = 0.1

    def __init__(self, nv: Any, handle: Any) -> None:
        self.nv, self.handle = nv, handle
        self._prev = self._cur = None
        self._prev_t = 0.0
        self._last: dict[str, float] = {}
        self.ok = True
        try:
            self._prev = nv.nvmlGpmSampleAlloc()
            self._cur = nv.nvmlGpmSampleAlloc()
            nv.nvmlGpmSampleGet(handle, self._prev)
            self._prev_t = time.monotonic()
        except Exception:
            self.ok = False
            self.close()

    def read(self) -> dict[str, float]:
        if not self.ok:
            return {}
        now = time.monotonic()
        if now - self._prev_t < self.MIN_INTERVAL_S:
            return dict(self._last)  # too soon for a meaningful rate: repeat the last one
        nv = self.nv
        try:
            nv.nvmlGpmSampleGet(self.handle, self._cur)
            req = nv.c_nvmlGpmMetricsGet_t()
            req.version = nv.NVML_GPM_METRICS_GET_VERSION
            req.numMetrics = len(self.METRICS)
            req.sample1, req.sample2 = self._prev, self._cur
            for i, mid in enumerate(self.METRICS.values()):
                req.metrics[i].metricId = mid
            nv.nvmlGpmMetricsGet(req)
            out = {
                name: float(req.metrics[i].value)
                for i, name in enumerate(self.METRICS)
                if req.metrics[i].nvmlReturn == 0
            }
        except Exception:
            self.ok = False
            return {}
        self._prev, self._cur = self._cur, self._prev  # the newer sample is the next interval's start
        self._prev_t = now
        self._last = out
        return dict(out)

    def close(self) -> None:
        for s in (self._prev, self._cur):
            if s is not None:
                try:
                    self.nv.nvmlGpmSampleFree(s)
                except Exception:
                    pass
        self._prev = self._cur = None


class NvmlReader:
    """Every NVML field of one GPU the monitor plots; unsupported ones are dropped after one try."""

    def __init__(self, nv: Any, handle: Any, *, gpu: int = 0, gpm: bool | None = None, pcie: bool = True) -> None:
        self.nv, self.handle, self.gpu = nv, handle, gpu
        self.total_gib = None
        self._fields: dict[str, Callable[[], dict[str, float]]] = {
            "util": lambda: {"util_pct": float(nv.nvmlDeviceGetUtilizationRates(handle).gpu)},
            "memory": self._memory,
            "power": lambda: {"power_w": nv.nvmlDeviceGetPowerUsage(handle) / 1e3},
            # the board's energy since the driver loaded (Volta and newer), a counter: a run's joules are the
            # difference between its first and last samples, exact where power sampled every period is not
            "energy": lambda: {"energy_j": nv.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3},
            "temperature": lambda: {"temp_c": float(nv.nvmlDeviceGetTemperature(handle, 0))},
            "sm_clock": lambda: {"sm_clock_mhz": float(nv.nvmlDeviceGetClockInfo(handle, 1))},
            "clock_reasons": self._clock_reasons,
        }
        if pcie:  # each PCIe counter read blocks about 20 ms inside NVML: fine on the sampler thread
            self._fields["pcie"] = lambda: {
                "pcie_tx_mb_s": nv.nvmlDeviceGetPcieThroughput(handle, 0) / 1e3,
                "pcie_rx_mb_s": nv.nvmlDeviceGetPcieThroughput(handle, 1) / 1e3,
            }
        self.unsupported: list[str] = []
        if gpm is None:
            gpm = nvml.gpm_supported(handle) if nv is nvml.load(quiet=True) else hasattr(nv, "nvmlGpmSampleAlloc")
        self.gpm = GpmReader(nv, handle) if gpm else None
        if not gpm:
            why = nvml.gpm_disabled() or "they need Hopper or newer, and most MIG slices hide them"
            say_once("no-gpm", f"This GPU offers no GPM metrics ({why}): the monitor and its diagnosis use NVML alone. NVML's utilisation is the share "
                               "of time any kernel ran, not how many SMs were busy.")

    def _memory(self) -> dict[str, float]:
        m = self.nv.nvmlDeviceGetMemoryInfo(self.handle)
        self.total_gib = m.total / 2**30
        return {"mem_used_gib": m.used / 2**30, "mem_total_gib": self.total_gib}

    def _clock_reasons(self) -> dict[str, float]:
        fn = getattr(self.nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or self.nv.nvmlDeviceGetCurrentClocksThrottleReasons
        return {"clock_reasons": float(fn(self.handle))}

    def read(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, fn in list(self._fields.items()):
            try:
                out.update(fn())
            except Exception:
                if name == "util":  # the one field every GPU has: a failure here is transient, not "unsupported"
                    raise
                del self._fields[name]
                self.unsupported.append(name)
        if self.gpm is not None:
            out.update(self.gpm.read())
            if not self.gpm.ok and "gpm" not in self.unsupported:
                self.unsupported.append("gpm")
        return out

    def close(self) -> None:
        if self.gpm is not None:
            self.gpm.close()


class HostReader:
    """CPU utilisation (all cores, as top shows it averaged) and this process's resident memory."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self._proc = psutil.Process()
        psutil.cpu_percent(None)  # the first call only sets the reference point

    def read(self) -> dict[str, float]:
        return {
            "cpu_pct": float(self._psutil.cpu_percent(None)),
            "host_mem_gib": self._proc.memory_info().rss / 2**30,
        }

    def close(self) -> None:
        pass
