"""The learner's own training, judged by the time it takes to reach the accuracy target.

    def my_training(model, data, device):          # your loop: data is a TrainingData, model the network to train
        ...
        return model                               # the same network, trained
    v = judge_training(my_training, session, name="my run")
    print(v)          # time to the target (or how far it fell short), img/s, MFU, held-out accuracy, the checks

A training function takes the network to train (the start weights every run shares, already on ``device``), the
challenge's training set as a :class:`~.training_data.TrainingData` (the only way its images reach the function,
counted as they are handed out) and the device, and returns the network it was given, trained (a
``torch.compile`` wrapper around it is fine). A changed network (fused kernels, a padded first convolution) comes
from ``build_model``: it takes the reference network and returns the one to train, and must compute the same
function (checked before training, as the harness of the ladder does).

The harness, in order:

1. builds the network and checks it computes the reference's function on the same weights (training and
   evaluation mode, gradients: :func:`~.function_check.check_function`); a network that does not is not trained;
2. **rehearses** the function on a copy of the network and random images, stopping it after a few batches: the
   compiler, cuDNN's autotuner and CUDA graphs do their one-off work here, outside the clock, as the field's speed
   records warm up before they time;
3. **times** one call from the start weights on the real training set: a synchronised clock started just before
   the call and read once it has returned with all its work done (threads or processes it started and left running
   are waited for a moment, on the clock, and refused if they still run; the harness is a child subreaper
   meanwhile, so a process whose parent ended comes back to it and is seen). At a point of the run drawn now, the
   harness copies the network being trained (on the clock: a copy of the weights, a few milliseconds) and, after the
   clock stops, checks that copy still computes the reference's function: nothing is subtracted from the time;
4. takes the network returned, checks it is the one it handed out and still computes the reference's function, and
   **judges it itself**: the reference network's own forward on the trained weights (read as the clock stopped,
   from the parameters found before it started, and judged before the network returned is asked anything: its
   attributes and methods are the submission's code; a network that changes after that, something still training
   it, is refused; global module hooks and torch function or dispatch modes it left on are taken away and refused),
   on held-out images drawn after the function returned (``rules.to_target_heldout`` of them, from a stream no code can know in advance: the public
   draw any code can make is never the one judged). The run reaches the target when that accuracy is at least the
   target (the classic loop's recipe trained for one epoch, the lower end of what 99% of its reruns reach:
   :mod:`.accuracy`).

What is ranked (:meth:`TrainingVerdict.entry`) is judge_training's own record of the run, not the verdict object,
under the challenge it was judged on (the rules and the target: ``rules.challenge(target)``).

The score is the time to the target: the timed call of a run that reaches it. Images per second and MFU (the
images handed out × the reference network's FLOPs per image, over the time and this session's matmul ceiling) stand
beside it. A run that misses the target is refused with its accuracy and its time.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import io
import math
import os
import random
import secrets
import threading
import time
from pathlib import Path
from typing import Callable, Protocol

import numpy as np
import torch
from torch import nn

from .. import data as _data
from .. import env, leaderboard, tables
from ..models import ReferenceCNN
from ..monitor import Monitor, MonitorRecord
from .accuracy import AccuracyTarget, copy_mapped, fresh_stream, heldout_accuracy, trained_reference
from .function_check import MAX_CHECK_BATCH, Mapping, check_function, fresh_seed, one_line, restored_defaults
from . import leftovers, sandbox
from .harness import Session, energy_missing
from .start import start_model
from .training_data import HandOut, RehearsalOver, TrainingData

__all__ = ["TrainFn", "Gate", "TrainingVerdict", "judge_training", "training_table", "unwrap", "trained_reference",
           "REHEARSAL_BATCHES"]

TrainFn = Callable[[nn.Module, TrainingData, torch.device], nn.Module]


class Gate(Protocol):
    """A judge outside this process (:mod:`.class_children`): ``ready()`` is called just before the timed call and
    returns when the judge has started its clock; ``done(model, mapping)`` after the call returned with its work done,
    and hands the judge the trained weights (the reference's parameters, read through ``mapping``): the judge's clock
    stops when it holds them."""

    def ready(self) -> None: ...

    def done(self, model: nn.Module, mapping: Mapping) -> None: ...
#: Batches the rehearsal hands out before it stops the function: enough for compile's first graphs, a recompile
#: after the first step, and CUDA graphs' warm-up and recording.
REHEARSAL_BATCHES = 8


@dataclasses.dataclass(frozen=True)
class TrainingVerdict:
    """One learner's training function, judged: the time to the target (when reached), the figures beside it, the
    checks (name → (passed, why)) and the monitor's record of the timed run."""

    name: str
    checks: dict[str, tuple[bool, str]]
    accuracy: float  # held-out, the reference forward on the trained weights
    target: float  # the accuracy the run had to reach
    train_s: float  # the timed call, the spot check's copy of the network included
    images: int  # handed out during the timed call
    img_per_s: float
    mfu_pct: float
    peak_mem_gib: float | None
    nvml_util_pct: float | None
    gpm_sm_pct: float | None
    rehearsal_s: float
    monitor: MonitorRecord = dataclasses.field(repr=False)
    stopped: str = ""  # where a run that did not finish stopped; "" when it did
    bounded: bool = True  # MFU means something (a GPU)
    # MFU over the data sheet's dense peak (PaLM's definition); None without a data sheet figure or on a CPU
    datasheet_mfu_pct: float | None = None
    datasheet_gpu: str | None = None
    # the board's energy (NVML's counter): over the monitor's samples in the timed call, and per image over its
    # steps; None without the counter (a CPU, a GPU before Volta) or over fewer than two samples (energy_missing: why)
    energy_j: float | None = None
    j_per_image: float | None = None
    energy_missing: str = ""
    # names judge_training's own record of this verdict (_RECORDED): what entry() ranks
    token: str = dataclasses.field(default="", repr=False, compare=False)

    @property
    def refused(self) -> bool:
        return not all(ok for ok, _ in self.checks.values())

    @property
    def reached(self) -> bool:
        """Did it reach the target (and pass every other rule)?"""
        return not self.refused

    @property
    def time_to_target_s(self) -> float | None:
        """The score: the timed call of a run that reached the target; None for one that did not."""
        return self.train_s if self.reached else None

    @property
    def reasons(self) -> list[str]:
        return [f"{name}: {why}" for name, (ok, why) in self.checks.items() if not ok]

    @property
    def img_per_s_shown(self) -> float:
        """img/s as printed: the images over the timed call's seconds *as printed* (three significant figures), so
        a reader's own division of the two printed figures lands on it (06 had printed "36,864 images in 1.62 s
        (22,694 img/s)", from the unrounded 1.6244 s). :attr:`img_per_s` keeps the measured rate the leaderboard
        checks; MFU is computed from this rate, as printed.

            >>> v.train_s, v.images, round(v.img_per_s_shown)   # doctest: +SKIP
            (1.6244, 36864, 22756)
        """
        shown = tables.rate_as_shown(self.images, self.train_s)
        return self.img_per_s if math.isnan(shown) else shown

    def figures(self, session: Session) -> dict[str, float | None]:
        """The leaderboard's figures of this run (``leaderboard.TO_TARGET``), beside the compute ceiling of
        ``session``, the session it was judged in (MFU is img/s over it). MFU is None where that ceiling bounds
        nothing (a CPU), as this verdict prints it."""
        return {"time_to_target_s": self.time_to_target_s, "train_s": self.train_s, "images": self.images,
                "img_per_s": self.img_per_s, "accuracy": self.accuracy, "target_accuracy": self.target,
                "ceiling_img_per_s": session.ceiling_img_per_s, "mfu_pct": self.mfu_pct if self.bounded else None,
                "datasheet_mfu_pct": self.datasheet_mfu_pct if self.bounded else None,
                "peak_mem_gib": self.peak_mem_gib, "nvml_util_pct": self.nvml_util_pct, "gpm_sm_pct": self.gpm_sm_pct}

    def entry(self, name: str | None = None, *, session: Session, configuration: str = "",
              path: Path | str | None = None) -> leaderboard.Entry:
        """This run as a leaderboard entry of the kind ``"to_target"``, sealed for the file at ``path``
        (``leaderboard.default_path()`` by default, as ``leaderboard.add``)::

            print(leaderboard.add(my_run.entry("Ada", session=session)))

        ``session``: the one it was judged in. ``configuration``: what tells two of your training functions apart
        (one row is kept per name, configuration, device and challenge). A refused run is sealed too, and refused by
        ``add`` with its reasons. What is ranked is judge_training's own record of the run (its figures, checks and
        challenge: the rules and the target it was judged against), not this object: raises
        ``leaderboard.EntryRefused`` when the two disagree (a verdict edited with ``dataclasses.replace``), when
        ``session`` is not the one it was judged in, or when judge_training made no such verdict in this process."""
        rec = _RECORDED.get(self.token)
        if rec is None:
            raise leaderboard.EntryRefused(f"{self.name!r}: judge_training made no such verdict in this process, so "
                                           "it cannot be ranked: judge the run and use the verdict it returns.")
        if rec.rerun_seed is not None:
            raise leaderboard.EntryRefused(f"{self.name!r} started from other weights than every ranked run "
                                           f"(rerun_seed={rec.rerun_seed}, to measure run-to-run variation): runs are "
                                           "ranked from the rules' own start; judge it without rerun_seed.")
        if rec.gated:
            raise leaderboard.EntryRefused(f"{self.name!r} was judged with a gate (a judge in another process starts "
                                           "its clock): such a judge seals its own entries; judge the run without "
                                           "gate= to rank it from here.")
        if repr(session) != rec.session:
            raise leaderboard.EntryRefused(f"{self.name!r} was judged in another session (other rules, ceilings or "
                                           "device): give entry() the session it was judged in.")
        mine = self.figures(session)
        edited = [k for k, x in rec.figures if not _same(mine.get(k), x)]
        edited += ["checks"] if {k: ok for k, (ok, _) in self.checks.items()} != dict(rec.checks) else []
        if edited:
            raise leaderboard.EntryRefused(f"{self.name!r}: its {', '.join(edited)} no longer match what "
                                           "judge_training measured (the verdict was edited after it was made), so "
                                           "it cannot be ranked: judge the run again.")
        entry = leaderboard.Entry.of(self.name if name is None else name, dict(rec.figures), dict(rec.checks),
                                     configuration=configuration, kind="to_target", challenge=rec.challenge)
        return leaderboard._seal(entry, path=path)  # the harness is the one caller: see leaderboard's threat model

    def row(self) -> dict[str, object]:
        """A flat dict (full precision) for a table."""
        return {"run": self.name, "time_to_target_s": self.time_to_target_s, "train_s": self.train_s,
                "accuracy": self.accuracy, "images": self.images, "img_per_s": self.img_per_s,
                "mfu_pct": self.mfu_pct if self.bounded else None, "datasheet_mfu_pct": self.datasheet_mfu_pct,
                "peak_mem_gib": self.peak_mem_gib, "energy_j": self.energy_j, "j_per_image": self.j_per_image,
                "reached": self.reached}

    def __str__(self) -> str:
        if self.stopped:
            return f"{self.name}: refused {self.stopped}: " + "; ".join(self.reasons)
        mfu = f"MFU {tables.percent(self.mfu_pct)}%" if self.bounded else "MFU not meaningful on a CPU"
        if self.bounded and self.datasheet_mfu_pct is not None:
            mfu += f"; {tables.percent(self.datasheet_mfu_pct)}% of the {self.datasheet_gpu} data sheet's peak"
        energy = "" if self.energy_j is None else f", {energy_text(self.energy_j, self.j_per_image)}"
        figures = (f"{self.images:,} images in {tables.sig(self.train_s)} s ({self.img_per_s_shown:,.0f} img/s, {mfu}{energy}), "
                   f"held-out accuracy {self.accuracy:.1%} against the target {self.target:.1%}")
        if self.reached:
            return f"{self.name}: reached the target in {tables.sig(self.train_s)} s\n  {figures}; passed every rule"
        return f"{self.name}: did not reach the target\n  {figures}\n  REFUSED: " + "; ".join(self.reasons)


@dataclasses.dataclass(frozen=True)
class _Recorded:
    """What judge_training concluded about one run, kept where the verdict object cannot change it."""

    figures: tuple[tuple[str, float | None], ...]  # TrainingVerdict.figures in the session it was judged in
    checks: tuple[tuple[str, bool], ...]
    session: str  # that session (its rules, ceilings and FLOPs, as text)
    challenge: str  # its rules and target, in words (Rules.challenge): ranked only beside runs of the same
    rerun_seed: int | None = None  # started from other weights than the rules' (to measure variation): not ranked
    gated: bool = False  # judged with a gate (the class judge's, which seals its own entries): not ranked from here


#: judge_training's record of every verdict it made in this process, by the verdict's token. A verdict edited
#: afterwards (dataclasses.replace) still carries its token: its figures or checks then disagree with the record, and
#: its entry is refused. (Code running in this process could change this table too: the class judge, which runs each
#: submission in a process of its own and seals the entries itself, is the boundary against that.)
_RECORDED: dict[str, _Recorded] = {}


def _record(v: TrainingVerdict, session: Session, *, rerun_seed: int | None, gated: bool) -> TrainingVerdict:
    token = secrets.token_hex(16)
    _RECORDED[token] = _Recorded(tuple(v.figures(session).items()), tuple((k, ok) for k, (ok, _) in v.checks.items()),
                                 repr(session), session.rules.challenge(v.target), rerun_seed, gated)
    return dataclasses.replace(v, token=token)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def unwrap(model: nn.Module) -> nn.Module:
    """The network inside ``torch.compile``'s wrappers (``_orig_mod``), or ``model`` itself. Read from the module's
    own table of submodules: no attribute, property or method of the object is asked (a submission's code could
    run there)."""
    seen = 0
    while seen < 8:
        try:
            inner = object.__getattribute__(model, "_modules").get("_orig_mod")
        except (AttributeError, TypeError):
            break
        if not isinstance(inner, nn.Module):
            break
        model, seen = inner, seen + 1
    return model


#: PyTorch's default for the algorithms cuDNN's autotuner tries, put back before each run (a function may change it).
_CUDNN_BENCHMARK_LIMIT = torch.backends.cudnn.benchmark_limit


class _Clock:
    """Wall time of the timed call, synchronised at both ends (every stream of the device has finished)."""

    def __init__(self, device: torch.device) -> None:
        self.device, self._t0 = device, 0.0

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def start(self) -> None:
        self.sync()
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        self.sync()
        return time.perf_counter() - self._t0


#: Seconds the clock keeps running, after the call returns, for threads and processes it started to end (a loader's
#: pin-memory thread or workers end a moment after their iterator is freed); any still running then is refused.
LEFT_RUNNING_GRACE_S = 2.0


def _children() -> set[int]:
    """The processes this one started and that still run (zombies left out), read from /proc (empty elsewhere)."""
    me = os.getpid()
    return {pid for pid, (ppid, _, state) in sandbox.processes().items() if ppid == me and state != "Z"}


def _left_running(threads_before: set[int], children_before: set[int], grace_s: float) -> list[str]:
    """Threads and child processes started since ``*_before`` that still run ``grace_s`` seconds from now, each
    waited for meanwhile: what a training function left running after it returned (empty: nothing)."""
    deadline = time.monotonic() + grace_s
    new = [t for t in threading.enumerate() if t.ident not in threads_before and t.is_alive()]
    for t in new:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    procs = _children() - children_before
    while procs and time.monotonic() < deadline:
        time.sleep(0.02)
        for pid in list(procs):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)  # reaps a child that ended (a process of ours that is not: an error)
        procs = _children() - children_before
    left = [f"thread {t.name!r}" for t in new if t.is_alive()]
    return left + [f"process {pid}" for pid in sorted(procs)]


def _random_data(n: int, image_size: int, hand_out: HandOut) -> TrainingData:
    """Random images and labels, as many as the training set holds (a function may size its schedule by
    ``len(data)``): what the rehearsal trains on, so no real image is learned from outside the clock."""
    rng = np.random.default_rng(random.SystemRandom().randrange(2**32))
    images = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, _data.NUM_CLASSES, size=n)
    return TrainingData(images, labels, image_size=image_size, hand_out=hand_out)


def _stopped(name, checks, target, where, record=None, rehearsal_s=0.0, bounded=True) -> TrainingVerdict:
    record = record if record is not None else MonitorRecord(source="host", devices=[], period_s=0.1)
    nan = math.nan
    return TrainingVerdict(name=name, checks=checks, accuracy=nan, target=target, train_s=nan, images=0,
                           img_per_s=nan, mfu_pct=nan, peak_mem_gib=None, nvml_util_pct=None, gpm_sm_pct=None,
                           rehearsal_s=rehearsal_s, monitor=record, stopped=where, bounded=bounded)


def judge_training(train: TrainFn, session: Session, target: AccuracyTarget, *, name: str = "my run",
                   build_model: Callable[[nn.Module], nn.Module] | None = None, live: bool | None = False,
                   rehearsal_batches: int = REHEARSAL_BATCHES, rerun_seed: int | None = None,
                   gate: "Gate | None" = None) -> TrainingVerdict:
    """Rehearse, time and judge the training function ``train`` (see the module's docstring); the verdict says
    whether it reached ``target`` (:func:`.accuracy.time_target`) and in how long. Whatever the function raises
    ends in a refused verdict that names it. ``rerun_seed``: start from other weights and random state (to measure
    run-to-run variation; a judged run always starts from the rules' own). ``gate``: a judge in another process
    (the class judge) that starts and stops its own clock around the timed call (:class:`Gate`)."""
    if rerun_seed is not None:
        if not isinstance(rerun_seed, int) or isinstance(rerun_seed, bool):
            raise TypeError(f"rerun_seed={rerun_seed!r}: a whole number (the seed of the other start), or None.")
        rerun_seed = int.__int__(rerun_seed)  # its value, whatever a subclass says of itself
    # a child subreaper meanwhile (Linux): a process the function started whose parent ended (a double fork) is
    # re-parented to this one, and is seen among its children as left running
    with sandbox.reaping():
        v = _judge_training(train, session, target, name=name, build_model=build_model, live=live,
                            rehearsal_batches=rehearsal_batches, rerun_seed=rerun_seed, gate=gate)
    return _record(v, session, rerun_seed=None if rerun_seed == session.rules.seed else rerun_seed,
                   gated=gate is not None)


def _judge_training(train: TrainFn, session: Session, target: AccuracyTarget, *, name: str,
                    build_model: Callable[[nn.Module], nn.Module] | None, live: bool | None,
                    rehearsal_batches: int, rerun_seed: int | None, gate: "Gate | None") -> TrainingVerdict:
    rules = session.rules
    device = env.device()
    bounded = session.ceilings.bounds
    checks: dict[str, tuple[bool, str]] = {}
    threshold = float(target.threshold)  # a plain float: a subclass's comparisons are its own, not the judge's
    torch._dynamo.reset()  # every run starts from the same compiler state (the on-disk caches still help)
    torch.backends.cudnn.benchmark = False  # and cuDNN's default: a function that wants its autotuner turns it on
    torch.backends.cudnn.benchmark_limit = _CUDNN_BENCHMARK_LIMIT  # (and how many algorithms it tries)
    seed = rules.seed if rerun_seed is None else rerun_seed
    start = start_model(rules, seed=seed)
    model = copy.deepcopy(start)
    if build_model is not None:
        try:
            with restored_defaults():
                model = build_model(model)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - the learner's code: its failure is a reason, not a crash
            checks["same_function"] = (False, f"build_model raised {one_line(e)}")
            return _stopped(name, checks, threshold, "before training", bounded=bounded)
        if not isinstance(model, nn.Module):
            checks["same_function"] = (False, f"build_model returned {type(model).__name__}, not a network")
            return _stopped(name, checks, threshold, "before training", bounded=bounded)
    model, reference = model.to(device), start.to(device)
    batch = min(MAX_CHECK_BATCH, 16 if device.type == "cpu" else MAX_CHECK_BATCH)
    check = check_function(model, reference, image_size=rules.image_size, batch=batch, heldout=rules.heldout)
    del reference
    checks["same_function"] = (check.ok, check.why if not check.ok else
                               "the network computes the reference's function (checked before training)")
    if not check.ok:
        return _stopped(name, checks, threshold, "before training", bounded=bounded)
    # the tensors the trained weights will be read from, found now: once the clock stops the harness reads them, and
    # judges them on its own network (made now), before it asks the network returned anything (its attributes and
    # methods are the submission's code, which could train a little more there)
    watched, why = _watched(model, check.mapping)
    if why:
        checks["same_function"] = (False, why)
        return _stopped(name, checks, threshold, "before training", bounded=bounded)
    judged = ReferenceCNN(rules.image_size)

    # -- the rehearsal: a copy of the network, random images, a few batches ----------------------------------
    t = time.perf_counter()
    rehearsal = HandOut(limit_batches=rehearsal_batches)
    try:
        # what the function prints while it rehearses on random images is not the run's: kept off the output
        with contextlib.redirect_stdout(io.StringIO()), restored_defaults():
            train(copy.deepcopy(model), _random_data(rules.dataset_size, rules.image_size, rehearsal), device)
    except RehearsalOver:
        pass
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - SystemExit from the learner's code is a refusal too, not the end
        checks["images_seen"] = (False, f"the rehearsal (random images, before the clock) raised {one_line(e)}")
        return _stopped(name, checks, threshold, "in the rehearsal", rehearsal_s=time.perf_counter() - t,
                        bounded=bounded)
    rehearsal_s = time.perf_counter() - t
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)

    # -- the timed run --------------------------------------------------------------------------------------
    images, labels = _challenge_set(rules)
    clock = _Clock(device)
    # where the spot check copies the network: between a tenth and nine tenths of the images the ladder's runs train
    # on (a run that reaches the target trains on about as many or more), drawn batch by batch as they are handed out
    window = min(len(labels), rules.images)
    spot_window = (int(0.1 * window), int(0.9 * window))
    spot_at = spot_window[1]  # the copy is made by then at the latest
    spot: dict[str, object] = {}
    mon = Monitor(period_s=0.1, live=live)
    mon.title = f"{mon.title}: {name if len(name) <= 48 else name[:47] + '…'}"

    def on_batch(n: int) -> None:
        mon.step(images=n)
        if not spot and _spot_now(hand_out.images, hand_out.images + n, spot_window):  # (counted after this call)
            # a copy of the network as it is now, on the clock (a few milliseconds: its weights), checked after the
            # clock stops; nothing the run does while the harness checks can leave the clock, for nothing is paused
            spot["at"] = hand_out.images
            clock.sync()  # the weights of now: every step handed out so far has finished
            try:
                spot["copy"] = copy.deepcopy(model)
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001 - a network the harness cannot copy cannot be checked
                spot["copy"] = e

    hand_out = HandOut(on_batch=on_batch)
    data = TrainingData(images, labels, image_size=rules.image_size, hand_out=hand_out)
    torch.manual_seed(seed)  # the same random state for every run (a learner's picked seed is its own)
    returned, left = None, []
    mon.start()
    threads_before, children_before = {t.ident for t in threading.enumerate()}, _children()  # the monitor's too
    in_process, found, copied, peak = leftovers.snapshot(), [], "the run did not finish", None
    try:
        if gate is not None:
            gate.ready()  # the judge's own clock starts when it answers
        with mon.phase(f"{name}: timed"):
            clock.start()
            try:
                with restored_defaults():
                    returned = train(model, data, device)
                clock.sync()
                # the call's work is done when it returns: what it left running is waited for, on the clock
                left = _left_running(threads_before, children_before, LEFT_RUNNING_GRACE_S)
                if gate is not None:
                    gate.done(model, check.mapping)  # the judge's clock stops when it holds the trained weights
            finally:
                train_s = clock.stop()
                if train_s > 0:  # the monitor's img/s over the timed phase is then the verdict's (06 had read the
                    mon.time_phase(f"{name}: timed", train_s)  # monitor's 585 img/s beside the verdict's 580)
                peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
                # what it left in this process that would act on the judge's own work goes first; then the weights
                found = leftovers.take_away(in_process)
                copied = _copy_into(judged, watched, device)
    except RehearsalOver as e:  # cannot happen outside a rehearsal; kept apart for a clear message if it does
        checks["images_seen"] = (False, f"the run raised {one_line(e)}")
    except torch.cuda.OutOfMemoryError as e:
        checks["images_seen"] = (False, f"the run ran out of GPU memory ({one_line(e, 160)}): a smaller batch, bf16, "
                                        "or fewer tensors kept alive")
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001
        checks["images_seen"] = (False, f"the run raised {one_line(e)} after {hand_out.images:,} images")
    finally:
        mon.stop()
    record = mon.snapshot()
    if returned is None and not checks.get("images_seen"):
        checks["images_seen"] = (False, "the function returned None: return the network you were given, trained")
    if left and not checks.get("images_seen"):
        checks["images_seen"] = (False, f"it returned with work still running ({_few(left)}, {LEFT_RUNNING_GRACE_S:g} "
                                        "s after it returned): a run's work must be done when it returns, for the "
                                        "clock stops then; join its threads and end its processes before returning")
    if found and not checks.get("images_seen"):
        checks["images_seen"] = (False, f"it left {_few(found)} in the judge's process when it returned: those act on "
                                        "every network and tensor operation after it, the judge's own evaluation "
                                        "included (taken away); remove your hooks and leave your modes before "
                                        "returning")
    if "images_seen" in checks:
        return _stopped(name, checks, threshold, "in training", record=record, rehearsal_s=rehearsal_s,
                        bounded=bounded)
    if not train_s > 0:  # the clock was tampered with from inside the run: nothing it says can be ranked
        checks["images_seen"] = (False, f"the timed call read {train_s:.3g} s: a run takes some time")
        return _stopped(name, checks, threshold, "in training", record=record, rehearsal_s=rehearsal_s,
                        bounded=bounded)
    if copied:
        checks["same_function"] = (False, f"the network returned no longer holds the reference's parameters "
                                          f"({copied}): train the network you were given, as it was built")
        return _stopped(name, checks, threshold, "after training", record=record, rehearsal_s=rehearsal_s,
                        bounded=bounded)
    # judged first, on held-out images drawn now, after the function returned: no code can have learned them (the
    # public draw, helpers.data.heldout_images' default stream, any code can make and train on)
    accuracy = heldout_accuracy(judged, image_size=rules.image_size, precision="fp32", n=rules.to_target_heldout,
                                task=rules.task, stream=fresh_stream())

    # -- the network returned, checked by the harness ---------------------------------------------------------
    trained = unwrap(returned) if isinstance(returned, nn.Module) else None
    if trained is not model:
        what = type(returned).__name__
        checks["same_function"] = (False, f"the function returned a {what} that is not the network it was given "
                                          "(nor a torch.compile wrapper around it): train that network and return "
                                          "it; a changed network comes from build_model")
        return _stopped(name, checks, threshold, "after training", record=record, rehearsal_s=rehearsal_s,
                        bounded=bounded)
    if hand_out.images == 0:
        checks["images_seen"] = (False, "it trained on no image of the training set: the images come from data")
    else:
        checks["images_seen"] = (True, f"{hand_out.images:,} images handed out by the harness")
    spot_check = _spot_check(spot.get("copy"), check.mapping, rules, batch)
    if spot_check is None and hand_out.images >= spot_at:
        checks["same_function"] = (False, f"the spot check was due by {spot_at:,} images and did not run")
    elif spot_check is not None and not getattr(spot_check, "ok", False):
        checks["same_function"] = (False, f"at the spot check after {spot.get('at', spot_at):,} images: "
                                          f"{getattr(spot_check, 'why', 'it did not run')}")
    else:
        end = check_function(model, judged, image_size=rules.image_size, batch=batch, seed=fresh_seed(),
                             heldout=rules.heldout)
        if not end.ok:
            checks["same_function"] = (False, f"the network returned: {end.why}")
        else:
            where = f"; at the spot check after {spot.get('at', spot_at):,} images" if spot_check is not None else ""
            checks["same_function"] = (True, f"the reference's function before training{where} and as returned")
    # judged holds the weights as the clock stopped: what changes them later gains nothing, and is seen
    changed = _changed_since(judged, watched)
    if changed:
        checks["same_function"] = (False, f"the network changed after the function returned ({changed}, while the "
                                          "harness judged it): something the function started was still training "
                                          "it; a run's work must be done when it returns, for the clock stops then")
    checks["accuracy_target"] = (
        accuracy >= threshold,
        f"held-out accuracy {accuracy:.1%} (the reference network's forward on the trained weights); the target is "
        f"{threshold:.1%}" + ("" if accuracy >= threshold else f", missed by {100 * (threshold - accuracy):.1f} "
                              f"points after {train_s:.3g} s"))
    steady = record.summary(phase=f"{name}: timed")
    on_gpu = steady.source == "nvml"
    img_per_s = hand_out.images / train_s if train_s > 0 else math.nan
    # MFU from the rate the verdict prints (the images over the time as printed), over the peaks as printed: 06 read
    # "36,864 images in 1.62 s (22,756 img/s, MFU 34.4%)", where 22,756 × 12.06 GFLOP ÷ 801 TFLOP/s is 34.3%
    shown = tables.rate_as_shown(hand_out.images, train_s)
    mfu, sheet = session.ceilings.mfu_pcts(img_per_s if math.isnan(shown) else shown, session.flops_per_image)
    return TrainingVerdict(
        name=name, checks=checks, accuracy=accuracy, target=threshold, train_s=train_s, images=hand_out.images,
        img_per_s=img_per_s, mfu_pct=mfu, peak_mem_gib=peak,
        nvml_util_pct=steady.mean_util_pct if on_gpu else None,
        gpm_sm_pct=steady.mean_sm_active_pct if on_gpu else None,
        rehearsal_s=rehearsal_s, monitor=record, bounded=bounded,
        datasheet_mfu_pct=sheet if bounded else None,
        datasheet_gpu=session.ceilings.datasheet_gpu, energy_j=steady.energy_j if on_gpu else None,
        j_per_image=steady.j_per_image if on_gpu else None, energy_missing=energy_missing(steady, True))


@dataclasses.dataclass(frozen=True)
class Watched:
    """The parameters the trained weights are read from (by the submission's names) and the mapping that reads them
    into the reference network (:attr:`.function_check.FunctionCheck.mapping`)."""

    params: dict[str, nn.Parameter]
    mapping: Mapping


def _watched(model: nn.Module, mapping: Mapping) -> tuple[Watched, str]:
    """The network's parameters that hold the reference's (by name) and the mapping to read them through, found
    before the clock starts; ``(watched, "")``, or ``(None, why)`` where one is not a plain ``nn.Parameter`` (a
    subclass's operations are its own code)."""
    params = dict(nn.Module.named_parameters(model))  # not an override of the submission's
    for _, sub, _ in mapping:
        if type(params.get(sub)) is not nn.Parameter:
            return None, (f"its parameter {sub} is a {type(params.get(sub)).__name__}, not an nn.Parameter: the "
                          "harness reads the trained weights from plain parameters (keep the reference's, as the "
                          "network was built)")
    return Watched({sub: params[sub] for _, sub, _ in mapping}, mapping), ""


def _copy_into(judged: nn.Module, watched: Watched, device: torch.device) -> str:
    """The trained weights, read from the watched parameters, copied into the judge's own network (moved to
    ``device``): "" when done, else what went wrong."""
    try:
        copy_mapped(judged.to(device), watched.params, watched.mapping)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a parameter reshaped or moved away: a reason, not a crash
        return one_line(e)
    return ""


def _changed_since(judged: nn.Module, watched: Watched) -> str:
    """Which of the reference's parameters differ now, in the watched tensors, from ``judged``'s (copied when the
    clock stopped): "" where none does."""
    try:
        with torch.no_grad():
            moved = [ref for ref, sub, sl in watched.mapping if not _same_values(
                torch.Tensor.detach(watched.params[sub])[sl].float(), judged.get_parameter(ref).detach())]
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a parameter removed or reshaped since
        return f"its parameters can no longer be read: {one_line(e)}"
    return _few([f"{n} differs" for n in moved]) if moved else ""


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, value for value, a NaN equal to a NaN (a diverged run's weights did not change by being NaN)."""
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


def _spot_now(before: int, after: int, window: tuple[int, int]) -> bool:
    """Is the batch that took the images handed out from ``before`` to ``after`` the one the spot check copies the
    network at? Drawn as the batch is handed out (nothing decided in advance can be read by the run), so that each
    image of ``window`` (first, last) is as likely as any other to be where the copy is made, and it is made by the
    window's end."""
    lo, hi = window
    if after <= lo:
        return False
    start = max(before, lo)
    if after >= hi or hi <= start:
        return True
    return random.SystemRandom().random() < (after - start) / (hi - start)


def _spot_check(copied, mapping, rules, batch: int):
    """The spot check of the network copied during the run (None: no copy was made), after the clock stopped."""
    from .function_check import FunctionCheck

    if copied is None:
        return None
    if isinstance(copied, BaseException):
        return FunctionCheck(False, f"the harness could not copy the network to check it ({one_line(copied)})")
    try:
        reference = trained_reference(copied, mapping, rules.image_size)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a parameter the function removed or replaced
        return FunctionCheck(False, f"it no longer held the reference's parameters ({one_line(e)})")
    return check_function(copied, reference, image_size=rules.image_size, batch=batch, seed=fresh_seed(),
                          heldout=rules.heldout)


def _few(items: list[str], n: int = 3) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def _challenge_set(rules) -> tuple[np.ndarray, np.ndarray]:
    """The challenge's training images and labels (the rules' data set, seed and task): a copy of its own for each
    run, so nothing a run does to its arrays reaches the next run's."""
    images, labels = _generated(rules.dataset_size, rules.seed, rules.task)
    return images.copy(), labels.copy()


@functools.lru_cache(maxsize=2)
def _generated(n: int, seed: int, task: _data.Task) -> tuple[np.ndarray, np.ndarray]:
    # generated once per process: about 3 s on two cores (the t4 profile), and 06 judges two runs on it
    return _data.synthetic_images(n, seed=seed, task=task)


def training_table(verdicts: list[TrainingVerdict]) -> tables.Table:
    """The learner's runs side by side as a person reads them: the time to the target ("—" where a run missed it),
    held-out accuracy, the images the harness handed out, img/s, MFU, peak memory, and the rules."""
    import pandas as pd

    def num(v, fmt):
        return tables.MISSING if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    rows = []
    for v in verdicts:
        rows.append({
            "run": v.name,
            "time to target s": tables.MISSING if v.time_to_target_s is None else tables.sig(v.time_to_target_s),
            "trained s": tables.MISSING if math.isnan(v.train_s) else tables.sig(v.train_s),
            "held-out accuracy %": num(100 * v.accuracy, ".1f"),
            "target %": num(100 * v.target, ".1f"),
            "images": num(v.images if v.images else math.nan, ","),
            "img/s": num(v.img_per_s_shown, ",.0f"),  # the images over the seconds as this table prints them
            "MFU %": tables.percent(v.mfu_pct) if v.bounded and not math.isnan(v.mfu_pct) else tables.MISSING,
            "MFU of data sheet %": (tables.percent(v.datasheet_mfu_pct) if v.datasheet_mfu_pct is not None
                                    and not math.isnan(v.datasheet_mfu_pct) else tables.MISSING),
            "peak memory GiB": num(v.peak_mem_gib, ".2f"),
            "mJ/image": tables.MISSING if v.j_per_image is None else tables.sig(1e3 * v.j_per_image),
            "rules": "passed" if v.reached else "REFUSED: " + ", ".join(n for n, (ok, _) in v.checks.items() if not ok),
        })
    notes = []
    if any(not v.reached for v in verdicts):
        notes.append("time to target: only a run that reached the target has one")
    if any(not v.bounded for v in verdicts):
        notes.append("MFU (of the ceiling and of the data sheet): the measured ceiling on a CPU bounds nothing")
    if any(v.bounded and v.datasheet_mfu_pct is None and v.reached for v in verdicts):
        notes.append("MFU of data sheet: the course knows no data sheet figure for this GPU")
    if any(v.peak_mem_gib is None for v in verdicts):
        notes.append("peak memory: no GPU allocator here")
    missing = dict.fromkeys(v.energy_missing for v in verdicts if v.energy_missing and not v.stopped)
    if missing:
        notes.append("energy: " + "; ".join(missing))
    data = pd.DataFrame([v.row() for v in verdicts]).set_index("run")
    return tables.Table(data=data, shown=pd.DataFrame(rows).set_index("run"),
                        notes=("— " + "; ".join(notes) + ".",) if notes else ())


def energy_text(energy_j: float, j_per_image: float | None) -> str:
    """A run's energy as a person reads it: ``board energy 41.2 kJ (38.1 mJ per image)``. The two are one
    measurement (the board's mean power times the timed phase, and that over its images), so the total is printed
    to as many figures (three at least) as a reader needs to divide it by the images and land on the per-image
    figure printed beside it: 06 read "2.19 kJ (357 mJ per image)" over 6,144 images, where 2,190 ÷ 6,144 is 356;
    it now reads "2.193 kJ". The per-image figure is the one the tables show."""
    kilo = energy_j >= 1e3
    scale = 1e3 if kilo else 1.0
    per = "" if j_per_image is None else tables.sig(1e3 * j_per_image)
    total = tables.sig(energy_j / scale)
    if j_per_image and energy_j > 0:
        images = energy_j / j_per_image
        for digits in range(3, 7):
            total = tables.sig(energy_j / scale, digits)
            if tables.sig(1e3 * tables.as_shown(total) * scale / images) == per:
                break
    return f"board energy {total} {'kJ' if kilo else 'J'}" + (f" ({per} mJ per image)" if per else "")
