"""Random crop + horizontal flip, the same augmentation on the CPU (per image, PIL) and on the GPU (batched).

    params = random_params(256, size=32, crop=28, seed=0)          # where to crop, whether to flip
    x = cpu_augment(images[i], params.at(i), out_size=224)        # one image, as a DataLoader worker would
    xb = exercises.nb02.gpu_augment(batch_u8_on_gpu, params, 224) # the whole batch in a few kernels

Parameters are drawn up front, so both versions can be given the same ones
and compared element by element.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .data import MEAN, STD

__all__ = ["AugmentParams", "random_params", "cpu_augment", "TOLERANCE"]

#: PIL rounds the resized image to uint8 before ToTensor (1/255, so 2/255 after normalising to [-1, 1]);
#: the tolerance allows that rounding plus float error, and nothing like a wrong pixel or a missed flip.
TOLERANCE = 3 / 255


@dataclasses.dataclass(frozen=True)
class AugmentParams:
    """Per-image crop offsets and flips for a batch of ``n`` square images."""

    top: torch.Tensor  # (n,) int64
    left: torch.Tensor  # (n,) int64
    flip: torch.Tensor  # (n,) bool
    crop: int

    def at(self, i: int) -> tuple[int, int, bool]:
        return int(self.top[i]), int(self.left[i]), bool(self.flip[i])

    def to(self, device) -> "AugmentParams":
        return AugmentParams(self.top.to(device), self.left.to(device), self.flip.to(device), self.crop)


def random_params(n: int, *, size: int = 32, crop: int = 28, seed: int | None = None) -> AugmentParams:
    """Uniform crop positions and fair coin flips for ``n`` images of ``size``×``size``."""
    if not 1 <= crop <= size:
        raise ValueError(f"crop={crop} must be between 1 and the image size {size}.")
    g = torch.Generator().manual_seed(seed) if seed is not None else None
    top = torch.randint(0, size - crop + 1, (n,), generator=g)
    left = torch.randint(0, size - crop + 1, (n,), generator=g)
    flip = torch.rand(n, generator=g) < 0.5
    return AugmentParams(top, left, flip, crop)


def cpu_augment(image: np.ndarray, params: tuple[int, int, bool], *, crop: int, out_size: int) -> torch.Tensor:
    """One uint8 HWC image: crop, maybe mirror, resize (bilinear) to ``out_size``, ToTensor, normalise."""
    from PIL import Image, ImageOps
    from torchvision.transforms import functional as TF

    top, left, flip = params
    img = Image.fromarray(image).crop((left, top, left + crop, top + crop))
    if flip:
        img = ImageOps.mirror(img)
    img = img.resize((out_size, out_size), Image.BILINEAR)
    return TF.normalize(TF.to_tensor(img), MEAN, STD)
