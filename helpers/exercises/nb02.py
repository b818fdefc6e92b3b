"""02_dataloader's exercises: a fast loader configuration, and augmentation on the GPU.

    from helpers.exercises import nb02 as checks
    check1 = checks.check_fast_loader(my_spec, grid_df=grid_df, gpu=True, measure=lambda s: ...)
    check2 = checks.check_gpu_augment(gpu_augment, device="cuda")

Try the exercises before reading the reference solutions below.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Callable

import torch

from .. import augment, bench, data, env
from ..augment import AugmentParams
from ..loaders import LoaderSpec, best_spec
from .common import CheckResult, WrongForm, as_flag, as_function, as_instance, as_number, failed, not_done

__all__ = ["fast_loader", "gpu_augment", "check_fast_loader", "check_gpu_augment"]


# -- the reference solutions ---------------------------------------------------------------------------

def fast_loader(grid_df, *, pinned: bool | None = None) -> LoaderSpec:
    """The fastest loader the grid measured for training: at the largest batch (the GPU needs big batches,
    01_baseline), leaving one core to the main process, which launches the GPU work, and pinned when
    ``pinned=True`` (training on a GPU: a pageable copy would wait for the previous step to finish)."""
    return best_spec(grid_df, batch_size=int(grid_df["batch_size"].max()), max_workers=max(0, env.usable_cpus() - 1),
                     pin_memory=pinned)


def gpu_augment(batch: torch.Tensor, params: AugmentParams, out_size: int) -> torch.Tensor:
    """Crop + flip + resize + normalise a uint8 NCHW batch on its own device, all images at once."""
    n, c = batch.shape[0], params.crop
    p = params.to(batch.device)
    ar = torch.arange(c, device=batch.device)
    rows = (p.top[:, None] + ar)[:, None, :, None]  # (n, 1, c, 1)
    cols = (p.left[:, None] + ar)  # (n, c)
    cols = torch.where(p.flip[:, None], cols.flip(1), cols)[:, None, None, :]  # mirrored columns where flip
    idx_n = torch.arange(n, device=batch.device)[:, None, None, None]
    idx_c = torch.arange(batch.shape[1], device=batch.device)[None, :, None, None]
    crops = batch[idx_n, idx_c, rows, cols]  # one gather: (n, 3, c, c)
    return data.gpu_resize_normalize(crops, out_size)


# -- the checks ----------------------------------------------------------------------------------------

#: A batch past this many times the grid's largest is not measured (it may not fit in the host's memory), nor a
#: prefetch deeper than this many batches per worker.
_MAX_BATCH_X, _MAX_PREFETCH = 16, 64


def check_fast_loader(spec, *, grid_df, measure: Callable, share_of_best: float = 0.8,
                      gpu: bool = False) -> CheckResult:
    """``spec`` (a LoaderSpec) must suit training: no more workers than cores, a large batch, pinned memory
    when ``gpu``, and at least ``share_of_best`` of the grid's best img/s at its batch size.

    ``measure(spec) → img/s`` measures it again now; the grid's numbers are the reference.
    """
    name = "02 · a fast loader configuration"
    ref = fast_loader(grid_df, pinned=True if gpu else None)
    if spec is None or spec is ...:
        return not_done(name, ref, "Set my_spec to a LoaderSpec and run this cell again.")
    largest = int(grid_df["batch_size"].max())
    try:  # LoaderSpec checks its own batch size and workers; what it does not check, and sizes past any grid:
        spec = as_instance(spec, LoaderSpec, what="my_spec", form="a LoaderSpec: build it with LoaderSpec("
                                                                  "batch_size=..., num_workers=..., pin_memory=...)")
        spec = dataclasses.replace(
            spec,
            batch_size=as_number(spec.batch_size, what="my_spec.batch_size", integer=True, low=1, high=_MAX_BATCH_X * largest,
                                 form=f"a whole number of images from 1 to {_MAX_BATCH_X * largest:,}, such as "
                                      f"{largest} (the grid's largest)"),
            num_workers=as_number(spec.num_workers, what="my_spec.num_workers", integer=True, low=0,
                                  form="a whole number of worker processes, 0 (the main process) or more"),
            pin_memory=as_flag(spec.pin_memory, what="my_spec.pin_memory"),
            persistent_workers=as_flag(spec.persistent_workers, what="my_spec.persistent_workers"),
            prefetch_factor=None if spec.prefetch_factor is None else as_number(
                spec.prefetch_factor, what="my_spec.prefetch_factor", integer=True, low=1, high=_MAX_PREFETCH,
                form=f"None or a whole number of batches each worker prepares ahead, from 1 to {_MAX_PREFETCH}"))
    except WrongForm as e:
        return failed(name, ref, str(e))
    cores = env.usable_cpus()
    if spec.num_workers > cores:
        return failed(name, ref, f"num_workers={spec.num_workers} is more than the {cores} cores this process may use: "
                                 "the extra workers only compete for them. Look at the worker sweep.")
    if spec.batch_size * 2 < largest:
        return failed(name, ref, f"batch_size={spec.batch_size} feeds the GPU small batches, which it computes far less "
                                 f"efficiently (01_baseline); pick one of the grid's larger batches (up to {largest}).")
    if gpu and not spec.pin_memory:
        return failed(name, ref, "For training on a GPU, pin the memory: a copy from pageable memory waits for all the "
                                 "work queued before it, so the GPU finishes each step before the next can be queued. "
                                 "Pinned memory with non_blocking=True copies while the GPU still computes. The grid, "
                                 "which runs no model, cannot show this.")
    same_batch = grid_df[grid_df["batch_size"] == spec.batch_size]
    pool = same_batch if not same_batch.empty else grid_df
    best = float(pool["img_per_s"].max())
    where = f"at batch {spec.batch_size}" if not same_batch.empty else "overall"
    got = measure(spec)
    if got < share_of_best * best:
        return failed(name, ref, f"{spec.label()} delivered {got:,.0f} img/s; the grid's best {where} reached "
                                 f"{best:,.0f}. Aim for at least {share_of_best:.0%} of it: read the heatmap.")
    return CheckResult(name, "passed", f"{spec.label()} delivered {got:,.0f} img/s ({got / best:.0%} of the grid's best "
                                       f"{where}).", spec)


def check_gpu_augment(fn: Callable, *, device, out_size: int = 64, n: int = 64, seed: int | None = None,
                      repeats: int = 5) -> CheckResult:
    """``fn(batch_u8_nchw, params, out_size)`` must match :func:`helpers.augment.cpu_augment` and beat the CPU loop."""
    name = "02 · augmentation on the GPU"
    ref = gpu_augment
    try:
        fn = as_function(fn, what="Your answer", form="the function itself, gpu_augment (no brackets: the check calls "
                                                      "it on a batch), which returns the augmented batch")
    except WrongForm as e:
        return failed(name, ref, str(e))
    rng_seed = seed if seed is not None else random.randrange(2**31)
    images, _ = data.synthetic_images(n, seed=rng_seed)
    params = augment.random_params(n, crop=28, seed=rng_seed + 1)
    batch = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous().to(device)
    try:
        got = fn(batch, params, out_size)
    except NotImplementedError:
        return not_done(name, ref, "Write gpu_augment and run this cell again.")
    except Exception as e:
        return failed(name, ref, f"It raised {type(e).__name__}: {e}.")
    want_shape = (n, 3, out_size, out_size)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != want_shape:
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        return failed(name, ref, f"It returned {shape}; expected a float tensor shaped {want_shape}.")
    if got.device.type != torch.device(device).type:
        return failed(name, ref, f"The result is on {got.device}, the batch was on {device}: keep the work on the GPU.")
    cpu = torch.stack([augment.cpu_augment(images[i], params.at(i), crop=params.crop, out_size=out_size)
                       for i in range(n)])
    err = (got.float().cpu() - cpu).abs()
    if not torch.isfinite(err).all() or err.max() > augment.TOLERANCE:
        worst = int(err.flatten(1).amax(1).argmax())
        top, left, flip = params.at(worst)
        return failed(name, ref, f"Image {worst} (crop at top={top}, left={left}, flip={flip}) differs from the CPU "
                                 f"version by up to {float(err[worst].max()):.3f} (tolerance {augment.TOLERANCE:.4f}). "
                                 "Check the crop offsets, which axis you flip, and the normalisation.")
    t_gpu = bench.time_it(lambda: fn(batch, params, out_size), warmup=2, repeats=repeats, device=device).median_ms
    t_cpu = bench.time_it(lambda: [augment.cpu_augment(images[i], params.at(i), crop=params.crop, out_size=out_size)
                                   for i in range(n)], warmup=1, repeats=repeats, device="cpu").median_ms
    if t_gpu >= t_cpu:
        return failed(name, ref, f"It matches, but takes {t_gpu:.2f} ms against {t_cpu:.2f} ms for the per-image CPU "
                                 "loop: process the whole batch at once instead of image by image.")
    return CheckResult(name, "passed", f"It matches the CPU version within {augment.TOLERANCE:.4f} and runs "
                                       f"{t_cpu / t_gpu:.1f}× faster ({t_gpu:.2f} ms vs {t_cpu:.2f} ms for {n} images).", fn)
