"""Learner-machine profiles: a large GPU and host made to stand in for the smaller ones learners have.

Most learners run the course on less than we measure it on: a hosted notebook with 2 vCPUs and a T4, a desktop
card. A profile limits this process, and every process it starts, to such a machine, so an instructor with a
large GPU sees what a learner with a small one will see::

    HELPERS_PROFILE=t4 make preview          # or: make preview PROFILE=t4 (every notebook at full scale)

    from helpers import env
    env.profile()                            # the Profile in force, or None
    env.device_label()                       # 'NVIDIA H100 80GB HBM3 as t4': every report, table and record says it

Notebooks and helpers ask :mod:`helpers.env`; this module holds the table (:data:`PROFILES`) and applies a
profile once per process: the host part (usable cores) when the helpers are imported, the GPU part (SMs, memory,
bf16, GPM) when :func:`helpers.env.device` first picks the GPU.

How each limit is made:

- **usable cores**: the process's CPU affinity (``os.sched_setaffinity``), which DataLoader workers, torchrun
  ranks and torch.compile's workers inherit; PyTorch's and OpenMP's thread counts follow it;
- **GPU memory**: the caching allocator's per-process fraction (``torch.cuda.set_per_process_memory_fraction``):
  a run that needs more meets the same out-of-memory error a smaller card gives;
- **SMs**: a CUDA green context (PyTorch ≥ 2.10, driver ≥ 12.8) holding that many SMs. Every stream the process
  uses belongs to it: the current stream, PyTorch's pool of side streams (CUDA-graph captures, torch.compile's
  graph trees, NCCL), and the stream ``torch.cuda.graph`` captures on; so eager kernels, compiled kernels and
  replayed CUDA graphs all run on those SMs. Where green contexts are missing the profile says it cannot limit
  SMs and applies the rest;
- **no bf16, no GPM**: the course's own paths for such GPUs (bf16 steps run as fp16 with a GradScaler; the
  monitor reads NVML without GPM).

What no profile imitates: the smaller card's memory bandwidth (8 of an H100's SMs still reach about twice a T4's
copy rate), its clocks, caches and instruction set (kernels compiled for Hopper still run Hopper's instructions:
flash attention, TMA), its PCIe link, and its driver. Each run records its measured ceilings beside the published
figures of the GPU it stands for (:meth:`Profile.published_figures`), so the distance is in the results.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from typing import Any

from . import notices, nvml, tables

__all__ = ["PROFILE_ENV", "Published", "Profile", "PROFILES", "selected", "Applied", "apply_host", "apply_gpu",
           "applied", "stream_is_green", "forget"]

PROFILE_ENV = "HELPERS_PROFILE"


@dataclasses.dataclass(frozen=True)
class Published:
    """A GPU's published figures: what a profile stands for (the vendor's data sheet, not a measurement)."""

    name: str
    sms: int
    memory_gib: float
    tensor_tflops: float  # dense, in tensor_dtype
    tensor_dtype: str
    memory_gb_per_s: float  # the data sheet's bandwidth; the course's copy ceiling counts read + write the same way
    capability: str


@dataclasses.dataclass(frozen=True)
class Profile:
    """A learner's machine: limits applied to this process and everything it starts. None = as the machine is."""

    name: str
    description: str
    usable_cores: int | None = None
    sms: int | None = None
    gpu_memory_gib: float | None = None
    bf16: bool = True
    gpm: bool = True
    stands_for: Published | None = None

    def limits(self) -> list[str]:
        """The limits in words: ``['8 SMs', '15 GiB of GPU memory', 'no bf16 (fp16 with a GradScaler)', ...]``."""
        out = []
        if self.sms is not None:
            out.append(f"{self.sms} SMs")
        if self.gpu_memory_gib is not None:
            out.append(f"{self.gpu_memory_gib:g} GiB of GPU memory")
        if not self.bf16:
            out.append("no bf16 (fp16 with a GradScaler)")
        if not self.gpm:
            out.append("no GPM")
        if self.usable_cores is not None:
            out.append(f"{self.usable_cores} usable CPU cores")
        return out

    def published_figures(self) -> dict[str, float]:
        """The stood-for GPU's published ceilings, named as the measured ones are (``published_fp16_tflops``,
        ``published_copy_gb_per_s``): results files keep both side by side."""
        p = self.stands_for
        if p is None:
            return {}
        return {f"published_{p.tensor_dtype}_tflops": p.tensor_tflops, "published_copy_gb_per_s": p.memory_gb_per_s}


#: The machines learners have, as this GPU can stand in for them. One table, in one place.
PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("t4", "a hosted notebook's T4: 2 vCPUs, 40 Turing SMs, 16 GB, no bf16, no GPM",
            usable_cores=2, sms=8, gpu_memory_gib=15, bf16=False, gpm=False,
            # 8 of an H100's SMs give about the T4's fp16 tensor rate (measured: 58 TFLOP/s); its bandwidth stays higher
            stands_for=Published("NVIDIA T4", sms=40, memory_gib=15, tensor_tflops=65, tensor_dtype="fp16",
                                 memory_gb_per_s=320, capability="7.5")),
    Profile("two-core", "this GPU on a host with 2 usable CPU cores (a hosted notebook's 2 vCPUs)", usable_cores=2),
)}


def selected() -> Profile | None:
    """The profile ``HELPERS_PROFILE`` names, or None when it is unset or empty."""
    raw = os.environ.get(PROFILE_ENV, "").strip().lower()
    if not raw or raw == "none":
        return None
    if raw not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={raw!r} is not a learner-machine profile: use one of "
                         f"{', '.join(PROFILES)}, or unset it to run on this machine as it is.")
    return PROFILES[raw]


@dataclasses.dataclass
class Applied:
    """What a profile did to this process, and what it could not do (said in the setup report)."""

    profile: Profile
    cores: tuple[int, ...] = ()
    gpu: bool = False  # the GPU part has been applied (or tried)
    sms: int | None = None  # SMs the green context holds; None: not limited
    total_sms: int | None = None
    memory_gib: float | None = None  # the allocator's limit
    total_memory_gib: float | None = None
    cannot: list[str] = dataclasses.field(default_factory=list)  # what it could not limit here, and why
    _keep: list[Any] = dataclasses.field(default_factory=list, repr=False)  # the green context and its streams

    def lines(self) -> list[str]:
        p = self.profile
        stands = f" (stands for {p.stands_for.name})" if p.stands_for else ""
        out = [f"profile {p.name}{stands}: {p.description}"]
        done = []
        if self.sms is not None:
            done.append(f"{self.sms} of {self.total_sms} SMs")
        if self.memory_gib is not None:
            done.append(f"{self.memory_gib:g} of {self.total_memory_gib:.1f} GiB")
        if self.gpu and not p.bf16:
            done.append("no bf16")
        if self.gpu and not p.gpm:
            done.append("no GPM")
        if self.cores:
            done.append(f"CPU cores {','.join(map(str, self.cores))}")
        out.append("        limited to " + (", ".join(done) or "nothing yet"))
        out += [f"        cannot limit {c}" for c in self.cannot]
        if not self.gpu and (p.sms or p.gpu_memory_gib or not p.bf16 or not p.gpm):
            out.append("        its GPU limits apply where a CUDA GPU is")
        return out


_applied: Applied | None = None


def applied() -> Applied | None:
    """What the profile in force did to this process (None without a profile)."""
    return _applied


def _state(profile: Profile) -> Applied:
    global _applied
    if _applied is None or _applied.profile != profile:
        _applied = Applied(profile)
    return _applied


def apply_host(profile: Profile | None = None) -> Applied | None:
    """Limit this process (and what it starts) to the profile's usable cores; name it in every table. Idempotent."""
    profile = profile or selected()
    if profile is None:
        return None
    state = _state(profile)
    stands = f"an {profile.stands_for.name} (not measured on one)" if profile.stands_for else profile.description
    tables.set_device_caption(f"profile {profile.name}: this machine limited to {', '.join(profile.limits())}, "
                              f"standing in for {stands}")
    if profile.usable_cores is not None and not state.cores:
        have = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if not have:
            state.cannot.append("CPU cores: this OS has no CPU affinity")
        else:
            keep = have[:profile.usable_cores]
            if len(have) > len(keep):
                os.sched_setaffinity(0, keep)
            state.cores = tuple(keep)
            n = str(len(keep))
            # Children started from here (workers, ranks, compile workers) size their thread pools from these.
            os.environ["OMP_NUM_THREADS"] = n
            os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = n
            import torch

            torch.set_num_threads(len(keep))
            if "torch._inductor.config" in sys.modules:  # already sized from the whole machine
                sys.modules["torch._inductor.config"].compile_threads = len(keep)
    return state


def apply_gpu(device_index: int, profile: Profile | None = None) -> Applied | None:
    """Apply the profile's GPU limits on CUDA device ``device_index`` (once; before any kernel runs, so every
    stream is made inside the limit). Returns what was applied."""
    profile = profile or selected()
    if profile is None:
        return None
    state = apply_host(profile)
    if state.gpu:
        return state
    state.gpu = True
    import torch

    props = torch.cuda.get_device_properties(device_index)
    state.total_sms, state.total_memory_gib = props.multi_processor_count, props.total_memory / 2**30
    if profile.gpu_memory_gib is not None:
        fraction = min(1.0, profile.gpu_memory_gib * 2**30 / props.total_memory)
        torch.cuda.set_per_process_memory_fraction(fraction, device_index)
        state.memory_gib = min(profile.gpu_memory_gib, state.total_memory_gib)
    if not profile.gpm:
        nvml.disable_gpm(f"the {profile.name} profile stands for a GPU without GPM")
    if profile.sms is not None:
        _limit_sms(state, profile.sms, device_index)
    return state


def _limit_sms(state: Applied, sms: int, device_index: int) -> None:
    import torch

    if sms >= state.total_sms:
        state.cannot.append(f"SMs: this GPU has {state.total_sms}, no more than the profile's {sms}")
        return
    try:
        from torch.cuda.green_contexts import GreenContext

        ctx = GreenContext.create(num_sms=sms, device_id=device_index)
    except Exception as e:  # PyTorch < 2.10, a driver before CUDA 12.8, no cuda.bindings: run the rest
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        state.cannot.append(f"SMs: no CUDA green context here ({reason}); kernels use all {state.total_sms} SMs")
        notices.say_once("profile:no-green", f"⚠ The {state.profile.name} profile cannot limit SMs here ({reason}): "
                                             f"kernels run on all {state.total_sms} SMs, so GPU figures are this "
                                             "GPU's, not the smaller one's. Every other limit applies.")
        return
    with warnings.catch_warnings():  # the context stack is deprecated for user code; here it makes the pool once
        warnings.simplefilter("ignore", FutureWarning)
        ctx.set_context()
        try:
            # PyTorch creates its pool of side streams on first use, in the context current then: inside the green
            # context, every side stream (graph captures, compiled graph trees, NCCL) runs on its SMs.
            torch.cuda.Stream(device_index)
        finally:
            ctx.pop_context()
    main, capture = ctx.Stream(), ctx.Stream()
    torch.cuda.set_stream(main)  # eager and compiled kernels of this thread, and autograd's backward that follows it
    torch.cuda.graph.default_capture_stream = capture  # torch.cuda.graph(g) without a stream captures here
    state._keep += [ctx, main, capture]
    state.sms = sms
    if stream_is_green(torch.cuda.Stream(device_index).cuda_stream) is False:
        state.cannot.append("side streams: PyTorch made its stream pool before the profile was applied, so CUDA "
                            "graphs captured on a side stream and compiled graph trees use every SM")


def stream_is_green(stream_handle: int) -> bool | None:
    """Whether a CUDA stream belongs to a green context (None where the driver bindings cannot say)."""
    try:
        from cuda.bindings import driver

        err, green = driver.cuStreamGetGreenCtx(driver.CUstream(stream_handle))
        return None if int(err) != 0 else int(green) != 0
    except Exception:
        return None


def forget() -> None:
    """Forget what was applied (tests). Limits already set on the process stay."""
    global _applied
    _applied = None
    tables.set_device_caption(None)
