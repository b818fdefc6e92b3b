"""Nsight Compute (``ncu``) on the reference forward pass, read into a table; the profiler's view where ncu
cannot run.

    res = kernel_table(batch=64, image_size=224)
    print(res.message)          # how the table was made, or the one line saying why ncu could not run
    res.table                   # kernel, kind, duration_us, dram_pct, sm_pct, and the detail counters
    detail(res.table, {"conv·1": "fprop", "pool·1": "max_pool_forward"})   # a few kernels, counter by counter

ncu replays each kernel and reads the GPU's hardware counters: how busy DRAM and the SMs were, as
shares of their peaks. The course runs it with ``--clock-control none`` (the GPU keeps its own
clocks: nothing on the machine is changed) and ``--profile-from-start off``, so only the pass
between ``torch.cuda.profiler.start()`` and ``stop()`` in :mod:`helpers.ncu_target` is measured.

Beyond the two throughputs, the same run reads what Nsight Compute's detail page shows for a kernel
(:data:`DETAIL`): occupancy achieved and possible (and what limits it: registers, shared memory, the block
size), the bytes DRAM read and wrote, the L2 hit rate, and the launch's shape. Where the detail counters are
refused (an older ncu that names them differently), the run is made again with the two throughputs alone.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

__all__ = ["METRICS", "DETAIL", "NcuResult", "find_ncu", "command", "by_hand", "parse_csv", "kernel_table", "profiler_table",
           "detail", "bytes_per_output"]

METRICS = {
    "gpu__time_duration.sum": "duration_us",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
}
#: The detail page's counters: ncu's name → the table's column (and, in :func:`detail`, its row's words).
DETAIL = {
    "sm__warps_active.avg.pct_of_peak_sustained_active": ("occupancy_pct", "achieved occupancy, % of the warps an SM holds"),
    "sm__maximum_warps_per_active_cycle_pct": ("max_occupancy_pct", "theoretical occupancy, %"),
    "launch__occupancy_limit_registers": ("blocks_by_registers", "blocks per SM the registers allow"),
    "launch__occupancy_limit_shared_mem": ("blocks_by_shared_mem", "blocks per SM the shared memory allows"),
    "launch__occupancy_limit_warps": ("blocks_by_warps", "blocks per SM the warp slots allow"),
    "launch__registers_per_thread": ("registers", "registers per thread"),
    "launch__block_size": ("block_size", "threads per block"),
    "launch__grid_size": ("grid_size", "blocks in the grid"),
    "dram__bytes_read.sum": ("dram_read_bytes", "DRAM bytes read"),
    "dram__bytes_write.sum": ("dram_write_bytes", "DRAM bytes written"),
    "lts__t_sector_hit_rate.pct": ("l2_hit_pct", "L2 hit rate, %"),
}
_COLUMNS = ["kernel", "kind", "duration_us", "dram_pct", "sm_pct", *(col for col, _ in DETAIL.values())]
_ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class NcuResult:
    """A kernel table and how it was made (``source`` is ``"ncu"`` or ``"torch.profiler"``)."""

    table: "pandas.DataFrame" = dataclasses.field(repr=False)  # noqa: F821
    source: str
    message: str
    command: tuple[str, ...] = ()  # as a learner types it in the repository's root (:func:`by_hand`)


def find_ncu() -> str | None:
    """Path of the ``ncu`` executable, or None."""
    return shutil.which("ncu")


def command(ncu: str, *, batch: int, image_size: int, log_file: str, details: bool = True) -> list[str]:
    """The ncu command line the course runs (printed in the notebook so a learner can run it by hand);
    ``details``: the detail page's counters (:data:`DETAIL`) too."""
    metrics = [*METRICS, *(DETAIL if details else ())]
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv", "--print-units", "base",
            "--metrics", ",".join(metrics), "--log-file", log_file,
            sys.executable, "-m", "helpers.ncu_target", "--batch", str(batch), "--image-size", str(image_size)]


def parse_csv(text: str) -> "pandas.DataFrame":  # noqa: F821
    """ncu's ``--csv`` output (one row per kernel and metric) → one row per kernel launch, in launch order."""
    import pandas as pd

    from .profiling import kernel_kind, kernel_labels

    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return pd.DataFrame(columns=_COLUMNS)
    raw = pd.read_csv(io.StringIO("\n".join(lines[start:])), dtype=str)
    raw["value"] = pd.to_numeric(raw["Metric Value"].str.replace(",", ""), errors="coerce")
    wide = raw.pivot_table(index=["ID", "Kernel Name"], columns="Metric Name", values="value", aggfunc="first")
    wide = wide.reset_index()
    wide["ID"] = pd.to_numeric(wide["ID"])
    wide = wide.sort_values("ID")
    out = pd.DataFrame({"kernel": kernel_labels(list(wide["Kernel Name"]))}, index=wide.index)
    out["kind"] = wide["Kernel Name"].map(kernel_kind)
    units = dict(zip(raw["Metric Name"], raw.get("Metric Unit", pd.Series(dtype=str))))
    for metric, col in [*METRICS.items(), *((m, c) for m, (c, _) in DETAIL.items())]:
        values = wide[metric] if metric in wide else float("nan")
        if col == "duration_us":  # base units: nanoseconds (or seconds, for older versions' "s" / "usecond")
            scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
                     "s": 1e6, "second": 1e6}.get(str(units.get(metric, "ns")).strip(), 1e-3)
            values = values * scale
        out[col] = values
    return out.reset_index(drop=True)


def profiler_table(*, batch: int, image_size: int) -> "pandas.DataFrame":  # noqa: F821
    """The same forward pass's kernels from ``torch.profiler``: durations only (no hardware counters)."""
    import pandas as pd
    import torch
    from torch.profiler import ProfilerActivity, profile

    from . import ncu_target
    from .profiling import kernel_kind, kernel_labels

    run = ncu_target.make_forward(batch=batch, image_size=image_size)
    run()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts, acc_events=True) as prof:
        run()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    if torch.cuda.is_available():
        events = [(e.name, e.device_time) for e in prof.events()
                  if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0]
    else:  # no kernels on a CPU: the aten ops that would launch them
        events = [(e.name, e.self_cpu_time_total) for e in prof.events()
                  if e.name.startswith("aten::") and e.self_cpu_time_total > 0
                  and kernel_kind(e.name) not in ("other", "attention")]
    df = pd.DataFrame([{"kernel": label, "kind": kernel_kind(n), "duration_us": us}
                       for label, (n, us) in zip(kernel_labels([n for n, _ in events]), events)],
                      columns=_COLUMNS)
    counters = "the profiler times kernels; only Nsight Compute reads the hardware counters"
    df.attrs["missing"] = {col: counters for col in _COLUMNS[3:]}
    return df


def by_hand(cmd: Sequence[str]) -> tuple[str, ...]:
    """:func:`command` as a learner types it in the repository's root: ``ncu`` and ``python`` by name, the log in
    ``ncu.csv``. The run's own temporary folder and interpreter path name this machine, not the command, and an
    exported notebook carries no absolute paths.

        by_hand(["/opt/nsight/ncu", "--log-file", "/tmp/x/ncu.csv", sys.executable, "-m", "helpers.ncu_target"])
        # ('ncu', '--log-file', 'ncu.csv', 'python', '-m', 'helpers.ncu_target')
    """
    out = ["ncu", *cmd[1:]]
    for i, part in enumerate(out):
        if i and out[i - 1] == "--log-file":
            out[i] = "ncu.csv"
        elif part == sys.executable:
            out[i] = "python"
    return tuple(out)


def kernel_table(*, batch: int, image_size: int, timeout_s: float = 180) -> NcuResult:
    """ncu's table of the reference forward pass's kernels; where ncu is missing or fails, the profiler's,
    with a message of one line saying why."""
    ncu = find_ncu()
    fallback = "the profiler's table instead (durations only: the hardware counters need ncu)"
    if ncu is None:
        return NcuResult(profiler_table(batch=batch, image_size=image_size), "torch.profiler",
                         f"ncu (Nsight Compute) is not on the PATH here; {fallback}.")
    import torch

    if not torch.cuda.is_available():
        return NcuResult(profiler_table(batch=batch, image_size=image_size), "torch.profiler",
                         f"no CUDA GPU here for ncu to measure; {fallback}.")
    refused = ""
    for details in (True, False):
        with tempfile.TemporaryDirectory(prefix="gpu-perf-lab-ncu-") as folder:
            log = str(Path(folder) / "ncu.csv")
            cmd = command(ncu, batch=batch, image_size=image_size, log_file=log, details=details)
            env = dict(os.environ)
            env["PYTHONPATH"] = str(_ROOT) + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
            except subprocess.TimeoutExpired:
                return NcuResult(profiler_table(batch=batch, image_size=image_size), "torch.profiler",
                                 f"ncu took longer than {timeout_s:.0f} s and was stopped; {fallback}.", by_hand(cmd))
            text = Path(log).read_text() if Path(log).exists() else ""
        table = parse_csv(text)
        said = proc.stdout + proc.stderr + text
        if proc.returncode == 0 and not table.empty or "ERR_NVGPUCTRPERM" in said:
            break
        if details:  # an ncu that does not know a detail counter refuses them all: the two throughputs alone
            last = [line for line in said.splitlines() if line.strip()][-1:] or ["no kernels were recorded"]
            refused = f" (the detail counters were refused: {last[0][:120]})"
    if proc.returncode != 0 or table.empty:
        said = (proc.stdout + proc.stderr + text)
        if "ERR_NVGPUCTRPERM" in said:
            why = "this user may not read the GPU's performance counters (ERR_NVGPUCTRPERM; an administrator can allow it)"
        else:
            last = [line for line in said.splitlines() if line.strip()][-1:] or ["no kernels were recorded"]
            why = f"ncu did not produce a table (exit {proc.returncode}: {last[0][:160]})"
        return NcuResult(profiler_table(batch=batch, image_size=image_size), "torch.profiler",
                         f"{why}; {fallback}.", by_hand(cmd))
    return NcuResult(table, "ncu", f"Nsight Compute measured {len(table)} kernels of one forward pass{refused}.",
                     by_hand(cmd))


def detail(table: "pandas.DataFrame", picks: dict[str, str]) -> "pandas.DataFrame":  # noqa: F821
    """Nsight Compute's detail page for a few kernels, side by side: one column per ``picks`` entry (its label →
    a piece of the kernel's name; the longest-running kernel whose name holds it), one row per counter, with
    the kernel's duration and two throughputs first. A pick that matches no kernel is left out."""
    import pandas as pd

    rows = {"duration_us": "duration, µs", "dram_pct": "DRAM throughput, % of peak",
            "sm_pct": "SM throughput, % of peak", **{col: words for col, words in DETAIL.values()}}
    cols = {}
    for label, piece in picks.items():
        hits = table[table["kernel"].str.contains(piece, regex=False)]
        if not hits.empty:
            k = hits.sort_values("duration_us", ascending=False).iloc[0]
            cols[label] = [k.get(col, float("nan")) for col in rows]
    df = pd.DataFrame(cols, index=list(rows.values()))
    df.index.name = "counter"
    df.attrs["missing"] = {c: "not measured: the profiler's table, or an ncu that refused the detail counters"
                           for c in df.columns}
    return df


def bytes_per_output(table: "pandas.DataFrame", piece: str, outputs: int) -> tuple[float, float] | None:  # noqa: F821
    """DRAM bytes (read, written) per output value of the longest-running kernel whose name holds ``piece``, given
    how many values it outputs; None where they were not measured (the profiler's table, no such kernel)."""
    hits = table[table["kernel"].str.contains(piece, regex=False)] if "dram_read_bytes" in table else table.iloc[:0]
    if hits.empty or outputs <= 0:
        return None
    k = hits.sort_values("duration_us", ascending=False).iloc[0]
    read, written = float(k["dram_read_bytes"]), float(k["dram_write_bytes"])
    if read != read or written != written:  # NaN: not measured
        return None
    return read / outputs, written / outputs
