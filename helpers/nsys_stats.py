"""``nsys stats``' CSV read into typed tables: kernels, CUDA API calls, NVTX ranges (:mod:`helpers.nsys` runs nsys).

    st = parse_stats(text)        # text: what `nsys stats --report ... --format csv --output -` printed
    st.kernel_count               # kernel launches recorded: 412
    st.kernels[0]                 # KernelRow(name='sm90_xmma_gemm_...', instances=60, total_ms=1.25, share=0.25)
    st.tables()                   # {"kernels": Table, "CUDA API": Table, "NVTX ranges": Table} to read

Every version prints a report's CSV block after a line naming it and ends it with a blank line; the columns kept
their names across versions ("Instances", "Num Calls", "Name", "Range"), while the times changed their spelling
("Time(%)", "Average" in the 2021 versions; "Time (%)", "Avg (ns)" by 2022.4) and unit ("Total Time (ns)", or
ms with ``--timeunit``): the parser reads each block by its column names, whatever the version.
"""

from __future__ import annotations

import csv
import dataclasses
import re
from typing import Mapping

from . import tables
from .profiling import kernel_kind

__all__ = ["KernelRow", "ApiRow", "RangeRow", "NsysStats", "parse_stats"]

_TIME_SCALE_MS = {"ns": 1e-6, "nsec": 1e-6, "us": 1e-3, "µs": 1e-3, "usec": 1e-3, "ms": 1.0, "msec": 1.0,
                  "s": 1e3, "sec": 1e3}


@dataclasses.dataclass(frozen=True)
class KernelRow:
    name: str
    instances: int
    total_ms: float
    share: float  # of all kernel time recorded (0–1)


@dataclasses.dataclass(frozen=True)
class ApiRow:
    name: str
    calls: int
    total_ms: float
    share: float  # of all CUDA API time recorded (0–1)


@dataclasses.dataclass(frozen=True)
class RangeRow:
    name: str
    instances: int
    total_ms: float


@dataclasses.dataclass(frozen=True)
class NsysStats:
    """``nsys stats``' three tables, most time first; ``skipped``: table → nsys's words for why it is empty."""

    kernels: tuple[KernelRow, ...] = dataclasses.field(repr=False)
    api: tuple[ApiRow, ...] = dataclasses.field(repr=False)
    ranges: tuple[RangeRow, ...] = dataclasses.field(repr=False)
    skipped: Mapping[str, str] = dataclasses.field(default_factory=dict)
    reports: tuple[str, ...] = ()

    @property
    def kernel_count(self) -> int:
        """Kernel launches recorded (every instance of every kernel)."""
        return sum(r.instances for r in self.kernels)

    @property
    def api_call_count(self) -> int:
        return sum(r.calls for r in self.api)

    @property
    def range_count(self) -> int:
        return sum(r.instances for r in self.ranges)

    def __str__(self) -> str:
        return (f"{self.kernel_count:,} kernel launches ({len(self.kernels)} kernels), "
                f"{self.api_call_count:,} CUDA API calls, {self.range_count:,} NVTX ranges")

    def tables(self, top: int = 15) -> dict[str, tables.Table]:
        """The three tables to read (the ``top`` rows with the most time each): kernels with their kind
        (:func:`helpers.profiling.kernel_kind`), CUDA API calls, NVTX ranges."""
        import pandas as pd

        frames = {
            "kernels": ("kernels", [{"kernel": _short(r.name), "kind": kernel_kind(r.name), "instances": r.instances,
                                     "total_ms": r.total_ms, "share": r.share} for r in self.kernels]),
            "CUDA API": ("api", [{"call": r.name, "calls": r.calls, "total_ms": r.total_ms, "share": r.share}
                                 for r in self.api]),
            "NVTX ranges": ("nvtx", [{"range": r.name, "instances": r.instances, "total_ms": r.total_ms}
                                     for r in self.ranges]),
        }
        columns = {"kernels": ["kernel", "kind", "instances", "total_ms", "share"],
                   "api": ["call", "calls", "total_ms", "share"], "nvtx": ["range", "instances", "total_ms"]}
        out = {}
        for title, (kind, rows) in frames.items():
            t = tables.readable(pd.DataFrame(rows[:top], columns=columns[kind]))
            notes = [f"nsys recorded none: {self.skipped[kind]}"] if kind in self.skipped else []
            if len(rows) > top:
                notes.append(f"the {top} of {len(rows)} with the most time (all of them: the stats' .{kind})")
            out[title] = dataclasses.replace(t, notes=(*t.notes, *notes))
        return out


def parse_stats(text: str, *, reports: tuple[str, ...] = ()) -> NsysStats:
    """``nsys stats --format csv`` output → :class:`NsysStats`. Each report prints a line naming it ("Processing
    [x.sqlite] with [.../cuda_gpu_kern_sum.py]..."; "Running [.../gpukernsum.py x.sqlite]..." in 2021), then its
    CSV block and a blank line, or "SKIPPED: x.sqlite does not contain CUDA kernel data" where it had none. Which
    table a block is comes from its columns (a "Range" column: NVTX; "Num Calls": CUDA API; "Instances" and "Name":
    kernels), which every version has named alike; a skipped one from the report that line named (2023.4 skips all
    three with the same words, "x.sqlite file does not contain StringIds table."), else from nsys's words."""
    blocks: dict[str, list[dict[str, float | str]]] = {"kernels": [], "api": [], "nvtx": []}
    skipped: dict[str, str] = {}
    header: list[str] | None = None
    kind: str | None = None
    running: str | None = None  # the kind of the report the last "Processing"/"Running" line named
    for line in text.splitlines():
        named = _report_named(line)
        if named:
            running = _kind_by_report(named)
        if "SKIPPED:" in line:
            why = line.split("SKIPPED:", 1)[1].strip()
            skipped[running or _kind_by_words(why)] = why
            header = None
            continue
        fields = [f.strip() for f in next(csv.reader([line]), [])]
        if _is_header(fields):
            header, kind = fields, _kind_by_columns(fields)
        elif header and kind and fields and _number(fields[0]) is not None:
            blocks[kind].append(_row(header, fields))
        else:
            header = None  # a blank line or words: the block has ended
    kernels = [KernelRow(str(r["name"]), int(r["count"]), float(r["ms"]), float(r["share"]))
               for r in _merged(blocks["kernels"])]
    api = [ApiRow(str(r["name"]), int(r["count"]), float(r["ms"]), float(r["share"])) for r in _merged(blocks["api"])]
    # some versions print a range of the default domain as ":name" (the domain's empty name before the colon)
    ranges = [RangeRow(str(r["name"]).removeprefix(":"), int(r["count"]), float(r["ms"]))
              for r in _merged(blocks["nvtx"])]
    return NsysStats(tuple(kernels), tuple(api), tuple(ranges), skipped, reports)


def _short(name: str) -> str:
    return name if len(name) <= 90 else name[:87] + "..."


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _is_header(fields: list[str]) -> bool:
    return any(f.startswith("Time") for f in fields) and any(f.startswith("Total Time") for f in fields)


def _kind_by_columns(header: list[str]) -> str | None:
    if "Range" in header:
        return "nvtx"
    if "Num Calls" in header:
        return "api"
    return "kernels" if "Instances" in header and "Name" in header else None


def _report_named(line: str) -> str | None:
    """The report a "Processing [db] with [.../name.py]... " line (2022.4 on; "with [name]" where there is no such
    report) or a "Running [.../name.py db]... " line (2021) names: ``"name"``; None for any other line."""
    m = re.match(r"Processing \[.*?\] with \[([^\]]*)\]", line) or re.match(r"Running \[(.*?\.py)[\s\]]", line)
    return m[1].rsplit("/", 1)[-1].removesuffix(".py") if m else None


def _kind_by_report(name: str) -> str | None:
    """The table a report fills, by its name in any version: gpukernsum, cuda_gpu_kern_sum; cudaapisum,
    cuda_api_sum; nvtxppsum, nvtxsum, nvtx_sum."""
    return "nvtx" if "nvtx" in name else "kernels" if "kern" in name else "api" if "api" in name else None


def _kind_by_words(why: str) -> str:
    low = why.lower()
    return "nvtx" if "nvtx" in low else "kernels" if "kernel" in low else "api"


def _row(header: list[str], fields: list[str]) -> dict[str, float | str]:
    """One CSV row → name, count, total ms and share (0–1), whatever the version calls and orders its columns."""
    cells = dict(zip(header, fields))
    total = next(h for h in header if h.startswith("Total Time"))
    unit = re.search(r"\((\w+)\)", total)
    scale = _TIME_SCALE_MS.get(unit[1] if unit else "ns", 1e-6)  # the old reports' unit: ns, said only in their help
    share = next((h for h in header if re.fullmatch(r"Time\s*\(%\)", h)), None)
    count = next((h for h in ("Instances", "Num Calls", "Calls") if h in cells), None)
    name = next((h for h in ("Name", "Range") if h in cells), header[-1])
    return {"name": cells[name], "count": int(_number(cells[count]) or 0) if count else 0,
            "ms": (_number(cells[total]) or 0.0) * scale,
            "share": (_number(cells[share]) or 0.0) / 100 if share else float("nan")}


def _merged(rows: list[dict[str, float | str]]) -> list[dict[str, float | str]]:
    """Rows of one name summed (a kernel launched with two grid shapes is one row per shape in some versions),
    most time first."""
    out: dict[str, dict[str, float | str]] = {}
    for r in rows:
        m = out.setdefault(str(r["name"]), {"name": r["name"], "count": 0, "ms": 0.0, "share": 0.0})
        m["count"] = int(m["count"]) + int(r["count"])
        m["ms"] = float(m["ms"]) + float(r["ms"])
        m["share"] = float(m["share"]) + float(r["share"])
    return sorted(out.values(), key=lambda r: -float(r["ms"]))
