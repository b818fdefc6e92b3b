"""Reading profiles: torch.profiler with a schedule, top ops, kernels, a timeline you can see.

    prof = profile_steps(trainer.step, wait=1, warmup=2, active=5)
    prof.top_ops(5)                  # DataFrame: self vs total, CPU vs GPU, calls
    prof.kernel_stats()              # KernelStats: count per step, mean duration
    prof.launch_split()              # DataFrame: kernels replayed in CUDA graphs vs launched one by one, and by what
    prof.timeline_figure()           # plotly: CPU ops, CUDA API calls and GPU kernels on one axis
    prof.export_trace("trace.pt.trace.json")   # opens in ui.perfetto.dev and TensorBoard

    with nvtx_range("data"): ...     # shows in torch.profiler and in Nsight Systems
    python_hotspots(trainer.step)    # cProfile of the Python side as a DataFrame

Self time is what an op spent in its own code; total time includes the ops
it called. A GPU row with many calls of a few microseconds each is launch
overhead; the gaps between kernels on the timeline are time the GPU waited.
"""

from __future__ import annotations

import contextlib
import cProfile
import dataclasses
import functools
import json
import os
import pstats
import re
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import torch
from torch.autograd import DeviceType

from . import tables

__all__ = [
    "ProfileResult",
    "KernelStats",
    "profile_steps",
    "nvtx_range",
    "python_hotspots",
    "intervals_union_us",
    "kernel_kind",
    "TIMELINE_COLORS",
]

#: "GPU, earlier": GPU work launched before the profiled steps and still running in them (a row only where some is)
_TIMELINE_ORDER = ("ranges (NVTX, steps)", "CPU ops", "CUDA API", "GPU kernels", "GPU, earlier", "GPU copies")
#: One colour per timeline row, in the notebooks' plotly timelines and the challenge report's SVG one alike.
TIMELINE_COLORS = {"ranges (NVTX, steps)": "#7f7f7f", "CPU ops": "#1f77b4", "CUDA API": "#ff7f0e",
                   "GPU kernels": "#2ca02c", "GPU, earlier": "#98df8a", "GPU copies": "#d62728"}
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
_ROWS = {  # trace category → timeline row
    "user_annotation": "ranges (NVTX, steps)",  # record_function ranges: what nsys shows as NVTX
    "cpu_op": "CPU ops",
    "cuda_runtime": "CUDA API",
    "cuda_driver": "CUDA API",
    "kernel": "GPU kernels",
    "gpu_memcpy": "GPU copies",
    "gpu_memset": "GPU copies",
}


@contextlib.contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """A named range for torch.profiler (``record_function``) and, on a GPU, NVTX (Nsight Systems)."""
    nvtx = torch.cuda.is_available()
    if nvtx:
        torch.cuda.nvtx.range_push(name)
    try:
        with torch.profiler.record_function(name):
            yield
    finally:
        if nvtx:
            torch.cuda.nvtx.range_pop()


def intervals_union_us(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by ``(start, end)`` intervals, overlaps counted once."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


_KINDS = (  # (kind, words in a kernel's or op's name), the first match wins: cuDNN's conv kernels contain "gemm"
    ("convolution", ("conv", "fprop", "dgrad", "wgrad", "implicit_gemm", "winograd")),
    ("pooling", ("pool",)),
    ("GEMM", ("gemm", "matmul", "cutlass", "cublas", "addmm", "aten::mm", "aten::bmm", "xmma", "nvjet")),
    ("reduction", ("reduce", "sum", "softmax", "nll", "norm", "mean", "argmax", "cross_entropy", "_per_")),
    ("copy", ("copy", "memcpy", "memset", "cat", "nchwtonhwc", "nhwctonchw", "transpose", "convert", "to_copy")),
    ("elementwise", ("elementwise", "vectorized", "unrolled", "relu", "threshold", "clamp", "add", "mul", "fill",
                     "foreach", "triton_poi", "sgd", "where", "exp", "div")),
)


def kernel_kind(name: str) -> str:
    """What a GPU kernel (or an aten op) does, read from its name: convolution, pooling, GEMM, fused attention
    (flash and its kin: "attention"), reduction, copy, elementwise, or other. Inductor names its kernels by the ops
    they fuse (``triton_poi_fused_…`` is pointwise, ``triton_red_``/``triton_per_`` reductions)."""
    low = name.lower()
    if low.startswith(("triton_red", "triton_per")):
        return "reduction"
    if low.startswith("triton_poi"):  # pointwise, whatever ops it is named after
        return "elementwise"
    if "padding" in low:  # cuDNN padding channels up to what tensor cores take (conv1's 3 → 8)
        return "copy"
    if "convert" in low:  # a dtype cast ("convert_…"): "conv" would read it as a convolution
        return "copy"
    if any(w in low for w in ("sdpa", "flash", "fmha")):  # fused attention ("…sdpa…flash_fprop…" is no convolution)
        return "attention"
    for kind, words in _KINDS:
        if any(w in low for w in words):
            return kind
    return "other"


def kernel_label(name: str, width: int = 72) -> str:
    """A kernel's (or op's) name as a table shows it: C++ names run to hundreds of characters, so the return type
    ("void "), anonymous namespaces and the parameter list go, and what is still longer than ``width`` is cut
    with "…" (so a reader knows the name goes on). The kernel's own name and its template arguments stay first.

        kernel_label("void at::<unnamed>::max_pool_forward_nhwc<c10::BFloat16, int>(const T1 *, int, T2)")
        # 'at::max_pool_forward_nhwc<c10::BFloat16, int>'
    """
    label = _whole_label(name)
    return label if len(label) <= width else label[: width - 1] + "…"


def _whole_label(name: str) -> str:
    """kernel_label before any cut: no return type, anonymous namespace, parameter list, or C-style casts and
    return types inside the template arguments ("<(int)128, (int)4, void at::…" reads "<128, 4, at::…")."""
    label = name.strip().removeprefix("void ").replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    if label.endswith(")"):  # the parameter list: from the "(" that closes at the end, if anything precedes it
        depth = 0
        for i in range(len(label) - 1, 0, -1):
            depth += {")": 1, "(": -1}.get(label[i], 0)
            if depth == 0:
                label = label[:i].rstrip()
                break
    return re.sub(r"\(int\)(?=-?\d)", "", label).replace("<void ", "<").replace(", void ", ", ")


def demangled(names: list[str]) -> list[str]:
    """Names as C++ spells them: a kernel the profiler reports by its mangled symbol (cuDNN's
    ``_ZN17cutlass__5x_cudnn6KernelI…``) read through ``c++filt`` (binutils) where it is installed, in one call for
    all of them; elsewhere, and for names that are not mangled, unchanged."""
    import shutil
    import subprocess

    mangled = [n for n in names if n.startswith("_Z")]
    tool = shutil.which("c++filt")
    if not mangled or tool is None:
        return list(names)
    try:
        out = subprocess.run([tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=30,
                             check=True).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return list(names)
    if len(out) != len(mangled):
        return list(names)
    read = dict(zip(mangled, out))
    return [read.get(n, n) for n in names]


def kernel_labels(names: list[str], width: int = 72) -> list[str]:
    """:func:`kernel_label` of each name (mangled ones demangled first), kept apart: where two different kernels
    would read alike once cut (06's table showed two rows "at::native::elementwise_kernel<128, 4, at::native::
    gpu_kernel_impl_nocast<at::…"), each keeps the start and the end of its name with "…" between, since templated
    kernels differ in their last arguments.

        kernel_labels(["void k<float, 1, tile128x128, end>(int)", "void k<float, 1, tile128x256, end>(int)"], width=20)
        # ['k<float, 1…128x128,…', 'k<float, 1…128x256,…']
    """
    raw = demangled(list(names))
    whole = [_whole_label(n) for n in raw]
    # two kernels whose names differ only in what a label drops (their parameter lists) keep the whole name: 03's
    # and 06's tables had shown two rows "sm90_xmma_wgrad_indexed_implicit_ge…xecute_segment_k_on_kernel__5x_cudnn"
    dropped: dict[str, set[str]] = {}
    for r, w in zip(raw, whole):
        dropped.setdefault(w, set()).add(r)
    whole = [r.strip().removeprefix("void ") if len(dropped[w]) > 1 else w for r, w in zip(raw, whole)]
    labels = [w if len(w) <= width else w[: width - 1] + "…" for w in whole]
    seen: dict[str, set[str]] = {}
    for w, lab in zip(whole, labels):
        seen.setdefault(lab, set()).add(w)
    apart: dict[str, str] = {}
    for group in (sorted(g) for g in seen.values() if len(g) > 1):
        apart.update(_told_apart(group, width))
    out = [apart.get(w, lab) for w, lab in zip(whole, labels)]
    # where no window of the names tells two apart within the width, they are numbered, never shown as one
    of_label: dict[str, list[str]] = {}
    for w, lab in zip(whole, out):
        if w not in of_label.setdefault(lab, []):
            of_label[lab].append(w)
    return [lab if len(of_label[lab]) == 1 else f"{lab[: width - 4]} [{of_label[lab].index(w) + 1}]"
            for w, lab in zip(whole, out)]


def _told_apart(group: list[str], width: int) -> dict[str, str]:
    """Labels of at most ``width`` characters for names that read alike cut at ``width``: each keeps its start (up
    to 40 characters: 03 looks kernels up by a piece of it, "fprop", "max_pool_forward"), then "…", then the part
    from a little before where the names first differ. Where that window still reads alike, the end instead."""
    common = len(os.path.commonprefix(group))
    keep = min(40, common, width // 2)
    room = width - 2 - keep  # the window, and a "…" on each side of it
    # from a little before the first difference; near the names' end, from as far back as the room allows
    begin = max(keep, min(common - min(8, room // 2), min(len(w) for w in group) - room))
    cut = {w: w[:keep] + ("…" if begin > keep else "") + w[begin: begin + room]
           + ("…" if begin + room < len(w) else "") for w in group}
    if len(set(cut.values())) == len(group):
        return cut
    tail = width // 2
    return {w: w[: width - 1 - tail] + "…" + w[-tail:] for w in group}


@dataclasses.dataclass(frozen=True)
class KernelStats:
    """GPU kernels seen in the profiled steps."""

    kernels_per_step: float
    mean_kernel_us: float
    gpu_busy_share: float  # union of kernel, copy and memset time over the profiled span, earlier steps' included
    span_ms_per_step: float
    # the part of gpu_busy_share the GPU spent finishing work queued before the profiled steps began: a host that
    # runs ahead of its GPU launches steps early, and their kernels still run when the profiled steps start
    earlier_work_share: float = 0.0

    @property
    def profiled_work_share(self) -> float:
        """The share of the profiled time the GPU spent on the profiled steps' own kernels, copies and memsets."""
        return self.gpu_busy_share - self.earlier_work_share

    def __str__(self) -> str:
        if not self.kernels_per_step:
            return "no GPU kernels recorded (CPU run)"
        busy = round(100 * self.gpu_busy_share)
        text = (f"{self.kernels_per_step:.0f} kernels per step, {self.mean_kernel_us:.1f} µs each on average; "
                f"GPU busy {busy}% of the profiled time")
        if self.earlier_work_share >= 0.005:
            # the two parts as printed add up to the busy share as printed ("busy 98%: 78% … 19%" had read 97):
            # the profiled steps' part is what the other leaves
            earlier = round(100 * self.earlier_work_share)
            text += (f": {busy - earlier}% on the profiled steps' kernels, "
                     f"{earlier}% still finishing steps the host had queued before them")
        return text


def _shares_as_shown(split: "pandas.DataFrame") -> "pandas.DataFrame":  # noqa: F821
    """``split`` (a :meth:`ProfileResult.launch_split`) whose "share %" is each row's GPU µs per step over the column's
    sum, both as the table shows them: 03 read 0.79 for a row of 248 µs, where 248 ÷ 31,170 (its column's 29,871 + 854
    + 248 + 168 + 28.5) is 0.80. The shares stay unrounded (they add up to 100), so the graphs' share 03 records
    from them reads as the table does to the digits it shows.

    >>> import pandas as pd
    >>> split = pd.DataFrame({"GPU µs per step": [29871.4, 854.3, 247.6, 168.2, 28.46]})
    >>> out = _shares_as_shown(split.assign(**{"share %": 100 * split["GPU µs per step"] / 31169.96}))
    >>> [tables.percent(p) for p in out["share %"]], round(float(out["share %"].sum()), 9)
    (['95.8', '2.7', '0.80', '0.54', '0.091'], 100.0)
    """
    us = tables.shown_numbers(split, "GPU µs per step")
    total = sum(u for u in us if u is not None)
    out = split.copy()
    out.attrs = dict(split.attrs)
    if total > 0:
        out["share %"] = [100 * u / total if u is not None else float("nan") for u in us]
    return out


@dataclasses.dataclass
class ProfileResult:
    """A finished profile of ``active_steps`` steps (see :func:`profile_steps`)."""

    prof: torch.profiler.profile = dataclasses.field(repr=False)
    active_steps: int
    _trace: list[dict] | None = dataclasses.field(default=None, repr=False)
    _raw_trace: bytes | None = dataclasses.field(default=None, repr=False)
    untimed_events: int = 0  # events of the trace without a timestamp, left out of trace_events() (set when read)
    # names of the GPU work in the trace, the warm-up steps' included (set when read)
    _gpu_names: set[str] = dataclasses.field(default_factory=set, repr=False)
    # (start, end, name) of the GPU work launched before the profiled steps, left out of trace_events() (set when read)
    _earlier_gpu: list[tuple[float, float, str]] = dataclasses.field(default_factory=list, repr=False)

    # -- tables -------------------------------------------------------------------------------
    def top_ops(self, n: int = 10, *, sort_by: str = "auto") -> "pandas.DataFrame":  # noqa: F821
        """The ``n`` most expensive ops, times in ms over all profiled steps.

        ``sort_by``: ``"self_device_ms"``, ``"self_cpu_ms"``, ``"device_total_ms"``,
        ``"cpu_total_ms"``, or ``"auto"`` (device self time when a GPU ran, else CPU self time).
        """
        import pandas as pd

        # key_averages() counts the GPU work the warm-up steps launched too (their CPU side is dropped, their
        # kernels are not): a kernel's row takes its calls and time from the trace's kernels launched inside the
        # profiled steps, as top_kernels() does, and a kernel launched only in the warm-up has no row
        in_steps = self._gpu_work_in_steps()
        rows = []
        for e in self.prof.key_averages():
            if e.key.startswith("ProfilerStep"):  # the step markers ("ProfilerStep#3", "ProfilerStep*"): not ops
                continue
            calls = e.count
            dev_self = getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0))
            dev_total = getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0.0))
            if getattr(e, "device_type", DeviceType.CPU) != DeviceType.CPU and e.key in self._gpu_names:
                if e.key not in in_steps:
                    continue
                calls, dev_self = in_steps[e.key]
                dev_total = dev_self
            rows.append(
                {
                    "op": kernel_label(e.key),
                    "calls": calls,
                    "self_cpu_ms": e.self_cpu_time_total / 1e3,
                    "cpu_total_ms": e.cpu_time_total / 1e3,
                    "self_device_ms": dev_self / 1e3,
                    "device_total_ms": dev_total / 1e3,
                }
            )
        df = pd.DataFrame(rows, columns=["op", "calls", "self_cpu_ms", "cpu_total_ms", "self_device_ms", "device_total_ms"])
        if sort_by == "auto":
            sort_by = "self_device_ms" if df["self_device_ms"].sum() > 0 else "self_cpu_ms"
        if sort_by not in df.columns[2:]:
            raise ValueError(f"sort_by={sort_by!r}: use 'auto' or one of {list(df.columns[2:])}.")
        return df.sort_values(sort_by, ascending=False).head(n).reset_index(drop=True)

    def launch_split(self) -> "pandas.DataFrame":  # noqa: F821
        """How the profiled steps' GPU work was launched: replayed inside CUDA graphs, or launched one by one,
        and for the latter what launched it (the outermost op or annotation around the launch: the optimizer's
        ``Optimizer.step#…``, the loss, ``zero_grad``'s fills). One row per (how, launched by): kernels per step,
        GPU µs per step, share of the GPU time (the rows' GPU µs over their sum, as the table shows them:
        :func:`_shares_as_shown`). Empty without kernels (a CPU run)."""
        import pandas as pd

        ev = self.trace_events()
        runtime = {e["args"]["correlation"]: e for e in ev
                   if e["cat"] in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
        outer = [e for e in ev if e["cat"] in ("cpu_op", "user_annotation")
                 and not str(e["name"]).startswith("ProfilerStep#")]
        steps = max(1, self.active_steps)
        rows: dict[tuple[str, str], list[float]] = {}
        for k in (e for e in ev if e["cat"] in GPU_CATEGORIES):
            launch = runtime.get(k.get("args", {}).get("correlation"))
            if launch is not None and "GraphLaunch" in str(launch["name"]):
                key = ("replayed in a CUDA graph", "the graph's one launch")
            else:
                by = "?"
                if launch is not None:
                    around = [o for o in outer if o["ts"] <= launch["ts"] <= o["ts"] + o["dur"]]
                    if around:
                        by = str(max(around, key=lambda o: o["dur"])["name"])
                key = ("launched one by one", by)
            calls_us = rows.setdefault(key, [0, 0.0])
            calls_us[0] += 1
            calls_us[1] += float(k["dur"])
        total = sum(us for _, us in rows.values()) or 1.0
        small = [k for k, (_, us) in rows.items() if k[0] == "launched one by one" and us < total * 1e-3]
        if len(small) > 1:  # a tail of autograd's one-kernel ops: one row says they add up to almost nothing
            others = [0, 0.0]
            for k in small:
                calls, us = rows.pop(k)
                others[0] += calls
                others[1] += us
            rows[("launched one by one", f"{len(small)} others, each under 0.1% of the time")] = others
        df = pd.DataFrame([{"how": how, "launched by": by, "kernels per step": calls / steps,
                            "GPU µs per step": us / steps, "share %": 100 * us / total}
                           for (how, by), (calls, us) in sorted(rows.items(), key=lambda kv: -kv[1][1])],
                          columns=["how", "launched by", "kernels per step", "GPU µs per step", "share %"])
        df.attrs["formats"] = {"how": "text", "launched by": "text"}
        return _shares_as_shown(df)

    def top_kernels(self, n: int = 10) -> "pandas.DataFrame":  # noqa: F821
        """The ``n`` GPU kernels with the most total time over the profiled steps, each with its kind
        (:func:`kernel_kind`), calls, total and mean µs, and share of all kernel time.

        On a CPU there are no kernels: the table lists the aten ops by self CPU time instead
        (column ``source`` says which).
        """
        import pandas as pd

        kernels = [e for e in self.trace_events() if e["cat"] == "kernel"]
        if kernels:
            source, items = "GPU kernel", [(str(e["name"]), float(e["dur"])) for e in kernels]
        else:
            source = "CPU op (no GPU)"
            items = [(e.key, e.self_cpu_time_total / max(1, e.count)) for e in self.prof.key_averages()
                     for _ in range(e.count) if e.key.startswith("aten::")]
        agg: dict[str, list[float]] = {}
        for name, dur in items:
            agg.setdefault(name, []).append(dur)
        total = sum(sum(v) for v in agg.values()) or 1.0
        labels = kernel_labels(list(agg))
        rows = [{"kernel": label, "kind": kernel_kind(name),
                 "calls": len(v), "total_us": sum(v), "mean_us": sum(v) / len(v), "share": sum(v) / total,
                 "source": source} for label, (name, v) in zip(labels, agg.items())]
        df = pd.DataFrame(rows, columns=["kernel", "kind", "calls", "total_us", "mean_us", "share", "source"])
        return df.sort_values("total_us", ascending=False).head(n).reset_index(drop=True)

    def _gpu_work_in_steps(self) -> dict[str, tuple[int, float]]:
        """Per name of GPU work (kernel, copy, memset) launched inside the profiled steps: its calls and µs."""
        out: dict[str, tuple[int, float]] = {}
        for e in self.trace_events():
            if e["cat"] in GPU_CATEGORIES:
                calls, us = out.get(e["name"], (0, 0.0))
                out[e["name"]] = (calls + 1, us + float(e["dur"]))
        return out

    def kind_shares(self) -> dict[str, float]:
        """Share (%) of the profiled GPU time per kind of kernel (convolution, GEMM, pooling, elementwise, …),
        largest first; on a CPU, of the ops' CPU time."""
        df = self.top_kernels(100_000)
        total = float(df["total_us"].sum()) or 1.0
        by_kind = df.groupby("kind")["total_us"].sum().sort_values(ascending=False)
        return {str(k): 100 * float(v) / total for k, v in by_kind.items()}

    # -- the trace ----------------------------------------------------------------------------
    def _trace_bytes(self) -> bytes:
        # Kineto writes a trace only once per profile, and only to a file: write it to a temporary folder that
        # is gone when this call returns, and keep the bytes (a few MB at full scale) with this result. Nothing is
        # left behind, even when the kernel is killed; the copies the learner asks for are written by export_trace.
        if self._raw_trace is None:
            with tempfile.TemporaryDirectory(prefix="gpu-perf-lab-trace-") as folder:
                path = Path(folder) / "trace.json"
                self.prof.export_chrome_trace(str(path))
                self._raw_trace = path.read_bytes()
        return self._raw_trace

    def export_trace(self, path: str | Path) -> Path:
        """Write the Chrome-trace JSON. Open it at https://ui.perfetto.dev, or name it
        ``<logdir>/<name>.pt.trace.json`` for TensorBoard's profiler plugin."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self._trace_bytes())
        return path

    def trace_events(self) -> list[dict]:
        """Complete ('X') events of the trace, each with ``cat``, ``name``, ``ts`` and ``dur`` in µs."""
        if self._trace is None:
            raw = json.loads(self._trace_bytes())
            events = raw["traceEvents"] if isinstance(raw, dict) else raw
            trace = [e for e in events if e.get("ph") == "X" and "dur" in e and str(e.get("cat", "")).lower() in _ROWS]
            # An event at time zero came without a timestamp (seen for every CUDA API call of a profile taken in a
            # notebook on an H100): it cannot be placed on the time axis, and would stretch it to the clock's epoch
            self.untimed_events = sum(1 for e in trace if not e.get("ts"))
            trace = [e for e in trace if e.get("ts")]
            for e in trace:
                e["cat"] = str(e["cat"]).lower()
                if e["cat"] in GPU_CATEGORIES:  # named as key_averages() names it: the trace keeps a few mangled
                    e["name"] = _demangled(str(e["name"]))  # ("_ZN17cutlass__5x_cudnn6Kernel…", one of cuDNN's)
            self._gpu_names = {e["name"] for e in trace if e["cat"] in GPU_CATEGORIES}
            self._trace = _launched_in_active_steps(trace)
            kept = {id(e) for e in self._trace}
            self._earlier_gpu = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in trace
                                 if e["cat"] in GPU_CATEGORIES and id(e) not in kept]
        return self._trace

    def memory_events(self) -> list[dict]:
        """The allocator's events, recorded with ``profile_steps(..., profile_memory=True)``: each with ``ts`` (µs),
        ``device`` (``"cpu"`` or ``"cuda"``), ``bytes`` (+ allocated, − freed) and ``allocated``/``reserved`` totals."""
        raw = json.loads(self._trace_bytes())
        events = raw["traceEvents"] if isinstance(raw, dict) else raw
        out = []
        for e in events:
            if e.get("name") != "[memory]" or "args" not in e:
                continue
            a = e["args"]
            out.append({"ts": float(e["ts"]), "device": "cuda" if a.get("Device Type") == 1 else "cpu",
                        "bytes": int(a.get("Bytes", 0)), "allocated": int(a.get("Total Allocated", 0)),
                        "reserved": int(a.get("Total Reserved", 0))})
        return sorted(out, key=lambda e: e["ts"])

    def kernel_stats(self) -> KernelStats:
        """Kernel count per step, mean kernel duration, and the share of time the GPU was busy.

        The profiled time runs from the first event of the profiled steps to the last. Where the host ran ahead of
        the GPU, the GPU is still running the steps launched before the profile when the profiled steps begin: that
        time counts as busy (it was), and ``earlier_work_share`` says how much of it there was.
        """
        ev = self.trace_events()
        if not ev:
            return KernelStats(0.0, 0.0, 0.0, 0.0)
        kernels = [e for e in ev if e["cat"] == "kernel"]
        gpu = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] in GPU_CATEGORIES]
        start = min(e["ts"] for e in ev)
        end = max(e["ts"] + e["dur"] for e in ev)
        span = max(end - start, 1e-9)
        earlier = [(a, b) for a, b, _ in self._earlier_in(start, end)]
        own = intervals_union_us(gpu)
        busy = intervals_union_us(gpu + earlier)
        steps = max(1, self.active_steps)
        return KernelStats(
            kernels_per_step=len(kernels) / steps,
            mean_kernel_us=sum(e["dur"] for e in kernels) / len(kernels) if kernels else 0.0,
            gpu_busy_share=busy / span if gpu else 0.0,
            span_ms_per_step=span / 1e3 / steps,
            earlier_work_share=(busy - own) / span if gpu else 0.0,
        )

    def _earlier_in(self, start: float, end: float) -> list[tuple[float, float, str]]:
        """The GPU work launched before the profiled steps, clipped to ``[start, end]`` (µs): what of it ran then."""
        self.trace_events()
        return [(max(a, start), min(b, end), name) for a, b, name in self._earlier_gpu if b > start and a < end]

    def timeline_rows(self, *, max_per_row: int = 4000) -> dict[str, list[tuple[float, float, str]]]:
        """The timeline's rows (ranges, CPU ops, CUDA API, GPU kernels, GPU copies), each a list of
        (start ms since the first event, duration ms, name): the ``max_per_row`` longest events of each row.
        A row "GPU, earlier" comes between the kernels and copies where work launched before the profiled steps
        still ran in them (a host that runs ahead of its GPU): without it, that time would look idle."""
        ev = self.trace_events()
        rows: dict[str, list[tuple[float, float, str]]] = {r: [] for r in _TIMELINE_ORDER if r != "GPU, earlier"}
        if not ev:
            return rows
        t0 = min(e["ts"] for e in ev)
        for e in ev:
            rows[_ROWS[e["cat"]]].append(((e["ts"] - t0) / 1e3, e["dur"] / 1e3, str(e["name"])))
        earlier = self._earlier_in(t0, max(e["ts"] + e["dur"] for e in ev))
        if earlier:
            rows["GPU, earlier"] = [((a - t0) / 1e3, (b - a) / 1e3, f"launched before the profiled steps: {name}")
                                    for a, b, name in earlier]
            rows = {r: rows[r] for r in _TIMELINE_ORDER if r in rows}
        return {r: sorted(items, key=lambda it: -it[1])[:max_per_row] for r, items in rows.items()}

    def timeline_figure(self, *, max_events: int = 4000, title: str = "Profiled steps: CPU and GPU on one time axis"):
        """A plotly figure with one row each for ranges (NVTX and profiler steps), CPU ops, CUDA API calls, GPU kernels and copies.

        Blank stretches on the GPU rows are time the GPU sat idle; look at
        what the CPU rows were doing at that moment.
        """
        import plotly.graph_objects as go

        rows = self.timeline_rows(max_per_row=max_events)
        if self.untimed_events:
            title += f" ({self.untimed_events} events came without a timestamp and are left out)"
        fig = go.Figure()
        if not any(rows.values()):
            fig.update_layout(title=title + " (no events recorded)")
            return fig
        order = [r for r in _TIMELINE_ORDER if r in rows]
        span = max((start + dur for items in rows.values() for start, dur, _ in items), default=0.0)
        for row, items in rows.items():
            if not items:
                continue
            # a bar narrower than a pixel draws nothing: copies of a few µs in a span of 100 ms would leave their row
            # looking empty. Each bar is drawn at least 0.2% of the span wide; the hover keeps its own duration.
            shown = [max(dur, span * 0.002) for _, dur, _ in items]
            # a host bar over a tenth of the span (a synchronize the host waited in) says what it is on the bar:
            # a static export has no hover
            named = [name[:40] if dur > span * 0.1 and row in ("CPU ops", "CUDA API") else ""
                     for _, dur, name in items]
            fig.add_trace(
                go.Bar(
                    y=[row] * len(items),
                    x=shown,
                    base=[start for start, _, _ in items],
                    orientation="h",
                    name=row,
                    # opaque and without an outline: at full scale a row is thousands of bars narrower than the
                    # template's pale outline, which would wash the colour out
                    marker=dict(color=TIMELINE_COLORS[row], line_width=0),
                    opacity=1,
                    text=named,
                    textposition="inside",
                    insidetextanchor="middle",
                    textfont=dict(color="white", size=11),
                    hovertext=[name[:80] for _, _, name in items],
                    customdata=[dur for _, dur, _ in items],
                    hovertemplate="%{hovertext}<br>start %{base:.3f} ms, %{customdata:.3f} ms<extra></extra>",
                )
            )
        fig.update_layout(
            title=title,
            barmode="overlay",
            xaxis_title="time since the first profiled event (ms)",
            yaxis=dict(categoryorder="array", categoryarray=list(reversed(order))),
            height=360,
            showlegend=False,
            margin=dict(l=10, r=10, t=50, b=40),
        )
        return fig


@functools.lru_cache(maxsize=None)
def _demangled(name: str) -> str:
    """``name`` demangled as ``torch.profiler`` demangles it for ``key_averages()`` (a name already readable stays)."""
    return torch._C._demangle(name) if len(name) > 1 else name


def _launched_in_active_steps(events: list[dict]) -> list[dict]:
    """``events`` without the GPU work launched outside the profiled steps.

    The profiler's schedule drops the CPU side of its warm-up steps, but the GPU's activity buffers still hand
    over the kernels those steps launched: they would count as the active steps' own (12 calls of a kernel in 3
    steps that launch it 3 times each). A GPU event names its launch by ``correlation`` id (one id for every
    kernel of a CUDA graph replay: the graph's launch); keep those whose launch lies inside a ``ProfilerStep#N``.
    Without launches to match, keep the GPU work that began after the first step began. A trace without step
    markers is returned as it is.
    """
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e["cat"] == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]
    gpu = [e for e in events if e["cat"] in GPU_CATEGORIES]
    if not steps or not gpu:
        return events
    launched = {e["args"]["correlation"] for e in events
                if e["cat"] in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
                and any(a <= e["ts"] <= b for a, b in steps)}
    if launched and all("correlation" in e.get("args", {}) for e in gpu):
        return [e for e in events if e["cat"] not in GPU_CATEGORIES or e["args"]["correlation"] in launched]
    # No launch to match (a trace whose CUDA API events came without timestamps): keep the GPU work that began
    # once the first profiled step had, which is exact for a loop that waits for the GPU at each step's end
    first = min(a for a, _ in steps)
    return [e for e in events if e["cat"] not in GPU_CATEGORIES or e["ts"] >= first]


def profile_steps(
    step_fn: Callable[[], object],
    *,
    wait: int = 1,
    warmup: int = 2,
    active: int = 5,
    record_shapes: bool = False,
    with_stack: bool = False,
    profile_memory: bool = False,
    attempts: int = 2,
) -> ProfileResult:
    """Call ``step_fn`` ``wait + warmup + active`` times under ``torch.profiler`` and keep the active steps.

    The schedule skips the first ``wait`` steps, records but discards
    ``warmup`` steps (the profiler's own start-up cost lands there), and keeps
    ``active`` steps.

    A profile whose GPU events came back without timestamps (seen on an H100 for the first profile taken in a
    Jupyter kernel: every kernel and CUDA API call at time zero, so no timeline) is taken again, up to
    ``attempts`` profiles in all; the last one is returned either way (``ProfileResult.untimed_events`` says).
    """
    if min(wait, warmup) < 0 or active < 1:
        raise ValueError(f"profile_steps needs wait ≥ 0, warmup ≥ 0, active ≥ 1 (got {wait}, {warmup}, {active}).")
    if attempts < 1:
        raise ValueError(f"profile_steps needs attempts ≥ 1 (got {attempts}).")
    for _ in range(attempts):
        res = _profile_once(step_fn, wait=wait, warmup=warmup, active=active, record_shapes=record_shapes,
                            with_stack=with_stack, profile_memory=profile_memory)
        res.trace_events()  # reading the trace counts the events that came without a timestamp
        if not res.untimed_events:
            break
    return res


def _profile_once(step_fn: Callable[[], object], *, wait: int, warmup: int, active: int, record_shapes: bool,
                  with_stack: bool, profile_memory: bool) -> ProfileResult:
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(
        activities=activities,
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        record_shapes=record_shapes,
        with_stack=with_stack,
        profile_memory=profile_memory,
        acc_events=True,  # one cycle only; without it torch warns that it clears events between cycles
    ) as prof:
        for _ in range(wait + warmup + active):
            step_fn()
            prof.step()  # the profiler marks each step as a "ProfilerStep#N" annotation
    return ProfileResult(prof=prof, active_steps=active)


def python_hotspots(fn: Callable[[], object], *, repeats: int = 1, top: int = 10) -> "pandas.DataFrame":  # noqa: F821
    """cProfile ``fn`` (called ``repeats`` times): the functions with the most self time.

    Shows what the host does between GPU launches: PIL resizes, ``ToTensor``,
    collation, the waits inside ``synchronize`` and ``.item()``.
    """
    import pandas as pd

    pr = cProfile.Profile()
    pr.enable()
    try:
        for _ in range(repeats):
            fn()
    finally:
        pr.disable()
    stats = pstats.Stats(pr).stats  # {(file, line, func): (cc, nc, tottime, cumtime, callers)}
    rows = [
        {
            "function": f"{Path(file).name}:{line}({func})" if file != "~" else func,
            "calls": nc,
            "self_ms": tt * 1e3,
            "cumulative_ms": ct * 1e3,
        }
        for (file, line, func), (cc, nc, tt, ct, _callers) in stats.items()
    ]
    df = pd.DataFrame(rows)
    # Self time, not cumulative: cumulative puts every wrapper (the loop, DataLoader.__next__) on top.
    return df.sort_values("self_ms", ascending=False).head(top).reset_index(drop=True)
