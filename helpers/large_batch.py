"""A larger batch that learns as much: the same images trained at the baseline's batch and at one eight times larger,
each run judged on held-out images it never saw.

A larger batch runs more images per second, but takes fewer optimizer steps over the same images: with the
baseline's learning rate it learns less. The learning rate, its warm-up and its decay (and the optimizer) decide
whether the larger batch keeps the accuracy. This module trains one recipe and measures it; 04's exercise
(``helpers.exercises.nb04.check_large_batch``) judges the learner's against the baseline's.

    from helpers import large_batch
    setup = large_batch.setup_for()                       # this scale's task, images and batches
    base = large_batch.baseline(setup, seed=0, device="cuda")
    run = large_batch.train_run(setup, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
                                lambda step, steps: 0.01, batch=setup.large_batch, seed=0, device="cuda")
    print(base.accuracy, run.accuracy)                    # the same lr at 8× the batch: it learns less
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import data, env
from .models import ReferenceCNN
from .train import scheduled_lr

__all__ = ["Setup", "Run", "setup_for", "train_run", "baseline", "baseline_mean", "learner_seeds", "BASELINE_SEEDS",
           "sgd", "constant", "warmup_decay", "loss_figure", "runs_table"]

OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]
Schedule = Callable[[int, int], float]


@dataclasses.dataclass(frozen=True)
class Setup:
    """What every run of the exercise trains on: the task, the image size, how many images, the two batches, the
    baseline's learning rate (SGD with momentum 0.9, constant) and how many held-out images judge each run."""

    task: data.Task
    image_size: int
    images: int  # trained on, by every run (the larger batch: the same images in fewer steps)
    base_batch: int = 32
    base_lr: float = 0.01
    large_batch: int = 256
    heldout: int = 4_096
    pool: int = 50_000  # training images drawn; a run of ``images`` shuffles them

    @property
    def base_steps(self) -> int:
        return self.images // self.base_batch

    @property
    def large_steps(self) -> int:
        return self.images // self.large_batch


def setup_for(scale: env.Scale | None = None) -> Setup:
    """This scale's setup. Full scale: the final challenge's images (held-out accuracy keeps rising with the images
    trained, so a recipe that learns less shows) at 64² (the lesson is the optimizer's, not the GPU's: every GPU
    runs it in seconds). Smoke scale (a CPU): the course's images at 16², where a CPU trains the baseline's 8,192
    images in seconds."""
    if (scale or env.scale()) == "full":
        return Setup(task=data.CHALLENGE_TASK, image_size=64, images=24_576)
    return Setup(task=data.COURSE_TASK, image_size=16, images=8_192, heldout=2_048, pool=8_192)


@dataclasses.dataclass(frozen=True)
class Run:
    """One recipe's run: held-out accuracy after training, the training loss's last steps, and its wall time."""

    name: str
    batch: int
    steps: int
    images: int
    accuracy: float  # on setup.heldout images the run never saw
    final_loss: float  # the mean of the last steps' losses (nan: training diverged)
    seconds: float  # training alone (the held-out evaluation after it not counted)
    curve: tuple[tuple[int, float], ...] = ()  # (images seen, training loss) every few steps
    lrs: tuple[float, ...] = ()  # the learning rate each step used

    @property
    def diverged(self) -> bool:
        return not math.isfinite(self.final_loss)

    @property
    def img_per_s(self) -> float:
        """Its images over its training time *as printed* (three figures, as the runs' table shows it), so the table's
        img/s and every sentence quoting it are the reader's division: 04 read 6,251 img/s beside 3.93 s, where
        24,576 ÷ 3.93 is 6,253. Three figures move it by at most 0.5%."""
        from . import tables

        return tables.rate_as_shown(self.images, self.seconds)


def sgd(lr: float) -> OptimizerFactory:
    """SGD with momentum 0.9 at ``lr`` (the baseline's optimizer): ``sgd(0.01)(model.parameters())``."""
    return lambda params: torch.optim.SGD(params, lr=lr, momentum=0.9)


def constant(lr: float) -> Schedule:
    """The learning rate ``lr`` at every step."""
    return lambda step, steps: lr


def warmup_decay(lr: float, warmup: int) -> Schedule:
    """A linear warm-up from lr/warmup to ``lr`` over ``warmup`` steps, then a linear decay to zero at the last step
    (the training loop's own schedule, :func:`helpers.train.scheduled_lr`)."""
    return lambda step, steps: scheduled_lr(lr, step, steps, warmup_steps=warmup, decay="linear")


def _device(device: torch.device | str | None) -> torch.device:
    return torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")


@functools.lru_cache(maxsize=4)
def _tensors(setup: Setup, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The training pool and the held-out images, uint8 NCHW on ``device`` (made once per setup and device)."""
    x, y = data.synthetic_images(setup.pool, task=setup.task)
    hx, hy = data.heldout_images(setup.heldout, task=setup.task)
    as_t = lambda a: torch.from_numpy(a).permute(0, 3, 1, 2).contiguous().to(device)  # noqa: E731
    return as_t(x), torch.from_numpy(y).to(device), as_t(hx), torch.from_numpy(hy).to(device)


def _autocast(device: torch.device):
    # bf16 where the GPU has it (what the course trains in); fp32 elsewhere (a T4, a CPU): what is learned is the
    # lesson, and fp16 would add a loss scaler to it
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast(device.type, enabled=False)


def _prep(xb: torch.Tensor, setup: Setup, device: torch.device) -> torch.Tensor:
    x = data.gpu_resize_normalize(xb, setup.image_size)
    return x.contiguous(memory_format=torch.channels_last) if device.type == "cuda" else x


@torch.no_grad()
def _accuracy(model: nn.Module, setup: Setup, device: torch.device) -> float:
    _, _, hx, hy = _tensors(setup, device)
    model.eval()
    correct = 0
    with _autocast(device):
        for s in range(0, len(hx), 512):
            correct += int((model(_prep(hx[s:s + 512], setup, device)).argmax(1) == hy[s:s + 512]).sum())
    model.train()
    return correct / len(hx)


def _as_rate(value, step: int, steps: int) -> float:
    """A learning rate as a float: a finite number ≥ 0 (numpy scalars and 0-d tensors count), else ValueError."""
    rate = None
    if isinstance(value, torch.Tensor):
        if value.numel() == 1 and (value.dtype.is_floating_point or value.dtype in (torch.int32, torch.int64)):
            rate = float(value)
    elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        try:
            rate = float(value)
        except OverflowError:  # an int too large for a float
            rate = math.inf
    if rate is None or not math.isfinite(rate) or rate < 0:
        try:
            shown = repr(value)
        except ValueError:  # an int with more digits than Python will write out
            shown = "a whole number too large to write out"
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise ValueError(f"the schedule gave the learning rate {shown} at step {step} of {steps}: it must be a finite "
                         "number ≥ 0")
    return rate


def train_run(setup: Setup, make_optimizer: OptimizerFactory, lr_at: Schedule, *, batch: int, seed: int,
              device: torch.device | str | None = None, name: str = "") -> Run:
    """Train a fresh reference CNN (seed ``seed``) on ``setup.images`` images at ``batch``: ``make_optimizer`` is
    handed the model's parameters, and before every step each parameter group's learning rate is set to
    ``lr_at(step, steps)`` (step 0 … steps − 1). The run is judged on held-out images.

    A learning rate that is not a finite number ≥ 0 raises ``ValueError`` naming the step."""
    dev = _device(device)
    x, y, _, _ = _tensors(setup, dev)
    torch.manual_seed(seed)
    model = ReferenceCNN(setup.image_size).to(dev)
    if dev.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    params = list(model.parameters())
    opt = make_optimizer(params)
    if not isinstance(opt, torch.optim.Optimizer):
        raise TypeError(f"the optimizer factory returned {type(opt).__name__}, not a torch.optim.Optimizer: "
                        "return e.g. torch.optim.SGD(params, lr=0.01, momentum=0.9)")
    given = {id(p) for g in opt.param_groups for p in g["params"]}
    if given != {id(p) for p in params}:
        raise ValueError("the optimizer does not train exactly the parameters it was handed: build it from the "
                         "`params` argument (all of them)")
    steps = setup.images // batch
    gen = torch.Generator(device="cpu").manual_seed(seed)
    order = torch.randperm(len(x), generator=gen).to(dev)
    losses = torch.empty(steps, device=dev)
    lrs = []
    t0 = time.perf_counter()
    pos = 0
    for step in range(steps):
        lr = _as_rate(lr_at(step, steps), step, steps)
        lrs.append(lr)
        for g in opt.param_groups:
            g["lr"] = lr
        if pos + batch > len(x):
            order, pos = torch.randperm(len(x), generator=gen).to(dev), 0
        idx = order[pos:pos + batch]
        pos += batch
        with _autocast(dev):
            loss = F.cross_entropy(model(_prep(x[idx], setup, dev)), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses[step] = loss.detach().float()  # no host wait per step: read once at the end
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)  # the queued steps finish before the clock is read
    seconds = time.perf_counter() - t0
    acc = _accuracy(model, setup, dev)
    every = max(1, steps // 24)
    host = losses.cpu().tolist()
    curve = tuple(((s + 1) * batch, host[s]) for s in range(0, steps, every))
    tail = host[-max(1, steps // 10):]
    final = sum(tail) / len(tail)
    return Run(name or f"batch {batch}", batch, steps, steps * batch, acc if math.isfinite(final) else 0.0,
               final, seconds, curve, tuple(lrs))


@functools.lru_cache(maxsize=8)
def _baseline_cached(setup: Setup, seed: int, device: torch.device) -> Run:
    return train_run(setup, sgd(setup.base_lr), constant(setup.base_lr), batch=setup.base_batch, seed=seed,
                     device=device, name=f"baseline, seed {seed}: batch {setup.base_batch}, lr {setup.base_lr:g}")


def baseline(setup: Setup, *, seed: int = 0, device: torch.device | str | None = None) -> Run:
    """The baseline's run (batch ``setup.base_batch``, SGD with momentum 0.9 at ``setup.base_lr``), trained once per
    setup, seed and device and kept."""
    return _baseline_cached(setup, seed, _device(device))


#: The baseline's seeds: its mean over them is the accuracy a larger batch must keep. Three, because one seed's run
#: can land several points from another's (results/archive/probe-large-batch...: 84.6% to 93.0% at full scale).
BASELINE_SEEDS = (0, 1, 2)


def learner_seeds(scale: env.Scale | None = None) -> int:
    """How many fresh seeds a recipe under judgement runs from: three where a run takes a second (a GPU), two on a
    CPU, where one takes several."""
    return 3 if (scale or env.scale()) == "full" else 2


def baseline_mean(setup: Setup, *, device: torch.device | str | None = None) -> tuple[float, list[Run]]:
    """The baseline's mean held-out accuracy over :data:`BASELINE_SEEDS`, and its runs."""
    runs = [baseline(setup, seed=s, device=device) for s in BASELINE_SEEDS]
    return sum(r.accuracy for r in runs) / len(runs), runs


def loss_figure(runs: list[Run], *, title: str):
    """Each run's training loss against the images it has seen: the same images, so a larger batch's curve has fewer
    points, and one that learns less per image lies above."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for r in runs:
        fig.add_trace(go.Scatter(x=[c[0] for c in r.curve], y=[c[1] for c in r.curve], mode="lines+markers",
                                 marker={"size": 4}, name=f"{r.name} ({100 * r.accuracy:.1f}% held-out)"))
    fig.update_layout(title=title, xaxis_title="images trained on", yaxis_title="training loss", height=420,
                      legend={"orientation": "h", "y": -0.3})
    return fig


def runs_table(runs: list[Run]):
    """One row per run: batch, optimizer steps, images, held-out accuracy, the mean loss of its last tenth of steps,
    its training time (the held-out evaluation not counted) and img/s (the images over that time as shown)."""
    import pandas as pd

    df = pd.DataFrame([{"run": r.name, "batch": r.batch, "steps": r.steps, "images": r.images,
                        "held-out accuracy %": 100 * r.accuracy,
                        "loss, mean of the last tenth of steps": r.final_loss, "training time s": r.seconds,
                        "img/s": r.img_per_s}
                       for r in runs]).set_index("run")
    said = loss_against_accuracy(runs)
    if said:
        df.attrs["notes"] = [said]
    return df


def loss_against_accuracy(runs: list[Run]) -> str:
    """A sentence where the runs' training losses and held-out accuracies rank them differently (04's baseline
    seed 2 read the lowest loss and the lowest accuracy, and nothing said why); "" where they agree.

        loss_against_accuracy(runs)   # "seed 2 has the lowest training loss (0.412) and 81.7% held-out, …"
    """
    from . import tables

    ran = [r for r in runs if not r.diverged]
    if len(ran) < 2:
        return ""
    lowest = min(ran, key=lambda r: r.final_loss)
    best = max(ran, key=lambda r: r.accuracy)
    if lowest is best or lowest.accuracy == best.accuracy:
        return ""
    worst = min(ran, key=lambda r: r.accuracy)
    also = " (the lowest held-out accuracy of these runs)" if worst is lowest else ""
    return (f"{lowest.name} has the lowest training loss ({tables.sig(lowest.final_loss)}) and "
            f"{100 * lowest.accuracy:.1f}% held-out{also}, against {100 * best.accuracy:.1f}% for {best.name} "
            f"(loss {tables.sig(best.final_loss)}): the loss is measured on the images a run trains on, the accuracy "
            "on images it never saw, so a run can fit its own images better and still classify new ones worse; "
            "seeds differ in both, and a single run's accuracy carries that spread")
