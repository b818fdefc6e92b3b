"""Reference solutions for notebooks/02_dataloader."""

from __future__ import annotations

import torch

from ..augment import AugmentParams
from ..data import gpu_resize_normalize
from ..loaders import LoaderSpec, best_spec

__all__ = ["fast_loader", "gpu_augment"]


def fast_loader(grid_df, *, pinned: bool | None = None) -> LoaderSpec:
    """The fastest loader the grid measured for training: at the largest batch (the GPU needs big batches,
    01_baseline), leaving one core to the main process, which launches the GPU work, and pinned when
    ``pinned=True`` (training on a GPU: a pageable copy would wait for the previous step to finish)."""
    from ..env import usable_cpus

    return best_spec(grid_df, batch_size=int(grid_df["batch_size"].max()), max_workers=max(0, usable_cpus() - 1),
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
    return gpu_resize_normalize(crops, out_size)
