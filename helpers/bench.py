"""Measuring right: GPU timing, device ceilings, FLOPs and MFU.

GPU work is asynchronous: ``time.time()`` around a kernel launch measures the
launch, not the work. :func:`time_it` records CUDA events around each repeat
(on a CPU it reads ``perf_counter``), warms up first, and reports the median
and spread::

    m = time_it(lambda: a @ b, warmup=3, repeats=20)
    print(m)            # Measurement(median_ms=..., ...)

    c = measure_ceilings()          # bf16 matmul TFLOP/s and copy GB/s of this device
    gf = flops_per_image(ReferenceCNN(224), 224) / 1e9   # ≈ 12 GFLOP forward + backward
    print(mfu(img_per_s=510, flops_per_img=gf * 1e9, peak_tflops=c.matmul_tflops))
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
import time
from typing import Callable

import torch
from torch import nn

from . import env, tables, timebox

__all__ = [
    "RETIME_SPREAD_PCT",
    "steadier",
    "DatasheetPeak",
    "DATASHEET_PEAKS",
    "datasheet_peak",
    "Measurement",
    "time_it",
    "Ceilings",
    "matmul_tflops",
    "copy_gb_per_s",
    "measure_ceilings",
    "session_ceilings",
    "SESSION_HOURS",
    "beside_published",
    "flops_per_image",
    "mfu",
    "flops_rate",
]


@dataclasses.dataclass(frozen=True)
class Measurement:
    """Repeated timings of one thing, in milliseconds."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    repeats: int

    @property
    def spread_pct(self) -> float:
        """Interquartile range as a share of the median: how much to trust a difference."""
        return 100.0 * (self.q3_ms - self.q1_ms) / self.median_ms if self.median_ms else 0.0

    @classmethod
    def of(cls, times_ms: list[float]) -> "Measurement":
        if not times_ms:
            raise ValueError("Measurement.of needs at least one time.")
        t = sorted(times_ms)
        q = statistics.quantiles(t, n=4, method="inclusive") if len(t) > 1 else [t[0]] * 3
        return cls(median_ms=statistics.median(t), q1_ms=q[0], q3_ms=q[2], min_ms=t[0], max_ms=t[-1], repeats=len(t))

    def __str__(self) -> str:
        return f"{self.median_ms:.3f} ms median (IQR {self.q1_ms:.3f}–{self.q3_ms:.3f}, n={self.repeats})"


def _device_of(device: torch.device | str | None) -> torch.device:
    return torch.device(device) if device is not None else env.device()


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


#: The fewest repeats a timing's median and quartiles are taken from (when its time box cuts it short).
MIN_REPEATS = 3

#: A timing whose spread (interquartile range over the median) passes this many percent is taken again.
RETIME_SPREAD_PCT = 10.0


def steadier(measure: Callable[[], Measurement]) -> tuple[Measurement, float | None]:
    """``measure()`` once, and where its spread passes :data:`RETIME_SPREAD_PCT` once more, keeping the steadier
    of the two; with the first timing's spread where it was taken again (None: once was enough). On one H200, 03's
    fused-Adam step read fastest at a 33.5% spread and 07's fused-AdamW rung 15% slower at 18.6%.

        m, first_spread = steadier(lambda: time_it(step, repeats=20))
    """
    first = measure()
    if first.spread_pct <= RETIME_SPREAD_PCT:
        return first, None
    return min(first, measure(), key=lambda m: m.spread_pct), first.spread_pct


def time_it(
    fn: Callable[[], object], *, warmup: int = 3, repeats: int = 20, device: torch.device | str | None = None,
    warmup_s: float = 0.0,
) -> Measurement:
    """Time ``fn()`` ``repeats`` times after ``warmup`` calls; CUDA events on a GPU, ``perf_counter`` on a CPU.

    ``warmup_s``: after those calls, keep calling ``fn()`` until this many seconds of it have run, for a call of a
    millisecond or less that a few calls cannot warm up (a GPU that sat idle is still raising its clocks, and the
    first shape timed pays one-off costs). The repeats stop early at the ``timing_repeats`` time box
    (:mod:`helpers.timebox`), never below :data:`MIN_REPEATS`: a call too slow for that many in the box is still
    timed that many times, and the line the box prints says so.
    """
    if warmup < 0 or repeats < 1 or warmup_s < 0:
        raise ValueError(f"time_it needs warmup ≥ 0, repeats ≥ 1 and warmup_s ≥ 0 (got warmup={warmup}, "
                         f"repeats={repeats}, warmup_s={warmup_s}).")
    dev = _device_of(device)
    for _ in range(warmup):
        fn()
    if warmup_s:
        _sync(dev)
        until = time.perf_counter() + warmup_s
        while time.perf_counter() < until:
            fn()
            _sync(dev)  # note: a CPU-GPU sync point, so the seconds are the GPU's work, not only the launches
    # The minimum is kept even past the box: a median needs a few repeats, and one call's cost is bounded by the
    # caller's choice of size. The box trims the repeats beyond it, and says so once per process.
    win = timebox.window("timing_repeats", planned=repeats, minimum=MIN_REPEATS, keep_minimum=True, unit="repeats",
                         say="once")
    times: list[float] = []
    if dev.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        torch.cuda.synchronize(dev)
        for s, e in zip(starts, ends):
            if not win.more():  # the host's clock: launches run ahead of the GPU, so the box is a safety net here
                break
            s.record()
            fn()
            e.record()
            win.tick()
        torch.cuda.synchronize(dev)  # note: events are read only after the GPU has reached them
        times = [s.elapsed_time(e) for s, e in list(zip(starts, ends))[:win.done]]
    else:
        while win.more():
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
            win.tick()
    return Measurement.of(times)


@dataclasses.dataclass(frozen=True)
class Ceilings:
    """What this device can do at best, measured here: the roofs for every later figure."""

    device_name: str
    matmul_tflops: float
    matmul_dtype: str
    matmul_n: int
    copy_gb_per_s: float  # bytes read + bytes written, per second
    copy_bytes: int
    # Whether the matmul ceiling bounds what a run reaches, so MFU and "at most N× here" mean something. On a GPU
    # it does. On a CPU it is a small fp32 matmul measured in a moment, and training passes it (oneDNN's kernels,
    # caches and clocks): 06's smoke runs printed MFU 142% and speed-ups above their bound. See NOT_A_BOUND.
    bounds: bool = True
    # The maker's data sheet for this GPU (dense tensor-core peak, no sparsity; None where the course knows none):
    # MFU as the PaLM paper defines it divides by this, not by what this device measured (datasheet_peak says how).
    datasheet_tflops: float | None = None
    datasheet_gpu: str | None = None
    # When it was measured (UTC, ISO 8601), and whether this notebook took it from the session's earlier measurement
    # (session_ceilings) rather than measuring it itself: every notebook of a session divides by the same figures.
    measured_at: str | None = None
    reused: bool = False

    @property
    def provenance(self) -> str:
        """Where the measured ceilings come from, in words (a data sheet figure printed beside them is never
        measured): ``"ceilings measured now; no earlier notebook of this session had measured them"``, or
        ``"ceilings measured at 04:12 UTC today and reused: every notebook of this session divides by the same
        ceilings"``."""
        if not self.reused or not self.measured_at:
            return "ceilings measured now; no earlier notebook of this session had measured them"
        import datetime as dt

        when = dt.datetime.fromisoformat(self.measured_at)
        day = "today" if when.date() == dt.datetime.now(dt.timezone.utc).date() else when.strftime("%Y-%m-%d")
        return (f"ceilings measured at {when:%H:%M} UTC {day} and reused: every notebook of this session divides by "
                "the same ceilings")

    def datasheet_mfu_pct(self, mfu_pct: float | None) -> float | None:
        """An MFU against the measured ceiling (in %) as a share of the data sheet's peak instead: lower wherever
        the measured matrix product falls short of the data sheet (it always does). None without a data sheet
        figure, or where the ceiling bounds nothing (a CPU)."""
        if mfu_pct is None or not self.bounds or not self.datasheet_tflops or math.isnan(mfu_pct):
            return None
        return mfu_pct * self.matmul_tflops / self.datasheet_tflops

    def mfu_pcts(self, img_per_s: float, flops_per_img: float) -> tuple[float, float | None]:
        """``(MFU %, MFU % of the data sheet's peak)`` of a run at ``img_per_s``: its share of
        :meth:`img_per_s_ceiling`, from the peaks and the FLOPs as printed, so a reader's division agrees with the
        share to its last digit (06 read MFU 33.2% where 22,117 img/s × 12.06 GFLOP ÷ 805 TFLOP/s is 33.1%). The
        data sheet's share is None without its figure, or where the ceiling bounds nothing (a CPU).

            mfu, sheet = session.ceilings.mfu_pcts(img_per_s, session.flops_per_image)
        """
        mfu = 100 * img_per_s / self.img_per_s_ceiling(flops_per_img)
        if not self.bounds or not self.datasheet_tflops or math.isnan(mfu):
            return mfu, None
        return mfu, datasheet_share_pct(mfu, self.matmul_tflops, self.datasheet_tflops)

    def mfu_text(self, mfu: float, *, sheet_pct: float | None = None) -> str:
        """An MFU (a fraction of the measured ceiling) in words, with the data sheet's share beside it where the
        course knows the GPU's figure: ``"0.9% of the 790 TFLOP/s bfloat16 ceiling measured here; 0.7% of the
        NVIDIA H100 SXM data sheet's dense 989 TFLOP/s"``. ``sheet_pct``: that share, where the caller computed it
        (:meth:`mfu_text_of_rate`); else it follows from ``mfu``."""
        text = f"{mfu:.1%} of the {self.matmul_rate} {self.matmul_dtype} ceiling measured here"
        if not self.bounds:
            return text + " (not a bound on a CPU: its small fp32 matmul, measured in a moment, training can pass)"
        sheet = sheet_pct if sheet_pct is not None else self.datasheet_mfu_pct(100 * mfu)
        if sheet is not None:
            text += (f"; {sheet:.1f}% of the {self.datasheet_gpu} data sheet's dense "
                     f"{flops_rate(self.datasheet_tflops)}")
        return text

    def mfu_text_of_rate(self, tflops: float) -> str:
        """:meth:`mfu_text` for a FLOP rate printed just before it, each share the reader's division of that rate by
        the ceiling as printed (07 read "= 445 TFLOP/s, MFU 55.8% of the 797 TFLOP/s", where 445 ÷ 797 is 55.8 only
        by the unrounded 797.4)::

            ceil.mfu_text_of_rate(flops_rate_as_shown(achieved))
        """
        if not self.bounds:
            return self.mfu_text(tflops / self.matmul_tflops)
        sheet = 100 * tflops / flops_rate_as_shown(self.datasheet_tflops) if self.datasheet_tflops else None
        return self.mfu_text(tflops / flops_rate_as_shown(self.matmul_tflops), sheet_pct=sheet)

    def img_per_s_ceiling(self, flops_per_img: float) -> float:
        """The compute-bound ceiling for a workload: what img/s would be at the matmul rate. From the rate as printed
        (:attr:`matmul_rate`, three figures) and the FLOPs per image to four (12.06 GFLOP), as the notebooks print
        them beside it: 01 and 06 read 66,712 img/s beside "805 TFLOP/s" and "12.06 GFLOP", where 805 ÷ 12.06 is
        66,750, the figure 00 records from the same two inputs.

            c.img_per_s_ceiling(12.0615e9)   # 805 TFLOP/s measured as 804.65: 66,750
        """
        return img_per_s_ceiling(self.matmul_tflops, flops_per_img)

    @property
    def matmul_rate(self) -> str:
        """The matmul ceiling in the unit that reads: ``"989 TFLOP/s"`` on a GPU, ``"352 GFLOP/s"`` on a CPU."""
        return flops_rate(self.matmul_tflops)


@dataclasses.dataclass(frozen=True)
class DatasheetPeak:
    """A GPU's dense tensor-core peak as its maker's data sheet states it (without sparsity): a published figure,
    not a measurement, and the denominator of MFU in the PaLM paper's definition."""

    gpu: str
    tflops: float
    dtype: str


#: (what the device's name contains, its data sheet's dense peak), first match first. Only GPUs whose name says
#: which variant they are: an "H100 NVL" or a board the table does not name gets no figure, not a neighbour's.
DATASHEET_PEAKS: tuple[tuple[str, DatasheetPeak], ...] = (
    ("H100 80GB HBM3", DatasheetPeak("NVIDIA H100 SXM", 989.4, "bf16")),
    ("H100 PCIe", DatasheetPeak("NVIDIA H100 PCIe", 756.0, "bf16")),
    ("H200", DatasheetPeak("NVIDIA H200", 989.4, "bf16")),
    ("A100", DatasheetPeak("NVIDIA A100", 312.0, "bf16")),
    ("L40S", DatasheetPeak("NVIDIA L40S", 362.05, "bf16")),
    ("NVIDIA L4", DatasheetPeak("NVIDIA L4", 121.0, "bf16")),
    ("Tesla T4", DatasheetPeak("NVIDIA T4", 65.0, "fp16")),
)


def datasheet_peak(device_name: str | None) -> DatasheetPeak | None:
    """The data sheet's dense tensor-core peak for ``device_name`` (as CUDA names it), or, under a learner-machine
    profile, for the GPU the profile stands for; None where the course knows no figure (say so beside MFU).

        datasheet_peak("NVIDIA H100 80GB HBM3")     # DatasheetPeak('NVIDIA H100 SXM', 989.4, 'bf16')
    """
    profile = env.profile()
    if profile is not None and profile.stands_for is not None:
        pub = profile.stands_for
        return DatasheetPeak(pub.name, pub.tensor_tflops, pub.tensor_dtype)
    if device_name is None or "NVL" in device_name:  # the NVL boards run at other clocks than their namesakes
        return None
    return next((peak for key, peak in DATASHEET_PEAKS  # whole words: "NVIDIA L4" is not the start of "L40"
                 if re.search(rf"(?<!\w){re.escape(key)}(?!\w)", device_name)), None)


#: What a notebook prints instead of MFU or a speed-up's bound where the ceiling does not bound (``Ceilings.bounds``).
NOT_A_BOUND = ("not meaningful on this CPU: its ceiling is a small fp32 matmul measured in a moment, and training "
               "passes it (oneDNN's kernels, caches and clocks)")


def flops_rate(tflops: float) -> str:
    """A FLOP rate with three significant figures at most, in TFLOP/s from 1 TFLOP/s up and in GFLOP/s below it
    (a CPU's 0.35 TFLOP/s reads "352 GFLOP/s", not "0 TFLOP/s")::

        flops_rate(786.4) == "786 TFLOP/s"; flops_rate(58.2) == "58.2 TFLOP/s"; flops_rate(0.0352) == "35.2 GFLOP/s"
    """
    value, unit = (tflops, "TFLOP/s") if abs(tflops) >= 1 else (tflops * 1e3, "GFLOP/s")
    return f"{value:,.0f} {unit}" if abs(value) >= 100 else f"{value:.3g} {unit}"


def img_per_s_ceiling(matmul_tflops: float, flops_per_img: float) -> float:
    """:meth:`Ceilings.img_per_s_ceiling` from the two figures: the rate as :func:`flops_rate` prints it over the
    FLOPs per image to four significant figures (the harness derives its figures again from these, so one function
    makes both)."""
    return flops_rate_as_shown(matmul_tflops) * 1e12 / float(f"{flops_per_img:.4g}")


def datasheet_share_pct(mfu_pct: float, matmul_tflops: float, datasheet_tflops: float) -> float:
    """An MFU over the measured ceiling (%) as a share of the data sheet's peak instead, both peaks as printed."""
    return mfu_pct * flops_rate_as_shown(matmul_tflops) / flops_rate_as_shown(datasheet_tflops)


def flops_rate_as_shown(tflops: float) -> float:
    """The TFLOP/s that :func:`flops_rate` prints, as a number: a share computed from it agrees with the rate beside
    it (07 read "433 TFLOP/s … 43.7% of … 989", where 433 ÷ 989 is 43.8%).

        flops_rate_as_shown(432.6) == 433.0; flops_rate_as_shown(0.03524) == 0.0352
    """
    value, unit = flops_rate(tflops).split(" ")
    return tables.as_shown(value) / (1e3 if unit == "GFLOP/s" else 1.0)


def matmul_tflops(
    n: int = 8192, *, dtype: torch.dtype = torch.bfloat16, device: torch.device | str | None = None, repeats: int = 20
) -> tuple[float, Measurement]:
    """TFLOP/s of an ``n×n @ n×n`` matrix product on random data (never zeros: they run faster)."""
    dev = _device_of(device)
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    m = time_it(lambda: a @ b, warmup=3, repeats=repeats, device=dev)
    return 2 * n**3 / (m.median_ms * 1e-3) / 1e12, m


def copy_gb_per_s(
    nbytes: int = 2 * 2**30, *, device: torch.device | str | None = None, repeats: int = 20
) -> tuple[float, Measurement]:
    """Device-to-device copy bandwidth, counting bytes read plus bytes written."""
    dev = _device_of(device)
    n = nbytes // 4
    src = torch.rand(n, device=dev)
    dst = torch.empty_like(src)
    m = time_it(lambda: dst.copy_(src), warmup=3, repeats=repeats, device=dev)
    return 2 * n * 4 / (m.median_ms * 1e-3) / 1e9, m


def measure_ceilings(device: torch.device | str | None = None) -> Ceilings:
    """bf16 matmul TFLOP/s (fp16 on a GPU without bf16) and copy GB/s on a GPU (8192² and 2 GiB); small fp32
    stand-ins on a CPU."""
    dev = _device_of(device)
    sheet = None
    if dev.type == "cuda":
        sheet = datasheet_peak(torch.cuda.get_device_name(dev))
        name = env.device_label(torch.cuda.get_device_name(dev))
        # bf16 where the GPU computes it; fp16 on one without (a T4): the ceiling of the precision the course runs
        n, dtype, nbytes = 8192, env.autocast_dtype(torch.bfloat16, dev), 2 * 2**30
    else:
        import platform

        name = f"CPU ({platform.processor() or platform.machine()}, {env.usable_cpus()} cores)"
        n, dtype, nbytes = 1024, torch.float32, 64 * 2**20
    tflops, _ = matmul_tflops(n, dtype=dtype, device=dev, repeats=20 if dev.type == "cuda" else 5)
    gbs, _ = copy_gb_per_s(nbytes, device=dev, repeats=20 if dev.type == "cuda" else 5)
    return Ceilings(
        device_name=name,
        matmul_tflops=tflops,
        matmul_dtype=str(dtype).removeprefix("torch."),
        matmul_n=n,
        copy_gb_per_s=gbs,
        copy_bytes=nbytes,
        bounds=dev.type == "cuda",
        datasheet_tflops=sheet.tflops if sheet else None,
        datasheet_gpu=sheet.gpu if sheet else None,
        measured_at=_utc_now(),
    )


#: How long a session's ceilings are reused on one machine (and never past a reboot): a day's course, not a week's.
SESSION_HOURS = 12.0


def _utc_now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _machine_identity(dev: torch.device) -> dict[str, str]:
    """What must match for ceilings measured earlier to be this machine's now: the same boot, the same device (a
    GPU's UUID; a CPU's kernels and usable cores), the same PyTorch, the same learner-machine profile."""
    import pathlib

    try:
        boot = pathlib.Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:  # not Linux: the age limit alone bounds the reuse
        boot = "unknown"
    p = env.profile()
    ident = {"boot": boot, "torch": torch.__version__, "profile": p.name if p is not None else "none"}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        ident["device"] = f"{props.name} {getattr(props, 'uuid', '')}"
    else:
        ident["device"] = f"cpu {torch.backends.cpu.get_cpu_capability()} {env.usable_cpus()} cores"
    return ident


def _session_file(ident: dict[str, str]) -> "pathlib.Path":  # noqa: F821
    import hashlib

    from . import results

    key = hashlib.sha1(repr(sorted(ident.items())).encode()).hexdigest()[:16]
    return results.results_dir() / "local" / "ceilings" / f"{key}.json"


def session_ceilings(device: torch.device | str | None = None, *, fresh: bool = False) -> Ceilings:
    """This machine's ceilings, measured once a session and reused by every notebook after, so that MFU and every
    share of a roof divide by the same figures all day (measured again, each notebook read its own: 784, 785 and
    807 TFLOP/s in one run of 00, 03 and 06 on one H100).

        ceil = session_ceilings(fresh=True)   # 00_setup: measure now, and keep it for the session
        ceil = session_ceilings()             # every later notebook: the session's, or measured now if none
        print(ceil.provenance)                # "ceilings measured at 04:12 UTC today and reused: ..."

    Kept in ``results/local/ceilings/`` (ignored by git) for :data:`SESSION_HOURS` hours, and only while the machine
    is the one that measured them: the same boot, device, PyTorch and learner-machine profile. A file that cannot
    be read is measured over, never trusted."""
    import datetime as dt
    import json
    import os

    dev = _device_of(device)
    ident = _machine_identity(dev)
    path = _session_file(ident)
    if not fresh:
        try:
            saved = json.loads(path.read_text())
            ceil = Ceilings(**saved["ceilings"])
            age = dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(ceil.measured_at)
            age_h = age.total_seconds() / 3600
            if saved.get("identity") == ident and 0 <= age_h < SESSION_HOURS:
                return dataclasses.replace(ceil, reused=True)
        except (OSError, ValueError, TypeError, KeyError):
            pass  # none yet, another machine's, or unreadable: measure
    ceil = measure_ceilings(dev)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # whole or not at all: notebooks may run side by side
        tmp.write_text(json.dumps({"identity": ident, "ceilings": dataclasses.asdict(ceil)}, indent=2) + "\n")
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only checkout: each notebook measures its own, as before
    return ceil


def beside_published(ceilings: Ceilings) -> "pandas.DataFrame | None":  # noqa: F821
    """Under a learner-machine profile, the ceilings measured here beside the published ones of the GPU it stands
    for (the distance between them is what the stand-in cannot imitate); None without one."""
    import pandas as pd

    p = env.profile()
    if p is None or p.stands_for is None:
        return None
    pub = p.stands_for
    rows = [(f"{ceilings.matmul_dtype} matmul TFLOP/s", ceilings.matmul_tflops, pub.tensor_tflops, pub.tensor_dtype),
            ("copy GB/s (read + write)", ceilings.copy_gb_per_s, pub.memory_gb_per_s, "memory bandwidth")]
    df = pd.DataFrame([{"ceiling": name, f"measured as {p.name}": here, f"{pub.name}, published": sheet,
                        "measured ÷ published": here / sheet, "published as": what}
                       for name, here, sheet, what in rows]).set_index("ceiling")
    df.attrs["formats"] = {"measured ÷ published": "sig", "published as": "text"}
    return df


def flops_per_image(model: nn.Module, image_size: int, *, backward: bool = True, batch: int = 2) -> float:
    """FLOPs per image of a forward (and backward) pass, counted by ``FlopCounterMode``.

    Counted on the ``meta`` device: shapes only, no arithmetic, so it is
    instant on any machine and does not touch the model's real weights.
    """
    from torch.func import functional_call
    from torch.utils.flop_counter import FlopCounterMode

    meta_state = {
        name: torch.empty_like(t, device="meta").requires_grad_(t.requires_grad)
        for name, t in [*model.named_parameters(), *model.named_buffers()]
    }
    x = torch.randn(batch, 3, image_size, image_size, device="meta")
    with FlopCounterMode(display=False) as counter:
        out = functional_call(model, meta_state, (x,))
        if backward:
            out.sum().backward()
    return counter.get_total_flops() / batch


def mfu(*, img_per_s: float, flops_per_img: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation: achieved FLOP/s as a share (0–1) of the stated peak."""
    if peak_tflops <= 0:
        raise ValueError(f"peak_tflops={peak_tflops} must be positive (measure it with measure_ceilings()).")
    return img_per_s * flops_per_img / (peak_tflops * 1e12)
