"""Datasets and loaders for the course.

The default data is synthetic but learnable: ten classes, each a smooth
colour pattern, drawn shifted and with noise into 32×32 RGB images, with
10% of the labels redrawn at random (so accuracy tops out near 90%). It exists three ways,
so that each notebook can show what each costs:

* in memory as uint8 arrays, the way torchvision's CIFAR10 holds images
  (:class:`InMemoryImages`): the per-item cost is PIL's resize + ``ToTensor``;
* as JPEG files in a cache folder (:func:`ensure_jpeg_folder`,
  :class:`JpegFolder`): decoding costs real CPU time, as with ImageNet;
* resident on the GPU (:class:`GpuResidentLoader`): no loader at all, resize
  and normalise as batched GPU ops.

CIFAR-10 itself only when the learner asks for it (:func:`cifar10`)::

    images, labels = synthetic_images(50_000)
    ds = InMemoryImages(images, labels, transform=reference_transform(224))
    x, y = ds[0]          # float tensor (3, 224, 224), int label
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

__all__ = [
    "NUM_CLASSES",
    "Task",
    "COURSE_TASK",
    "CHALLENGE_TASK",
    "MEAN",
    "STD",
    "synthetic_images",
    "heldout_images",
    "reference_transform",
    "resize_transform",
    "normalize_u8",
    "InMemoryImages",
    "cache_dir",
    "ensure_jpeg_folder",
    "JpegFolder",
    "GpuResidentLoader",
    "gpu_resize_normalize",
    "JpegBytes",
    "PackedBytes",
    "collate_bytes",
    "GpuJpegLoader",
    "cifar10",
]

NUM_CLASSES = 10
#: The reference workload's normalisation: (x - 0.5) / 0.5 per channel.
MEAN = (0.5, 0.5, 0.5)
STD = (0.5, 0.5, 0.5)


@dataclasses.dataclass(frozen=True)
class Task:
    """How hard the synthetic images are to tell apart: how far the classes' patterns lie apart (``spread``, per
    value), how fine they are (``grid`` coarse cells per side), the pixel ``noise``, the largest shift in pixels and
    the share of labels redrawn at random (which caps accuracy near ``1 - label_noise``).

        images, labels = synthetic_images(50_000, task=CHALLENGE_TASK)
    """

    spread: float = 25.0
    grid: int = 4
    noise: float = 50.0
    max_shift: int = 4
    label_noise: float = 0.1

    def kwargs(self) -> dict:
        return dataclasses.asdict(self)


#: The images of 00-05: easy to learn (every recipe of the course ends near 91%, the cap its 10% of redrawn labels
#: sets), so a notebook measures speed without waiting for accuracy.
COURSE_TASK = Task()
#: The final challenge's images: closer classes, more shift, no redrawn labels. Held-out accuracy keeps rising with
#: the images trained and falls with a learning rate too high, so training choices show (one H100, 2026-11-25,
#: scripts/probes/challenge_task.py: the classic loop's recipe 17% after 3,072 images, 37% after 6,144, 74% after
#: 12,288, 89% after 24,576, 94-96% after 49,152; four times its learning rate 35%).
CHALLENGE_TASK = Task(spread=8.0, grid=4, noise=40.0, max_shift=6, label_noise=0.0)


def synthetic_images(
    n: int,
    *,
    size: int = 32,
    num_classes: int = NUM_CLASSES,
    seed: int = 0,
    noise: float = 50.0,
    max_shift: int = 4,
    label_noise: float = 0.1,
    stream: int = 0,
    spread: float = 25.0,
    grid: int = 4,
    task: Task | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` learnable RGB images as uint8 ``(n, size, size, 3)`` and int64 labels ``(n,)``.

    Each class is a smooth colour pattern (a 4×4 grid upsampled) that differs
    from the others by a modest amount; each image is its class's pattern,
    shifted by up to ``max_shift`` pixels, with per-channel gain, a brightness
    offset and pixel noise. A share ``label_noise`` of the labels is redrawn
    at random, as in real data sets: the loss falls steadily but never to zero,
    and accuracy stays below 100%, so a training curve looks like training.

    ``stream``: another draw of images from the same classes (the templates come from ``seed`` alone):
    :func:`heldout_images` uses it for a test set the training run never saw.

    ``spread`` (how far the classes' patterns lie apart, per value) and ``grid`` (the pattern's coarse cells per
    side: more cells, finer detail) set how hard the classes are to tell apart, with ``noise`` and ``max_shift``.
    ``task``: all five at once (a :class:`Task`), in place of those arguments.
    """
    if task is not None:
        return synthetic_images(n, size=size, num_classes=num_classes, seed=seed, stream=stream, **task.kwargs())
    if n <= 0 or size <= 0:
        raise ValueError(f"synthetic_images needs n > 0 and size > 0, got n={n}, size={size}.")
    rng = np.random.default_rng(seed)
    if grid <= 0 or grid > size:
        raise ValueError(f"synthetic_images needs 0 < grid <= size, got grid={grid}, size={size}.")
    coarse = rng.uniform(60, 195, size=(1, grid, grid, 3)) + rng.normal(0, spread, size=(num_classes, grid, grid, 3))
    reps = -(-size // grid)
    templates = np.repeat(np.repeat(coarse, reps, axis=1), reps, axis=2)[:, :size, :size]
    if stream:
        rng = np.random.default_rng((seed, stream))  # the same classes, other images
    shifts = range(-max_shift, max_shift + 1)
    # Every (class, dy, dx) variant once, then index it: no per-image Python loop.
    variants = np.stack([np.roll(templates, (dy, dx), axis=(1, 2)) for dy in shifts for dx in shifts], axis=1)
    variants = variants.astype(np.float32)
    labels = rng.integers(0, num_classes, size=n)
    which = rng.integers(0, variants.shape[1], size=n)
    gain = rng.normal(1.0, 0.1, size=(n, 1, 1, 3)).astype(np.float32)
    offset = rng.normal(0, 15, size=(n, 1, 1, 1)).astype(np.float32)
    out = np.empty((n, size, size, 3), dtype=np.uint8)
    for start in range(0, n, 4096):  # chunks keep the float temporaries small
        sl = slice(start, min(n, start + 4096))
        img = variants[labels[sl], which[sl]] * gain[sl] + offset[sl]
        img += noise * rng.standard_normal(img.shape, dtype=np.float32)
        out[sl] = np.clip(img, 0, 255).astype(np.uint8)
    relabel = rng.random(n) < label_noise
    labels = np.where(relabel, rng.integers(0, num_classes, size=n), labels)
    return out, labels.astype(np.int64)


#: The stream :func:`heldout_images` draws from: never used for training.
HELDOUT_STREAM = 1


def heldout_images(n: int, *, seed: int = 0, task: Task = COURSE_TASK,
                   stream: int = HELDOUT_STREAM) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images of the training set's classes (the same ``seed`` and ``task``) that no training run sees: a
    test set. ``stream`` (not 0, the training set's): another such test set.

        images, labels = heldout_images(4096)     # uint8 (4096, 32, 32, 3), int64 (4096,)
    """
    if stream == 0:
        raise ValueError("stream 0 draws the training images themselves; a held-out stream is any other number.")
    return synthetic_images(n, seed=seed, stream=stream, task=task)


def reference_transform(image_size: int = 224) -> Callable:
    """The reference workload's per-item transform: PIL resize, ``ToTensor``, normalise to [-1, 1]."""
    from torchvision import transforms

    return transforms.Compose(
        [transforms.Resize((image_size, image_size)), transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    )


#: Two per-image rates closer than this share of the larger read as "about" each other: the transform timed alone
#: over 64 images moves by several percent from one timing to the next on a busy host.
RATES_ABOUT = 0.10


def loop_against_alone(loop_per_s: float, alone_per_s: float, one_thread_per_s: float, threads: int) -> str:
    """Where a loop's own data phase (images per second, collation included) lies against the same transform timed
    alone, with ``threads`` intra-op threads and with one, in words written from the three rates. 01 on one H200
    read "feeds about 1,404 img/s … inside the loop its data phase made 692 img/s" and its prose put a 2× gap down to
    a host whose speed moves, where 692 is the one-thread rate (708).

    >>> loop_against_alone(692, 1404, 708, 16)
    'about the one-thread rate: inside the loop the transform gained nothing from the 16 threads that sped it up alone'
    """
    def about(a: float, b: float) -> bool:
        return abs(a - b) <= RATES_ABOUT * max(a, b)

    near_alone, near_one = about(loop_per_s, alone_per_s), about(loop_per_s, one_thread_per_s)
    if near_alone and near_one:
        return "about both rates timed alone (the threads gained this transform little here)"
    if near_alone:
        return f"about the rate timed alone with {threads} threads"
    if near_one:
        return (f"about the one-thread rate: inside the loop the transform gained nothing from the {threads} threads "
                "that sped it up alone")
    low, high = sorted((alone_per_s, one_thread_per_s))
    if loop_per_s < low:
        return "below both rates timed alone (the loop's figure includes collation, which the cell's do not)"
    if loop_per_s > high:
        return "above both rates timed alone: the cell's short timing read this host slower than the loop's whole run"
    return (f"between the two rates timed alone: inside the loop the transform gained part of what the {threads} "
            "threads gave it alone")


def resize_transform(image_size: int = 224) -> Callable:
    """The reference transform's CPU half: PIL resize, then a uint8 CHW tensor (no float, no normalisation).

    Pair it with :func:`normalize_u8` after the copy to the GPU: the result is the
    reference transform's, while workers do less and each image crosses from the
    workers and over PCIe as 1 byte per value instead of 4::

        ds = InMemoryImages(images, labels, transform=resize_transform(224))
        x = normalize_u8(next(iter(loader))[0].to("cuda", non_blocking=True))
    """
    from torchvision import transforms

    return transforms.Compose([transforms.Resize((image_size, image_size)), transforms.PILToTensor()])


def normalize_u8(batch_u8: torch.Tensor) -> torch.Tensor:
    """uint8 NCHW → float32 normalised as the reference does (``ToTensor`` then ``Normalize(MEAN, STD)``)."""
    if batch_u8.dtype != torch.uint8:
        raise ValueError(f"normalize_u8 wants a uint8 batch; got {batch_u8.dtype}. Use resize_transform() in the dataset.")
    x = batch_u8.float().div_(255.0)
    mean, std = _channel_stats(x.device)
    return x.sub_(mean).div_(std)


_STATS: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def _channel_stats(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """MEAN and STD as (1, 3, 1, 1) tensors on ``device``, made once per device: a tensor built from a Python list
    on a GPU is a copy from pageable memory, which makes the host wait for the GPU, every step it is made."""
    if device not in _STATS:
        _STATS[device] = (torch.tensor(MEAN, device=device).view(1, 3, 1, 1),
                          torch.tensor(STD, device=device).view(1, 3, 1, 1))
    return _STATS[device]


class InMemoryImages(Dataset):
    """uint8 HWC images held in memory, turned into PIL images per item (as CIFAR10 does).

    ``transform=None`` returns the uint8 image as a CHW tensor (no resize).
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform: Callable | None = None) -> None:
        if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
            raise ValueError(
                f"InMemoryImages wants uint8 images shaped (N, H, W, 3); got {images.dtype} {images.shape}."
            )
        if len(images) != len(labels):
            raise ValueError(f"{len(images)} images but {len(labels)} labels: they must match.")
        self.images, self.labels, self.transform = images, np.asarray(labels, dtype=np.int64), transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int):
        from PIL import Image

        arr = self.images[i]
        if self.transform is None:
            return torch.from_numpy(arr).permute(2, 0, 1).contiguous(), int(self.labels[i])
        return self.transform(Image.fromarray(arr)), int(self.labels[i])


def cache_dir() -> Path:
    """Where generated data lives: ``$HELPERS_CACHE`` or ``~/.cache/gpu-perf-lab``."""
    root = os.environ.get("HELPERS_CACHE") or Path.home() / ".cache" / "gpu-perf-lab"
    return Path(root)


def ensure_jpeg_folder(
    n: int = 2000, *, size: int = 32, seed: int = 0, quality: int = 90, root: Path | str | None = None
) -> Path:
    """Write ``n`` synthetic images as JPEG files (``<root>/<class>/<i>.jpg``) once; return the folder.

    The folder name encodes its parameters, and a ``done.json`` marker is
    written last, into a temporary folder that is then renamed: an
    interrupted run never leaves a half-written set that looks complete.
    """
    from PIL import Image

    base = Path(root) if root is not None else cache_dir()
    folder = base / f"synthetic-jpeg-n{n}-s{size}-seed{seed}-q{quality}"
    if (folder / "done.json").exists():
        return folder
    images, labels = synthetic_images(n, size=size, seed=seed)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for c in range(NUM_CLASSES):
        (tmp / f"{c:02d}").mkdir(parents=True)
    for i, (img, lab) in enumerate(zip(images, labels)):
        Image.fromarray(img).save(tmp / f"{lab:02d}" / f"{i:06d}.jpg", quality=quality)
    (tmp / "done.json").write_text(json.dumps({"n": n, "size": size, "seed": seed, "quality": quality}))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


class JpegFolder(Dataset):
    """JPEG files in class folders, decoded with PIL per item (real CPU decode cost)."""

    def __init__(self, root: Path | str, transform: Callable | None = None) -> None:
        root = Path(root)
        if not root.is_dir():
            raise FileNotFoundError(
                f"No dataset folder at {root}. Generate the course's synthetic JPEGs with "
                f"helpers.data.ensure_jpeg_folder(n=2000) (a few seconds), or point to a folder "
                "of class subfolders holding .jpg files."
            )
        self.files = sorted(p for p in root.glob("*/*.jpg"))
        if not self.files:
            raise FileNotFoundError(
                f"{root} holds no <class>/<name>.jpg files. Generate them with "
                "helpers.data.ensure_jpeg_folder(n=2000, root=...)."
            )
        classes = sorted({p.parent.name for p in self.files})
        self.class_index = {c: i for i, c in enumerate(classes)}
        self.transform = transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        from PIL import Image

        path = self.files[i]
        with Image.open(path) as im:
            img = im.convert("RGB")
        label = self.class_index[path.parent.name]
        if self.transform is None:
            return torch.from_numpy(np.array(img)).permute(2, 0, 1).contiguous(), label
        return self.transform(img), label


def gpu_resize_normalize(batch_u8: torch.Tensor, image_size: int) -> torch.Tensor:
    """uint8 NCHW batch → float, resized to ``image_size`` (bilinear) and normalised like the reference.

    A batched GPU version of :func:`reference_transform`. PIL's bilinear
    resize antialiases; for upsampling (32 → 224) antialiasing changes
    nothing, so the two agree closely there.
    """
    x = normalize_u8(batch_u8)
    if x.shape[-1] != image_size or x.shape[-2] != image_size:
        # Antialiasing only changes a downscale; upscaling (32 → 224) skips its slower kernel.
        # Normalising before resizing is exact: both are linear per channel, and bilinear weights sum to 1.
        down = image_size < max(x.shape[-2:])
        x = F.interpolate(x, size=(image_size, image_size), mode="bilinear", align_corners=False, antialias=down)
    return x


class GpuResidentLoader:
    """Batches from a dataset held on the device as uint8: no workers, no copies per step.

    ``images`` is uint8 ``(N, H, W, 3)`` (as from :func:`synthetic_images`).
    Each iteration is one epoch of shuffled, full batches, resized and
    normalised on the device::

        loader = GpuResidentLoader(images, labels, batch_size=256, image_size=224, device="cuda")
        for x, y in loader: ...
    """

    def __init__(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        *,
        batch_size: int,
        image_size: int,
        device: torch.device | str,
        shuffle: bool = True,
        seed: int = 0,
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size={batch_size} must be a positive integer.")
        if batch_size > len(images):
            raise ValueError(f"batch_size={batch_size} is larger than the dataset ({len(images)} images).")
        self.device = torch.device(device)
        self.x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous().to(self.device)
        self.y = torch.as_tensor(labels, dtype=torch.long).to(self.device)
        self.batch_size, self.image_size, self.shuffle = batch_size, image_size, shuffle
        self.generator = torch.Generator(device=self.device).manual_seed(seed)

    def __len__(self) -> int:
        return len(self.x) // self.batch_size

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = len(self.x)
        order = (
            torch.randperm(n, device=self.device, generator=self.generator)
            if self.shuffle
            else torch.arange(n, device=self.device)
        )
        for b in range(len(self)):
            idx = order[b * self.batch_size : (b + 1) * self.batch_size]
            yield gpu_resize_normalize(self.x[idx], self.image_size), self.y[idx]


class JpegBytes(Dataset):
    """The files of a :class:`JpegFolder` as undecoded bytes (uint8 1-D tensors), for decoding on the GPU."""

    def __init__(self, root: Path | str) -> None:
        self.folder = JpegFolder(root)  # same files, same labels, same errors for a missing folder

    def __len__(self) -> int:
        return len(self.folder)

    def __getitem__(self, i: int):
        path = self.folder.files[i]
        # A NumPy array, not a tensor: workers send it pickled, where a tensor would go through
        # shared-memory file descriptors, one per image (slow, and it exhausts descriptors).
        return np.fromfile(path, dtype=np.uint8), self.folder.class_index[path.parent.name]


@dataclasses.dataclass(frozen=True)
class PackedBytes:
    """A batch of encoded images packed into one uint8 tensor, with each image's length.

    One tensor crosses from a worker to the main process per batch: a list of tensors would cost
    one shared-memory block per image, which for small files costs more than reading them
    (02_dataloader's GPU decoder was held back by it).
    """

    flat: torch.Tensor
    lengths: torch.Tensor

    def __len__(self) -> int:
        return len(self.lengths)

    def unpack(self) -> list[torch.Tensor]:
        """The encoded images as 1-D uint8 views into ``flat`` (no copy), for ``decode_jpeg``."""
        return list(torch.split(self.flat, self.lengths.tolist()))


def collate_bytes(batch) -> tuple[PackedBytes, torch.Tensor]:
    """Pack encoded images (they differ in length) into one :class:`PackedBytes`; stack the labels."""
    arrays = [b for b, _ in batch]
    packed = PackedBytes(torch.from_numpy(np.concatenate(arrays)), torch.tensor([len(a) for a in arrays]))
    return packed, torch.tensor([label for _, label in batch])


class GpuJpegLoader:
    """Workers read JPEG bytes; the GPU decodes the whole batch at once (nvJPEG), then resizes and normalises.

        loader = GpuJpegLoader(ensure_jpeg_folder(50_000), batch_size=256, image_size=224, device="cuda",
                               num_workers=4)

    On a CPU the same code decodes on the CPU, so it runs everywhere.
    """

    def __init__(self, root: Path | str, *, batch_size: int, image_size: int, device: torch.device | str,
                 num_workers: int = 2, seed: int = 0) -> None:
        self.device = torch.device(device)
        self.image_size = image_size
        self.loader = torch.utils.data.DataLoader(
            JpegBytes(root), batch_size=batch_size, shuffle=True, drop_last=True, num_workers=num_workers,
            collate_fn=collate_bytes, generator=torch.Generator().manual_seed(seed),
            persistent_workers=num_workers > 0,
        )

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        from torchvision.io import ImageReadMode, decode_jpeg

        for packed, labels in self.loader:
            images = decode_jpeg(packed.unpack(), mode=ImageReadMode.RGB, device=self.device)  # one batched call
            batch = torch.stack(images) if isinstance(images, list) else images
            yield gpu_resize_normalize(batch, self.image_size), labels.to(self.device, non_blocking=True)


def cifar10(root: Path | str | None = None, *, download: bool = True, transform: Callable | None = None) -> InMemoryImages:
    """CIFAR-10's training set as :class:`InMemoryImages`, only when you opt in.

    The course runs on synthetic data by default so that it works offline and
    in CI. This downloads about 170 MB into ``root`` (default: the cache).
    """
    from torchvision import datasets

    root = Path(root) if root is not None else cache_dir() / "cifar10"
    try:
        ds = datasets.CIFAR10(str(root), train=True, download=download)
    except Exception as e:
        raise RuntimeError(
            f"CIFAR-10 could not be loaded from {root} ({type(e).__name__}: {e}). "
            "It needs internet access to download once (or its files copied into that folder). "
            "Without it, keep the default synthetic data: helpers.data.synthetic_images(50_000)."
        ) from e
    return InMemoryImages(np.asarray(ds.data), np.asarray(ds.targets), transform=transform)
