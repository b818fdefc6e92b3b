"""Held-out accuracy: how well a trained network does on images of the same classes it never trained on.

    acc = heldout_accuracy(trainer.model, image_size=224, precision="bf16")   # a share, 0..1

The images come from :func:`helpers.data.heldout_images` (the training set's classes, another draw), resized
and normalised on the device as the GPU pipeline does; the model runs in eval mode without gradients, under the
precision it trained in. The same ``n`` and ``seed`` give the same images: every run is judged on one test set.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from .. import data as _data
from .. import env

__all__ = ["HELDOUT_IMAGES", "heldout_accuracy", "accuracy_margin", "runs_channels_last"]

#: Images in the held-out set at each scale (its accuracy's standard error is about 0.5 points at full scale).
HELDOUT_IMAGES = {"smoke": 512, "full": 4096}


@functools.lru_cache(maxsize=2)
def _heldout(n: int, seed: int):
    return _data.heldout_images(n, seed=seed)


def runs_channels_last(model: nn.Module) -> bool:
    """Was ``model`` converted to channels_last (its first weight a 4-D NHWC tensor)? Its inputs should be too.
    A network without parameters was not."""
    w = next(iter(model.parameters()), None)
    return w is not None and w.dim() == 4 and w.is_contiguous(memory_format=torch.channels_last)


def heldout_accuracy(model: nn.Module, *, image_size: int, precision: str = "fp32", n: int | None = None,
                     seed: int = 0, batch: int = 256, device: torch.device | str | None = None) -> float:
    """Share of ``n`` held-out images (default: :data:`HELDOUT_IMAGES` at this scale) that ``model`` labels right."""
    n = n or HELDOUT_IMAGES[env.scale()]
    if device is None:
        first = next(iter(model.parameters()), None)
        device = first.device if first is not None else env.device()
    device = torch.device(device)
    images, labels = _heldout(n, seed)
    x_all = torch.from_numpy(images).permute(0, 3, 1, 2)
    y_all = torch.as_tensor(labels)
    amp = env.autocast_dtype(precision, device)
    channels_last = runs_channels_last(model)
    was_training = model.training
    model.eval()
    correct = 0
    try:
        with torch.no_grad(), torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            for start in range(0, n, batch):
                x = _data.gpu_resize_normalize(x_all[start:start + batch].to(device), image_size)
                if channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                correct += int((model(x).argmax(1).cpu() == y_all[start:start + batch]).sum())
    finally:
        model.train(was_training)
    return correct / n


def accuracy_margin(baseline: float, n: int) -> float:
    """How far below ``baseline`` an accuracy on ``n`` held-out images may land by chance alone: two standard
    errors of the difference of two such accuracies (each binomial), as a share."""
    p = min(max(baseline, 0.01), 0.99)
    return 2 * math.sqrt(2 * p * (1 - p) / n)
