"""Name the likely bottleneck in plain words, from what was measured.

    for finding in diagnose(mon.summary(), result):
        print(finding)

Each rule reads measurements, never guesses: utilisation against SM activity
(GPM), the loop's data-wait share, memory against capacity, and the clock-event
reasons. They correct a common misreading: NVML "GPU utilisation" is the
share of time *any* kernel ran, so a high value does not mean the GPU is well
used (one tiny kernel at a time reads 100%), and a low value does not by
itself say why the GPU idles: the data-wait share and the profiler do.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from .record import MonitorSummary

if TYPE_CHECKING:
    from ..train import TrainResult

__all__ = ["Finding", "diagnose", "format_findings"]

Severity = Literal["bottleneck", "warning", "good", "info"]
_ORDER = {"bottleneck": 0, "warning": 1, "info": 2, "good": 3}


@dataclasses.dataclass(frozen=True)
class Finding:
    severity: Severity
    title: str
    evidence: str
    advice: str

    def __str__(self) -> str:
        # the severity in words: an emoji mark is an empty box where no emoji font is installed (Chromium, exports)
        evidence = self.evidence[:1].upper() + self.evidence[1:]  # a sentence after the title's full stop
        return f"{self.severity.capitalize()}: {self.title}. {evidence} → {self.advice}"


def diagnose(s: MonitorSummary, result: "TrainResult | None" = None) -> list[Finding]:
    """Findings ordered from the most to the least pressing."""
    out: list[Finding] = []
    util, sm = s.mean_util_pct, s.mean_sm_active_pct
    wait = result.data_wait_share if result is not None else None

    gpu_busy = max(v for v in (util, sm, 0.0) if v is not None) if s.source == "nvml" else None
    if wait is not None and wait >= 0.3 and (gpu_busy is None or gpu_busy < 70):
        out.append(Finding(
            "bottleneck", "Input pipeline: the GPU waits for data",
            f"the loop spent {wait:.0%} of its time blocked on the next batch",
            "prepare batches in parallel and ahead of time: DataLoader workers, pinned memory with "
            "non_blocking copies, decoding and augmenting on the GPU, or data resident on the GPU (02_dataloader)"))

    if s.source == "nvml" and util is not None:
        if sm is not None and util >= 60 and sm < 0.5 * util:
            out.append(Finding(
                "bottleneck", "Busy but not full: small kernels or launch overhead",
                f"NVML utilisation {util:.0f}% but GPM SM activity only {sm:.0f}%: kernels run back to back, "
                "yet each keeps few SMs busy",
                "give each kernel more work (larger batch), fuse small ops (torch.compile), or replay the step as "
                "a CUDA graph (03_kernels)"))
        elif util < 50 and (wait is None or wait < 0.3):
            out.append(Finding(
                "bottleneck", "The GPU idles between kernels, and not for data",
                f"NVML utilisation {util:.0f}%" + (f" with only {wait:.0%} of the time waiting for data" if wait is not None else ""),
                "look for host work on the critical path: torch.cuda.synchronize(), .item() or print of GPU "
                "values each step, Python overhead, many tiny launches; the profiler's timeline shows the gaps "
                "(01_baseline)"))
        if sm is not None and sm >= 80:
            tensor = s.mean_tensor_active_pct
            if tensor is not None and tensor < 20:
                out.append(Finding(
                    "warning", "SMs busy, tensor cores mostly idle",
                    f"SM activity {sm:.0f}%, tensor-core activity {tensor:.0f}%",
                    "run the matrix work in bf16 (torch.autocast) with channels_last so it maps onto tensor "
                    "cores (04_memory, 03_kernels)"))
            else:
                out.append(Finding(
                    "good", "The SMs are busy",
                    f"SM activity {sm:.0f}%" + (f", tensor cores {tensor:.0f}%" if tensor is not None else ""),
                    "next gains come from doing less work per image (fusion, precision) rather than feeding the GPU"))
        if s.mean_dram_bw_pct is not None and s.mean_dram_bw_pct >= 70:
            out.append(Finding(
                "warning", "Memory-bandwidth bound",
                f"DRAM bandwidth at {s.mean_dram_bw_pct:.0f}% of peak",
                "move fewer bytes: fuse elementwise ops (torch.compile), lower precision, channels_last"))
        if s.slowdown_share is not None and s.slowdown_share >= 0.2:
            out.append(Finding(
                "info", "Clocks lowered by power or thermal limits",
                f"{s.slowdown_share:.0%} of busy samples carried a power-cap or thermal clock-event reason"
                + (f" ({', '.join(s.slowdown_reasons)})" if s.slowdown_reasons else ""),
                "the GPU is at its limits, which a well-fed GPU often is; expect figures to vary with temperature, "
                "and compare runs side by side"))

    if s.source == "nvml" and util is not None and sm is None:
        out.append(Finding(
            "info", "NVML alone: this GPU offers no GPM",
            f"NVML utilisation {util:.0f}% counts the time any kernel ran; without GPM's SM activity a GPU kept busy "
            "by small kernels reads the same as one whose SMs are full",
            "read the profiler's kernel times (03_kernels) before concluding the GPU is well used"))

    if s.peak_used_gib is not None and s.mem_total_gib:
        share = s.peak_used_gib / s.mem_total_gib
        if share >= 0.9:
            out.append(Finding(
                "warning", "Memory nearly full",
                f"GPU memory used (NVML) peaked at {s.peak_used_gib:.1f} of {s.mem_total_gib:.1f} GiB",
                "a larger batch will not fit: bf16 autocast, activation checkpointing, or gradient accumulation "
                "(04_memory)"))
        elif share < 0.3 and util is not None and util >= 80 and (sm is None or sm < 80):
            out.append(Finding(
                "info", "Room for a larger batch",
                f"GPU memory used (NVML) peaked at {s.peak_used_gib:.1f} of {s.mem_total_gib:.1f} GiB",
                "a larger batch gives each kernel more work"))

    if s.source == "host":
        out.append(Finding(
            "info", "No GPU telemetry here",
            "NVML is not available, so these figures are CPU utilisation and host memory",
            "run on a GPU node for GPU utilisation, SM activity and memory"))
    if not out:
        out.append(Finding("info", "No clear bottleneck in these figures", "none of the rules fired",
                           "profile a few steps (profiling.profile_steps) and read the timeline"))
    return sorted(out, key=lambda f: _ORDER[f.severity])


def format_findings(findings: list[Finding]) -> str:
    """One line per finding."""
    return "\n".join(str(f) for f in findings)
