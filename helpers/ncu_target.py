"""What ``ncu`` measures for 03_kernels: one forward pass of the reference CNN (bf16 autocast, channels_last).

    python -m helpers.ncu_target --batch 64 --image-size 224     # under ncu --profile-from-start off

Three warm-up passes run first (cuDNN picks its kernels there); only the pass between
``torch.cuda.profiler.start()`` and ``stop()`` is profiled.
"""

from __future__ import annotations

import argparse
from typing import Callable

import torch

from . import env
from .models import ReferenceCNN

__all__ = ["make_forward", "main"]


def make_forward(*, batch: int, image_size: int) -> Callable[[], torch.Tensor]:
    """A function running one inference forward pass of the reference CNN on a random batch."""
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = ReferenceCNN(image_size).to(dev, memory_format=torch.channels_last).eval()
    x = torch.randn(batch, 3, image_size, image_size, device=dev).contiguous(memory_format=torch.channels_last)

    low = env.autocast_dtype(torch.bfloat16, dev) if dev.type == "cuda" else torch.bfloat16  # fp16 on a T4

    def forward() -> torch.Tensor:
        with torch.no_grad(), torch.autocast(dev.type, dtype=low):
            return model(x)

    return forward


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--image-size", type=int, default=224)
    args = ap.parse_args(argv)
    forward = make_forward(batch=args.batch, image_size=args.image_size)
    for _ in range(3):
        forward()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    forward()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
