"""Where am I running, and at what scale?

Every notebook starts with::

    from helpers import env
    env.report()            # versions, device, scale; says once if no GPU
    dev = env.device()      # torch.device("cuda") or torch.device("cpu")
    S = env.scale()         # "smoke" on a CPU, "full" on a GPU (HELPERS_SCALE overrides)

Scale decides how big the notebooks' runs are. ``full`` is what the course's
figures are measured at; ``smoke`` is a small run that proves every cell works
on a CPU (CI, Binder, a laptop) in a few minutes.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import platform
import random
import re
from typing import Literal

from . import machine_profiles
from .notices import say_once

__all__ = [
    "Scale",
    "SCALE_ENV",
    "scale",
    "is_full",
    "pick",
    "has_cuda",
    "device",
    "seed_everything",
    "EnvReport",
    "collect",
    "report",
    "gpu_slug",
    "today",
    "usable_cpus",
    "cpu_model",
    "cpu_capability",
    "native_precision",
    "resolve_dtype",
    "autocast_dtype",
    "profile",
    "apply_profile",
    "device_label",
    "gpu_memory_gib",
    "SMALL_GPU_GIB",
]

Scale = Literal["smoke", "full"]
SCALE_ENV = "HELPERS_SCALE"

def has_cuda() -> bool:
    """True when PyTorch can use a CUDA GPU."""
    import torch

    return torch.cuda.is_available()


def scale() -> Scale:
    """``"full"`` or ``"smoke"``: ``HELPERS_SCALE`` if set, else full with a GPU, smoke without.

    >>> os.environ["HELPERS_SCALE"] = "smoke"; scale()
    'smoke'
    """
    raw = os.environ.get(SCALE_ENV, "").strip().lower()
    if raw:
        if raw not in ("smoke", "full"):
            raise ValueError(
                f"{SCALE_ENV}={raw!r} is not a scale: set it to 'smoke' (small, runs on a CPU) "
                "or 'full' (the measured course run, needs a GPU), or unset it."
            )
        if raw == "full" and not has_cuda():
            say_once(
                "full-without-gpu",
                f"{SCALE_ENV}=full but no CUDA GPU is visible: full scale on a CPU would take hours. "
                "Running anyway because you asked; unset it to get smoke scale.",
            )
        return raw  # type: ignore[return-value]
    return "full" if has_cuda() else "smoke"


def is_full() -> bool:
    """True at full scale."""
    return scale() == "full"


def pick(*, smoke, full):
    """The value for the current scale: ``steps = env.pick(smoke=10, full=200)``."""
    return full if is_full() else smoke


def profile() -> "machine_profiles.Profile | None":
    """The learner-machine profile this process runs under (``HELPERS_PROFILE``), or None: this machine as it is.

    >>> os.environ["HELPERS_PROFILE"] = "t4"; profile().sms
    8
    """
    return machine_profiles.selected()


def apply_profile(device_index: int | None = None) -> "machine_profiles.Applied | None":
    """Apply the profile in force to this process: its usable cores now (the helpers do it when imported), its GPU
    limits too when ``device_index`` names the GPU (:func:`device` does it before any kernel runs). Once each."""
    if profile() is None:
        return None
    if device_index is None:
        return machine_profiles.apply_host()
    return machine_profiles.apply_gpu(device_index)


def device_label(name: str | None = None) -> str:
    """This machine's device as every report and record names it: the GPU's name, and the profile it stands in
    for when one is in force (``'NVIDIA H100 80GB HBM3 as t4'``), so a stand-in run is never read as real
    hardware; ``'cpu'`` without a GPU (``'cpu as two-core'`` under a profile)."""
    if name is None:
        import torch

        name = torch.cuda.get_device_name(torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
    p = profile()
    return f"{name} as {p.name}" if p is not None and not name.endswith(f" as {p.name}") else name


def device() -> "torch.device":  # noqa: F821 - torch imported lazily
    """The device the course trains on: the current CUDA GPU, else the CPU (said once). Under a learner-machine
    profile, the GPU comes with the profile's limits (applied here, once, before any kernel runs)."""
    import torch

    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        apply_profile(index)
        _expandable_on_a_small_gpu()
        return torch.device("cuda", index)
    say_once(
        "no-gpu",
        "No CUDA GPU visible: running on the CPU at smoke scale. Every cell still runs; the "
        "numbers are small and not the course's figures. On a notebook host, pick a GPU "
        "runtime; on a cluster, run on a GPU node (see README: 'Running on a GPU node').",
    )
    return torch.device("cpu")


#: At or below this much GPU memory the course's full-scale batches run near the limit (fp32 at batch 256 peaks near
#: 12 GiB), where fragmentation alone can refuse one (04 shows it): the allocator grows segments in place there.
SMALL_GPU_GIB = 24.0


def gpu_memory_gib() -> float | None:
    """The GPU memory this process may use, in GiB: the card's, or a learner-machine profile's limit; None without
    a GPU. Full-scale sizes that need more than a small card has ask it::

        batch = env.pick(smoke=8, full=512 if (env.gpu_memory_gib() or 0) > env.SMALL_GPU_GIB else 256)
    """
    import torch

    if not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device()
    applied = apply_profile(index)
    if applied is not None and applied.memory_gib is not None:
        return applied.memory_gib
    return torch.cuda.get_device_properties(index).total_memory / 2**30


def _expandable_on_a_small_gpu() -> None:
    """On a GPU with little memory (a T4's 15 GiB, or a profile's limit), turn on the caching allocator's
    expandable segments, unless ``PYTORCH_CUDA_ALLOC_CONF`` already says how to allocate. Said once."""
    import torch

    gib = gpu_memory_gib()
    if gib is None or gib > SMALL_GPU_GIB or os.environ.get("PYTORCH_CUDA_ALLOC_CONF"):
        return
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None) or torch.cuda.memory._set_allocator_settings
    setter("expandable_segments:True")
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"  # DDP ranks and other children too
    say_once("expandable-small-gpu",
             f"This GPU gives the course {gib:.0f} GiB: the caching allocator's expandable segments are on "
             "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), so a batch near the limit is not refused because "
             "free memory lies in pieces of the wrong size (04_memory shows that effect). Set PYTORCH_CUDA_ALLOC_CONF "
             "yourself to choose otherwise.")


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and PyTorch (all devices) so runs repeat."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def usable_cpus() -> int:
    """Cores this process may run on (affinity, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def cpu_model() -> str:
    """The host CPU's model name (the data pipeline runs on it), e.g. 'AMD EPYC 9454 48-Core Processor'."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_capability() -> str:
    """The vector instructions PyTorch's CPU kernels use here (``"AVX512"``, ``"AVX2"``, ...), and oneDNN's limit
    when ``ONEDNN_MAX_CPU_ISA`` sets one: ``"AVX2"`` or ``"AVX512 (oneDNN ≤ AVX2)"``."""
    import torch

    cap = torch.backends.cpu.get_cpu_capability()
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip()
    return f"{cap} (oneDNN ≤ {isa})" if isa and isa.upper() != cap.upper() else cap


def native_precision(dtype: str, device: "torch.device | str") -> bool:  # noqa: F821
    """Whether ``device`` computes ``dtype`` ("bf16" or "fp16") in hardware rather than emulating it.

    A GPU without bf16 (before Ampere: a T4, a V100) emulates it; ``torch.cuda.is_bf16_supported()`` counts
    emulation as support unless told not to. A CPU needs AVX-512 bf16 or AMX (and PyTorch's and oneDNN's
    kernels allowed to use them: ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` forbids it); without,
    bf16 runs many times slower than fp32.
    """
    import torch

    dev = torch.device(device)
    if dtype == "fp32":
        return True
    if dev.type == "cuda":
        if dtype == "bf16":
            p = profile()
            if p is not None and not p.bf16:  # standing in for a GPU without bf16
                return False
            return torch.cuda.is_bf16_supported(including_emulation=False)
        return True  # fp16 tensor cores since Volta
    if not torch.backends.cpu.get_cpu_capability().startswith("AVX512"):
        return False
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper() in ("SSE41", "AVX", "AVX2", "AVX2_VNNI"):
        return False
    if dtype == "bf16":
        return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    return torch.cpu._is_amx_fp16_supported()


def resolve_dtype(dtype: str, device: "torch.device | str") -> str:  # noqa: F821
    """The precision the course runs for ``dtype`` on ``device``: itself where the hardware has it, else the
    nearest it has, said once.

    bf16 on a GPU without it (a T4) runs as fp16, which the training loop pairs with ``GradScaler``; bf16 or
    fp16 on a CPU without them runs as fp32 (emulated, they would take a notebook's whole time budget).
    """
    import torch

    dev = torch.device(device)
    if dtype not in ("bf16", "fp16") or native_precision(dtype, dev):
        return dtype
    if dev.type == "cuda":
        name = device_label(torch.cuda.get_device_name(dev))
        p = profile()
        if p is not None and p.stands_for is not None and not p.bf16:
            what = f"{name} (standing in for the {p.stands_for.name}, compute capability {p.stands_for.capability})"
        else:
            major, minor = torch.cuda.get_device_capability(dev)
            what = f"{name} (compute capability {major}.{minor})"
        say_once("no-bf16-gpu",
                 f"{what} has no bf16 arithmetic: the course's bf16 steps run in "
                 "fp16 with torch.amp.GradScaler('cuda') here, which keeps small gradients from rounding to zero. "
                 "The speed-ups are fp16's, on the same tensor cores.")
        return "fp16"
    say_once(f"no-{dtype}-cpu",
             f"This CPU has no {dtype} instructions (PyTorch's CPU kernels: {cpu_capability()}): emulated, {dtype} steps "
             f"run many times slower than fp32, so the course's {dtype} steps run in fp32 here. The speed and memory "
             f"{dtype} saves are GPU figures.")
    return "fp32"


def autocast_dtype(dtype: "str | torch.dtype | None", device: "torch.device | str") -> "torch.dtype | None":  # noqa: F821
    """``torch.autocast``'s dtype for ``dtype`` ("bf16", ``torch.bfloat16``, ...) as :func:`resolve_dtype` resolves
    it on ``device``; None means fp32 (no autocast)::

        low = env.autocast_dtype(torch.bfloat16, dev)     # torch.float16 on a T4, None on a CPU without bf16
        with torch.autocast(dev.type, dtype=low, enabled=low is not None): ...
    """
    import torch

    names = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", None: "fp32"}
    name = names.get(dtype, dtype)
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(resolve_dtype(name, device))


def compile_backend(on: "torch.device | str | None" = None) -> str:  # noqa: F821
    """``torch.compile``'s backend for the device ``on`` (this machine's by default): Inductor on a GPU; on a CPU
    ``aot_eager``, which captures the same graphs (forward and backward, custom ops included) and runs them with
    PyTorch's kernels, because Inductor's C++ build takes minutes on two cores and a CPU's speed is not the point."""
    import torch

    dev = torch.device(on) if on is not None else device()
    return "inductor" if dev.type == "cuda" else "aot_eager"


def today() -> str:
    """Today's date as YYYY-MM-DD (results are dated)."""
    return _dt.date.today().isoformat()


def gpu_slug(name: str | None) -> str:
    """A file-name-safe slug of a device name: ``'NVIDIA H100 80GB HBM3'`` → ``'nvidia-h100-80gb-hbm3'``."""
    if not name:
        return "cpu"
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "cpu"


@dataclasses.dataclass(frozen=True)
class EnvReport:
    """What this machine is: printed by :func:`report`, stored with every result."""

    python: str
    torch: str
    cuda: str | None
    cudnn: int | None
    device_name: str | None
    device_count: int
    capability: str | None
    total_mem_gib: float | None
    driver: str | None
    nvml: bool
    scale: Scale
    cpus: int
    profile: tuple[str, ...] = ()  # what a learner-machine profile limited here, and what it could not

    def lines(self) -> list[str]:
        gpu = (
            f"{self.device_name} ×{self.device_count}, compute capability {self.capability}, "
            f"{self.total_mem_gib:.1f} GiB"
            if self.device_name
            else "none (CPU only)"
        )
        return [
            f"python  {self.python}    torch {self.torch}    CUDA {self.cuda or '-'}    cuDNN {self.cudnn or '-'}",
            f"GPU     {gpu}",
            f"driver  {self.driver or '-'}    NVML {'yes' if self.nvml else 'no'}    usable CPU cores {self.cpus}",
            f"scale   {self.scale}",
            *self.profile,
        ]


def collect() -> EnvReport:
    """Gather versions and the GPU's description without printing."""
    import torch

    from . import nvml

    name = cap = mem = None
    count = 0
    applied = apply_profile()
    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        applied = apply_profile(index) or applied
        props = torch.cuda.get_device_properties(index)
        name, count = device_label(props.name), torch.cuda.device_count()
        cap = f"{props.major}.{props.minor}"
        mem = props.total_memory / 2**30
        if applied is not None and applied.memory_gib is not None:
            mem = applied.memory_gib  # what the allocator may use here
    info = nvml.driver_info()
    return EnvReport(
        python=platform.python_version(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        device_name=name,
        device_count=count,
        capability=cap,
        total_mem_gib=mem,
        driver=info.driver if info else None,
        nvml=info is not None,
        scale=scale(),
        cpus=usable_cpus(),
        profile=tuple(applied.lines()) if applied is not None else (),
    )


def report() -> EnvReport:
    """Print versions, the GPU and the scale; return them as an :class:`EnvReport`."""
    rep = collect()
    print("\n".join(rep.lines()))
    if rep.device_name is None:
        device()  # prints the no-GPU notice once
    return rep
