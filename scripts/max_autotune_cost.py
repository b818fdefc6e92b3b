#!/usr/bin/env python3
"""What ``torch.compile(mode="max-autotune")`` costs on the full reference step, recorded for 03_kernels.

    python3 scripts/max_autotune_cost.py        # on a GPU node; a few minutes; writes results/<gpu>.json

03_kernels shows max-autotune on a small model (its kernel search for the full training step takes
minutes, more than a notebook cell should). This script measures the full step once per GPU model:
the reference step (bf16, channels_last, batch 512, the batch already on the GPU) compiled in the
default mode and in max-autotune, each in a fresh compile, and records
``max_autotune_ref_compile_s``, ``max_autotune_ref_speedup_vs_default``, ``max_autotune_ref_img_per_s``
and ``default_ref_compile_s``. The notebook prints them when this GPU model's results file has them.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    os.environ["HELPERS_SCALE"] = "full"
    # A cache of its own: the compile is measured cold, as on a fresh machine, and the notebooks run after this
    # script still compile cold too.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="gpu-perf-lab-autotune-"))
    sys.path.insert(0, str(ROOT))
    import dataclasses

    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA GPU is visible; max-autotune's cost is a GPU figure. Run this on a GPU node.",
              file=sys.stderr)
        return 2
    from helpers import results, train
    from helpers.kernels import compile_modes

    cfg = train.TrainConfig(batch_size=512, image_size=224, data="gpu", dtype="bf16", channels_last=True,
                            cudnn_benchmark=True, compile=True)
    timings = []
    for mode in ("default", "max-autotune"):
        torch._dynamo.reset()  # each mode compiles afresh
        t = compile_modes.time_train_step(dataclasses.replace(cfg, compile_mode=mode), label=mode)
        print(f"{mode:14s} first call {t.compile_s:7.1f} s, step {t.step.median_ms:.2f} ms ({t.items_per_s:,.0f} img/s)",
              flush=True)
        timings.append(t)
    default, auto = timings
    path = results.record({
        "default_ref_compile_s": default.compile_s,
        "max_autotune_ref_compile_s": auto.compile_s,
        "max_autotune_ref_img_per_s": auto.items_per_s,
        "max_autotune_ref_speedup_vs_default": default.step.median_ms / auto.step.median_ms,
    })
    print(f"recorded in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
