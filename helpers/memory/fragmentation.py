"""The allocator's ``expandable_segments`` setting against fragmentation, measured in a fresh process.

    python -m helpers.memory.fragmentation --expandable 1      # prints one JSON line
    compare_expandable()                                        # both settings, side by side (a GPU is needed)

The workload asks for a buffer a little larger at every step (as a batch of growing sequences
does) and frees it. PyTorch's caching allocator keeps each freed block for reuse, but a block
cannot serve a larger request, so every step reserves a new one: reserved memory grows with the
sum of all the sizes while live tensors never exceed the largest. With
``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` the allocator grows one segment in place
instead. The setting must be made before CUDA starts, so each measurement runs in its own process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["workload", "run_in_subprocess", "compare_expandable"]

_ROOT = Path(__file__).resolve().parents[2]


def workload(*, steps: int = 24, step_mib: int = 64) -> dict:
    """Allocate and free buffers of 1, 2, ... ``steps`` × ``step_mib`` MiB; the allocator's peaks, in GiB."""
    import torch

    dev = torch.device("cuda")
    torch.cuda.reset_peak_memory_stats(dev)
    for i in range(1, steps + 1):
        t = torch.empty(i * step_mib * 2**20, dtype=torch.uint8, device=dev)
        t.fill_(1)
        del t
    torch.cuda.synchronize(dev)
    stats = torch.cuda.memory_stats(dev)
    return {"peak_allocated_gib": stats["allocated_bytes.all.peak"] / 2**30,
            "peak_reserved_gib": stats["reserved_bytes.all.peak"] / 2**30,
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}


def run_in_subprocess(expandable: bool, *, timeout_s: float = 120) -> dict:
    """Run :func:`workload` in a fresh Python with expandable segments on or off."""
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=f"expandable_segments:{'True' if expandable else 'False'}")
    env["PYTHONPATH"] = str(_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-m", "helpers.memory.fragmentation", "--expandable", str(int(expandable))],
                          capture_output=True, text=True, timeout=timeout_s, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"the fragmentation workload failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare_expandable():
    """Both settings, one row each: the allocator's peak allocated and reserved GiB."""
    import pandas as pd

    rows = []
    for on in (False, True):
        r = run_in_subprocess(on)
        rows.append({"expandable_segments": on, "peak allocated GiB": r["peak_allocated_gib"],
                     "peak reserved GiB": r["peak_reserved_gib"],
                     "reserved ÷ allocated": r["peak_reserved_gib"] / r["peak_allocated_gib"]})
    return pd.DataFrame(rows).set_index("expandable_segments")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--expandable", type=int, choices=(0, 1), required=True)
    args = ap.parse_args(argv)
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = f"expandable_segments:{'True' if args.expandable else 'False'}"
    print(json.dumps(workload()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
