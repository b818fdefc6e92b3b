"""What ``nsys`` records for :mod:`helpers.nsys`: a few training steps inside one NVTX range, of one of three runs.

    python -m helpers.nsys_target --steps 5 --batch 32 --image-size 64   # under nsys profile --capture-range=nvtx
    python -m helpers.nsys_target --run baseline --steps 5               # the ladder's baseline: the classic loop
    python -m helpers.nsys_target --run top --steps 5                    # the ladder's top rung: every change
    count_kernels(steps=5, batch=32, image_size=64)     # the kernels the same steps launch, counted by torch.profiler

The runs (:data:`RUNS`): ``course``, the course's own training step (:func:`helpers.train.step_only_trainer`: one
batch already on the device, bf16 autocast, channels_last); ``baseline`` and ``top``, the first and the last rung of
the final challenge's ladder (:mod:`helpers.challenge.ladder`) as the harness trains them, at this machine's size of
the challenge (its batch, image size and network; the data pipeline too: the baseline's per-image resize on the
CPU, the top rung's on the GPU), on a few batches of the challenge's images. ``--batch`` and ``--image-size`` are the
course step's; a rung brings its own. Three warm-up steps run first (cuDNN picks its kernels, the allocator fills
its cache, ``torch.compile`` compiles and records its CUDA graphs there); then :data:`CAPTURE_RANGE` opens, each
step runs in its own ``step`` range, and the range closes after the GPU has finished, so every kernel of the
profiled steps lies inside it. nsys records only what happens inside that range.
"""

from __future__ import annotations

import argparse
import dataclasses

from . import profiling
from .train import Trainer, TrainConfig, step_only_trainer

__all__ = ["CAPTURE_RANGE", "STEP_RANGE", "CLOSE_RANGE", "IMAGES_RANGE", "WARMUP_STEPS", "RUNS", "make_trainer", "run_steps", "count_kernels",
           "main"]

#: The NVTX range whose opening starts nsys's recording and whose closing stops it (``--nvtx-capture``).
CAPTURE_RANGE = "profiled_steps"
#: The NVTX range around each profiled step (nsys's NVTX table counts one per step).
STEP_RANGE = "step"
#: The NVTX range around the synchronisation that closes the recording, after the last step: its one call and its
#: wait (the GPU finishing the steps the host queued ahead) are not a step's, and the per-step table leaves them out.
CLOSE_RANGE = "closing sync"
#: The start of an empty range's name, followed by the images one step trains.
IMAGES_RANGE = "images per step: "
WARMUP_STEPS = 3
#: What can be recorded, in words: the course's step, or a rung of the final challenge's ladder.
RUNS = {"course": "the course's training step (bf16, channels_last, one batch already on the GPU)",
        "baseline": "the final challenge's baseline: the classic loop of 01 (fp32, a resize per image on the CPU, a "
                    "sync and loss.item() each step)",
        "top": "the final challenge's top rung: every change of its ladder (the input pipeline on the GPU, bf16, "
               "channels_last, compiled and replayed as CUDA graphs, the fused kernels and optimizer)"}
#: Batches of images a rung's run is given: the warm-up's and the profiled steps' with room to spare (the challenge's
#: own 50,000 would take longer to make than the steps take to run; which images they are changes no kernel).
_RUN_BATCHES = 16


def make_trainer(*, batch: int, image_size: int, run: str = "course") -> Trainer:
    """The trainer of ``run`` (:data:`RUNS`): the course's training step on one batch already on the device (bf16
    autocast where the GPU has it), of ``batch`` images of ``image_size``; or a rung of the final challenge's
    ladder as the harness builds it (its configuration fitted to this machine's rules, its network built from the
    reference), with its own batch and image size."""
    if run not in RUNS:
        raise ValueError(f"run={run!r}: the runs nsys can record are {', '.join(map(repr, RUNS))}")
    if run == "course":
        cfg = TrainConfig(batch_size=batch, image_size=image_size, dtype="bf16", channels_last=True, data="gpu",
                          dataset_size=batch)
        return step_only_trainer(cfg)
    from .challenge import ladder
    from .challenge.rules import Rules
    from .models import ReferenceCNN

    rules = Rules.at_scale()
    sub = ladder.ladder(rules=rules)[0 if run == "baseline" else -1].submission
    cfg = rules.fit(sub.config)
    cfg = dataclasses.replace(cfg, dataset_size=cfg.batch_size * cfg.grad_accum * _RUN_BATCHES)
    model = ReferenceCNN(rules.image_size)
    return Trainer(cfg, model=sub.build_model(model) if sub.build_model else model)


def run_steps(trainer: Trainer, *, steps: int) -> None:
    """Warm up, then run ``steps`` steps inside :data:`CAPTURE_RANGE` (what nsys records)."""
    import torch

    for _ in range(WARMUP_STEPS):
        trainer.step(measure=False)
    if trainer.cuda:
        torch.cuda.synchronize()  # the warm-up's kernels finish before the capture opens: none of them is counted
    with profiling.nvtx_range(CAPTURE_RANGE):
        # an empty range whose name carries a step's images: runs of different batches compare per image (03's
        # per-step table set the baseline's batch 32 beside the top rung's 256 and did not say so)
        with profiling.nvtx_range(f"{IMAGES_RANGE}{trainer.cfg.batch_size * trainer.cfg.grad_accum}"):
            pass
        for _ in range(steps):
            with profiling.nvtx_range(STEP_RANGE):
                trainer.step(measure=False)
        if trainer.cuda:
            with profiling.nvtx_range(CLOSE_RANGE):  # named, so that its wait is not counted as a step's
                torch.cuda.synchronize()  # the profiled steps' kernels finish before the capture closes


def count_kernels(*, steps: int, batch: int, image_size: int, run: str = "course") -> int:
    """How many GPU kernels ``steps`` of these steps launch, counted by ``torch.profiler`` in this process (0 on a
    CPU): what nsys should record, so a version that misses kernels is found by measuring, not assumed."""
    trainer = make_trainer(batch=batch, image_size=image_size, run=run)
    prof = profiling.profile_steps(lambda: trainer.step(measure=False), wait=0, warmup=WARMUP_STEPS, active=steps)
    return round(prof.kernel_stats().kernels_per_step * steps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--run", choices=tuple(RUNS), default="course")
    args = ap.parse_args(argv)
    run_steps(make_trainer(batch=args.batch, image_size=args.image_size, run=args.run), steps=args.steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
