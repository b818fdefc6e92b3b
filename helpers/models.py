"""The networks the course trains.

The reference network is a classic small CNN, with shapes that agree: three
3×3 convolutions (3→64→128→256), each followed by ReLU and a 2×2 max-pool,
then ``Linear(256·(s/8)², 512)``, ReLU, ``Linear(512, 10)``. At the course's
224×224 input that is ``Linear(256·28·28, 512)``. (A common version of this
network pools only twice and feeds 256×56×56 into that layer, which crashes.)

    model = ReferenceCNN(image_size=224)
    logits = model(torch.randn(8, 3, 224, 224))   # (8, 10)
    seq = as_sequential(model)                    # the same layers (the same weights) as one nn.Sequential
    mlp = small_mlp()                             # 8 × (Linear(256, 256), ReLU): tiny kernels, launch-bound
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["MIN_IMAGE_SIZE", "ReferenceCNN", "ResidualNet", "feature_size", "count_params", "as_sequential",
           "small_mlp", "PaddedInputConv", "pad_first_conv"]

#: Three 2×2 pools halve the side three times; below 8 pixels nothing is left.
MIN_IMAGE_SIZE = 8


def feature_size(image_size: int) -> int:
    """Side of the last feature map for a square input: ``image_size // 8``."""
    if not isinstance(image_size, int) or image_size < MIN_IMAGE_SIZE:
        raise ValueError(
            f"image_size={image_size!r} is too small for ReferenceCNN: its three 2×2 max-pools "
            f"need at least {MIN_IMAGE_SIZE} pixels per side (the course uses 224; smoke runs use 32-64)."
        )
    return image_size // 2 // 2 // 2


class ReferenceCNN(nn.Module):
    """The course's reference CNN (see module docstring)."""

    def __init__(self, image_size: int = 224, num_classes: int = 10, *, checkpoint: bool = False) -> None:
        super().__init__()
        side = feature_size(image_size)
        self.image_size = image_size
        # Activation checkpointing per conv block (04_memory): keep each block's input, recompute the rest in backward.
        self.checkpoint = checkpoint
        self.conv1 = nn.Conv2d(3, 64, 3, padding=1)
        self.conv2 = nn.Conv2d(64, 128, 3, padding=1)
        self.conv3 = nn.Conv2d(128, 256, 3, padding=1)
        self.pool = nn.MaxPool2d(2, 2)
        self.relu = nn.ReLU()
        self.fc1 = nn.Linear(256 * side * side, 512)
        self.fc2 = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-2:] != (self.image_size, self.image_size):
            raise ValueError(
                f"ReferenceCNN was built for {self.image_size}×{self.image_size} images but got "
                f"{tuple(x.shape[-2:])}: resize the input or build the model with image_size={x.shape[-1]}."
            )
        for conv in (self.conv1, self.conv2, self.conv3):
            if self.checkpoint and self.training and torch.is_grad_enabled():
                x = checkpoint(self._block, conv, x, use_reentrant=False)
            else:
                x = self._block(conv, x)
        x = torch.flatten(x, 1)
        x = self.relu(self.fc1(x))
        return self.fc2(x)


    def _block(self, conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.relu(conv(x)))


def count_params(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def as_sequential(model: ReferenceCNN) -> nn.Sequential:
    """``model``'s layers, in order, as one ``nn.Sequential`` sharing its weights (same outputs).

    Writing a network as ``nn.Sequential`` changes how it is written, not what runs: every layer
    still launches its own kernels (03_kernels counts them).
    """
    return nn.Sequential(
        model.conv1, model.relu, model.pool,
        model.conv2, model.relu, model.pool,
        model.conv3, model.relu, model.pool,
        nn.Flatten(1), model.fc1, model.relu, model.fc2,
    )


class PaddedInputConv(nn.Module):
    """A convolution whose input gets zero channels appended, with zero weights for them: the same function.

    Tensor-core convolutions want input channels in multiples of 8; with 3 (RGB) cuDNN pads inside, in kernels
    of its own, or falls back to slower ones. Padding once, on purpose, keeps the fast path. The new weights start
    at zero and stay there: their inputs are zero, so their gradients are zero.
    """

    def __init__(self, conv: nn.Conv2d, channels: int) -> None:
        super().__init__()
        if channels < conv.in_channels:
            raise ValueError(f"pad to channels={channels}: it must be at least the convolution's "
                             f"{conv.in_channels} input channels.")
        if conv.groups != 1:
            raise ValueError("PaddedInputConv pads ordinary convolutions (groups=1) only.")
        self.extra = channels - conv.in_channels
        padded = nn.Conv2d(channels, conv.out_channels, conv.kernel_size, stride=conv.stride, padding=conv.padding,
                           dilation=conv.dilation, bias=conv.bias is not None)
        padded = padded.to(device=conv.weight.device, dtype=conv.weight.dtype)
        with torch.no_grad():
            padded.weight.zero_()
            padded.weight[:, : conv.in_channels].copy_(conv.weight)
            if conv.bias is not None:
                padded.bias.copy_(conv.bias)
        self.conv = padded

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` with the zero channels appended."""
        return torch.nn.functional.pad(x, (0, 0, 0, 0, 0, self.extra))  # (W, H, C): channels only

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.pad(x))


def pad_first_conv(model: ReferenceCNN, channels: int = 8) -> ReferenceCNN:
    """Give ``model.conv1`` ``channels`` input channels (zeros appended, zero weights): the same function, faster
    on tensor cores. In place; returns ``model``::

        model = pad_first_conv(ReferenceCNN(224))     # conv1 takes 3 channels and pads them to 8 itself
    """
    if not isinstance(getattr(model, "conv1", None), nn.Conv2d):
        raise TypeError(f"pad_first_conv needs a network with a conv1 convolution (the course's ReferenceCNN), "
                        f"got {type(model).__name__}.")
    model.conv1 = PaddedInputConv(model.conv1, channels)
    return model


def small_mlp(width: int = 256, depth: int = 8) -> nn.Sequential:
    """``depth`` × (Linear(width, width), ReLU): so little work per layer that launching it costs more."""
    if depth < 1 or width < 1:
        raise ValueError(f"small_mlp needs width ≥ 1 and depth ≥ 1 (got width={width}, depth={depth}).")
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


class _ResidualBlock(nn.Module):
    """conv → GroupNorm → ReLU → conv → GroupNorm, plus the input: six activations the size of the input.

    GroupNorm, not BatchNorm: it keeps no running statistics, so recomputing a block under
    checkpointing changes nothing.
    """

    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.norm1 = nn.GroupNorm(8, width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(8, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.norm1(self.conv1(x)))
        return torch.relu(x + self.norm2(self.conv2(y)))


class ResidualNet(nn.Module):
    """A deeper network for 04_memory: a stride-4 stem, then ``depth`` residual blocks at one resolution.

    Its activations grow with depth while its weights stay small, so activation checkpointing (one
    ``torch.utils.checkpoint`` per block, ``checkpoint=True``) saves most of its memory::

        net = ResidualNet(image_size=224, depth=8, checkpoint=True)
    """

    def __init__(self, image_size: int = 224, *, width: int = 64, depth: int = 8, num_classes: int = 10,
                 checkpoint: bool = False) -> None:
        super().__init__()
        if image_size < 8 or depth < 1 or width % 8:
            raise ValueError(f"ResidualNet needs image_size ≥ 8, depth ≥ 1 and a width divisible by 8 "
                             f"(got image_size={image_size}, depth={depth}, width={width}).")
        self.image_size = image_size
        self.checkpoint = checkpoint
        self.stem = nn.Sequential(nn.Conv2d(3, width, 4, stride=4, bias=False), nn.GroupNorm(8, width), nn.ReLU())
        self.blocks = nn.ModuleList(_ResidualBlock(width) for _ in range(depth))
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            if self.checkpoint and self.training and torch.is_grad_enabled():
                x = checkpoint(block, x, use_reentrant=False)  # keep x; recompute the block's insides in backward
            else:
                x = block(x)
        return self.head(x.mean(dim=(2, 3)))
