"""Exercise checks: correctness first, then the target; friendly text either way.

Every check returns a :class:`CheckResult` whose ``value`` is what the
notebook carries on with: the learner's answer when it passed, the reference
solution (from :mod:`helpers.solutions`) when it is not done yet or wrong. So
an unsolved exercise never breaks the rest of a notebook::

    def ceiling_img_per_s(matmul_tflops, gflop_per_image):
        raise NotImplementedError   # your code here

    res = checks.check_ceiling_img_per_s(ceiling_img_per_s)
    res                      # shows ✅ / ❌ / ⏳ and what to change
    ceiling_fn = res.value   # yours if it passed, else the reference
"""

from __future__ import annotations

import dataclasses
import html
import math
import random
from typing import Any, Callable, Literal

from . import solutions

__all__ = [
    "CheckResult",
    "check_fast_loader",
    "check_gpu_augment",
    "BOTTLENECKS",
    "BaselineEvidence",
    "BaselineAnalysis",
    "check_ceiling_img_per_s",
    "check_baseline_analysis",
    "Target",
    "check_targets",
]

Status = Literal["passed", "failed", "not done"]


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The outcome of one exercise check."""

    exercise: str
    status: Status
    message: str
    value: Any = dataclasses.field(default=None, repr=False)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        icon = {"passed": "✅", "failed": "❌", "not done": "⏳"}[self.status]
        return f"{icon} {self.exercise}: {self.status}. {self.message}"

    def _repr_html_(self) -> str:
        color = {"passed": "#1a7f37", "failed": "#cf222e", "not done": "#6e7781"}[self.status]
        return (
            f'<div style="border-left:4px solid {color};padding:4px 10px;margin:4px 0">'
            f"{html.escape(str(self))}</div>"
        )


def _not_done(exercise: str, reference: Any, hint: str) -> CheckResult:
    return CheckResult(exercise, "not done", f"{hint} The notebook carries on with the reference solution.", reference)


def _failed(exercise: str, reference: Any, why: str) -> CheckResult:
    return CheckResult(exercise, "failed", f"{why} The notebook carries on with the reference solution.", reference)


# -- 00_setup: the compute ceiling of a workload ---------------------------------------------------------

def check_ceiling_img_per_s(fn: Callable[[float, float], float], *, trials: int = 20, seed: int | None = None) -> CheckResult:
    """Check ``fn(matmul_tflops, gflop_per_image) → img/s`` against the reference on fresh random inputs."""
    name = "00 · compute ceiling in img/s"
    ref = solutions.nb00.ceiling_img_per_s
    rng = random.Random(seed)
    for _ in range(trials):
        tflops, gflop = rng.uniform(0.05, 1000.0), rng.uniform(0.1, 50.0)
        try:
            got = fn(tflops, gflop)
        except NotImplementedError:
            return _not_done(name, ref, "Write ceiling_img_per_s and run this cell again.")
        except Exception as e:
            return _failed(name, ref, f"Calling it with ({tflops:.3g}, {gflop:.3g}) raised {type(e).__name__}: {e}.")
        want = ref(tflops, gflop)
        if not isinstance(got, (int, float)) or isinstance(got, bool) or not math.isfinite(got):
            return _failed(name, ref, f"It returned {got!r}; return the number of images per second (a float).")
        if not math.isclose(got, want, rel_tol=1e-6):
            ratio = got / want if want else float("inf")
            hint = ""
            for power in (3, 6, 9, 12):
                if math.isclose(ratio, 10.0**power, rel_tol=1e-3) or math.isclose(ratio, 10.0**-power, rel_tol=1e-3):
                    hint = f" It is off by exactly 10^{power if ratio > 1 else -power}: check the units (TFLOP = 1e12, GFLOP = 1e9)."
            if math.isclose(got * want, 1.0, rel_tol=1e-3):
                hint = " It looks upside down: images per second is FLOP/s divided by FLOP per image."
            return _failed(name, ref, f"For {tflops:.3g} TFLOP/s and {gflop:.3g} GFLOP/image it gave {got:.6g}, expected {want:.6g}.{hint}")
    return CheckResult(name, "passed", f"It matches the reference on {trials} random inputs.", fn)


# -- 01_baseline: the learner's reading of the baseline -------------------------------------------------

#: Where a step's time can go, in the names the analysis uses.
BOTTLENECKS = ("data_loading", "host_to_device_copy", "compute", "sync_and_launch_overhead")
_PHASE_TO_BOTTLENECK = {"data": "data_loading", "h2d": "host_to_device_copy", "compute": "compute",
                        "other": "sync_and_launch_overhead"}


@dataclasses.dataclass(frozen=True)
class BaselineEvidence:
    """What the baseline run measured: the check compares the learner's analysis with this."""

    util_pct: float  # mean NVML utilisation (CPU utilisation without NVML)
    util_source: str  # "nvml" or "host"
    img_per_s: float
    phase_ms: dict[str, float]  # median per step: data, h2d, compute, other
    ceiling_img_per_s: float  # compute-bound ceiling from the measured matmul rate

    @property
    def step_ms(self) -> float:
        return sum(self.phase_ms.values())

    def ranked_bottlenecks(self) -> list[str]:
        """Phases from largest to smallest share of a step, by their analysis names."""
        order = sorted(self.phase_ms, key=lambda k: -self.phase_ms[k])
        return [_PHASE_TO_BOTTLENECK[k] for k in order]

    def headroom_bounds(self) -> tuple[float, float]:
        """(low, high): hiding everything but compute gives at least ``low``×; the roofline caps it at ``high``×."""
        compute = max(self.phase_ms.get("compute", 0.0), 1e-9)
        low = max(1.0, self.step_ms / compute)
        high = max(1.0, self.ceiling_img_per_s / self.img_per_s)
        return (min(low, high), max(low, high))


@dataclasses.dataclass(frozen=True)
class BaselineAnalysis:
    """The learner's baseline report (the written baseline report an investigation starts with, checked)."""

    gpu_util_pct: float | None = None  # what the monitor measured
    bottlenecks: tuple[str, ...] | list[str] = ()  # ranked, largest first, names from BOTTLENECKS
    estimated_headroom_x: float | None = None  # how many times faster this could get


def check_baseline_analysis(answer: BaselineAnalysis, evidence: BaselineEvidence) -> CheckResult:
    """Compare the learner's analysis with the measured evidence."""
    name = "01 · baseline analysis"
    ref = solutions.nb01.baseline_analysis(evidence)
    if answer.gpu_util_pct is None or not answer.bottlenecks or answer.estimated_headroom_x is None:
        return _not_done(name, ref, "Fill in all three fields of BaselineAnalysis and run this cell again.")
    unknown = [b for b in answer.bottlenecks if b not in BOTTLENECKS]
    if unknown:
        return _failed(name, ref, f"{unknown} are not bottleneck names; use these: {', '.join(BOTTLENECKS)}.")
    what = "NVML GPU utilisation" if evidence.util_source == "nvml" else "CPU utilisation (no GPU here)"
    if abs(answer.gpu_util_pct - evidence.util_pct) > 10:
        return _failed(name, ref, f"You wrote {answer.gpu_util_pct:.0f}% utilisation; the monitor measured "
                                  f"{evidence.util_pct:.0f}% mean {what}. Read it from the monitor's summary.")
    ranked = evidence.ranked_bottlenecks()
    if answer.bottlenecks[0] != ranked[0]:
        shares = ", ".join(f"{_PHASE_TO_BOTTLENECK[k]} {v / evidence.step_ms:.0%}" for k, v in evidence.phase_ms.items())
        return _failed(name, ref, f"Your first bottleneck is {answer.bottlenecks[0]!r}, but the step breakdown says "
                                  f"{ranked[0]!r} takes the largest share ({shares}).")
    low, high = evidence.headroom_bounds()
    x = answer.estimated_headroom_x
    if not (0.8 * low <= x <= high * 1.05):
        return _failed(name, ref, f"An estimated headroom of {x:.1f}× is outside what the measurements allow: hiding "
                                  f"everything but compute gives about {low:.1f}×, and the compute ceiling caps it at "
                                  f"{high:.1f}×.")
    return CheckResult(name, "passed", f"Your reading agrees with the measurements (headroom between {low:.1f}× and "
                                       f"{high:.1f}×).", answer)


# -- 02_dataloader: a fast loader configuration, and augmentation on the GPU ----------------------------

def check_fast_loader(spec, *, grid_df, measure: Callable, share_of_best: float = 0.8,
                      gpu: bool = False) -> CheckResult:
    """``spec`` (a LoaderSpec) must suit training: no more workers than cores, a large batch, pinned memory
    when ``gpu``, and at least ``share_of_best`` of the grid's best img/s at its batch size.

    ``measure(spec) → img/s`` measures it again now; the grid's numbers are the reference.
    """
    from . import env
    from .loaders import LoaderSpec

    name = "02 · a fast loader configuration"
    ref = solutions.nb02.fast_loader(grid_df, pinned=True if gpu else None)
    if spec is None:
        return _not_done(name, ref, "Set my_spec to a LoaderSpec and run this cell again.")
    if not isinstance(spec, LoaderSpec):
        return _failed(name, ref, f"my_spec is a {type(spec).__name__}; build it with LoaderSpec(batch_size=..., "
                                  "num_workers=..., pin_memory=...).")
    cores = env.usable_cpus()
    if spec.num_workers > cores:
        return _failed(name, ref, f"num_workers={spec.num_workers} is more than the {cores} cores this process may use: "
                                  "the extra workers only compete for them. Look at the worker sweep.")
    largest = int(grid_df["batch_size"].max())
    if spec.batch_size * 2 < largest:
        return _failed(name, ref, f"batch_size={spec.batch_size} feeds the GPU small batches, which it computes far less "
                                  f"efficiently (01_baseline); pick one of the grid's larger batches (up to {largest}).")
    if gpu and not spec.pin_memory:
        return _failed(name, ref, "For training on a GPU, pin the memory: a copy from pageable memory waits for all the "
                                  "work queued before it, so the GPU finishes each step before the next can be queued. "
                                  "Pinned memory with non_blocking=True copies while the GPU still computes. The grid, "
                                  "which runs no model, cannot show this.")
    same_batch = grid_df[grid_df["batch_size"] == spec.batch_size]
    pool = same_batch if not same_batch.empty else grid_df
    best = float(pool["img_per_s"].max())
    where = f"at batch {spec.batch_size}" if not same_batch.empty else "overall"
    got = measure(spec)
    if got < share_of_best * best:
        return _failed(name, ref, f"{spec.label()} delivered {got:,.0f} img/s; the grid's best {where} reached "
                                  f"{best:,.0f}. Aim for at least {share_of_best:.0%} of it: read the heatmap.")
    return CheckResult(name, "passed", f"{spec.label()} delivered {got:,.0f} img/s ({got / best:.0%} of the grid's best "
                                       f"{where}).", spec)


def check_gpu_augment(fn: Callable, *, device, out_size: int = 64, n: int = 64, seed: int | None = None,
                      repeats: int = 5) -> CheckResult:
    """``fn(batch_u8_nchw, params, out_size)`` must match :func:`helpers.augment.cpu_augment` and beat the CPU loop."""
    import torch

    from . import augment, bench, data

    name = "02 · augmentation on the GPU"
    ref = solutions.nb02.gpu_augment
    rng_seed = seed if seed is not None else random.randrange(2**31)
    images, _ = data.synthetic_images(n, seed=rng_seed)
    params = augment.random_params(n, crop=28, seed=rng_seed + 1)
    batch = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous().to(device)
    try:
        got = fn(batch, params, out_size)
    except NotImplementedError:
        return _not_done(name, ref, "Write gpu_augment and run this cell again.")
    except Exception as e:
        return _failed(name, ref, f"It raised {type(e).__name__}: {e}.")
    want_shape = (n, 3, out_size, out_size)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != want_shape:
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        return _failed(name, ref, f"It returned {shape}; expected a float tensor shaped {want_shape}.")
    if got.device.type != torch.device(device).type:
        return _failed(name, ref, f"The result is on {got.device}, the batch was on {device}: keep the work on the GPU.")
    cpu = torch.stack([augment.cpu_augment(images[i], params.at(i), crop=params.crop, out_size=out_size)
                       for i in range(n)])
    err = (got.float().cpu() - cpu).abs()
    if not torch.isfinite(err).all() or err.max() > augment.TOLERANCE:
        worst = int(err.flatten(1).amax(1).argmax())
        top, left, flip = params.at(worst)
        return _failed(name, ref, f"Image {worst} (crop at top={top}, left={left}, flip={flip}) differs from the CPU "
                                  f"version by up to {float(err[worst].max()):.3f} (tolerance {augment.TOLERANCE:.4f}). "
                                  "Check the crop offsets, which axis you flip, and the normalisation.")
    t_gpu = bench.time_it(lambda: fn(batch, params, out_size), warmup=2, repeats=repeats, device=device).median_ms
    t_cpu = bench.time_it(lambda: [augment.cpu_augment(images[i], params.at(i), crop=params.crop, out_size=out_size)
                                   for i in range(n)], warmup=1, repeats=repeats, device="cpu").median_ms
    if t_gpu >= t_cpu:
        return _failed(name, ref, f"It matches, but takes {t_gpu:.2f} ms against {t_cpu:.2f} ms for the per-image CPU "
                                  "loop: process the whole batch at once instead of image by image.")
    return CheckResult(name, "passed", f"It matches the CPU version within {augment.TOLERANCE:.4f} and runs "
                                       f"{t_cpu / t_gpu:.1f}× faster ({t_gpu:.2f} ms vs {t_cpu:.2f} ms for {n} images).", fn)


# -- full-scale targets: the speed-ups a notebook teaches, asserted on a GPU node -----------------------

@dataclasses.dataclass(frozen=True)
class Target:
    """A figure a notebook promises at full scale: ``figures[figure] >= at_least``.

    ``required=False`` shows the target without asserting it, for a figure that depends on more than
    this course's code (say, a speed-up over a baseline that is bound by the node's CPU); ``why`` says so.
    """

    figure: str
    at_least: float
    why: str
    required: bool = True


def check_targets(figures: dict[str, float], targets: list[Target], *, scale: str | None = None):
    """A table of each target against what was measured; at full scale a missed required target raises.

        table = check_targets(figures, [Target("loader_tuned_speedup", 5, "tuned loader vs baseline")])

    At smoke scale (a CPU, tiny images) the speed-ups of a GPU course do not apply: the table only informs.
    """
    import pandas as pd

    from . import env

    scale = scale or env.scale()
    rows, missed = [], []
    for t in targets:
        if t.figure not in figures:
            raise KeyError(f"no figure named {t.figure!r} was measured; measured: {', '.join(sorted(figures))}.")
        value = float(figures[t.figure])
        met = math.isfinite(value) and value >= t.at_least
        rows.append({"figure": t.figure, "measured": value, "at least": t.at_least, "met": met,
                     "asserted": t.required and scale == "full", "why": t.why})
        if t.required and not met:
            missed.append(f"{t.figure} = {value:.3g}, wanted ≥ {t.at_least:g} ({t.why})")
    if missed and scale == "full":
        raise AssertionError("full-scale target missed: " + "; ".join(missed))
    return pd.DataFrame(rows)
