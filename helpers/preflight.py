"""Preflight: can this machine run the course at full scale, and if not, what to do.

    pf = preflight.run()
    pf.table()          # a table to read, every word of it: check, status, detail, what to do (.data: the DataFrame)
    pf.ok_for_full      # True when a CUDA GPU is usable

Nothing here raises: a missing piece is a row that says how to fix it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
from typing import Literal

from . import env, nvml, tables

__all__ = ["Check", "Preflight", "run"]

Status = Literal["ok", "warn", "missing", "info"]
# marks DejaVu Sans has, in their text forms (no emoji: an empty box where no emoji font is installed)
_ICON = {"ok": "✓", "warn": "⚠", "missing": "✗", "info": "ℹ"}


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


@dataclasses.dataclass(frozen=True)
class Preflight:
    checks: tuple[Check, ...]
    scale: env.Scale

    @property
    def ok_for_full(self) -> bool:
        return all(c.status != "missing" for c in self.checks if c.name in ("GPU", "PyTorch CUDA build"))

    def table(self) -> tables.Table:
        """Every check as a row, shown whole: a notebook's DataFrame view cuts text at 50 characters ("...") and
        would hide the advice a learner needs when something is missing. ``.data`` is the DataFrame."""
        import pandas as pd

        df = pd.DataFrame(
            [{"check": c.name, "status": f"{_ICON[c.status]} {c.status}", "detail": c.detail, "what to do": c.fix}
             for c in self.checks]
        )
        return tables.Table(df, df.style.hide(axis="index").set_properties(**{"text-align": "left"}))

    def __str__(self) -> str:
        return "\n".join(f"{_ICON[c.status]} {c.name}: {c.detail}" + (f"  → {c.fix}" if c.fix else "") for c in self.checks)


def _gpu_checks() -> list[Check]:
    import torch

    out: list[Check] = []
    if torch.version.cuda is None:
        out.append(Check("PyTorch CUDA build", "missing", f"torch {torch.__version__} is a CPU-only build",
                         "install a CUDA build of PyTorch (pip install torch from PyPI on Linux x86_64)"))
    else:
        out.append(Check("PyTorch CUDA build", "ok", f"torch {torch.__version__} built for CUDA {torch.version.cuda}"))
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        out.append(Check("GPU", "ok", f"{p.name}, compute capability {p.major}.{p.minor}, "
                                      # to the tenth, as the free-memory line below and the environment table
                                      # print it (00 read "140 GiB" beside "139.8 GiB" for one card)
                                      f"{p.total_memory / 2**30:.1f} GiB, {p.multi_processor_count} SMs"))
        free, total = torch.cuda.mem_get_info()
        status: Status = "ok" if free > 0.5 * total else "warn"
        out.append(Check("GPU memory free", status, f"{free / 2**30:.1f} of {total / 2**30:.1f} GiB",
                         "" if status == "ok" else "another process holds GPU memory (nvidia-smi shows which); "
                                                   "full-scale runs may run out of memory"))
    else:
        has_smi = shutil.which("nvidia-smi") is not None
        fix = ("the driver is there but PyTorch sees no GPU: check CUDA_VISIBLE_DEVICES and that torch is a CUDA build"
               if has_smi else
               "no NVIDIA driver here. On a notebook host, switch the runtime to a GPU (Colab: Runtime → Change runtime "
               "type → GPU) and restart; on a cluster, run on a GPU node (e.g. srun --gres=gpu:1 make lab). "
               "Everything still runs at smoke scale on the CPU.")
        out.append(Check("GPU", "missing", "PyTorch sees no CUDA GPU", fix))
    return out


def _nvml_checks() -> list[Check]:
    import torch

    out: list[Check] = []
    info = nvml.driver_info()
    if info is None:
        out.append(Check("NVML", "missing" if torch.cuda.is_available() else "info",
                         "NVML (the driver's monitoring library) is not reachable",
                         "pip install nvidia-ml-py; on a GPU host check that nvidia-smi works"
                         if torch.cuda.is_available() else "expected without a GPU: the monitor shows CPU and host memory"))
        return out
    out.append(Check("NVIDIA driver", "ok", f"driver {info.driver}, supports CUDA up to {info.cuda_driver}"))
    out.append(Check("NVML", "ok", f"NVML {info.nvml} through nvidia-ml-py"))
    handle = nvml.handle_for_cuda_device(torch.cuda.current_device()) if torch.cuda.is_available() else None
    if handle is None:
        return out
    if nvml.gpm_supported(handle):
        out.append(Check("NVML GPM", "ok", "supported: SM activity, occupancy, tensor-core activity, DRAM bandwidth"))
    else:
        out.append(Check("NVML GPM", "info", "not supported on this GPU (needs Hopper or newer)",
                         "the monitor shows NVML utilisation only, which cannot tell busy SMs from one tiny kernel"))
    mig = nvml.mig_enabled(handle)
    if mig:
        out.append(Check("MIG", "warn", "MIG is on: this process sees one slice of the GPU",
                         "figures will be a fraction of the full GPU's; GPM per slice needs the GPU instance id"))
    else:
        out.append(Check("MIG", "ok", "off" if mig is False else "not available on this GPU"))
    return out


def _stack_checks() -> list[Check]:
    missing = [m for m in ("ipywidgets", "plotly", "anywidget", "pandas", "psutil") if importlib.util.find_spec(m) is None]
    if missing:
        return [Check("notebook stack", "missing", f"not importable: {', '.join(missing)}",
                      "run 'make lab' from the repository (it installs everything), or pip install -e ."
                      )]
    return [Check("notebook stack", "ok", "ipywidgets, plotly, anywidget, pandas, psutil")]


def run() -> Preflight:
    """Run every check (a second or two) and return them."""
    checks = [*_gpu_checks(), *_nvml_checks(), *_stack_checks()]
    sc = env.scale()
    why = "a CUDA GPU is visible" if sc == "full" and env.has_cuda() else "no CUDA GPU is visible"
    if os.environ.get(env.SCALE_ENV):
        why = f"{env.SCALE_ENV} is set"
    checks.append(Check("scale", "info", f"{sc} ({why})",
                        "smoke: small runs that prove every cell works; the course's figures come from full scale"
                        if sc == "smoke" else ""))
    checks.append(Check("CPU cores", "info", f"{env.usable_cpus()} usable by this process",
                        "loader workers beyond this number share the same cores"))
    return Preflight(checks=tuple(checks), scale=sc)
