"""One training loop with every knob the course turns.

    cfg = TrainConfig.reference_baseline()         # the classic training loop at this scale
    result = train(cfg)                            # → TrainResult
    print(result)                                  # img/s, step times, data-wait share, memory, loss

    faster = dataclasses.replace(cfg, batch_size=256, num_workers=8, pin_memory=True,
                                 non_blocking=True, sync_each_step=False, item_each_step=False,
                                 normalize_on_device=True)

Each step is timed on the host (``time.perf_counter``) and, on a GPU, with
CUDA events around the host-to-device copy and the compute, so the result can
say where a step's time went without adding synchronisations of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
import statistics
import time
from typing import Callable, Container, Iterator, Literal, NoReturn

import torch
from torch import nn

from . import data as _data
from . import env, timebox
from .loaders import LoaderSpec, make_loader
from .models import ReferenceCNN, feature_size

__all__ = ["scheduled_lr", "DTYPES", "DATA_SOURCES", "COMPILE_MODES", "COMPILE_BACKENDS", "step_only_trainer", "explain_out_of_memory", "raise_freed", "TrainConfig", "StepRecord", "TrainResult", "Trainer", "train",
           "compute_only_img_per_s", "SpotBatch", "SpotStep"]

DTYPES = ("fp32", "bf16", "fp16")
DATA_SOURCES = ("memory", "jpeg", "gpu")
# torch.compile's modes: reduce-overhead adds CUDA graphs; max-autotune also times many GEMM/conv kernels (minutes).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
COMPILE_BACKENDS = ("inductor", "aot_eager")
LR_DECAYS = ("none", "linear", "cosine")
_TORCH_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16}
#: The fewest measured steps a training window's figures are taken from (when its time box cuts it short).
MIN_STABLE_STEPS = 5


def _bad(field: str, value, allowed: str) -> ValueError:
    return ValueError(f"TrainConfig.{field}={value!r} is not allowed: {allowed}.")


def scheduled_lr(lr: float, step: int, total: int, *, warmup_steps: int = 0, decay: str = "none") -> float:
    """The learning rate of training step ``step`` (0-based) of ``total``: a linear ramp from lr/N to ``lr`` over
    the first ``warmup_steps``, then ``lr``, decayed to zero at the last step where ``decay`` ("linear", "cosine")
    says so. ``TrainConfig.lr_at`` and the final challenge's reference training both follow it.

        [scheduled_lr(0.1, s, 10, warmup_steps=2, decay="linear") for s in (0, 1, 9)]   # [0.05, 0.1, 0.0]
    """
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if decay == "none":
        return lr
    span = max(1, total - 1 - warmup_steps)  # the last step trains at zero: nothing is left to learn
    done = min(1.0, (step - warmup_steps) / span)
    return lr * ((1 - done) if decay == "linear" else 0.5 * (1 + math.cos(math.pi * done)))


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Every knob of :func:`train`. Build variants with ``dataclasses.replace(cfg, ...)``."""

    batch_size: int = 32
    steps: int = 200  # measured steps, after the warm-up
    warmup_steps: int = 10
    image_size: int = 224
    data: Literal["memory", "jpeg", "gpu"] = "memory"
    dataset_size: int = 50_000
    num_workers: int = 0
    pin_memory: bool = False
    non_blocking: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None
    # Workers resize only and hand over uint8; the float conversion and normalisation run on the device after the
    # copy (4× fewer bytes between processes and over PCIe). data="gpu" always works this way.
    normalize_on_device: bool = False
    dtype: Literal["fp32", "bf16", "fp16"] = "fp32"
    channels_last: bool = False
    compile: bool = False
    compile_mode: str = "default"  # with compile=True: one of COMPILE_MODES
    # "inductor" generates kernels; "aot_eager" captures the same graphs (forward and backward) and runs them with
    # PyTorch's own kernels: what a CPU smoke run uses to check the capture without minutes of C++ compiling
    compile_backend: Literal["inductor", "aot_eager"] = "inductor"
    cudnn_benchmark: bool = False  # let cuDNN time its convolution algorithms once and keep the fastest
    sync_each_step: bool = False  # torch.cuda.synchronize() after the copy and after the step (the classic loop's habit)
    item_each_step: bool = False  # loss.item() every step: a hidden CPU-GPU sync
    grad_accum: int = 1
    lr: float = 0.01
    momentum: float = 0.9
    # The learning rate's schedule over every training step (warm-up steps included): a linear ramp from lr/N to lr
    # over the first lr_warmup_steps, then lr, decayed to zero at the last step where lr_decay says so. A larger
    # batch takes fewer steps; ramping up and decaying lets it learn as much as the small batch's constant rate.
    lr_warmup_steps: int = 0
    lr_decay: Literal["none", "linear", "cosine"] = "none"
    # The seed of the initial weights and of the batch order; None: ``seed``, the data set's. Another init_seed
    # trains the same network on the same data from other weights, in another order: a rerun, as a field measures
    # run-to-run variation (the final challenge fixes it: every run starts from the same weights).
    init_seed: int | None = None
    # SGD(fused=True): one kernel for the whole update over every parameter (foreach: a kernel per operation)
    fused_optimizer: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        def positive_int(name: str, minimum: int = 1) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
                raise _bad(name, v, f"use an integer ≥ {minimum}")

        positive_int("batch_size")
        positive_int("steps")
        positive_int("warmup_steps", 0)
        positive_int("num_workers", 0)
        positive_int("grad_accum")
        positive_int("lr_warmup_steps", 0)
        if self.lr_decay not in LR_DECAYS:
            raise _bad("lr_decay", self.lr_decay, f"choose one of {', '.join(LR_DECAYS)}")
        if self.init_seed is not None and (isinstance(self.init_seed, bool) or not isinstance(self.init_seed, int)):
            raise _bad("init_seed", self.init_seed, "use None (the data's seed) or an integer")
        positive_int("dataset_size")
        if self.dtype not in DTYPES:
            raise _bad("dtype", self.dtype, f"choose one of {', '.join(DTYPES)}")
        if self.compile_backend not in COMPILE_BACKENDS:
            raise _bad("compile_backend", self.compile_backend, f"choose one of {', '.join(COMPILE_BACKENDS)}")
        if self.compile_mode not in COMPILE_MODES:
            raise _bad("compile_mode", self.compile_mode, f"choose one of {', '.join(COMPILE_MODES)}")
        if self.data not in DATA_SOURCES:
            raise _bad("data", self.data, f"choose one of {', '.join(DATA_SOURCES)}")
        if isinstance(self.image_size, bool) or not isinstance(self.image_size, int):
            raise _bad("image_size", self.image_size, "use an integer number of pixels, at least 8")
        try:
            feature_size(self.image_size)
        except ValueError as e:
            raise ValueError(f"TrainConfig.image_size: {e}") from None
        if self.batch_size > self.dataset_size:
            raise _bad("batch_size", self.batch_size, f"it must not exceed dataset_size={self.dataset_size}")
        if self.num_workers == 0 and (self.persistent_workers or self.prefetch_factor is not None):
            field = "persistent_workers" if self.persistent_workers else "prefetch_factor"
            raise _bad(field, getattr(self, field), "it only applies with num_workers ≥ 1")
        if self.prefetch_factor is not None and (not isinstance(self.prefetch_factor, int) or self.prefetch_factor < 1):
            raise _bad("prefetch_factor", self.prefetch_factor, "use None or an integer ≥ 1")
        if self.data == "gpu" and (self.num_workers or self.pin_memory):
            raise _bad("num_workers" if self.num_workers else "pin_memory", self.num_workers or self.pin_memory,
                       "data='gpu' keeps the dataset on the device and uses no loader workers or pinned memory")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise _bad("lr", self.lr, "use a positive learning rate")

    @property
    def order_seed(self) -> int:
        """The seed of the initial weights and the batch order: ``init_seed``, or the data's ``seed``."""
        return self.seed if self.init_seed is None else self.init_seed

    def lr_at(self, step: int) -> float:
        """The learning rate of training step ``step`` (0-based, warm-up steps included) under this schedule.

            cfg = TrainConfig(lr=0.04, lr_warmup_steps=5, lr_decay="cosine", warmup_steps=3, steps=45)
            [round(cfg.lr_at(i), 4) for i in (0, 4, 5, 47)]     # [0.008, 0.04, 0.04, 0.0]
        """
        return scheduled_lr(self.lr, step, self.warmup_steps + self.steps, warmup_steps=self.lr_warmup_steps,
                            decay=self.lr_decay)

    @property
    def scheduled(self) -> bool:
        """Does the learning rate change over the run?"""
        return self.lr_warmup_steps > 0 or self.lr_decay != "none"

    @classmethod
    def reference_baseline(cls, scale: env.Scale | None = None) -> "TrainConfig":
        """The reference workload as a classic training loop runs it: batch 32, no workers, pageable memory,
        a sync after the copy and after each step plus ``loss.item()``, fp32, 224×224.

        At smoke scale the same loop runs on 64×64 images for a few steps.
        """
        scale = scale or env.scale()
        base = cls(
            batch_size=32,
            num_workers=0,
            pin_memory=False,
            sync_each_step=True,
            item_each_step=True,
            dtype="fp32",
            data="memory",
        )
        if scale == "full":
            return dataclasses.replace(base, image_size=224, steps=300, warmup_steps=20, dataset_size=50_000)
        return dataclasses.replace(base, image_size=64, batch_size=16, steps=12, warmup_steps=2, dataset_size=512)


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """One step's times in milliseconds. GPU times come from CUDA events and are filled in at the end."""

    index: int
    images: int
    step_ms: float  # host wall time of the whole step
    data_ms: float  # host time blocked waiting for the next batch
    copy_host_ms: float  # host time in .to(device) (+ the sync after it, if any)
    compute_host_ms: float  # host time launching forward/backward/step (+ the sync after it, if any)
    item_ms: float  # host time in loss.item(), if the config asks for it


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What one :func:`train` run measured (over the steps after the warm-up)."""

    config: TrainConfig = dataclasses.field(repr=False)
    device: str
    precision: str  # what ran for config.dtype on this device (env.resolve_dtype): "fp16" for bf16 on a T4
    img_per_s: float
    step_ms_median: float
    step_ms_p95: float
    # Share of wall time the host was blocked waiting for the next batch (with data="gpu": the GPU's time
    # making batches). In an asynchronous loop the GPU may still be busy while the host waits: read it
    # beside the GPU's activity (the monitor), as helpers.diagnose does.
    data_wait_share: float
    phase_ms: dict[str, float]  # median per step: data, h2d (+ normalize_on_device), compute, other
    peak_allocated_gib: float | None  # PyTorch's allocator: the most memory live tensors held (exact, not sampled)
    loss: float  # mean over the last quarter of the measured steps
    accuracy: float  # training accuracy over the measured steps
    steps: int
    wall_s: float
    records: tuple[StepRecord, ...] = dataclasses.field(repr=False, default=())
    losses: tuple[float, ...] = dataclasses.field(repr=False, default=())
    # Set when the training window's time box stopped the run before cfg.steps (helpers.timebox).
    cut: timebox.Cut | None = dataclasses.field(repr=False, default=None)

    @property
    def stable(self) -> bool:
        """False when the time box cut the window below the steps a stable figure needs: its img/s is NaN."""
        return self.cut is None or self.cut.stable

    def summary(self) -> str:
        mem = f"{self.peak_allocated_gib:.2f} GiB" if self.peak_allocated_gib is not None else "n/a (CPU)"
        if not self.stable:
            return f"not measured here: {self.cut}"
        return (
            f"{self.img_per_s:,.0f} img/s | step {self.step_ms_median:.1f} ms median, {self.step_ms_p95:.1f} ms p95 | "
            f"waiting for data {self.data_wait_share:.0%} | PyTorch allocated peak {mem} | "
            f"loss {self.loss:.3f}, accuracy {self.accuracy:.0%} | {self.steps} steps on {self.device}"
            + (f" | {self.config.dtype} ran as {self.precision}" if self.precision != self.config.dtype else "")
            + self._below_median_step()
        )

    def _below_median_step(self) -> str:
        """Where img/s reads more than 3% below batch ÷ median step (02's data on the GPU, one H200: 5,456 img/s
        beside a 45.8 ms median step, which would be 5,590), why: img/s is images over the wall clock."""
        if not (self.step_ms_median > 0 and self.img_per_s > 0):
            return ""
        # a step's images over the median step as printed beside it, so the reader's division gives this figure
        step_ms = round(self.step_ms_median, 1) or self.step_ms_median  # under 0.05 ms: the unrounded step
        per_step = self.config.batch_size * self.config.grad_accum / (step_ms / 1e3)
        if self.img_per_s >= 0.97 * per_step:
            return ""
        return (f" | {self.img_per_s:,.0f} img/s is images over the wall clock, below the {per_step:,.0f} of batch ÷ "
                "median step: slower steps than the median, and time between steps, count too")

    def as_row(self) -> dict[str, float | str | None]:
        """A flat dict for comparison tables."""
        return {
            "img_per_s": self.img_per_s,
            "step_ms_median": self.step_ms_median,
            "step_ms_p95": self.step_ms_p95,
            "data_wait_share": self.data_wait_share,
            "peak_allocated_gib": self.peak_allocated_gib,
            "loss": self.loss,
            "accuracy": self.accuracy,
        }


@dataclasses.dataclass(frozen=True)
class _StepEvents:
    """CUDA events of one step, read after the run (events add no synchronisation)."""

    data_start: torch.cuda.Event
    data_end: torch.cuda.Event
    copy_start: torch.cuda.Event
    copy_end: torch.cuda.Event
    step_end: torch.cuda.Event

    @classmethod
    def new(cls) -> "_StepEvents":
        return cls(*(torch.cuda.Event(enable_timing=True) for _ in range(5)))


@dataclasses.dataclass(frozen=True)
class SpotBatch:
    """One micro-batch of a spot-checked step: its inputs and labels as the forward got them, and the logits the
    forward computed (a copy: under CUDA graphs the graph's output is overwritten by the next replay)."""

    x: torch.Tensor
    y: torch.Tensor
    logits: torch.Tensor


@dataclasses.dataclass(frozen=True)
class SpotStep:
    """What the spot check of one training step sees, after its forward and backward and before its optimizer step
    (the weights are still the ones that computed it; each parameter's ``.grad`` holds the step's gradients).

        def spot_check(s: SpotStep): print(s.index, [b.x.shape[0] for b in s.micro_batches], s.grad_scale)
    """

    index: int  # the step, counted from 0, warm-up included
    micro_batches: tuple[SpotBatch, ...]
    grad_accum: int  # each micro-batch's loss was divided by this before its backward: the grads are their sum
    grad_scale: float | None  # the GradScaler's scale the gradients carry (fp16); None: they carry none


@functools.lru_cache(maxsize=4)
def _synthetic(n: int, seed: int):
    # Cached: notebooks build many loaders over one data set.
    return _data.synthetic_images(n, seed=seed)


def _cycle(make_iter: Callable[[], Iterator]) -> Iterator:
    """Iterate epochs forever (a step count, not an epoch count, ends a run)."""
    while True:
        yield from make_iter()


class Trainer:
    """The training loop, one step at a time (so profilers and monitors can wrap a step).

    ``Trainer(cfg).run()`` is :func:`train`. ``trainer.step()`` runs one step.

    ``spot_check(SpotStep)``: called with a step's micro-batches (inputs, labels, the logits its forward computed)
    after the step's backward and before its optimizer step, so the weights are still the ones that computed them
    and each ``.grad`` holds the step's gradients (the final challenge's spot check). Which steps: those in
    ``spot_steps`` (a set fixed before the run: probes), or those ``spot_draw(step)`` says yes to, asked only once
    the step's forward and backward have run, so that nothing the forward can read says whether its step will be
    checked (the final challenge: ``spot_draw=spot.draw``). The check's time is left out of the step's and the
    run's, unless the check is ``deferred`` (it only copies the step then, and compares after the run: those copies
    stay in the step's time, and nothing is left out).

        Trainer(cfg, spot_check=print, spot_steps={3})              # step 3's SpotStep, printed
    """

    def __init__(self, cfg: TrainConfig, *, device: torch.device | str | None = None, model: nn.Module | None = None,
                 spot_check: Callable[[SpotStep], None] | None = None, spot_steps: Container[int] = (),
                 spot_draw: Callable[[int], bool] | None = None):
        if spot_draw is not None and spot_steps:
            raise ValueError("Trainer: give spot_steps (fixed before the run) or spot_draw (asked after each step), "
                             "not both")
        self.cfg = cfg
        self.device = torch.device(device) if device is not None else env.device()
        self.cuda = self.device.type == "cuda"
        torch.manual_seed(cfg.order_seed)
        torch.backends.cudnn.benchmark = cfg.cudnn_benchmark  # process-wide: every Trainer sets it from its config
        model = model if model is not None else ReferenceCNN(image_size=cfg.image_size)
        model = model.to(self.device)
        if cfg.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        # nn.Module's own named_parameters(), never an override of the network's (which its parameters() would call):
        # an override could hand the optimizer fewer
        self.optimizer = torch.optim.SGD([p for _, p in nn.Module.named_parameters(model)], lr=cfg.lr,
                                         momentum=cfg.momentum,
                                         fused=True if cfg.fused_optimizer else None)
        self.loss_fn = nn.CrossEntropyLoss()
        mode = None if cfg.compile_mode == "default" or cfg.compile_backend != "inductor" else cfg.compile_mode
        self.forward: Callable = torch.compile(model, mode=mode, backend=cfg.compile_backend) if cfg.compile else model
        # CUDA graphs (reduce-overhead, max-autotune) replay into the same output memory: tell them where a step starts
        self._graphs = (cfg.compile and cfg.compile_backend == "inductor" and self.cuda
                        and cfg.compile_mode in ("reduce-overhead", "max-autotune"))
        # What this device computes for cfg.dtype: bf16 on a GPU without it runs as fp16 (with the scaler below),
        # bf16/fp16 on a CPU without their instructions as fp32; each said once (env.resolve_dtype).
        self.precision = env.resolve_dtype(cfg.dtype, self.device)
        self.scaler = torch.amp.GradScaler(self.device.type) if self.precision == "fp16" else None
        self.autocast_dtype = _TORCH_DTYPE.get(self.precision)
        self._batches = self._make_batches()
        self.records: list[StepRecord] = []
        self._events: list[_StepEvents] = []
        self._losses: list[torch.Tensor] = []
        self._correct = torch.zeros((), dtype=torch.long, device=self.device)
        self._seen = 0
        self.images_trained = 0  # every step's images, warm-up included (the final challenge's rule counts them)
        self.steps_done = 0  # every step, warm-up included: the index the spot check is called with
        self._spot_check, self._spot_steps, self._spot_draw = spot_check, spot_steps, spot_draw
        self.spot_check_s = 0.0  # host time the spot check took (left out of the steps' times and the run's)
        self._spot_copy: tuple[int, int] | None = None  # a deferred check's copies: (peak before them, their bytes)

    # -- data ---------------------------------------------------------------------------------
    def _make_batches(self) -> Iterator:
        cfg = self.cfg
        if cfg.data == "gpu":
            images, labels = _synthetic(cfg.dataset_size, cfg.seed)
            loader = _data.GpuResidentLoader(
                images, labels, batch_size=cfg.batch_size, image_size=cfg.image_size, device=self.device,
                seed=cfg.order_seed
            )
            return _cycle(lambda: iter(loader))
        if cfg.normalize_on_device:
            transform = _data.resize_transform(cfg.image_size)
        else:
            transform = _data.reference_transform(cfg.image_size)
        if cfg.data == "memory":
            images, labels = _synthetic(cfg.dataset_size, cfg.seed)
            dataset = _data.InMemoryImages(images, labels, transform=transform)
        else:
            dataset = _data.JpegFolder(_data.ensure_jpeg_folder(cfg.dataset_size, seed=cfg.seed), transform=transform)
        spec = LoaderSpec(cfg.batch_size, cfg.num_workers, cfg.pin_memory and self.cuda, cfg.persistent_workers,
                          cfg.prefetch_factor)
        loader = make_loader(dataset, spec, seed=cfg.order_seed)  # warns if num_workers exceeds the usable cores
        return _cycle(lambda: iter(loader))

    # -- one step -----------------------------------------------------------------------------
    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)  # note: a CPU-GPU sync point, on purpose (the baseline's habit)

    def step(self, *, measure: bool = True) -> StepRecord:
        """Run one optimizer step (``grad_accum`` micro-batches) and return its host-side times."""
        cfg, cuda = self.cfg, self.cuda
        t_start = time.perf_counter()
        data_s = copy_s = compute_s = 0.0
        ev = _StepEvents.new() if (cuda and measure) else None
        images = 0
        # with spot_draw, every step keeps its micro-batches: whether this one is checked is drawn after it ran
        keep = self._spot_check is not None and (self._spot_draw is not None or self.steps_done in self._spot_steps)
        spot: list[SpotBatch] | None = [] if keep else None
        self.optimizer.zero_grad(set_to_none=True)
        if self._graphs:
            torch.compiler.cudagraph_mark_step_begin()
        for micro in range(cfg.grad_accum):
            t0 = time.perf_counter()
            if ev is not None and micro == 0:
                ev.data_start.record()
            x, y = next(self._batches)
            if ev is not None and micro == 0:
                ev.data_end.record()  # with data="gpu" the batch is GPU work between these two events
            t1 = time.perf_counter()
            if ev is not None and micro == 0:
                ev.copy_start.record()
            x = x.to(self.device, non_blocking=cfg.non_blocking)
            y = y.to(self.device, non_blocking=cfg.non_blocking)
            if cfg.normalize_on_device and x.dtype == torch.uint8:  # data="gpu" batches arrive normalised already
                x = _data.normalize_u8(x)
            if cfg.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            if ev is not None and micro == 0:
                ev.copy_end.record()
            if cfg.sync_each_step:
                self._sync()
            t2 = time.perf_counter()
            with torch.autocast(self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None):
                logits = self.forward(x)
                loss = self.loss_fn(logits, y) / cfg.grad_accum
            if spot is not None:  # cloned: a CUDA graph's output is overwritten by its next replay (B×10 numbers)
                spot.append(SpotBatch(x, y, logits.detach().clone()))
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
            else:
                loss.backward()
            if measure:
                self._correct += (logits.detach().argmax(1) == y).sum()
                self._losses.append(loss.detach() * cfg.grad_accum)
            t3 = time.perf_counter()
            data_s, copy_s, compute_s = data_s + (t1 - t0), copy_s + (t2 - t1), compute_s + (t3 - t2)
            images += x.shape[0]
        t4 = time.perf_counter()
        if spot is not None and self._spot_draw is not None and not self._spot_draw(self.steps_done):
            spot = None  # drawn now, after the step's forward and backward: not this one
        spot_s = self._run_spot_check(spot) if spot is not None else 0.0
        if cfg.scheduled:
            lr = cfg.lr_at(self.steps_done)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        if ev is not None:
            ev.step_end.record()
        if cfg.sync_each_step:
            self._sync()
        t5 = time.perf_counter()
        item_s = 0.0
        if cfg.item_each_step:
            _ = loss.item()  # note: a CPU-GPU sync point: the host waits for the whole step
            item_s = time.perf_counter() - t5
        t_end = time.perf_counter()
        rec = StepRecord(
            index=len(self.records),
            images=images,
            step_ms=(t_end - t_start - spot_s) * 1e3,
            data_ms=data_s * 1e3,
            copy_host_ms=copy_s * 1e3,
            compute_host_ms=(compute_s + (t5 - t4) - spot_s) * 1e3,
            item_ms=item_s * 1e3,
        )
        self.images_trained += images
        self.steps_done += 1
        if measure:
            self.records.append(rec)
            self._seen += images
            if ev is not None:
                self._events.append(ev)
        return rec

    def _done_event(self) -> "torch.cuda.Event | None":
        """A CUDA event after all the work the last step queued (None on a CPU): the monitor times the step by when
        the GPU reaches it, not by when the host queued it. Recording one costs microseconds and no sync."""
        if not self.cuda:
            return None
        ev = torch.cuda.Event(enable_timing=True)
        ev.record(torch.cuda.current_stream(self.device))
        return ev

    def _peak_gib(self) -> float | None:
        """The allocator's peak (GiB) since it was last reset, less a deferred spot check's copies: the peak before they
        were made, or the peak since, less their bytes (held from then to the end of the run)."""
        if not self.cuda:
            return None
        peak = torch.cuda.max_memory_allocated(self.device)
        if self._spot_copy is not None:
            before, copies = self._spot_copy
            peak = max(before, peak - copies)
        return peak / 2**30

    def _run_spot_check(self, micro_batches: list[SpotBatch]) -> float:
        """Call the spot check on this step's micro-batches; return the host time it took, to be left out of the
        step's and the run's."""
        # the scale this step's loss was multiplied by (scaler.update() after the optimizer step changes it)
        scale = self.scaler.get_scale() if self.scaler is not None else None
        if getattr(self._spot_check, "deferred", False):
            # it only copies the step (device-to-device, in stream order) and compares after the run: those copies
            # stay in the step's time and the run's, and nothing is taken out of either. Their memory is the
            # harness's, held until the run ends: left out of the run's peak (_peak_gib)
            before = torch.cuda.memory_allocated(self.device) if self.cuda else 0
            peak = torch.cuda.max_memory_allocated(self.device) if self.cuda else 0
            self._spot_check(SpotStep(self.steps_done, tuple(micro_batches), self.cfg.grad_accum, scale))
            if self.cuda:
                self._spot_copy = (peak, torch.cuda.memory_allocated(self.device) - before)
                torch.cuda.reset_peak_memory_stats(self.device)
            return 0.0
        self._sync()  # note: a CPU-GPU sync point, at one step of a run: the check's time starts after the step's work
        start = time.perf_counter()
        self._spot_check(SpotStep(self.steps_done, tuple(micro_batches), self.cfg.grad_accum, scale))
        self._sync()
        spent = time.perf_counter() - start
        self.spot_check_s += spent
        return spent

    # -- a run --------------------------------------------------------------------------------
    def run(self, *, on_step: Callable[[StepRecord], None] | None = None, monitor=None, boxed: bool = True,
            phase_prefix: str = "", peak_over: str = "measured") -> TrainResult:
        """Warm up, then time ``cfg.steps`` steps, or fewer where the training window's time box ends first.

        A window the box cut below :data:`MIN_STABLE_STEPS` gives no figures (``img_per_s`` is NaN, ``stable``
        False): a figure is never taken from a window too short to be stable. ``boxed=False`` runs every step
        whatever the box says (the final challenge: every run trains on the same number of images).

        ``on_step`` sees each measured step; a ``monitor`` (:class:`helpers.monitor.Monitor`) gets every
        step's images and time, and the warm-up and measured parts as phases (named after ``phase_prefix``,
        so that several runs can share one monitor).

        ``peak_over``: the allocator's peak over the ``"measured"`` steps (steady state: what a step needs), or
        over the whole ``"run"``, warm-up included. Under CUDA graphs only the second sees the activations: they
        live in the graph's own pool, allocated while the graph is recorded in warm-up, and replays allocate
        nothing. (It also sees what warm-up alone needed: cuDNN's benchmark workspaces, autotuning.)
        """
        cfg = self.cfg
        phase = monitor.phase if monitor is not None else (lambda name: contextlib.nullcontext())
        if peak_over not in ("measured", "run"):
            raise ValueError(f"peak_over={peak_over!r}: use 'measured' (the measured steps) or 'run' (warm-up too).")
        try:
            if self.cuda and peak_over == "run":
                self._sync()
                torch.cuda.reset_peak_memory_stats(self.device)
            with phase(f"{phase_prefix}warm-up"):
                # A slow GPU spends seconds per step: past its box the warm-up ends after a few steps (compile,
                # autotuning and the loader's workers have started by then). Unboxed (the challenge), every
                # warm-up step runs: the images a run sees are counted.
                warm = _Unboxed(cfg.warmup_steps) if not boxed else timebox.window(
                    "warm_up", planned=cfg.warmup_steps, minimum=min(5, cfg.warmup_steps), keep_minimum=True,
                    unit="warm-up steps", say="once", measured=False, left_out="the measured steps started sooner")
                while warm.more():
                    rec = self.step(measure=False)
                    warm.tick()
                    if monitor is not None:
                        monitor.on_train_step(rec, done=self._done_event())
                self._sync()
                if monitor is not None:
                    monitor.synchronized()  # the steps' times become the GPU's (Monitor.synchronized)
            if self.cuda and peak_over == "measured":
                torch.cuda.reset_peak_memory_stats(self.device)
                if self._spot_copy is not None:  # copied in warm-up: its bytes are held through every measured step
                    self._spot_copy = (0, self._spot_copy[1])
            with phase(f"{phase_prefix}measured"):
                win = timebox.window("training_window", planned=cfg.steps, minimum=MIN_STABLE_STEPS,
                                     left_out="later steps were not run") if boxed else _Unboxed(cfg.steps)
                spot_before = self.spot_check_s
                start = time.perf_counter()
                while win.more():
                    rec = self.step()
                    win.tick()
                    if monitor is not None:  # first: a callback that reads the monitor (a scrape) sees this step
                        monitor.on_train_step(rec, done=self._done_event())
                    if on_step is not None:
                        on_step(rec)
                self._sync()  # note: the clock is read only after the GPU has finished
                wall = time.perf_counter() - start - (self.spot_check_s - spot_before)
                if monitor is not None:  # after the clock: its host work is not the run's
                    monitor.synchronized()
            if monitor is not None and wall > 0:  # its img/s over the measured phase is then the run's, to the digit
                monitor.time_phase(f"{phase_prefix}measured", wall)
        except torch.cuda.OutOfMemoryError as e:
            raise explain_out_of_memory(cfg, e) from None
        return self._result(wall, win.cut)

    def _result(self, wall_s: float, cut: timebox.Cut | None = None) -> TrainResult:
        recs = self.records
        step_ms = sorted(r.step_ms for r in recs)
        p95 = step_ms[min(len(step_ms) - 1, math.ceil(0.95 * len(step_ms)) - 1)]
        if self._events:
            copy_ms = [e.copy_start.elapsed_time(e.copy_end) for e in self._events]
            gpu_ms = [e.copy_end.elapsed_time(e.step_end) for e in self._events]
        else:  # CPU: the host times are the work itself
            copy_ms = [r.copy_host_ms for r in recs]
            gpu_ms = [r.compute_host_ms for r in recs]
        med = statistics.median
        if self.cfg.data == "gpu" and self._events:
            # The batch is made by GPU kernels; time the host spends in next() there is the launch queue
            # pushing back (the GPU is busy), not waiting for data. Count the GPU's own time instead.
            data_ms = [e.data_start.elapsed_time(e.data_end) for e in self._events]
        else:
            data_ms = [r.data_ms for r in recs]
        data = med(data_ms)
        h2d, compute = med(copy_ms), med(gpu_ms)
        phases = {"data": data, "h2d": h2d, "compute": compute, "other": max(0.0, med(step_ms) - data - h2d - compute)}
        losses = torch.stack(self._losses).float().cpu().tolist() if self._losses else []
        tail = losses[-max(1, len(losses) // 4):] if losses else [float("nan")]
        return TrainResult(
            config=self.cfg,
            device=str(self.device),
            precision=self.precision,
            img_per_s=self._seen / wall_s if cut is None or cut.stable else float("nan"),
            step_ms_median=med(step_ms),
            step_ms_p95=p95,
            data_wait_share=min(1.0, sum(data_ms) / 1e3 / wall_s),
            phase_ms=phases,
            peak_allocated_gib=self._peak_gib(),
            loss=sum(tail) / len(tail),
            accuracy=int(self._correct.item()) / max(1, self._seen),
            steps=len(recs),
            wall_s=wall_s,
            records=tuple(recs),
            losses=tuple(losses),
            cut=cut,
        )


class _Unboxed:
    """A training window without a time box: exactly ``planned`` steps (timebox.Window's interface)."""

    def __init__(self, planned: int) -> None:
        self.left, self.cut = planned, None

    def more(self) -> bool:
        return self.left > 0

    def tick(self) -> None:
        self.left -= 1


def explain_out_of_memory(cfg: TrainConfig, e: torch.cuda.OutOfMemoryError) -> torch.cuda.OutOfMemoryError:
    """The OOM error a learner can act on: what ran out, and what to change.

    It drops ``e``'s traceback: the failed step's frames hold its activations, and an error kept by the notebook
    (``sys.last_traceback``) would keep them on the GPU, so the next cell would run out of memory too."""
    e.__traceback__ = None
    bf16 = "" if cfg.dtype in ("bf16", "fp16") else ", dtype='bf16'"  # half precision already: not advice
    return torch.cuda.OutOfMemoryError(
        f"batch_size={cfg.batch_size} at {cfg.image_size}×{cfg.image_size} ({cfg.dtype}) ran out of GPU memory. "
        f"Try batch_size={max(1, cfg.batch_size // 2)}{bf16}, or grad_accum to keep the effective batch. "
        f"(PyTorch said: {str(e).splitlines()[0] if str(e) else 'out of memory'})"
    )


def raise_freed(error: BaseException) -> NoReturn:
    """Raise ``error`` (an out-of-memory error, explained) once the failed run's GPU memory is free again.

    The caller first deletes its own references to the run (``del trainer``); this drops the frames the error
    passed through, which hold the rest, and returns the allocator's cached blocks, so the notebook's next cell
    has the memory back::

        try:
            return trainer.run()
        except torch.OutOfMemoryError as e:
            failed = e
        del trainer
        raise_freed(failed)
    """
    import gc

    error.__traceback__ = None
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    raise error


def train(
    cfg: TrainConfig,
    *,
    device: torch.device | str | None = None,
    model: nn.Module | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
    monitor=None,
) -> TrainResult:
    """Train the reference CNN (or ``model``) as ``cfg`` says; return what was measured.

    With ``monitor=mon`` the live monitor plots every step and shades the warm-up and measured phases.
    """
    setup = monitor.phase("set-up") if monitor is not None else contextlib.nullcontext()
    with setup:  # building the data set and the model takes seconds: show where they went
        trainer = Trainer(cfg, device=device, model=model)
    try:
        return trainer.run(on_step=on_step, monitor=monitor)
    except torch.OutOfMemoryError as e:  # explained by run()
        failed = e
    del trainer  # the failed run's model, optimizer and batches
    raise_freed(failed)


def compute_only_img_per_s(
    cfg: TrainConfig, *, device: torch.device | str | None = None, warmup: int = 5, repeats: int = 20
) -> float:
    """Images per second of ``cfg``'s training step alone: one batch already on the device, stepped again and again.

    No input pipeline can feed the step faster than this: it is the ceiling a loader is measured against::

        ceiling = compute_only_img_per_s(dataclasses.replace(cfg, channels_last=True))
        print(f"the loader reaches {train(cfg).img_per_s / ceiling:.0%} of what the step allows")

    Data and synchronisation knobs of ``cfg`` are ignored; batch size, dtype, memory layout,
    ``compile``, ``cudnn_benchmark`` and ``grad_accum`` count. Timed with CUDA events on a GPU (median).
    """
    from . import bench

    trainer = step_only_trainer(cfg, device=device)
    try:
        ms = bench.time_it(lambda: trainer.step(measure=False), warmup=warmup, repeats=repeats,
                           device=trainer.device).median_ms
    except torch.cuda.OutOfMemoryError as e:
        failed = explain_out_of_memory(cfg, e)
    else:
        return cfg.batch_size * cfg.grad_accum / (ms / 1e3)
    del trainer
    raise_freed(failed)


def step_only_trainer(cfg: TrainConfig, *, device: torch.device | str | None = None,
                      model: nn.Module | None = None) -> Trainer:
    """A :class:`Trainer` whose every ``step()`` trains on one batch already on the device: no input work at all.

    Data and synchronisation knobs of ``cfg`` are ignored; batch size, dtype, memory layout, compile and
    its mode, ``cudnn_benchmark`` and ``grad_accum`` count. ``model``: another network than the reference CNN
    (the reference with a fused kernel in it, say).
    """
    step_cfg = dataclasses.replace(
        cfg, data="gpu", num_workers=0, pin_memory=False, non_blocking=False, persistent_workers=False,
        prefetch_factor=None, normalize_on_device=False, sync_each_step=False, item_each_step=False,
        dataset_size=cfg.batch_size,
    )
    trainer = Trainer(step_cfg, device=device, model=model)
    trainer._batches = itertools.repeat(next(trainer._batches))  # the same batch every time
    return trainer
