"""The challenge's training set as the harness hands it to a learner's training function: every batch counted.

    def my_training(model, data, device):
        loader = data.loader(batch_size=32, shuffle=True, transform=reference_transform(data.image_size))
        for images, labels in loader: ...                     # a DataLoader over the training set: any of its options
        on_gpu = data.on_device(device, batch_size=512)
        for images_u8, labels in on_gpu: ...                  # the set held on the device: uint8 (B, 3, 32, 32) batches

Both are iterables of one epoch each (iterate again for another epoch; ``len()`` is their batches per epoch). The
harness counts each batch as it reaches your loop (in your process: a loader's workers hand their batches to it
first) and times your function from outside. The images it trains on come only through here: the held-out images
it is judged on never do.

While the harness rehearses your function before the timed run (to compile and autotune, as the field's speed
records do), :class:`TrainingData` hands out random images and stops the rehearsal after a few batches by raising
:class:`RehearsalOver` from the batch it would hand out next: let it pass (a ``try`` around your loop that swallows
every exception would turn the rehearsal into a whole run on random images).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable, Iterator

import numpy as np
import torch

from .. import data as _data

__all__ = ["TrainingData", "CountingLoader", "DeviceBatches", "RehearsalOver", "HandOut"]


class RehearsalOver(Exception):
    """The rehearsal has drawn its batches: the harness ends your function here (let it pass)."""


@dataclasses.dataclass
class HandOut:
    """What the harness has handed out so far, and what it does at each batch (the harness's, not yours)."""

    images: int = 0
    batches: int = 0
    limit_batches: int | None = None  # a rehearsal: stop after this many
    on_batch: Callable[[int], None] | None = None  # called before each batch leaves, with its size


class TrainingData:
    """The training images of one challenge (uint8 ``(N, 32, 32, 3)`` and their labels), handed out counted.

    ``image_size``: the side the network takes (the images are 32×32: a pipeline resizes them, as 01's does).
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, *, image_size: int, hand_out: HandOut | None = None):
        if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
            raise ValueError(f"TrainingData wants uint8 images shaped (N, H, W, 3); got {images.dtype} "
                             f"{images.shape}.")
        self._images, self._labels = images, np.asarray(labels, dtype=np.int64)
        self.image_size = image_size
        self.num_classes = _data.NUM_CLASSES
        self._hand_out = hand_out or HandOut()

    def __len__(self) -> int:
        return len(self._labels)

    def __repr__(self) -> str:
        return (f"TrainingData({len(self):,} images of 32×32 for a {self.image_size}×{self.image_size} network, "
                f"{self.images_handed_out:,} handed out)")

    @property
    def images_handed_out(self) -> int:
        """Images handed out so far (the harness's count)."""
        return self._hand_out.images

    def _check_batch(self, batch_size) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r}: use a positive integer.")
        if batch_size > len(self):
            raise ValueError(f"batch_size={batch_size} is larger than the training set ({len(self):,} images).")

    def _count(self, n: int) -> None:
        h = self._hand_out
        if h.limit_batches is not None and h.batches >= h.limit_batches:
            raise RehearsalOver(f"the rehearsal drew its {h.limit_batches} batches")
        if h.on_batch is not None:
            h.on_batch(n)
        h.images += n
        h.batches += 1

    def loader(self, *, batch_size: int, transform: Callable | None = None, shuffle: bool = True,
               drop_last: bool = True, **dataloader_options) -> "CountingLoader":
        """A ``torch.utils.data.DataLoader`` over the training set, counted: each item is the image through
        ``transform`` (a PIL image in; ``None``: the uint8 CHW tensor, 32×32) and its label. Any other DataLoader
        option passes through (``num_workers``, ``pin_memory``, ``persistent_workers``, ``prefetch_factor``, ...)."""
        self._check_batch(batch_size)
        for option in ("batch_sampler", "batch_size"):
            if option in dataloader_options:
                raise ValueError(f"{option} is not an option here: the harness samples the batches (batch_size, "
                                 "shuffle, drop_last and a sampler of your own are)")
        if dataloader_options.get("in_order", True) is not True:
            raise ValueError("in_order=False is not an option here: the harness counts each batch by the images "
                             "drawn for it, in the order they were drawn")
        ds = _data.InMemoryImages(self._images, self._labels, transform=transform)
        sampler = dataloader_options.pop("sampler", None)
        if sampler is not None and shuffle:
            raise ValueError("a sampler of your own orders the images itself: give it with shuffle=False")
        if sampler is None:
            sampler = (torch.utils.data.RandomSampler(ds) if shuffle else torch.utils.data.SequentialSampler(ds))
        # the harness's own batch sampler: each batch is counted by the images the sampler drew for it, whatever the
        # collate_fn makes of them (labels repeated by a collate_fn are not more images)
        batches = _CountedBatches(sampler, batch_size, drop_last)
        dl = torch.utils.data.DataLoader(ds, batch_sampler=batches, **dataloader_options)
        return CountingLoader(dl, self, batches)

    def on_device(self, device: torch.device | str, *, batch_size: int, shuffle: bool = True,
                  drop_last: bool = True) -> "DeviceBatches":
        """The training set copied to ``device`` once as uint8 NCHW (about 150 MB for 50,000 images), handed out
        in batches of ``batch_size``: uint8 ``(B, 3, 32, 32)`` images and int64 labels, both on ``device``. Resize
        and normalise them there (``helpers.data.gpu_resize_normalize``, or your own)."""
        self._check_batch(batch_size)
        return DeviceBatches(self, torch.device(device), batch_size, shuffle, drop_last)


class _CountedBatches(torch.utils.data.BatchSampler):
    """A BatchSampler that notes, in order, how many images each batch it draws holds: the loader's workers may draw
    ahead of the loop, and :class:`CountingLoader` takes the sizes in the same order as the batches reach it."""

    def __init__(self, sampler, batch_size: int, drop_last: bool) -> None:
        super().__init__(sampler, batch_size, drop_last)
        self.drawn: collections.deque[int] = collections.deque()

    def __iter__(self) -> Iterator[list[int]]:
        self.drawn.clear()  # a new epoch: what an epoch left undrawn by the loop is not counted
        for indices in super().__iter__():
            self.drawn.append(len(indices))
            yield indices


class CountingLoader:
    """A DataLoader whose batches the harness counts as they reach your loop. One iteration is one epoch."""

    def __init__(self, loader: torch.utils.data.DataLoader, data: TrainingData, batches: _CountedBatches) -> None:
        self._loader, self._data, self._batches = loader, data, batches

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Iterator:
        for batch in self._loader:
            # the images the batch sampler drew for this batch (in order: a loader hands its batches out in the order
            # they were drawn unless in_order=False, and every batch but an epoch's last holds batch_size)
            drawn = self._batches.drawn
            self._data._count(drawn.popleft() if drawn else self._batches.batch_size)
            yield batch


class DeviceBatches:
    """The training set held on a device, handed out in shuffled batches. One iteration is one epoch."""

    def __init__(self, data: TrainingData, device: torch.device, batch_size: int, shuffle: bool,
                 drop_last: bool) -> None:
        self._data, self.device, self.batch_size = data, device, batch_size
        self.shuffle, self.drop_last = shuffle, drop_last
        # copied as stored (NHWC) and made NCHW on the device: a CPU's permute of 150 MB took about 0.1 s, 5% of a
        # fast run's clock, where the device's takes well under a millisecond
        self._x = torch.from_numpy(data._images).to(device).permute(0, 3, 1, 2).contiguous()
        self._y = torch.from_numpy(data._labels).to(device)

    def __len__(self) -> int:
        n = len(self._y)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = len(self._y)
        # the order from torch's global generator on the device, as a DataLoader's shuffle takes it from the CPU's
        order = torch.randperm(n, device=self.device) if self.shuffle else torch.arange(n, device=self.device)
        for b in range(len(self)):
            idx = order[b * self.batch_size:(b + 1) * self.batch_size]
            self._data._count(len(idx))
            yield self._x[idx], self._y[idx]
