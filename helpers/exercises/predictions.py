"""A prediction written down before a measurement, checked for having been made first and compared after it.

A notebook asks for the learner's expectation before it measures, and compares it with what was measured once
the numbers are in. A guess made after seeing the numbers teaches nothing, so each prediction records when it was
made (``time.monotonic()``) and each measurement when it started; the check refuses a prediction written after::

    my_prediction = checks.predict(waiting_for_data_pct=60)     # the prediction cell, before the measurement
    baseline_started = checks.measuring("the baseline run")     # first line of the measurement cell
    ...
    checks.check_prediction(my_prediction, base, started=baseline_started)  # after it: ✓ with both numbers

A wrong prediction still passes: the exercise is to make one and see how far off it was. Each notebook's
``predict`` names its questions (:class:`Question`); :func:`check_prediction` here does the rest for all of them.
This module is apart from :mod:`.common` to keep each under the course's ~400 lines; it builds on it.
"""

from __future__ import annotations

import dataclasses
import math
import time
import types
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import torch

from .common import CheckResult, WrongForm, as_instance, as_number, blank, describe

__all__ = ["Prediction", "MeasurementStart", "measuring", "Question", "check_prediction"]


@dataclasses.dataclass(frozen=True)
class Prediction:
    """What a learner expects, by question, and when it was written down (not settable: a check compares it with
    the start of the measurement). Made by a notebook's ``checks.predict(...)``."""

    answers: Mapping[str, Any]
    made_at: float = dataclasses.field(init=False, default_factory=time.monotonic, repr=False, compare=False)

    def __post_init__(self) -> None:
        # what was written down, as it was then: read-only, and an array or tensor copied (a fill_() after the
        # measurement must not change the prediction made before it)
        if isinstance(self.answers, Mapping):
            object.__setattr__(self, "answers", types.MappingProxyType({k: _kept(v) for k, v in self.answers.items()}))


def _kept(value: Any) -> Any:
    try:
        if isinstance(value, torch.Tensor):
            return value.detach().clone()
        if isinstance(value, np.ndarray):
            return value.copy()
    except Exception:  # a tensor-like that refuses to be copied: the check reads it as it is, and says what it is
        pass
    return value


@dataclasses.dataclass(frozen=True)
class MeasurementStart:
    """When a measurement started, by ``time.monotonic()``: ``started = measuring("the baseline run")``."""

    what: str
    at: float = dataclasses.field(init=False, default_factory=time.monotonic, repr=False, compare=False)


def measuring(what: str) -> MeasurementStart:
    """Mark the start of the measurement a prediction is about; call it as the measurement cell's first line."""
    return MeasurementStart(what)


@dataclasses.dataclass(frozen=True)
class Question:
    """One number a prediction gives: its field in ``predict(...)``, what it is in words, and its unit.

    ``unit`` is ``"%"`` (a share from 0 to 100, compared in percentage points) or ``"×"`` (how many times,
    above 0, compared in × and as a ratio).
    """

    field: str
    label: str  # "the share of a step spent waiting for data"
    unit: Literal["%", "×"]
    example: float

    def read(self, value: Any) -> float:
        """The learner's answer as a float in this question's range, else :class:`WrongForm`."""
        what = f"{self.field} (in checks.predict)"
        if self.unit == "%":
            return float(as_number(value, what=what, low=0, high=100,
                                   form=f"a share in % from 0 to 100, such as {self.example:g}"))
        return float(as_number(value, what=what, above=0, form=f"how many times, a number above 0, such as "
                                                                 f"{self.example:g}"))

    def compare(self, predicted: float, measured: float) -> str:
        """Prediction beside measurement, and how far off in the measured unit: '…: you predicted 60.0%, measured
        83.2%: 23.2 percentage points below it'."""
        head = f"{self.label}: you predicted {_shown(predicted, self.unit)}, measured {_shown(measured, self.unit)}"
        off = abs(predicted - measured)
        way = "above" if predicted > measured else "below"
        if self.unit == "%":
            return head + (": spot on" if off < 0.05 else f": {off:.1f} percentage points {way} it")
        if off < 0.005 * measured:
            return head + ": spot on"
        return head + f": {off:.3g}× {way} it (the measurement is {measured / predicted:.3g} times your prediction)"


def _shown(value: float, unit: str) -> str:
    return f"{value:.1f}%" if unit == "%" else f"{value:.3g}×"


def check_prediction(exercise: str, prediction: Any, measured: Mapping[str, float | None], *,
                     started: MeasurementStart, cell: str, questions: list[Question], note: str = "",
                     not_measured: str = "") -> CheckResult:
    """The check every notebook's prediction shares; each notebook's ``check_prediction`` computes ``measured``
    (one figure per question, from the measurement's own result) and calls this.

    * not done: ``prediction`` (or every answer in it) left blank; the hint names the prediction cell ``cell``;
    * failed: an answer of the wrong form (what form is due, and what was given), or a prediction made after
      ``started``; never raises, whatever the learner wrote;
    * passed: made in time; each question's prediction beside its measurement, then ``note``. A figure that is
      None or NaN was not measured here: ``not_measured`` says why, and nothing is compared for it.
    """
    where = f"[{cell}]"
    usage = "checks.predict(" + ", ".join(f"{q.field}={q.example:g}" for q in questions) + ")"
    if blank(prediction):
        return CheckResult(exercise, "not done", f"Write your prediction in {where} ({usage}) before the measurement "
                                                 "runs, then run the notebook on from that cell.")
    try:
        prediction = as_instance(prediction, Prediction, what="my_prediction", form=usage)
        answers = dict(prediction.answers)
    except WrongForm as e:
        return _wrong(exercise, str(e), where)
    except Exception:  # an object whose attributes raise: what it is is enough to say
        return _wrong(exercise, f"my_prediction should be {usage}; you gave {describe(prediction)}.", where)
    fields = [q.field for q in questions]
    if set(answers) != set(fields):  # another notebook's prediction, or one made by hand
        return _wrong(exercise, f"my_prediction answers {sorted(map(str, answers))}; this notebook asks for "
                                f"{fields}: make it with {usage}.", where)
    left = [f for f in fields if blank(answers[f])]
    if len(left) == len(fields):
        return CheckResult(exercise, "not done", f"Fill in your prediction in {where} ({usage}), then run the "
                                                 "notebook on from that cell: the measurement must come after it.")
    if left:
        return CheckResult(exercise, "not done", f"Fill in {', '.join(left)} too in {where}, then run the notebook "
                                                 "on from that cell.")
    said = {}
    for q in questions:
        try:
            said[q.field] = q.read(answers[q.field])
        except WrongForm as e:
            return _wrong(exercise, str(e), where)
        except Exception:  # a learner's number-like object that raises when read
            return _wrong(exercise, f"{q.field} should be a number; you gave {describe(answers[q.field])}.", where)
    if not isinstance(started, MeasurementStart):
        return _wrong(exercise, f"started should be what checks.measuring(...) returned, called as the measurement "
                                f"cell's first line; it was {describe(started)}.", where)
    if prediction.made_at > started.at:
        late = prediction.made_at - started.at
        return CheckResult(exercise, "failed", f"Your prediction was written {late:,.1f} s after {started.what} "
                                               f"started: a prediction comes before the numbers it predicts. Write "
                                               f"it in {where} first, then run the notebook on from that cell.")
    lines, missing = [], []
    for q in questions:
        m = _figure(measured.get(q.field))
        if m is None:
            missing.append(q.label)
        else:
            lines.append(q.compare(said[q.field], m))
    text = f"Made before {started.what} started."
    if lines:
        compared = "; ".join(lines)
        text += f" {compared[0].upper()}{compared[1:]}." + (f" {note}" if note else "")
    if missing:
        why = f" ({not_measured})" if not_measured else ""
        text += f" Not measured here, so not compared: {', '.join(missing)}{why}."
    return CheckResult(exercise, "passed", text, said)


def _figure(value: Any) -> float | None:
    """A measured figure as a finite float, or None where it was not measured (None, NaN)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _wrong(exercise: str, why: str, where: str) -> CheckResult:
    return CheckResult(exercise, "failed", f"{why} Correct it in {where}, then run the notebook on from that cell (a "
                                           "prediction comes before the measurement).")
