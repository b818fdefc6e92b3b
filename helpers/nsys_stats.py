"""``nsys stats``' CSV read into typed tables: kernels, CUDA API calls, NVTX ranges (:mod:`helpers.nsys` runs nsys).

    st = parse_stats(text)        # text: what `nsys stats --report ... --format csv --output -` printed
    st.kernel_count               # kernels the GPU ran (a graph's replay runs many from one launch): 412
    st.kernels[0]                 # KernelRow(name='sm90_xmma_gemm_...', instances=60, total_ms=1.25, share=0.25)
    st.tables()                   # {"kernels": Table, "CUDA API": Table, "NVTX ranges": Table} to read
    per_step({"baseline": a, "top rung": b})   # one column per recording: launches, syncs, GPU busy, per step

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
from .profiling import kernel_kind, kernel_labels

__all__ = ["KernelRow", "ApiRow", "RangeRow", "NsysStats", "parse_stats", "per_step", "STEP_RANGE", "API_KINDS"]

#: The NVTX range around each recorded step (:data:`helpers.nsys_target.STEP_RANGE`): what "per step" divides by;
#: and the one around them all, which closes once the GPU has finished them (:data:`helpers.nsys_target.CAPTURE_RANGE`).
STEP_RANGE = "step"
CAPTURE_RANGE = "profiled_steps"
#: The range around the recording's closing synchronisation (:data:`helpers.nsys_target.CLOSE_RANGE`).
CLOSE_RANGE = "closing sync"
#: The empty range whose name gives a step's images (:data:`helpers.nsys_target.IMAGES_RANGE`).
IMAGES_RANGE = "images per step: "
#: CUDA API calls by what they do (a call's name, its ``_v2``/``_ptsz`` suffixes and ``cu``/``cuda`` prefix aside).
#: ``cudaLaunchKernelExC_v11060`` is a kernel launch (CUDA 11.6's extensible one, which PyTorch's own kernels use).
#: A copy to the host waits for the GPU too (``loss.item()`` is a ``cudaMemcpyAsync`` and a stream sync): it counts
#: among the copies, not the synchronizing calls.
API_KINDS = {
    "kernel launches": ("LaunchKernel", "LaunchKernelEx", "LaunchKernelExC", "LaunchCooperativeKernel"),
    "CUDA graph launches": ("GraphLaunch",),
    "synchronizing calls": ("StreamSynchronize", "DeviceSynchronize", "EventSynchronize", "StreamWaitEvent"),
    "copies": ("Memcpy", "MemcpyAsync", "Memcpy2D", "Memcpy2DAsync", "MemcpyHtoD", "MemcpyDtoH", "MemcpyDtoD",
               "MemcpyHtoDAsync", "MemcpyDtoHAsync", "MemcpyDtoDAsync"),
    "memory sets": ("Memset", "MemsetAsync", "MemsetD8", "MemsetD32", "MemsetD8Async", "MemsetD32Async"),
}

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

    def range_named(self, name: str) -> RangeRow | None:
        """The NVTX range of that name (nsys may prefix a name with ":"), or None where none was recorded."""
        return next((r for r in self.ranges if r.name.lstrip(":") == name), None)

    def closing_sync(self) -> tuple[int, float] | None:
        """``(calls, ms)`` of the synchronisation that closes the recording, after its last step: the lone device
        sync call's own time where there is one (its NVTX range holds the call and a little Python around it, and 03
        read 44.6 ms for the range a line above "1 call, 44.4 ms" for the call), else its range's; None where the
        recording has no such range."""
        close = self.range_named(CLOSE_RANGE)
        if close is None:
            return None
        alone = next((r for r in self.api if "DeviceSynchronize" in r.name and r.calls == 1), None)
        return (1, alone.total_ms) if alone is not None else (close.instances, close.total_ms)

    @property
    def images_per_step(self) -> int | None:
        """The images a recorded step trained, from the empty range :mod:`helpers.nsys_target` names with them
        (``"images per step: 256"``); None where the recording has none."""
        for r in self.ranges:
            count = r.name.lstrip(":").removeprefix(IMAGES_RANGE)
            if count != r.name.lstrip(":") and count.isdigit():
                return int(count)
        return None

    def __str__(self) -> str:
        return (f"{self.kernel_count:,} kernels run ({len(self.kernels)} distinct), "
                f"{self.api_call_count:,} CUDA API calls, {self.range_count:,} NVTX ranges")

    def tables(self, top: int = 15) -> dict[str, tables.Table]:
        """The three tables to read (the ``top`` rows with the most time each): kernels with their kind
        (:func:`helpers.profiling.kernel_kind`), CUDA API calls, NVTX ranges."""
        import pandas as pd

        def share_of(rows) -> list[float]:
            # each row's share from the times themselves: nsys prints its "Time (%)" to 0.1%, and shown to three
            # figures that read "0.60" beside 0.290 ms of 51.5 ms (0.56%); and from the times as the table shows
            # them (three figures), over their sum, so the reader who adds the column and divides gets the share:
            # cudaLaunchKernel read 4.5% beside 2.02 ms of a column adding to 44.37 ms (4.55%)
            shown = [_shown(r.total_ms) for r in rows]
            total = sum(shown)
            return [t / total if total > 0 else r.share for t, r in zip(shown, rows)]

        frames = {
            "kernels": ("kernels", [{"kernel": label, "kind": kernel_kind(r.name), "instances": r.instances,
                                     "total_ms": r.total_ms, "share": share}
                                    for label, r, share in zip(kernel_labels([r.name for r in self.kernels]),
                                                               self.kernels, share_of(self.kernels))]),
            "CUDA API": ("api", [{"call": r.name, "calls": r.calls, "total_ms": r.total_ms, "share": share}
                                 for r, share in zip(self.api, share_of(self.api))]),
            "NVTX ranges": ("nvtx", [{"range": r.name, "instances": r.instances, "total_ms": r.total_ms}
                                     for r in self.ranges]),
        }
        columns = {"kernels": ["kernel", "kind", "instances", "total_ms", "share"],
                   "api": ["call", "calls", "total_ms", "share"], "nvtx": ["range", "instances", "total_ms"]}
        out = {}
        close = self.range_named(CLOSE_RANGE)
        for title, (kind, rows) in frames.items():
            t = tables.readable(pd.DataFrame(rows[:top], columns=columns[kind]))
            notes = [f"nsys recorded none: {self.skipped[kind]}"] if kind in self.skipped else []
            if kind == "api" and close is not None and rows:
                # the top rung's table read cudaDeviceSynchronize at 93% of its API time: that was this one call,
                # after the last step, which the per-step table leaves out
                # a lone device sync is that call: its row's time, not its NVTX range's (03 read "1 call, 42.9 ms"
                # under a cudaDeviceSynchronize row of 42.7 ms: the range holds the call and a little Python)
                alone = next((r for r in self.api if "DeviceSynchronize" in r.name and r.calls == 1), None)
                wait = (f"{alone.name}: 1 call, {alone.total_ms:.3g} ms" if alone is not None else
                        f"{close.instances} call, {close.total_ms:.3g} ms in its range")
                notes.append(f"these calls include the synchronisation that closes the recording, after its last "
                             f"step ({wait} waiting for the GPU to finish the steps the host had queued): not a "
                             "step's, so the per-step table leaves it out")
            if len(rows) > top:
                # "(all of them: …)" had read as "these are all of them": it points to where the rest are
                notes.append(f"the {top} of {len(rows)} with the most time; every one of the {len(rows)} is in the "
                             f"stats' .{kind}")
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


def _api_kind(name: str) -> str | None:
    bare = re.sub(r"^(cuda|cu)", "", name.split("_")[0])
    return next((kind for kind, calls in API_KINDS.items() if bare in calls), None)


#: :func:`per_step`'s rows that are computed from others: the GPU's share from its kernel time and the wall time,
#: the time per image from the wall time and the images.
WALL, KERNEL, BUSY = "wall time per step, ms", "kernel time on the GPU, ms", "GPU busy, % of the wall time"
IMAGES, PER_IMAGE = "images per step", "wall time per image, µs"


def per_step(recordings: Mapping[str, NsysStats]) -> tables.Table:
    """Recordings side by side, per step (each recording's ``step`` NVTX ranges count its steps): the wall time of a
    step (the capture range, which closes once the GPU has finished, over the steps), the host's time inside each
    step's range (less than the wall time where the host runs ahead of the GPU), the GPU's kernel time and its share
    of the wall time (from the two times as the table shows them, as is the wall time per image where every
    recording says its images per step: :func:`_from_shown_times`), the kernels the GPU ran, and the CUDA API calls
    the host made by kind (:data:`API_KINDS`) with the time spent in synchronizing ones, less the recording's closing
    sync (:data:`CLOSE_RANGE`), which is not a step's. A recording without step ranges has its rows empty, with the
    reason under the table."""
    import pandas as pd

    rows: dict[str, dict[str, float | None]] = {}
    notes = []
    closed: dict[str, float] = {}  # recording → its closing sync's wait, ms
    unmarked: list[str] = []  # recordings whose closing sync has no range: counted in the rows
    per_image: dict[str, int | None] = {}  # recording → images per step
    for name, st in recordings.items():
        step, capture = st.range_named(STEP_RANGE), st.range_named(CAPTURE_RANGE)
        if step is None or not step.instances:
            notes.append(f"{name}: no '{STEP_RANGE}' NVTX range was recorded, so nothing is per step")
        n = step.instances if step is not None and step.instances else None
        wall = capture.total_ms / n if n and capture is not None else None
        if n and capture is None:
            notes.append(f"{name}: no '{CAPTURE_RANGE}' NVTX range was recorded, so no wall time per step")
        kernel_ms = sum(r.total_ms for r in st.kernels)
        images = st.images_per_step
        per_image[name] = images
        col: dict[str, float | None] = {
            WALL: wall,
            # from the step range's time as the NVTX table shows it (03 read 38.3 ms beside "step 5 × 191 ms")
            "host time inside the step, ms": _shown(step.total_ms) / n if n else None,
            KERNEL: kernel_ms / n if n else None,
            BUSY: None,  # from the two times above as shown (_from_shown_times)
            "kernels run on the GPU": st.kernel_count / n if n else None,
        }
        # the recording's closing sync, where it was marked: one call and its wait, after the last step
        close = st.closing_sync()
        close_calls, close_ms = close if close is not None else (0, 0.0)
        if close is not None and n:
            closed[name] = close_ms
        for kind in API_KINDS:
            calls = sum(r.calls for r in st.api if _api_kind(r.name) == kind)
            if kind == "synchronizing calls":
                calls = max(0, calls - close_calls)
            col[f"{kind} (CUDA API)"] = calls / n if n else None
        # each call's time and the closing sync's as the API table and the note below show them (03 read 5.50 ms
        # where (27.4 − 0.0634 + 0.195) ÷ 5 is 5.51)
        sync_ms = sum(_shown(r.total_ms) for r in st.api if _api_kind(r.name) == "synchronizing calls")
        # the range holds the call and a few µs of the host's around it: a run with no other sync reads zero
        col["time in synchronizing calls, ms"] = max(0.0, sync_ms - _shown(close_ms)) / n if n else None
        col["CUDA API calls in all"] = max(0, st.api_call_count - close_calls) / n if n else None
        if close is None and n and col["synchronizing calls (CUDA API)"]:
            unmarked.append(name)
        rows[name] = col
    if closed:
        notes.append("the synchronisation that closes each recording, after its last step, is left out of the "
                     "synchronizing rows (it is not a step's; it is in the wall time): it waited "
                     + ", ".join(f"{tables.sig(ms)} ms in the {name}'s" for name, ms in closed.items())
                     + " for the GPU to finish the steps the host had queued")
    if unmarked:
        notes.append(f"in the {', '.join(unmarked)}, the synchronizing calls include the one that closes the "
                     "recording, after its last step (not marked with an NVTX range there): a run that never waits "
                     "inside a step still shows one such call over its steps, and that call's wait")
    if rows:
        # 03's baseline read 72.2 ms a step here against 45.8 ms in 01's timing of the same loop, and nothing said why
        # the two could differ
        notes.append("each recording ran in a process of its own under nsys, every CUDA call traced, for a few "
                     "steps after a short warm-up: its times compare the recordings with each other; the figures "
                     "to quote for a loop are its notebook's timing cells, which trace nothing")
    if per_image and all(per_image.values()):  # every recording says its batch
        for name, images in per_image.items():
            rows[name] = {IMAGES: images, PER_IMAGE: None, **rows[name]}  # from the wall time as shown, below
    df = pd.DataFrame(rows)
    df.index.name = "per step"
    formats = {c: "sig" for c in df.columns}
    # the busy share and the time per image from the times per step as the table shows them, not as measured: 03 read
    # 1,404 µs per image beside 44.9 ms ÷ 32 (1,403), and GPU busy 96.9% beside 11.5 ÷ 11.9 ms (96.6%)
    df = _from_shown_times(df, tables.readable(df, formats=formats).shown)
    t = tables.readable(df, formats=formats)
    # a count per step that is whole reads as one ("86 kernel launches", not 86.0; 5.2 stays 5.20); a time or a
    # share keeps its figures (a time per image of 1,250 µs is not a count)
    shown = t.shown.copy()
    for row in df.index:
        if not row.endswith((", ms", ", µs")) and row != BUSY:
            for col in df.columns:
                v = df.loc[row, col]
                if v is not None and v == v and abs(v - round(v)) < 1e-9:
                    shown.loc[row, col] = tables.whole(v)
    return dataclasses.replace(t, shown=shown, notes=(*t.notes, *notes))


def _shown(ms: float) -> float:
    """A time as the stats tables and notes print it (three figures), read back: what a reader adds and divides."""
    return tables.as_shown(tables.sig(ms)) if ms else 0.0


def _from_shown_times(df: "pandas.DataFrame", shown: "pandas.DataFrame") -> "pandas.DataFrame":  # noqa: F821
    """``df`` (:func:`per_step`'s rows, one column per recording) with the GPU's busy share and the wall time per image
    computed from the times per step as ``shown`` (its table's strings) prints them, so the reader's own division
    agrees to the last digit: 03 read 1,404 µs and 46.3 µs per image beside 44.9 ms ÷ 32 (1,403) and 11.9 ms ÷ 256
    (46.5), and GPU busy 96.9% beside 11.5 ÷ 11.9 ms (96.6%). ``df``'s data keeps those figures, unrounded, so a
    sentence written from it (03's "the GPU in kernels for 97% of it") reads as the table does.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"top rung": {IMAGES: 256, PER_IMAGE: None, WALL: 11.86, KERNEL: 11.49, BUSY: None}})
    >>> shown = pd.DataFrame({"top rung": {IMAGES: "256", PER_IMAGE: "—", WALL: "11.9", KERNEL: "11.5", BUSY: "—"}})
    >>> out = _from_shown_times(df, shown)["top rung"]
    >>> f"{out[PER_IMAGE]:.3g} µs, {out[BUSY]:.3g}%"
    '46.5 µs, 96.6%'
    """
    out = df.copy()
    at = {row: i for i, row in enumerate(df.index)}
    for j in range(df.shape[1]):  # by position: the shown table's labels may differ from the data's
        wall, kernel = (tables.shown_number(shown.iat[at[row], j]) for row in (WALL, KERNEL))
        if not wall:
            continue  # no wall time (no capture range): nothing to divide by, the rows stay empty
        if kernel is not None:
            out.iat[at[BUSY], j] = 100 * kernel / wall
        if PER_IMAGE in at and df.iat[at[IMAGES], j]:
            out.iat[at[PER_IMAGE], j] = 1e3 * wall / float(df.iat[at[IMAGES], j])
    return out
