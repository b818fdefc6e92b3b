"""NVML, safely: the one place that imports ``pynvml``.

NVML is the driver's management library (what ``nvidia-smi`` reads). The
maintained Python binding is the ``nvidia-ml-py`` package, imported as
``pynvml``. Everything here degrades to ``None`` with one printed sentence
when NVML is missing (a CPU machine, a container without the driver's
library, the wrong package), so notebooks never show a traceback for it::

    from helpers import nvml
    info = nvml.driver_info()           # DriverInfo(...) or None
    h = nvml.handle_for_cuda_device(0)  # NVML handle of CUDA device 0, or None
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import threading
from types import ModuleType
from typing import Any

from . import notices

__all__ = [
    "NvmlUnavailable",
    "DriverInfo",
    "load",
    "available",
    "driver_info",
    "handle_for_cuda_device",
    "gpm_supported",
    "disable_gpm",
    "gpm_disabled",
    "mig_enabled",
    "reset_for_tests",
]

_lock = threading.Lock()
_state: dict[str, Any] = {"module": None, "tried": False, "why": None, "no_gpm": None}


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used here; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class DriverInfo:
    """The driver as NVML reports it."""

    driver: str
    nvml: str
    cuda_driver: str  # highest CUDA version the driver supports, e.g. "13.0"


def _say_once(key: str, msg: str) -> None:
    notices.say_once(f"nvml:{key}", msg)


def _check_binding(mod: ModuleType) -> str | None:
    """Why this ``pynvml`` is the wrong one, or None if it is nvidia-ml-py."""
    try:
        dists = importlib.metadata.packages_distributions().get("pynvml", [])
    except Exception:  # pragma: no cover - metadata is best effort
        dists = []
    if "nvidia-ml-py3" in dists or not hasattr(mod, "nvmlDeviceGetHandleByUUID"):
        return (
            "The installed 'pynvml' module comes from an old, unmaintained package "
            f"({', '.join(dists) or 'unknown'}). Uninstall it and install NVIDIA's binding: "
            "pip uninstall -y nvidia-ml-py3 pynvml && pip install nvidia-ml-py"
        )
    return None


def load(*, quiet: bool = False) -> ModuleType | None:
    """The initialised ``pynvml`` module, or None (with one sentence printed saying why)."""
    with _lock:
        if not _state["tried"]:
            _state["tried"] = True
            _state["module"], _state["why"] = _try_init()
        mod, why = _state["module"], _state["why"]
    if mod is None and why and not quiet:
        _say_once("nvml", f"NVML unavailable: {why}")
    return mod


def _try_init() -> tuple[ModuleType | None, str | None]:
    try:
        mod = importlib.import_module("pynvml")
    except ImportError:
        return None, "the 'nvidia-ml-py' package is not installed (pip install nvidia-ml-py)."
    wrong = _check_binding(mod)
    if wrong:
        return None, wrong
    try:
        mod.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        text = str(e) or type(e).__name__
        return None, (
            f"{text}. No NVIDIA driver is reachable from this process: GPU telemetry is off "
            "(expected on a CPU machine; on a GPU host, check that the driver is loaded: nvidia-smi)."
        )
    return mod, None


def available() -> bool:
    """True when NVML initialised (prints nothing)."""
    return load(quiet=True) is not None


def reset_for_tests(module: ModuleType | None = None, why: str | None = None) -> None:
    """Forget the cached NVML state; with ``module`` set, use it as the (fake) binding."""
    with _lock:
        _state.update(module=module, why=why, tried=module is not None or why is not None, no_gpm=None)
    notices.forget("nvml:")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def driver_info() -> DriverInfo | None:
    """Driver, NVML and CUDA-driver versions, or None without NVML."""
    nv = load()
    if nv is None:
        return None
    try:
        cuda = nv.nvmlSystemGetCudaDriverVersion()
        return DriverInfo(
            driver=_text(nv.nvmlSystemGetDriverVersion()),
            nvml=_text(nv.nvmlSystemGetNVMLVersion()),
            cuda_driver=f"{cuda // 1000}.{(cuda % 1000) // 10}",
        )
    except Exception as e:
        _say_once("driver", f"NVML could not report the driver version: {e}")
        return None


def handle_for_cuda_device(index: int = 0) -> Any | None:
    """The NVML handle of CUDA device ``index``, matched by UUID.

    CUDA and NVML number GPUs differently: ``CUDA_VISIBLE_DEVICES=2,0`` makes
    NVML's GPU 2 CUDA's device 0, and CUDA may order by speed. Matching by the
    UUID both report is the only mapping that is always right.
    """
    nv = load()
    if nv is None:
        return None
    import torch

    uuid = None
    if torch.cuda.is_available() and index < torch.cuda.device_count():
        raw = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        if raw is not None:
            uuid = str(raw)
            uuid = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    try:
        if uuid is not None:
            return nv.nvmlDeviceGetHandleByUUID(uuid)
        return nv.nvmlDeviceGetHandleByIndex(index)
    except Exception as e:
        _say_once(f"handle{index}", f"NVML has no handle for CUDA device {index}: {e}")
        return None


def disable_gpm(why: str) -> None:
    """Answer as a GPU without GPM does from now on (a learner-machine profile standing in for one)."""
    _state["no_gpm"] = why


def gpm_disabled() -> str | None:
    """Why GPM was turned off (:func:`disable_gpm`), or None."""
    return _state["no_gpm"]


def gpm_supported(handle: Any) -> bool:
    """True when the GPU offers GPM metrics (Hopper and newer, not inside most MIG setups) and no profile
    standing in for an older GPU turned them off (:func:`disable_gpm`)."""
    nv = load(quiet=True)
    if _state["no_gpm"] is not None or nv is None or handle is None or not hasattr(nv, "nvmlGpmQueryDeviceSupport"):
        return False
    try:
        return bool(nv.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)
    except Exception:
        return False


def mig_enabled(handle: Any) -> bool | None:
    """True if MIG is on, False if off, None if the GPU has no MIG or NVML cannot say."""
    nv = load(quiet=True)
    if nv is None or handle is None:
        return None
    try:
        current, _pending = nv.nvmlDeviceGetMigMode(handle)
        return bool(current)
    except Exception:
        return None
