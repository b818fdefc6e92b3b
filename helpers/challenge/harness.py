"""The harness: every run of the final challenge judged the same way.

    rules = Rules.at_scale()
    ctx = Session.start(rules)                                  # ceilings and FLOPs, measured once per session
    base = judge(Submission("baseline", TrainConfig.reference_baseline()), ctx)
    mine = judge(Submission("mine", cfg, build_model=fuse_relu_pool), ctx, baseline=base)
    print(mine)                       # img/s, speed-up (and its bound), MFU, accuracy, memory, NVML, GPM, the checks
    mine.refused, mine.reasons        # a run that broke a rule, and why

A submission is a :class:`~helpers.train.TrainConfig` and, for a changed network (custom kernels, padded
channels), a function that takes the reference network (its weights) and returns the network to train. The
harness fits the configuration to the rules (:meth:`Rules.fit`: the same data, the same number of images),
checks the network computes the reference's function on the same weights where the work is done (training and
evaluation mode, gradients, a batch drawn at judging: :mod:`.function_check`), trains it with the live monitor
recording (warm-up and measured phases shaded) while a spot check compares one training step with the reference
network (its logits and gradients; the step is drawn only after it has run, so no forward can know it is checked),
and judges the trained weights on the held-out set with the reference network's own forward. MFU counts the
reference network's FLOPs (``FlopCounterMode``: padding or recomputation earns nothing) over the bf16 matmul
ceiling measured in the same session.

Whatever a submission raises (building its network, in the checks, in training, in the held-out evaluation) ends
in a refused verdict naming the exception, not in a crash; a run refused before training is not trained
(``print(v)`` says "refused before training: ..."), and one the spot check refuses stops at that step. Its figures
are NaN (or None) where they were not measured.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random
import secrets
import time
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from .. import bench, env, leaderboard, profiling, tables
from ..models import ReferenceCNN
from ..monitor import Monitor, MonitorRecord, MonitorSummary
from ..train import TrainConfig, TrainResult, Trainer, explain_out_of_memory, raise_freed
from .accuracy import accuracy_check, heldout_accuracy, trained_reference
from .function_check import MAX_CHECK_BATCH, SpotCheck, SpotCheckFailed, check_function, one_line, \
    restored_defaults, spot_precision
from .rules import RuleBroken, Rules
from .start import start_model

__all__ = ["Submission", "Session", "Verdict", "judge", "verdicts_table", "readable_table", "table_notes", "energy_missing",
           "speedup_as_shown"]


def speedup_as_shown(img_per_s: float, baseline_img_per_s: float) -> float:
    """A run's speed-up over the baseline as a reader computes it from the two img/s as printed (whole numbers,
    thousands separated, as every verdict's line and the table print them): 06's channels_last rung read "7.76×"
    beside its 5,591 img/s and the baseline's 721, where 5,591 ÷ 721 is 7.75. The one function behind the speed-up
    printed in a verdict's line (:class:`Verdict`), in :func:`readable_table` and in the report, so they read one
    figure. NaN where a figure was not measured; the unrounded ratio where the baseline prints as 0 img/s (below half
    an image a second: no division of the printed figures exists).

    >>> speedup_as_shown(5591.49, 720.6), tables.times(5591.49 / 720.6), tables.times(speedup_as_shown(5591.49, 720.6))
    (7.754507628294036, '7.76×', '7.75×')

    The leaderboard ranks the unrounded ratio (``Verdict.speedup``: its sealed checks derive it again from the raw
    images and seconds, and refuse a speed-up that is not img/s over the baseline's to 1e-5); this is what is printed.
    """
    return tables.ratio_as_shown(img_per_s, baseline_img_per_s)


@dataclasses.dataclass(frozen=True)
class Submission:
    """What a learner hands in: a name, a training configuration, and (optionally) how to build their network
    from the reference one (which carries the weights every run starts from)."""

    name: str
    config: TrainConfig
    build_model: Callable[[nn.Module], nn.Module] | None = None
    fit: bool = True  # let the harness set the steps for the rules' image count (False: judge the steps as given)


@dataclasses.dataclass(frozen=True)
class Session:
    """What every run of one session is measured against: the rules, this device's ceilings, the reference
    network's FLOPs per training image."""

    rules: Rules
    ceilings: bench.Ceilings
    flops_per_image: float
    device: str

    @classmethod
    def start(cls, rules: Rules | None = None, *, ceilings: bench.Ceilings | None = None) -> "Session":
        rules = rules or Rules.at_scale()
        ceilings = ceilings or bench.session_ceilings()  # 00_setup's of this session, so MFU reads as in 01 and 03
        flops = bench.flops_per_image(ReferenceCNN(rules.image_size), rules.image_size)
        return cls(rules, ceilings, flops, str(env.device()))

    @property
    def ceiling_img_per_s(self) -> float:
        """The compute-bound ceiling: the reference's FLOPs per image at the measured matmul rate."""
        return self.ceilings.img_per_s_ceiling(self.flops_per_image)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One judged run: its figures, the rules' checks (name → (passed, why)) and what was recorded.

    A run that did not go through (``stopped``: "before training", "in training, at step 3 of 8", "in the held-out
    evaluation") has the checks that were decided, NaN for the figures it did not measure, and ``train`` None when
    it never trained."""

    name: str
    config: TrainConfig = dataclasses.field(repr=False)
    checks: dict[str, tuple[bool, str]]
    img_per_s: float
    mfu_pct: float
    accuracy: float
    images_seen: int
    peak_mem_gb: float | None  # the allocator's peak over the whole run, warm-up (and graph recording) included
    nvml_util_pct: float | None
    gpm_sm_pct: float | None
    speedup: float | None  # over the baseline judged in the same session (None: this is the baseline)
    speedup_bound: float | None  # the compute ceiling over that baseline: the most any run could gain here
    baseline_img_per_s: float | None
    step_ms: float
    precision: str
    train: TrainResult | None = dataclasses.field(repr=False)  # None: it never trained (refused before training)
    monitor: MonitorRecord = dataclasses.field(repr=False)
    steady: MonitorSummary = dataclasses.field(repr=False)
    wall_s: float = 0.0
    # with judge(..., profile=True): a few steps profiled after judging (they change nothing judged)
    profile: profiling.ProfileResult | None = dataclasses.field(repr=False, default=None)
    stopped: str = ""  # where a run that did not go through stopped ("before training", ...); "" when it did
    bounded: bool = True  # the session's ceiling bounds runs (a GPU): MFU and the speed-up's bound mean something
    # MFU over the data sheet's dense peak (PaLM's definition) instead of the measured ceiling; None where the course
    # knows no data sheet figure for this GPU, or on a CPU (bench.Ceilings.datasheet_mfu_pct)
    datasheet_mfu_pct: float | None = None
    datasheet_gpu: str | None = None
    # names judge's own record of this verdict (_RECORDED): what entry() ranks and a later run's baseline is read from
    token: str = dataclasses.field(default="", repr=False, compare=False)

    @property
    def refused(self) -> bool:
        return not all(ok for ok, _ in self.checks.values())

    @property
    def speedup_shown(self) -> float | None:
        """The speed-up as printed (:func:`speedup_as_shown`: the two img/s as printed, divided); None for the
        baseline, NaN where a figure was not measured. :attr:`speedup` keeps the unrounded ratio the leaderboard
        ranks."""
        return None if self.speedup is None else speedup_as_shown(self.img_per_s, self.baseline_img_per_s)

    @property
    def peak_mem_gib(self) -> float | None:
        """The peak in GiB, as every notebook gives memory (``peak_mem_gb`` is the leaderboard's GB)."""
        return None if self.peak_mem_gb is None else self.peak_mem_gb * 1e9 / 2**30

    @property
    def j_per_image(self) -> float | None:
        """The board's energy per image over the timed steps (NVML's energy counter: the board's mean power while
        they ran, times their span, over their images); None without the counter (a CPU, a GPU before Volta) or
        where the steps spanned fewer than two of the monitor's samples (:attr:`energy_missing` says which)."""
        return self.steady.j_per_image if self.steady.source == "nvml" else None

    @property
    def energy_missing(self) -> str:
        """Why :attr:`j_per_image` is None, in words ("" where it was measured)."""
        return energy_missing(self.steady, self.train is not None)

    def steady_basis(self) -> str:
        """What the NVML and GPM figures rest on: ``11 samples over the 1.1 s of timed steps``; "" where there are
        none (no NVML). A fast rung trains for about a second: its utilisation is the mean of a handful of samples,
        and says so."""
        if self.nvml_util_pct is None or self.train is None:
            return ""
        n = self.steady.samples // max(len(self.monitor.devices), 1)  # one row per GPU per moment
        wall = self.train.wall_s
        # the interval as taken, not as asked: reading NVML and GPM on a busy host stretches each period
        # and from the seconds as printed ("7 samples over the 1.3 s … one every 0.18 s" had read, where 1.3 ÷ 7 is 0.19)
        shown = tables.sig(wall, 2)
        every = f", about one every {tables.sig(tables.as_shown(shown) / n, 2)} s" if n > 1 else ""
        # no parentheses: the verdict's line already sets this sentence in them
        # the timed steps counted: "5 samples over the 0.90 s of timed steps" beside 24,576 images had read as
        # those images' time, where 20 of the 96 steps were untimed warm-up
        steps = self.train.steps
        return (f"{n} sample{'s' if n != 1 else ''} over the {shown} s of {steps} timed step{'s' if steps != 1 else ''}"
                f"{every}, after untimed warm-up steps")

    @property
    def reasons(self) -> list[str]:
        """Why the run was refused, one line per broken rule (empty when it passed)."""
        return [f"{name}: {why}" for name, (ok, why) in self.checks.items() if not ok]

    def figures(self) -> dict[str, float | None]:
        """The leaderboard's figures (:mod:`helpers.leaderboard`)."""
        return {"img_per_s": self.img_per_s, "speedup": self.speedup if self.speedup is not None else 1.0,
                "mfu_pct": self.mfu_pct, "accuracy": self.accuracy, "peak_mem_gb": self.peak_mem_gb,
                "nvml_util_pct": self.nvml_util_pct, "gpm_sm_pct": self.gpm_sm_pct,
                "speedup_bound": self.speedup_bound, "baseline_img_per_s": self.baseline_img_per_s,
                "datasheet_mfu_pct": self.datasheet_mfu_pct if self.bounded else None}

    def entry(self, name: str | None = None, *, path: Path | str | None = None) -> leaderboard.Entry:
        """This run as a leaderboard entry, sealed for the file at ``path`` (``leaderboard.default_path()`` by
        default, as ``leaderboard.add``): ``print(leaderboard.add(v.entry("my fused pool")))``. ``name``: this
        verdict's by default; it is kept as given. A refused run is sealed too, and refused by ``add``, with its
        reasons. The checks and configuration ranked are judge's own record of the run, not this object's, and every
        figure judge derives (img/s, speed-up, MFU, its bound, the baseline's img/s) is derived again here from the
        raw measurements judge recorded (images, seconds, the ceiling, the baseline's images and seconds);
        raises ``leaderboard.EntryRefused`` when the two disagree (a verdict edited with ``dataclasses.replace``) or
        judge made no such verdict in this process."""
        recorded = _recorded(self, what="it cannot be ranked")
        try:
            figures = _rederived(recorded)
        except leaderboard.EntryRefused as e:
            raise leaderboard.EntryRefused(f"{self.name!r}: {e}") from None
        entry = leaderboard.Entry.of(self.name if name is None else name, figures, dict(recorded.checks),
                                     configuration=recorded.configuration, challenge=recorded.challenge)
        return leaderboard._seal(entry, path=path)  # the harness is the one caller: see leaderboard's threat model

    def row(self) -> dict[str, object]:
        """A flat dict for the comparison table (full precision; :func:`readable_table` formats it for reading)."""
        return {"run": self.name, "img_per_s": self.img_per_s, "speedup": self.speedup, "mfu_pct": self.mfu_pct,
                "datasheet_mfu_pct": self.datasheet_mfu_pct, "accuracy": self.accuracy, "peak_mem_gb": self.peak_mem_gb, "nvml_util_pct": self.nvml_util_pct,
                "gpm_sm_pct": self.gpm_sm_pct, "j_per_image": self.j_per_image, "step_ms": self.step_ms,
                "batch": self.config.batch_size, "precision": self.precision, "passed": not self.refused}

    def __str__(self) -> str:
        if self.stopped:
            where = self.stopped if self.stopped == "before training" else (
                f"{self.stopped}, after {self.images_seen:,} images")
            return f"{self.name}: refused {where}: " + "; ".join(self.reasons)

        def pct(v):
            return "—" if v is None else f"{v:.0f}%"

        bound = f" (at most {tables.times(self.speedup_bound)} here)" if self.speedup_bound is not None else ""
        # from the two img/s as printed (this line's and the baseline's): speedup_as_shown says why
        speed = "the baseline" if self.speedup is None else f"{tables.times(self.speedup_shown)} the baseline{bound}"
        mfu = f"MFU {tables.percent(self.mfu_pct)}%" if self.bounded else "MFU not meaningful on a CPU"
        if self.bounded and self.datasheet_mfu_pct is not None:
            mfu += f" ({tables.percent(self.datasheet_mfu_pct)}% of the {self.datasheet_gpu} data sheet's peak)"
        mem = "—" if self.peak_mem_gib is None else f"{self.peak_mem_gib:.1f} GiB"
        head = (f"{self.name}: {self.img_per_s:,.0f} img/s, {speed}, {mfu}, held-out accuracy "
                f"{self.accuracy:.1%}, peak memory {mem}, NVML {pct(self.nvml_util_pct)}, "
                f"GPM SM {pct(self.gpm_sm_pct)}" + (f" ({self.steady_basis()})" if self.steady_basis() else ""))
        verdict = "passed every rule" if not self.refused else "REFUSED: " + "; ".join(self.reasons)
        return f"{head}\n  {verdict}"


def _judging_draws() -> random.Random:
    """What no submission can know in advance: the randomness the spot check draws its step with, the operating
    system's, used only once each training step's forward and backward have run (:meth:`.SpotCheck.draw`). The seed
    of the batches the function is checked on is drawn by :func:`.check_function` itself, after the network is
    built: nothing a submission's code runs before then can read it."""
    return random.SystemRandom()


def _build(sub: Submission, reference: nn.Module, device: torch.device) -> nn.Module:
    """The network to train: ``sub.build_model`` applied to a copy of the reference network (its weights)."""
    model = copy.deepcopy(reference)
    if sub.build_model is not None:
        try:
            with restored_defaults():
                model = sub.build_model(model)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - the learner's code: its failure is a reason, not a crash
            raise _Stop(f"build_model raised {one_line(e)}: it must take the reference network and return the "
                        "network to train, built from it") from None
        if not isinstance(model, nn.Module):
            raise _Stop(f"build_model returned {type(model).__name__}; it must return the network to train "
                        "(an nn.Module), built from the reference network it was given")
    try:
        return model.to(device)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 (SystemExit and its kin too)
        raise _Stop(f"moving it to {device} raised {one_line(e)}") from None


class _Stop(Exception):
    """Why a run stops before training (the same_function check's reason)."""


@dataclasses.dataclass(frozen=True)
class _Raw:
    """The measurements a verdict's ranked figures are derived from: the measured steps' images and seconds, the
    session's matmul ceiling and the reference network's FLOPs per image, and the same of the baseline."""

    images: int
    seconds: float
    matmul_tflops: float
    flops_per_image: float
    bounds: bool
    baseline: "_Raw | None" = None
    datasheet_tflops: float | None = None  # the GPU data sheet's dense bf16 peak (None: none known, or a CPU)

    @property
    def img_per_s(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else math.nan

    def figures(self) -> dict[str, float | None]:
        """img/s, speed-up, MFU, the speed-up's bound and the baseline's img/s, derived here (the leaderboard's
        ``Verdict.figures`` names) from the raw measurements alone."""
        img = self.img_per_s
        base = self.baseline.img_per_s if self.baseline is not None else img
        # as judge derives them (bench.Ceilings.mfu_pcts): over the ceiling and the data sheet's peak as printed
        ceiling = bench.img_per_s_ceiling(self.matmul_tflops, self.flops_per_image)
        mfu = 100 * img / ceiling
        sheet = (bench.datasheet_share_pct(mfu, self.matmul_tflops, self.datasheet_tflops)
                 if self.bounds and self.datasheet_tflops and math.isfinite(img) else None)
        return {"img_per_s": img, "speedup": img / base if self.baseline is not None else 1.0,
                "mfu_pct": mfu, "speedup_bound": ceiling / base if self.bounds else None,
                "baseline_img_per_s": base, "datasheet_mfu_pct": sheet}


@dataclasses.dataclass(frozen=True)
class _Recorded:
    """What judge computed for one verdict, kept where the verdict object cannot change it."""

    figures: tuple[tuple[str, float | None], ...]
    checks: tuple[tuple[str, bool], ...]
    configuration: str
    step_ms: float
    images_seen: int
    raw: _Raw | None = None  # None: a run that stopped before its figures were measured
    session: str = ""  # the session it was judged in (its rules, ceilings and FLOPs, as text)
    challenge: str = ""  # the challenge of its rules (Rules.challenge): it is ranked only beside runs of the same


#: judge's record of every verdict it made in this process, by the verdict's token. A verdict edited afterwards
#: (dataclasses.replace) still carries its token: its figures then disagree with the record, and it is refused as a
#: baseline and as an entry. (Code running in this process could change this table too: the class judge, which runs
#: each submission in a process of its own, is the boundary against that; see 06's threat model.)
_RECORDED: dict[str, _Recorded] = {}


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _raw(v: Verdict, session: Session, baseline: Verdict | None) -> _Raw | None:
    """The raw measurements of a run that trained: its measured steps' images and seconds (the trainer's records),
    the session's ceiling, and the baseline's own raw measurements (judge's record of it, not the object given)."""
    if v.train is None or v.stopped:
        return None
    base = _RECORDED[baseline.token].raw if baseline is not None else None
    return _Raw(sum(r.images for r in v.train.records), v.train.wall_s, session.ceilings.matmul_tflops,
                session.flops_per_image, session.ceilings.bounds, base, session.ceilings.datasheet_tflops)


def _record(v: Verdict, raw: _Raw | None, session: Session) -> Verdict:
    token = secrets.token_hex(16)
    _RECORDED[token] = _Recorded(tuple(v.figures().items()), tuple((k, ok) for k, (ok, _) in v.checks.items()),
                                 leaderboard.configuration_of(v.config), v.step_ms, v.images_seen, raw, repr(session),
                                 session.rules.challenge())
    return dataclasses.replace(v, token=token)


def _rederived(rec: _Recorded) -> dict[str, float | None]:
    """The figures to rank: each one judge derives from raw measurements (img/s, speed-up, MFU, bound, the
    baseline's img/s) derived again from them now; the rest as judge recorded them."""
    figures = dict(rec.figures)
    if rec.raw is None:
        return figures
    derived = rec.raw.figures()
    off = [k for k, x in derived.items() if not _close(figures.get(k), x)]
    if off:  # judge derived them from these very measurements: a disagreement means the record itself was changed
        raise leaderboard.EntryRefused(f"its {', '.join(off)} do not follow from the images, seconds and ceiling "
                                       "judge measured, so it cannot be ranked: judge the run again.")
    return {**figures, **derived}


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9) or (math.isnan(a) and math.isnan(b))


def _recorded(v: Verdict, *, what: str) -> _Recorded:
    """judge's record of ``v``; raises ``leaderboard.EntryRefused`` (saying ``what`` follows) where there is none or
    ``v`` no longer agrees with it."""
    rec = _RECORDED.get(v.token)
    if rec is None:
        raise leaderboard.EntryRefused(f"{v.name!r}: judge made no such verdict in this process, so {what}: judge the "
                                       "run (harness.judge) and use the verdict it returns.")
    mine = v.figures()
    edited = [k for k, x in rec.figures if not _same(mine.get(k), x)]
    edited += ["checks"] if {k: ok for k, (ok, _) in v.checks.items()} != dict(rec.checks) else []
    edited += ["configuration"] if leaderboard.configuration_of(v.config) != rec.configuration else []
    edited += ["step_ms"] if not _same(v.step_ms, rec.step_ms) else []
    edited += ["images_seen"] if v.images_seen != rec.images_seen else []
    if edited:
        raise leaderboard.EntryRefused(
            f"{v.name!r}: its {', '.join(dict.fromkeys(edited))} no longer match what judge measured (the verdict was "
            f"edited after judge made it), so {what}: judge the run again.")
    return rec


def judge(sub: Submission, session: Session, *, baseline: Verdict | None = None, monitor: Monitor | None = None,
          live: bool | None = False, profile: bool = False) -> Verdict:
    """Fit, check, train and judge ``sub``; return its :class:`Verdict` (refused runs too, with the reasons).

    ``baseline``: the baseline's verdict from this session (for the speed-up and the accuracy rule); without it,
    this run is the baseline. ``monitor``: record into this monitor (a live plot, say) instead of a quiet one.
    ``profile``: after judging, profile three more steps of the same trainer (``Verdict.profile``, for the
    timeline and the top kernels); they run after the held-out accuracy is taken, so they change nothing judged.

    Before training, the network must compute the reference's function on the same weights (training and
    evaluation mode, gradients, on held-out images drawn now: :func:`~.function_check.check_function`); if it does
    not, the run is refused there and not trained. In training, one step (drawn after it ran) is copied and, after
    the run, compared with the reference network (:class:`~.function_check.SpotCheck`); a difference refuses the
    run. An exception from the submission (SystemExit too) ends in a refused verdict that names it. Raises
    :class:`RuleBroken` for a configuration the harness cannot run as the rules say (a batch that does not divide
    the images, other data) or for a ``baseline`` that is not a verdict judge made in this process, in this
    session, as it made it, and the explained out-of-memory error for a run that does not fit the GPU. The verdict
    returned is recorded (:meth:`Verdict.entry` ranks that record).
    """
    if baseline is not None:
        try:
            rec = _recorded(baseline, what="no run can be measured against it")
        except leaderboard.EntryRefused as e:
            raise RuleBroken(f"the baseline {e}") from None
        if rec.session != repr(session):
            raise RuleBroken(f"the baseline {baseline.name!r} was judged in another session (other rules, ceilings or "
                             "device): a speed-up is measured against the baseline of the same session; judge the "
                             "baseline in this one")
    v = _judge(sub, session, baseline=baseline, monitor=monitor, live=live, profile=profile)
    return _record(v, _raw(v, session, baseline), session)


def _judge(sub: Submission, session: Session, *, baseline: Verdict | None, monitor: Monitor | None,
           live: bool | None, profile: bool) -> Verdict:
    rules = session.rules
    cfg = rules.fit(sub.config) if sub.fit else sub.config
    rules.check_data(cfg)
    t_start = time.perf_counter()
    checks: dict[str, tuple[bool, str]] = {}
    total_steps = cfg.warmup_steps + cfg.steps
    reference = start_model(rules)  # the weights every run starts from (a warm start at smoke scale)
    device = env.device()
    # Every run starts from the same compiler state, as in a fresh process: no graphs, CUDA graph pools or
    # recompilation counts left over from the runs judged before it (the on-disk caches still help)
    torch._dynamo.reset()
    try:
        model = _build(sub, reference, device)
    except _Stop as e:
        checks["same_function"] = (False, str(e))
        return _stopped(sub.name, cfg, checks, session, baseline, t_start, "before training")
    reference = reference.to(device)
    check = check_function(model, reference, image_size=rules.image_size, batch=min(cfg.batch_size, MAX_CHECK_BATCH),
                           channels_last=cfg.channels_last, heldout=rules.heldout)
    del reference
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the check's copies and activations
    checks["same_function"] = (check.ok, check.why)
    if not check.ok:
        return _stopped(sub.name, cfg, checks, session, baseline, t_start, "before training")
    precision = env.resolve_dtype(cfg.dtype, device)
    spot = SpotCheck(model, check.mapping, image_size=rules.image_size, precision=spot_precision(precision, device),
                     steps=total_steps, rng=_judging_draws(), deferred=True)
    own = monitor is None
    mon = Monitor(period_s=0.1, live=live) if own else monitor
    if own:  # named by the run it watches ("GPU monitor: my run"), not only by what it samples
        mon.title = f"{mon.title}: {sub.name if len(sub.name) <= 48 else sub.name[:47] + '…'}"
    if own:
        mon.start()
    trainer = result = trained = None
    failed = stop = None
    accuracy, prof = math.nan, None
    try:
        with mon.phase(f"{sub.name}: set-up"):
            trainer = Trainer(cfg, model=model, spot_check=spot, spot_draw=spot.draw)  # drawn after each step ran
        # the peak over the whole run: under CUDA graphs the activations are allocated when the graph is recorded
        with restored_defaults():
            result = trainer.run(monitor=mon, boxed=False, phase_prefix=f"{sub.name}: ", peak_over="run")
        try:  # the step copied during the run, compared now: nothing of the check was taken out of the run's time
            with mon.phase(f"{sub.name}: spot check (the step copied in training)"):
                spot.finish()
        except SpotCheckFailed:
            result = None  # refused at that step: its figures are not ranked
            raise
        trained = trainer.images_trained  # before the profiled steps below: they are not the run's images
        with mon.phase(f"{sub.name}: held-out"):
            # the reference network's own forward on the trained weights (read back through the check's mapping),
            # in the run's precision: whatever the submission's forward does in evaluation mode is not what is judged
            accuracy = heldout_accuracy(trained_reference(trainer.model, check.mapping, rules.image_size),
                                        image_size=rules.image_size, precision=trainer.precision, n=rules.heldout)
        if profile:
            with mon.phase(f"{sub.name}: profiled (after judging)"):
                prof = profiling.profile_steps(lambda: trainer.step(measure=False), wait=0, warmup=1, active=3)
    except torch.cuda.OutOfMemoryError as e:
        failed = explain_out_of_memory(cfg, e)
    except SpotCheckFailed as e:
        checks["same_function"] = (False, str(e))
        stop = f"in training, at step {spot.step} of {total_steps}"
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - the submission's failure is a refusal, with the exception
        if result is None:
            done = trainer.steps_done if trainer is not None else 0
            checks["images_seen"] = (False, f"training stopped at step {done} of {total_steps}: it raised "
                                            f"{one_line(e)}; every step of the run must train")
            stop = f"in training, at step {done} of {total_steps}"
        elif math.isnan(accuracy):
            checks["accuracy_not_worse"] = (False, f"the held-out evaluation raised {one_line(e)}: the trained "
                                                   "network must label held-out images in evaluation mode")
            stop = "in the held-out evaluation"
        else:  # profiled after judging: nothing judged depends on it
            print(f"{sub.name}: profiling after judging raised {one_line(e)}; the verdict stands, without a profile")
    finally:
        if own:
            mon.stop()
    if failed is not None:
        trainer = model = spot = None  # the failed run's network, optimizer, batches: the next run gets the memory
        raise_freed(failed)
    record = mon.snapshot()
    seen = trained if trained is not None else trainer.images_trained if trainer is not None else 0
    if stop is not None and result is None:
        return _stopped(sub.name, cfg, checks, session, baseline, t_start, stop, record=record, seen=seen,
                        precision=precision)
    steady = record.summary(phase=f"{sub.name}: measured", unsupported=mon.unsupported)
    checks["images_seen"] = (seen == rules.images,
                             f"it trained on {seen:,} images; every run trains on {rules.images:,}")
    if stop is not None:  # trained, then failed in the held-out evaluation
        checks["accuracy_not_worse"] = checks.pop("accuracy_not_worse")  # after images_seen, as in every verdict
    elif spot.diverged:
        # the reference network's own logits on the run's weights were not finite at the spot check: the run diverged
        # (or a weight its forward never reads was made so, to blind the check); no accuracy is ranked for it,
        # whatever its own forward answers on the held-out images
        checks["accuracy_not_worse"] = (False, f"at the spot check (training step {spot.step} of {total_steps}) the "
                                               "weights had diverged: the reference network's logits on them were not "
                                               "finite; a run whose weights diverge has no accuracy to rank")
    else:
        checks["accuracy_not_worse"] = accuracy_check(accuracy, rules, baseline)
    mfu, sheet = session.ceilings.mfu_pcts(result.img_per_s, session.flops_per_image)  # over the peaks as printed
    on_gpu = steady.source == "nvml"
    return Verdict(
        name=sub.name, config=cfg, checks=checks, img_per_s=result.img_per_s, mfu_pct=mfu, accuracy=accuracy,
        images_seen=seen,
        peak_mem_gb=result.peak_allocated_gib * 2**30 / 1e9 if result.peak_allocated_gib is not None else None,
        nvml_util_pct=steady.mean_util_pct if on_gpu else None,
        gpm_sm_pct=steady.mean_sm_active_pct if on_gpu else None,
        speedup=result.img_per_s / baseline.img_per_s if baseline is not None else None,
        speedup_bound=session.ceiling_img_per_s / (baseline or result).img_per_s if session.ceilings.bounds else None,
        baseline_img_per_s=(baseline or result).img_per_s,
        step_ms=result.step_ms_median, precision=result.precision, train=result, monitor=record, steady=steady,
        wall_s=time.perf_counter() - t_start, profile=prof, stopped=stop or "", bounded=session.ceilings.bounds,
        datasheet_mfu_pct=sheet, datasheet_gpu=session.ceilings.datasheet_gpu,
    )


def _stopped(name: str, cfg: TrainConfig, checks: dict[str, tuple[bool, str]], session: Session,
             baseline: Verdict | None, t_start: float, where: str, *, record: MonitorRecord | None = None,
             seen: int = 0, precision: str | None = None) -> Verdict:
    """The verdict of a run that stopped before its figures were measured: the checks decided, NaN figures."""
    record = record if record is not None else MonitorRecord(source="host", devices=[], period_s=0.1)
    nan = math.nan
    base = baseline.img_per_s if baseline is not None else nan
    return Verdict(
        name=name, config=cfg, checks=checks, img_per_s=nan, mfu_pct=nan, accuracy=nan, images_seen=seen,
        peak_mem_gb=None, nvml_util_pct=None, gpm_sm_pct=None, speedup=nan,
        speedup_bound=session.ceiling_img_per_s / base if session.ceilings.bounds else None, baseline_img_per_s=base,
        bounded=session.ceilings.bounds, step_ms=nan, precision=precision or env.resolve_dtype(cfg.dtype, env.device()),
        train=None, monitor=record, steady=record.summary(), wall_s=time.perf_counter() - t_start, stopped=where)


def verdicts_table(verdicts: list[Verdict]) -> "pandas.DataFrame":  # noqa: F821
    """One row per judged run, full precision (:func:`readable_table` is the same for reading)."""
    import pandas as pd

    return pd.DataFrame([v.row() for v in verdicts]).set_index("run")


def readable_table(verdicts: list[Verdict]) -> tables.Table:
    """The comparison as a person reads it: img/s as whole numbers, shares in %, units in the column names, "—"
    where this machine cannot measure a figure (the note under the table says why). Full precision stays in
    :func:`verdicts_table` (and in the table's ``data``)."""
    import pandas as pd

    def num(v, fmt):
        return tables.MISSING if v is None or math.isnan(v) else format(v, fmt)

    rows = []
    for v in verdicts:
        rows.append({
            "run": v.name,
            "img/s": num(v.img_per_s, ",.0f"),
            # tables.sig, as tables.times prints each rung's line above the table ("8.35×" beside 8.3 read as two),
            # of the img/s as this table prints them (speedup_as_shown: "7.76×" beside 5,591 and 721 img/s)
            "speed-up ×": "1 (baseline)" if v.speedup is None else (
                tables.MISSING if math.isnan(v.speedup_shown) else tables.sig(v.speedup_shown)),
            # one rounding of MFU everywhere (tables.percent: 0.86, 30.9): the report's chart and text agree with it
            "MFU %": (tables.MISSING if v.mfu_pct is None or math.isnan(v.mfu_pct) else tables.percent(v.mfu_pct))
                     if v.bounded else tables.MISSING,
            # the same FLOP/s over the data sheet's peak: the figure papers (PaLM) report, beside the measured one
            "MFU of data sheet %": (tables.MISSING if v.datasheet_mfu_pct is None or math.isnan(v.datasheet_mfu_pct)
                                    else tables.percent(v.datasheet_mfu_pct)),
            "held-out accuracy %": num(100 * v.accuracy, ".1f"),
            "peak memory GiB": num(v.peak_mem_gib, ".2f"),
            "NVML util %": num(v.nvml_util_pct, ".0f"),
            "GPM SM %": num(v.gpm_sm_pct, ".0f"),
            # millijoules: a fast run's joule per image is a few hundredths
            "mJ/image": tables.MISSING if v.j_per_image is None else tables.sig(1e3 * v.j_per_image),
            "step ms": tables.MISSING if math.isnan(v.step_ms) else tables.sig(v.step_ms),
            "batch": v.config.batch_size,
            "rules": "passed" if not v.refused else "REFUSED" + (f" {v.stopped}" if v.stopped else "") + ": "
                     + ", ".join(n for n, (ok, _) in v.checks.items() if not ok),
        })
    notes = table_notes(verdicts)
    # a baseline that waits on its loader reads 686 img/s beside a 38.4 ms step (833 img/s at batch 32): two bases
    basis = ("step ms: the median step; img/s: every timed image over the whole timed run, data waits and slow steps "
             "included, so it can read below batch ÷ step")
    return tables.Table(data=verdicts_table(verdicts), shown=pd.DataFrame(rows).set_index("run"),
                        notes=(notes, basis) if notes else (basis,))


def table_notes(verdicts: list[Verdict]) -> str:
    """Why a column shows "—", in words (nothing when every figure was measured)."""
    notes = []
    if any(v.stopped for v in verdicts):
        notes.append("a refused run that stopped (before or in training, or in the held-out evaluation): what it did "
                     "not reach was not measured")
    verdicts = [v for v in verdicts if v.train is not None]  # the rest: the note above
    if any(not v.bounded for v in verdicts):
        notes.append(f"MFU (of the ceiling and of the data sheet): {bench.NOT_A_BOUND}")
    if any(v.bounded and v.datasheet_mfu_pct is None and not math.isnan(v.mfu_pct) for v in verdicts):
        notes.append("MFU of data sheet: the course knows no data sheet figure for this GPU")
    if any(v.peak_mem_gb is None for v in verdicts):
        notes.append("peak memory: no GPU allocator on a CPU")
    if any(v.nvml_util_pct is None for v in verdicts):
        notes.append("NVML: no NVIDIA driver here")
    elif any(v.gpm_sm_pct is None for v in verdicts):
        notes.append("GPM SM activity: this GPU has no GPM (it needs Hopper or newer)")
    missing = dict.fromkeys(v.energy_missing for v in verdicts if v.energy_missing)
    if missing:
        notes.append("energy: " + "; ".join(missing))
    return ("— " + "; ".join(notes) + ".") if notes else ""


def energy_missing(steady: MonitorSummary, trained: bool) -> str:
    """Why a run's energy per image was not measured, in words ("" where it was, or where the run never trained:
    the table's note on stopped runs says that)."""
    if not trained or steady.j_per_image is not None:
        return ""
    if steady.source != "nvml":
        return "no board energy counter here (NVML's total energy: an NVIDIA GPU from Volta on)"
    if steady.energy_j is None:
        return "this GPU's driver gives no total energy (NVML's counter needs Volta or newer)"
    return "the timed steps spanned fewer than two of the monitor's samples"
