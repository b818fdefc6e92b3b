"""Time boxes: every search, sweep and measured window stops at a time box as well as at its count.

A count that a fast machine meets in seconds can take minutes on a slow one (a 2-core CPU that emulates
bf16, a T4 on a 2-core host). So each loop the notebooks run has a box, named after what it bounds, with
its seconds at each scale in one table (:data:`BOXES`)::

    win = timebox.window("training_window", planned=cfg.steps, minimum=5, unit="steps")
    while win.more():                  # False once the count is met, or the box's time is up
        step()
        win.tick()
    win.stable                         # False when the box cut it before `minimum`: the figure is not measured here

    sweep = timebox.window("loader_grid", planned=len(cells), unit="grid cells")
    for cell in cells:
        if not sweep.more():           # says once, in one line, what the cut leaves out
            break
        ...; sweep.tick()

When the box cuts a loop short it prints one line saying so and what that leaves out, and keeps the cut in
:func:`cuts`. A figure taken from a window cut below its minimum is :func:`not_measured` (NaN, with the
reason kept): ``check_targets`` shows it as "not measured here" instead of asserting it.

``HELPERS_TIMEBOX_FACTOR`` multiplies every box (``0.1`` shrinks them 10×: a fast GPU then stands in for a
slow machine, and the run shows which figures survive a cut).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Literal

from . import env
from .notices import forget as _forget_notices
from .notices import say_once

__all__ = ["Box", "BOXES", "FACTOR_ENV", "factor", "seconds", "Window", "window", "Cut", "cuts", "not_measured",
           "why_not_measured", "forget"]

FACTOR_ENV = "HELPERS_TIMEBOX_FACTOR"


@dataclasses.dataclass(frozen=True)
class Box:
    """The most seconds one loop of a kind may take, at each scale."""

    name: str
    smoke_s: float
    full_s: float
    bounds: str  # what it bounds, in words

    def seconds(self, scale: env.Scale | None = None) -> float:
        return (self.full_s if (scale or env.scale()) == "full" else self.smoke_s) * factor()


# Chosen from measurements: at full scale on one H100 each loop ends by its count well inside its box (the box
# is the safety net for a slower GPU); at smoke scale on a 2-core AVX2-only CPU the slow loops (bf16 emulated,
# large searches) meet their box, so a notebook keeps its budget there too. On an H100 limited to a T4's 8 SMs
# (helpers.machine_profiles) a batch-256 step takes about 0.6 s: there the warm-up, training and timing boxes
# end 02's runs, and their seconds are what keeps 02 inside its 300 s (with a 45 s training box it took 342 s on an
# H200, with 25 s 308 s on an H100: 20 s leaves it room).
BOXES: dict[str, Box] = {b.name: b for b in (
    Box("warm_up", smoke_s=3, full_s=5, bounds="the warm-up steps before a training run's measured ones"),
    Box("training_window", smoke_s=8, full_s=20, bounds="the measured steps of one training run"),
    Box("timing_repeats", smoke_s=4, full_s=10, bounds="the repeats of one timed call"),
    Box("loader_window", smoke_s=4, full_s=15, bounds="the measured batches of one loader"),
    Box("loader_grid", smoke_s=12, full_s=80, bounds="the batch × workers × pinned-memory grid"),
    Box("worker_sweep", smoke_s=8, full_s=40, bounds="the worker counts swept at one batch size"),
    Box("batch_search", smoke_s=10, full_s=45, bounds="the trials of one largest-batch search"),
    Box("precision_comparison", smoke_s=20, full_s=60, bounds="the precisions trained side by side"),
    Box("attention_sweep", smoke_s=10, full_s=80, bounds="the sequence lengths of the attention sweep"),
    Box("serving_sweep", smoke_s=20, full_s=45, bounds="the batch sizes of the serving latency sweep"),
    Box("ddp_launches", smoke_s=40, full_s=80, bounds="the torchrun launches of one scaling or variants cell"),
)}


def factor() -> float:
    """``HELPERS_TIMEBOX_FACTOR`` (1 when unset): every box's seconds are multiplied by it."""
    raw = os.environ.get(FACTOR_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{FACTOR_ENV}={raw!r} is not a factor: set a positive number (0.1 shrinks every time box "
                         "10×), or unset it.")
    return value


def seconds(name: str, scale: env.Scale | None = None) -> float:
    """The seconds of box ``name`` at ``scale`` (this run's by default), the factor applied."""
    if name not in BOXES:
        raise KeyError(f"no time box named {name!r}; the boxes are: {', '.join(BOXES)}.")
    return BOXES[name].seconds(scale)


@dataclasses.dataclass(frozen=True)
class Cut:
    """A loop its box stopped: how far it got, and what that leaves out."""

    box: str
    seconds: float
    done: int
    planned: int
    minimum: int
    unit: str
    left_out: str
    measured: bool = True  # a measured window (its figures need the minimum); False: a warm-up, a search

    @property
    def stable(self) -> bool:
        return self.done >= self.minimum

    def __str__(self) -> str:
        line = f"⏱ time box '{self.box}' ({self.seconds:.3g} s) stopped this after {self.done} of {self.planned} {self.unit}"
        if self.measured and self.minimum > 1:  # a measured window: say whether its figures stand
            line += (f": the figures come from these {self.done}" if self.stable else
                     f", fewer than the {self.minimum} a stable figure needs: not measured here")
        return line + (f"; {self.left_out}" if self.left_out else "") + "."


_cuts: list[Cut] = []
_not_measured: dict[str, str] = {}


class Window:
    """A counted loop with a deadline: ``more()`` until the count is met or the box's time is up."""

    def __init__(self, name: str, *, planned: int, minimum: int = 1, unit: str = "steps", left_out: str = "",
                 keep_minimum: bool = False, seconds_: float | None = None,
                 say: Literal["each", "once"] = "each", measured: bool = True) -> None:
        if planned < 0 or minimum < 0:
            raise ValueError(f"a time-boxed window needs planned ≥ 0 and minimum ≥ 0 (got {planned}, {minimum}).")
        self.name, self.planned, self.minimum, self.unit = name, planned, min(minimum, planned), unit
        self.left_out, self.say, self.keep_minimum, self.measured = left_out, say, keep_minimum, measured
        self.seconds = seconds(name) if seconds_ is None else seconds_
        self.started = time.perf_counter()
        self.done = 0
        self.cut: Cut | None = None

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started

    def expired(self) -> bool:
        return self.elapsed_s >= self.seconds

    def more(self, next_s: float = 0.0) -> bool:
        """True while there is more to do and time to do it; the first time the box cuts, say so in one line.

        ``next_s``: how long the next item is expected to take (a sweep whose items grow: the last one's time
        scaled by its size); the box then cuts before an item that would end past it, not after."""
        if self.done >= self.planned or self.cut is not None:
            return False
        if self.done == 0 or self.elapsed_s + next_s < self.seconds:  # every loop does at least one of its items
            return True
        if self.keep_minimum and self.done < self.minimum:
            return True
        self.cut = Cut(self.name, self.seconds, self.done, self.planned, self.minimum, self.unit, self.left_out,
                       self.measured)
        _cuts.append(self.cut)
        if self.say == "each":
            print(self.cut)
        else:  # a loop that runs many times (each timed call): one line for the first cut is enough
            say_once(f"timebox:{self.name}", f"{self.cut} (said once; later cuts of this box are not repeated)")
        return False

    def tick(self, n: int = 1) -> None:
        self.done += n

    @property
    def stable(self) -> bool:
        """Whether the window ran its minimum: a figure from an unstable window is not measured here."""
        return self.done >= self.minimum


def window(name: str, *, planned: int, minimum: int = 1, unit: str = "steps", left_out: str = "",
           keep_minimum: bool = False, say: Literal["each", "once"] = "each", measured: bool = True) -> Window:
    """A :class:`Window` on box ``name`` (started now).

    ``keep_minimum``: run ``minimum`` items even past the box (a timing's few repeats), so it is never unstable;
    ``say="once"``: a loop that runs many times says its first cut only; ``measured=False``: no figure is taken
    from it (a warm-up), so its cut line says nothing about figures.
    """
    return Window(name, planned=planned, minimum=minimum, unit=unit, left_out=left_out, keep_minimum=keep_minimum,
                  say=say, measured=measured)


def cuts() -> list[Cut]:
    """Every cut of this process, oldest first."""
    return list(_cuts)


def not_measured(figures: dict, name: str, why: str) -> None:
    """Set ``figures[name]`` to NaN and keep ``why``: ``check_targets`` shows it as not measured here."""
    figures[name] = float("nan")
    _not_measured[name] = why


def why_not_measured(name: str) -> str | None:
    """Why a NaN figure was not measured: the reason given to :func:`not_measured`, else the first cut of this
    process that left a window below its minimum (its figures are NaN), else None (a NaN nothing explains)."""
    if name in _not_measured:
        return _not_measured[name]
    unstable = next((c for c in _cuts if not c.stable), None)
    return None if unstable is None else f"a time box cut a window short ({unstable})"


def forget() -> None:
    """Forget every cut and not-measured figure (tests; a notebook re-run from the top)."""
    _cuts.clear()
    _not_measured.clear()
    _forget_notices("timebox:")
