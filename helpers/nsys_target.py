"""What ``nsys`` records for :mod:`helpers.nsys`: a few training steps of the reference CNN, inside one NVTX range.

    python -m helpers.nsys_target --steps 5 --batch 32 --image-size 64   # under nsys profile --capture-range=nvtx
    count_kernels(steps=5, batch=32, image_size=64)     # the kernels the same steps launch, counted by torch.profiler

The steps are the course's own training step (:func:`helpers.train.step_only_trainer`: one batch already on the
device, bf16 autocast, channels_last), so Nsight Systems sees the loop the notebooks time. Three warm-up steps run
first (cuDNN picks its kernels and the allocator fills its cache there); then :data:`CAPTURE_RANGE` opens, each
step runs in its own ``step`` range, and the range closes after the GPU has finished, so every kernel of the
profiled steps lies inside it. nsys records only what happens inside that range.
"""

from __future__ import annotations

import argparse

from . import profiling
from .train import Trainer, TrainConfig, step_only_trainer

__all__ = ["CAPTURE_RANGE", "STEP_RANGE", "WARMUP_STEPS", "make_trainer", "run_steps", "count_kernels", "main"]

#: The NVTX range whose opening starts nsys's recording and whose closing stops it (``--nvtx-capture``).
CAPTURE_RANGE = "profiled_steps"
#: The NVTX range around each profiled step (nsys's NVTX table counts one per step).
STEP_RANGE = "step"
WARMUP_STEPS = 3


def make_trainer(*, batch: int, image_size: int) -> Trainer:
    """The course's training step on one batch already on the device (bf16 autocast where the GPU has it)."""
    cfg = TrainConfig(batch_size=batch, image_size=image_size, dtype="bf16", channels_last=True, data="gpu",
                      dataset_size=batch)
    return step_only_trainer(cfg)


def run_steps(trainer: Trainer, *, steps: int) -> None:
    """Warm up, then run ``steps`` steps inside :data:`CAPTURE_RANGE` (what nsys records)."""
    import torch

    for _ in range(WARMUP_STEPS):
        trainer.step(measure=False)
    if trainer.cuda:
        torch.cuda.synchronize()  # the warm-up's kernels finish before the capture opens: none of them is counted
    with profiling.nvtx_range(CAPTURE_RANGE):
        for _ in range(steps):
            with profiling.nvtx_range(STEP_RANGE):
                trainer.step(measure=False)
        if trainer.cuda:
            torch.cuda.synchronize()  # the profiled steps' kernels finish before the capture closes


def count_kernels(*, steps: int, batch: int, image_size: int) -> int:
    """How many GPU kernels ``steps`` of these steps launch, counted by ``torch.profiler`` in this process (0 on a
    CPU): what nsys should record, so a version that misses kernels is found by measuring, not assumed."""
    trainer = make_trainer(batch=batch, image_size=image_size)
    prof = profiling.profile_steps(lambda: trainer.step(measure=False), wait=0, warmup=WARMUP_STEPS, active=steps)
    return round(prof.kernel_stats().kernels_per_step * steps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=64)
    args = ap.parse_args(argv)
    run_steps(make_trainer(batch=args.batch, image_size=args.image_size), steps=args.steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
