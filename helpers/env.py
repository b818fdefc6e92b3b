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


def device() -> "torch.device":  # noqa: F821 - torch imported lazily
    """The device the course trains on: the current CUDA GPU, else the CPU (said once)."""
    import torch

    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    say_once(
        "no-gpu",
        "No CUDA GPU visible: running on the CPU at smoke scale. Every cell still runs; the "
        "numbers are small and not the course's figures. On a notebook host, pick a GPU "
        "runtime; on a cluster, run on a GPU node (see README: 'Running on a GPU node').",
    )
    return torch.device("cpu")


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
        ]


def collect() -> EnvReport:
    """Gather versions and the GPU's description without printing."""
    import torch

    from . import nvml

    name = cap = mem = None
    count = 0
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        name, count = props.name, torch.cuda.device_count()
        cap = f"{props.major}.{props.minor}"
        mem = props.total_memory / 2**30
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
    )


def report() -> EnvReport:
    """Print versions, the GPU and the scale; return them as an :class:`EnvReport`."""
    rep = collect()
    print("\n".join(rep.lines()))
    if rep.device_name is None:
        device()  # prints the no-GPU notice once
    return rep
