"""02_dataloader's exercises: a fast loader configuration, your own training loop (no per-step syncs; uint8 batches
copied without waiting and normalised on the device), and augmentation on the GPU.

    from helpers.exercises import nb02 as checks
    check1 = checks.check_fast_loader(my_spec, grid_df=grid_df, gpu=True, measure=lambda s: ...)
    check2 = checks.check_loop_without_syncs(my_loop, device="cuda")
    check3 = checks.check_loop_from_bytes(my_loop, device="cuda")
    check4 = checks.check_gpu_augment(gpu_augment, device="cuda")
    my_prediction = checks.predict(fastest_over_no_workers_x=3)      # before the grid runs
    checks.check_prediction(my_prediction, grid_df, started=started)  # started: checks.measuring(...) in the grid's cell

Try the exercises before reading the reference solutions below.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .. import augment, bench, data, env, models
from ..syncs import SyncFinder
from ..augment import AugmentParams
from ..loaders import LoaderSpec, best_spec
from . import predictions
from .predictions import Prediction, measuring
from .common import CheckResult, WrongForm, as_flag, as_function, as_instance, as_number, failed, not_done

__all__ = ["fast_loader", "train_loop", "classic_loop", "bytes_loop_with_syncs", "gpu_augment", "loop_batches",
           "time_loops", "check_fast_loader", "check_loop_without_syncs", "check_loop_from_bytes", "check_gpu_augment",
           "predict", "measuring", "check_prediction"]


# -- the reference solutions ---------------------------------------------------------------------------

def fast_loader(grid_df, *, pinned: bool | None = None) -> LoaderSpec:
    """The fastest loader the grid measured for training: at the largest batch (the GPU needs big batches,
    01_baseline), leaving one core to the main process, which launches the GPU work, and pinned when
    ``pinned=True`` (training on a GPU: a pageable copy would wait for the previous step to finish)."""
    return best_spec(grid_df, batch_size=int(grid_df["batch_size"].max()), max_workers=max(0, env.usable_cpus() - 1),
                     pin_memory=pinned)


def train_loop(model, opt, batches, device) -> torch.Tensor:
    """One step per batch of ``(uint8 images, labels)``: each batch copied to ``device`` without waiting (from pinned
    memory, a copy the GPU makes while the host goes on), normalised there, then forward, cross-entropy, backward and
    the optimizer's step; the losses kept on the device, so nothing in the loop makes the host wait for the GPU.
    Returns them as one tensor; the caller reads them when it needs them, once."""
    losses = []
    for x_u8, y in batches:
        x = data.normalize_u8(x_u8.to(device, non_blocking=True))  # a quarter of float32's bytes over the bus
        y = y.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())  # still on the device: no wait
    return torch.stack(losses)


def classic_loop(model, opt, batches, device) -> torch.Tensor:
    """01's habits, as a loop: the images made float on the host and copied at four times the bytes, a wait after
    the copy and after the step, and the loss read every step."""
    losses = []
    for x_u8, y in batches:
        x = data.normalize_u8(x_u8).to(device)
        y = y.to(device)
        if device.type == "cuda":
            torch.cuda.synchronize()  # wait for the copy
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()  # wait for the step
        losses.append(loss.item())  # and once more: the host reads the loss
    return torch.tensor(losses)


def bytes_loop_with_syncs(model, opt, batches, device) -> torch.Tensor:
    """:func:`train_loop`'s copies with :func:`classic_loop`'s waits: the loop that, beside your own, measures what
    removing the waits alone gains."""
    losses = []
    for x_u8, y in batches:
        x = data.normalize_u8(x_u8.to(device, non_blocking=True))
        y = y.to(device, non_blocking=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        losses.append(loss.item())
    return torch.tensor(losses)


def loop_batches(n: int, *, batch: int, size: int, device, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n`` batches of random uint8 images and labels in host memory, as a loader's workers hand them over: pinned
    when ``device`` is a GPU (a DataLoader with ``pin_memory=True``)."""
    g = torch.Generator().manual_seed(seed)
    pin = torch.device(device).type == "cuda"
    out = []
    for _ in range(n):
        x = torch.randint(0, 256, (batch, 3, size, size), generator=g, dtype=torch.uint8)
        y = torch.randint(0, 10, (batch,), generator=g)
        out.append((x.pin_memory(), y.pin_memory()) if pin else (x, y))
    return out


def time_loops(loops: dict[str, Callable], *, batches, size: int, device, repeats: int = 3):
    """Each loop trains its own copy of one ReferenceCNN on the same ``batches``, timed from the first batch to the
    last step's end (synchronised), after one untimed pass (cuDNN picks its algorithms, the allocator fills its
    pool). The rounds alternate between the loops, so a moment of host jitter cannot move one of them alone."""
    import pandas as pd

    dev = torch.device(device)
    torch.manual_seed(0)
    base = models.ReferenceCNN(size).to(dev)
    runs = {}
    for name, fn in loops.items():
        model = copy.deepcopy(base)
        runs[name] = (fn, model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), [])
        fn(model, runs[name][2], batches[:2], dev)  # warm-up
    for _ in range(repeats):
        for name, (fn, model, opt, times) in runs.items():
            times.append(bench.time_it(lambda: fn(model, opt, batches, dev), warmup=0, repeats=1,
                                       device=dev).median_ms)
    images = sum(len(y) for _x, y in batches)
    rows = []
    for name, (_fn, _m, _o, times) in runs.items():
        m = bench.Measurement.of(times)
        rows.append({"loop": name, "images": images, "ms": m.median_ms, "spread_pct": m.spread_pct,
                     "img/s": images / (m.median_ms * 1e-3)})
    df = pd.DataFrame(rows).set_index("loop")
    df["× vs " + df.index[0]] = df["ms"].iloc[0] / df["ms"]
    # img/s and the ratio are the reader's arithmetic on the images and times as shown (02 read 2,664 img/s beside
    # 960 images and 360 ms, which give 2,667)
    df.attrs.update(spread="spread_pct", spread_of=["ms", "img/s", "× vs " + df.index[0]],
                    ratio_of={"× vs " + df.index[0]: ("ms", df.index[0], "base/row")},
                    derived={"img/s": lambda r: r["images"] / (r["ms"] * 1e-3)})
    return df


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
        return not_done(name, ref, "Set my_spec to a LoaderSpec and run this cell again (from your grid "
                                   "[02-07], the worker sweep [02-10] and the pinned copies [02-14]).")
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
                                 "pick a loader within them (the worker sweep shows what workers past the cores did "
                                 "here: they share the same cores).")
    if spec.batch_size * 2 < largest:
        return failed(name, ref, f"batch_size={spec.batch_size} feeds the GPU small batches: a step's fixed work (its "
                                 "launches, the optimizer's update of every weight) is spread over fewer images; pick "
                                 f"one of the grid's larger batches (up to {largest}).")
    if gpu and not spec.pin_memory:
        return failed(name, ref, "For training on a GPU, pin the memory: a copy from pageable memory waits for all the "
                                 "work queued before it, so the GPU finishes each step before the next can be queued. "
                                 "Pinned memory with non_blocking=True copies while the GPU still computes. The grid, "
                                 "which runs no model, cannot show this; the notebook's pageable training run "
                                 "measures what it costs here.")
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
        return not_done(name, ref, "Write gpu_augment and run this cell again ([02-30] says what "
                                   "cpu_augment does to each image).")
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


# -- your own loop -------------------------------------------------------------------------------------

_LOOP_STEPS, _LOOP_BATCH, _LOOP_SIZE = 4, 8, 32


@dataclasses.dataclass
class _LoopRun:
    """What a learner's loop did on the check's batches: its result (or why it has none), the syncs it made, and
    how it moved each batch."""

    losses: torch.Tensor | None
    want: torch.Tensor
    weights_match: bool
    syncs: SyncFinder
    moves: dict[str, list[_Call]]  # "images"/"labels" → the calls made on the batch tensors handed over
    problem: CheckResult | None = None


#: Reads of a tensor's description, not of its data: neither a copy nor a conversion.
_METADATA = {"__get__", "size", "dim", "is_pinned", "__len__", "numel", "stride", "is_contiguous", "element_size",
             "data_ptr", "__hash__"}


@dataclasses.dataclass(frozen=True)
class _Call:
    """One call made on a batch tensor handed to the loop: what it was, and what it made."""

    name: str            # "to", "float", "__truediv__", ...
    to_device: bool      # a copy to the training device (.to(device...) or .cuda())
    non_blocking: bool
    dtype: torch.dtype | None  # the dtype of what it returned (None: not a tensor)
    on_host: bool        # what it returned is on the CPU

    def shown(self) -> str:
        return f".{self.name}(...)" + (f", which made a {str(self.dtype).replace('torch.', '')} tensor"
                                       if self.dtype is not None else "")


class _BatchCalls(TorchFunctionMode):
    """Records the calls whose ``self`` is one of the batch tensors handed to the loop (by identity): how the
    learner's code moved and converted each one. ``device`` is the object the loop is handed: on a machine without
    a GPU, ``x.to(device)`` with it is the copy to the device (it returns x itself there)."""

    def __init__(self, batches, device: torch.device) -> None:
        super().__init__()
        self.device = device
        self.ids = {}
        for x, y in batches:
            self.ids[id(x)] = "images"
            self.ids[id(y)] = "labels"
        self.calls: dict[str, list[_Call]] = {"images": [], "labels": []}

    def _to_device(self, name: str, args, kwargs) -> bool:
        if name == "cuda":
            return True
        if name != "to":
            return False
        raw = kwargs.get("device", next((a for a in args[1:] if isinstance(a, (str, torch.device))), None))
        if raw is self.device:
            return True
        try:
            return raw is not None and self.device.type == "cuda" and torch.device(raw).type == "cuda"
        except (RuntimeError, TypeError):
            return False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        out = func(*args, **kwargs)
        if args and isinstance(args[0], torch.Tensor) and id(args[0]) in self.ids and name not in _METADATA:
            blocking = kwargs.get("non_blocking", next((a for a in args[2:] if isinstance(a, bool)), False))
            tensor = out if isinstance(out, torch.Tensor) else None
            self.calls[self.ids[id(args[0])]].append(_Call(
                name, self._to_device(name, args, kwargs), bool(blocking), None if tensor is None else tensor.dtype,
                tensor is not None and tensor.device.type == "cpu"))
        return out


def _run_loop(fn, name: str, device, seed: int | None) -> _LoopRun:
    dev = torch.device(device)
    rng = random.Random(seed if seed is not None else random.randrange(2**31))
    batches = loop_batches(_LOOP_STEPS, batch=_LOOP_BATCH, size=_LOOP_SIZE, device=dev, seed=rng.randrange(2**31))
    torch.manual_seed(rng.randrange(2**31))
    base = models.ReferenceCNN(_LOOP_SIZE).to(dev)
    ref_model, mine = copy.deepcopy(base), copy.deepcopy(base)
    opt = lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)  # noqa: E731
    want = train_loop(ref_model, opt(ref_model), batches, dev).float().cpu()
    run = _LoopRun(None, want, False, SyncFinder(ignore=[t for pair in batches for t in pair], device=dev),
                   {"images": [], "labels": []})
    calls = _BatchCalls(batches, dev)
    try:
        with run.syncs, calls:
            got = fn(mine, opt(mine), batches, dev)
    except NotImplementedError:
        run.problem = not_done(name, train_loop, "Write my_loop's body in [02-loop-4] and run this cell again.")
        return run
    except Exception as e:
        run.problem = failed(name, train_loop, f"It raised {type(e).__name__}: {str(e)[:300]}")
        return run
    run.moves = calls.calls
    if isinstance(got, (list, tuple)) and got and all(isinstance(t, torch.Tensor) and t.numel() == 1 for t in got):
        got = torch.stack([t.reshape(()) for t in got])
    if not isinstance(got, torch.Tensor) or got.numel() != _LOOP_STEPS:
        what = f"a tensor of {got.numel()} values" if isinstance(got, torch.Tensor) else type(got).__name__
        run.problem = failed(name, train_loop, f"It returned {what} for {_LOOP_STEPS} batches: return one loss per "
                                               "step, as one tensor (torch.stack(losses)).")
        return run
    run.losses = got.detach().reshape(-1).float().cpu()
    # a GPU's kernels may add in another order from run to run: its weights are compared more loosely
    rtol, atol = (1e-2, 1e-4) if dev.type == "cuda" else (1e-3, 1e-5)
    run.weights_match = all(torch.allclose(a.detach().cpu(), b.detach().cpu(), rtol=rtol, atol=atol)
                            for a, b in zip(mine.parameters(), ref_model.parameters()))
    return run


def _trains_right(run: _LoopRun, name: str) -> CheckResult | None:
    if run.problem is not None:
        return run.problem
    if not torch.allclose(run.losses, run.want, rtol=1e-3, atol=1e-4) or not run.weights_match:
        return failed(name, train_loop, f"Its losses ({', '.join(f'{v:.4f}' for v in run.losses.tolist())}) or weights "
                                        "differ from the reference loop's on the same batches "
                                        f"({', '.join(f'{v:.4f}' for v in run.want.tolist())}): each batch once, in "
                                        "order: normalise the images (data.normalize_u8), forward, cross-entropy, "
                                        "zero the gradients, backward, the optimizer's step.")
    return None


def _judged_loop(fn, name: str, device, seed: int | None) -> _LoopRun | CheckResult:
    """The learner's loop run beside the reference (what both checks start from), or the check's verdict already:
    not done, the wrong form, a crash, or a loop that trains differently."""
    if fn is None or fn is ...:
        return not_done(name, train_loop, "Write my_loop in [02-loop-4], set my_loop to it, and run this cell again.")
    try:
        fn = as_function(fn, what="my_loop", form="the function itself, my_loop (no brackets: the check calls it with "
                                                  "a model, an optimizer, batches and a device)")
    except WrongForm as e:
        return failed(name, train_loop, str(e))
    run = _run_loop(fn, name, device, seed)
    wrong = _trains_right(run, name)  # a CheckResult is falsy unless it passed: no `or` here
    return run if wrong is None else wrong


def check_loop_without_syncs(fn: Callable | None, *, device, seed: int | None = None) -> CheckResult:
    """``fn(model, opt, batches, device)`` must train as :func:`train_loop` does (the same losses and weights, on fresh
    batches and a fresh network) and make the host wait for the GPU nowhere in its loop: no ``.item()``,
    ``float()``, ``print`` of a tensor, ``.cpu()``, ``if`` on a tensor or ``torch.cuda.synchronize()``
    (:class:`helpers.syncs.SyncFinder`, which finds them on a CPU too)."""
    name = "02 · a loop that never waits"
    run = _judged_loop(fn, name, device, seed)
    if isinstance(run, CheckResult):
        return run
    if run.syncs.count:
        lines = "; ".join(f"{r['what']} × {r['times']} at {r['where']} ({r['code']})"
                          for _, r in run.syncs.table().iterrows())
        return failed(name, train_loop, f"It trains right, but makes the host wait for the GPU {run.syncs.count} times "
                                        f"in {_LOOP_STEPS} steps: {lines}. Keep each loss on the device "
                                        "(loss.detach()) and return them stacked; the caller reads them once.")
    return CheckResult(name, "passed", f"It trains as the reference loop does ({_LOOP_STEPS} steps, the same losses and "
                                       "weights) and never makes the host wait for the GPU.", fn)


def check_loop_from_bytes(fn: Callable | None, *, device, seed: int | None = None) -> CheckResult:
    """``fn(model, opt, batches, device)`` must train as :func:`train_loop` does and move each batch as it does: the
    uint8 images copied to the device as they are, with ``non_blocking=True`` (the batches are pinned on a GPU),
    and converted to float there; the labels copied with ``non_blocking=True`` too."""
    name = "02 · batches as bytes, copied without waiting"
    run = _judged_loop(fn, name, device, seed)
    if isinstance(run, CheckResult):
        return run
    dev = torch.device(device)
    for what in ("images", "labels"):
        calls = run.moves[what]
        moves = [c for c in calls if c.to_device]
        first_move = calls.index(moves[0]) if moves else len(calls)
        # before the first copy everything is on the host; after it, on a GPU, the batch handed over still is (on a
        # machine without one, x.to(device) returns x itself, so only what came before the copy is known to be)
        host_calls = calls[:first_move] + ([c for c in calls[first_move:] if not c.to_device] if dev.type == "cuda" else [])
        converted = next((c for c in host_calls if what == "images" and c.dtype not in (None, torch.uint8) and c.on_host),
                         None)
        if converted is not None:
            return failed(name, train_loop, f"It calls {converted.shown()} on the uint8 images on the host: a float32 "
                                            "batch is four times the bytes to copy. Copy the batch as it comes, and "
                                            "make it float on the device.")
        if not moves:
            return failed(name, train_loop, f"It never copies the {what} to the device it is handed: copy each batch's "
                                            f"{what} there itself, as they come.")
        wrong_kind = next((c for c in moves if what == "images" and c.dtype not in (None, torch.uint8)), None)
        if wrong_kind is not None:
            return failed(name, train_loop, f"It copies the images and converts them in one call ({wrong_kind.shown()}): "
                                            "the copy carries what the call asks for. Copy the uint8 batch as it is, "
                                            "and make it float on the device in a call of its own.")
        blocking = next((c for c in moves if not c.non_blocking), None)
        if blocking is not None:
            return failed(name, train_loop, f"It copies the {what} without non_blocking=True (.{blocking.name}), so the "
                                            "host waits for each copy before queuing the step: from pinned memory the "
                                            "copy can run while the host goes on.")
    return CheckResult(name, "passed", "It copies each uint8 batch and its labels as they are, with non_blocking=True, "
                                       "normalises the images on the device, and trains as the reference loop does.",
                       fn)


# -- the prediction, written before the grid runs ------------------------------------------------------------------

_FASTEST = predictions.Question("fastest_over_no_workers_x", "the grid's fastest loader over the fastest with no "
                                "workers (the main process alone)", "×", 3.0)


def predict(*, fastest_over_no_workers_x: Any = None) -> Prediction:
    """Your prediction, made before the grid runs: ``my_prediction = checks.predict(fastest_over_no_workers_x=3)``."""
    return Prediction({"fastest_over_no_workers_x": fastest_over_no_workers_x})


def check_prediction(prediction: Any, grid_df, *, started: predictions.MeasurementStart) -> CheckResult:
    """Your prediction beside the grid: its fastest img/s over its fastest with ``num_workers=0``."""
    name = "02 · your prediction"
    alone = grid_df.loc[grid_df["num_workers"] == 0, "img_per_s"]
    ratio = float(grid_df["img_per_s"].max() / alone.max()) if len(alone) and alone.max() > 0 else None
    workers = int(grid_df.loc[grid_df["img_per_s"].idxmax(), "num_workers"])
    note = (f"The fastest cell used {workers} workers: each prepares whole batches on a core of its own while the "
            "main process hands them over, so the speed-up is bounded by the cores there are, and by the main "
            "process's own share of the work.")
    return predictions.check_prediction(name, prediction, {"fastest_over_no_workers_x": ratio}, started=started,
                                        cell="02-06", questions=[_FASTEST], note=note)
