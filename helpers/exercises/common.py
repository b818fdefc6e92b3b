"""What every notebook's exercises share: the result of a check, and the full-scale targets.

Every check returns a :class:`CheckResult` whose ``value`` is what the
notebook carries on with: the learner's answer when it passed, the reference
solution when it is not done yet or wrong. So an unsolved exercise never
breaks the rest of a notebook::

    res = checks.check_ceiling_img_per_s(ceiling_img_per_s)
    res                      # shows ✓ passed / ✗ failed / … not done, and what to change
    ceiling_fn = res.value   # yours if it passed, else the reference

A learner's answer is read by the ``as_*`` functions below before a check judges it: each returns the
answer in the form the check computes with (a float from a numpy scalar or a 0-d tensor, say), or raises
:class:`WrongForm`, whose message says what form the answer should take and what was given. A check turns
it into a failed result, so no answer, of whatever type, makes a check raise::

    try:
        kind, pct = as_pair(answer, what="my_profile_answer", form="a (kind, share in %) pair such as ('GEMM', 12.5)")
        pct = as_number(pct, what="The share", low=0, high=100, example=12.5)
    except WrongForm as e:
        return failed(name, reference, str(e))

A notebook's promises at full scale are :class:`Target` rows, checked together
by :func:`check_targets` (asserted on a GPU node, shown at smoke scale).
"""

from __future__ import annotations

import dataclasses
import html
import math
import numbers
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np

from .. import env, results, timebox
from .cells import name_cells

__all__ = ["Status", "CheckResult", "not_done", "failed", "WrongForm", "describe", "blank", "as_number", "as_flag",
           "as_text", "as_choice", "as_names", "as_pair", "as_mapping", "as_instance", "as_function", "as_path",
           "Target", "check_targets"]

Status = Literal["passed", "failed", "not done"]


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The outcome of one exercise check."""

    exercise: str
    status: Status
    message: str
    value: Any = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        # JupyterLab does not show cell ids: each [NN-id] the message names gets its section's heading
        object.__setattr__(self, "message", name_cells(self.message))

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        icon = {"passed": "✓", "failed": "✗", "not done": "…"}[self.status]  # marks common fonts have: no emoji
        return f"{icon} {self.exercise}: {self.status}. {self.message}"

    def _repr_html_(self) -> str:
        color = {"passed": "#1a7f37", "failed": "#cf222e", "not done": "#6e7781"}[self.status]
        return (
            f'<div style="border-left:4px solid {color};padding:4px 10px;margin:4px 0">'
            f"{html.escape(str(self))}</div>"
        )


def not_done(exercise: str, reference: Any, hint: str) -> CheckResult:
    """The exercise is not attempted yet: say what to do, carry on with ``reference``."""
    return CheckResult(exercise, "not done", f"{hint} The notebook carries on with the reference solution.", reference)


def failed(exercise: str, reference: Any, why: str) -> CheckResult:
    """The answer is wrong: say why, carry on with ``reference``."""
    return CheckResult(exercise, "failed", f"{why} The notebook carries on with the reference solution.", reference)


# -- reading an answer: the value in the form a check computes with, or WrongForm --------------------------

class WrongForm(ValueError):
    """An answer of the wrong type or shape. ``str(e)`` reads "<what> should be <form>; you gave <given>.": ``what``
    names the answer as the learner wrote it (``my_plan.batch_size``), or in words with a capital (``Your answer``)."""

    def __init__(self, what: str, form: str, value: Any, *, message: str | None = None):
        self.what, self.form, self.given = what, form, describe(value)
        super().__init__(message or f"{what} should be {form}; you gave {self.given}.")


#: Integers at least this large are no size or count a check can compute with (nor print: Python refuses to turn
#: an int of over 4,300 digits into text).
_HUGE_INT = 2**63


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(value: Any) -> str:
    """What a learner gave, in a few words: ``'a list of 3 items'``, ``'NaN'``, ``"a string ('48')"``, ``'True (a
    bool)'``. Never raises, whatever ``value`` is (an int of 5,000 digits included)."""
    try:
        if value is None:
            return "None"
        if value is ...:
            return "... (the placeholder)"
        if isinstance(value, (bool, np.bool_)):
            return f"{bool(value)} (a bool)"
        if isinstance(value, numbers.Integral):
            v = int(value)
            if abs(v) < 10**15:
                return str(v)
            digits = int(abs(v).bit_length() * math.log10(2)) + 1  # str(v) refuses over 4,300 digits
            return f"a {'negative ' if v < 0 else ''}number of about {digits:,} digits"
        if isinstance(value, numbers.Real):
            v = float(value)
            return "NaN" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else f"{v:g}"
        if isinstance(value, str):
            return "an empty string" if not value else f"a string ({_short(repr(str(value)))})"
        if isinstance(value, (bytes, bytearray)):
            return f"a bytes string ({_short(repr(value))})"
        if isinstance(value, (list, tuple, set, frozenset, dict)):
            kind, n = type(value).__name__, len(value)
            if n == 0:
                return f"an empty {kind}"
            unit = "entr" if kind == "dict" else "item"
            return f"a {kind} of {n} {unit}{('y' if n == 1 else 'ies') if kind == 'dict' else ('' if n == 1 else 's')}"
        shape = getattr(value, "shape", None)
        if shape is not None and hasattr(value, "ndim"):  # a tensor or an array
            kind = "array" if isinstance(value, np.ndarray) else type(value).__name__.lower()
            if value.ndim == 0:
                return f"a 0-d {kind} holding {describe(value.item())}"
            return f"{_a(kind)} of shape {tuple(int(d) for d in shape)}"
        if isinstance(value, complex):
            return f"a complex number ({value})"
        if callable(value) and hasattr(value, "__name__"):
            return f"a function ({value.__name__})" if not isinstance(value, type) else f"the class {value.__name__}"
        text = repr(value)
        kind = _a(type(value).__name__)
        return kind if " at 0x" in text or len(text) > 60 else f"{kind} ({text})"
    except Exception:  # a learner's object whose repr or len raises: its type is enough
        return _a(type(value).__name__)


def blank(value: Any) -> bool:
    """The answer left as it was handed out: None, ``...``, or an empty string, list, tuple, set or dict."""
    return value is None or value is ... or (isinstance(value, (str, list, tuple, set, frozenset, dict)) and not value)


def _scalar(value: Any) -> Any:
    """A 0-d tensor or array as the Python scalar it holds; anything else as it is."""
    if (not isinstance(value, (numbers.Number, str, bytes)) and getattr(value, "ndim", None) == 0
            and hasattr(value, "item")):
        try:
            return value.item()
        except Exception:
            return value
    return value


def _range(low, high, above) -> str:
    n = lambda x: f"{x:,}" if isinstance(x, int) else f"{x:g}"  # noqa: E731
    if low is not None and high is not None:
        return f" from {n(low)} to {n(high)}"
    if above is not None:
        return f" above {n(above)}"
    if low is not None:
        return f" of at least {n(low)}"
    if high is not None:
        return f" of at most {n(high)}"
    return ""


def as_number(value: Any, *, what: str, form: str | None = None, low: float | None = None,
              high: float | None = None, above: float | None = None, integer: bool = False,
              example: float | None = None) -> float | int:
    """``value`` as a finite float (an int with ``integer=True``) within the bounds given, else :class:`WrongForm`.

        pct = as_number(answer[1], what="the share", low=0, high=100, example=48.0)

    Accepted: ints, floats, numpy scalars, 0-d tensors and arrays (and a whole float where an integer is due).
    Refused: bools, strings (even "48"), containers, NaN, ±inf, numbers too large to compute with, and, with
    bounds, numbers outside ``[low, high]`` or not above ``above``.
    """
    if form is None:
        form = ("a whole number" if integer else "a number") + _range(low, high, above) + (
            f", such as {example!r}" if example is not None else "")
    v = _scalar(value)
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise WrongForm(what, form, value)
    if isinstance(v, numbers.Integral):
        v = int(v)
        if abs(v) >= _HUGE_INT:
            raise WrongForm(what, form, value)
        number: float | int = v if integer else float(v)
    else:
        try:
            f = float(v)
        except (OverflowError, ValueError, TypeError):
            raise WrongForm(what, form, value) from None
        if not math.isfinite(f) or (integer and (not f.is_integer() or abs(f) >= _HUGE_INT)):
            raise WrongForm(what, form, value)
        number = int(f) if integer else f
    if (low is not None and number < low) or (high is not None and number > high) or (
            above is not None and not number > above):
        raise WrongForm(what, form, value)
    return number


def as_flag(value: Any, *, what: str, none_is: bool | None = None) -> bool:
    """``value`` as a bool (True/False, a numpy bool, a 0-d bool tensor); None reads as ``none_is`` if given."""
    if value is None and none_is is not None:
        return none_is
    v = _scalar(value)
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise WrongForm(what, "True or False", value)


def as_text(value: Any, *, what: str, form: str = "a string", none_is: str | None = None) -> str:
    """``value`` as a string, stripped; None reads as ``none_is`` if given."""
    if value is None and none_is is not None:
        return none_is
    if isinstance(value, str):
        return str(value).strip()
    raise WrongForm(what, form, value)


def as_choice(value: Any, choices, *, what: str, allow_none: bool = False, noun: str | None = None) -> str | None:
    """``value`` as one of ``choices`` (a string, matched without regard to case or surrounding spaces), or None
    when ``allow_none``. A string that is none of them says so: "… should be one of …; 'too fast' is not a rule."."""
    if value is None and allow_none:
        return None
    names = list(choices)
    form = "one of " + ", ".join(repr(c) for c in names) + (" or None" if allow_none else "")
    if not isinstance(value, str):
        raise WrongForm(what, form, value)
    match = {c.casefold(): c for c in names}.get(str(value).strip().casefold())
    if match is None:
        raise WrongForm(what, form, value, message=f"{what} should be {form}; {_short(repr(str(value)), 60)} is not "
                                                   f"{noun or 'one of them'}.")
    return match


def as_names(value: Any, *, what: str, form: str) -> list[str]:
    """``value`` as a list of strings, in order: a list or a tuple of strings (not one string, not a set)."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise WrongForm(what, form, value)
    return [str(v).strip() for v in value]


def as_pair(value: Any, *, what: str, form: str) -> tuple[Any, Any]:
    """``value`` as a pair: a tuple or list of exactly two items (not a string, a dict or a set)."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise WrongForm(what, form, value)
    return value[0], value[1]


def as_mapping(value: Any, *, what: str, form: str) -> Mapping:
    """``value`` as it is, if it is a dict (any mapping)."""
    if not isinstance(value, Mapping):
        raise WrongForm(what, form, value)
    return value


def as_instance(value: Any, cls: type, *, what: str, form: str):
    """``value`` as it is, if it is a ``cls``."""
    if not isinstance(value, cls):
        raise WrongForm(what, form, value)
    return value


def as_function(value: Any, *, what: str, form: str) -> Callable:
    """``value`` as it is, if it can be called (a function, not a call's result or a number)."""
    if not callable(value) or isinstance(value, type):
        raise WrongForm(what, form, value)
    return value


def as_path(value: Any, *, what: str, form: str) -> Path:
    """``value`` as a :class:`~pathlib.Path`: a string or a path object."""
    if isinstance(value, (str, os.PathLike)):
        try:
            raw = os.fspath(value)
        except Exception:
            raise WrongForm(what, form, value) from None
        if isinstance(raw, str):
            return Path(raw)
    raise WrongForm(what, form, value)


@dataclasses.dataclass(frozen=True)
class Target:
    """A figure a notebook promises at full scale: ``figures[figure] >= at_least``.

    ``required=False`` shows the target without asserting it, for a figure that depends on more than
    this course's code (a speed-up over a baseline bound by the node's CPU, say); ``why`` says so, and
    ``bound`` is the most that figure can reach on this node (shown beside it).
    """

    figure: str
    at_least: float
    why: str
    required: bool = True
    bound: float | None = None


def check_targets(figures: dict[str, float], targets: list[Target], *, scale: str | None = None):
    """A table of each target against what was measured; at full scale a missed required target raises.

        table = check_targets(figures, [Target("loader_tuned_share_of_ceiling", 0.85, "the GPU is fed")])

    At smoke scale (a CPU, tiny images) the speed-ups of a GPU course do not apply: the table only informs.
    A figure that a time box left unmeasured (:func:`helpers.timebox.not_measured`) is shown as not measured
    here, with the reason, and never asserted.
    """
    import pandas as pd

    scale = scale or env.scale()
    rows, missed = [], []
    for t in targets:
        if t.figure not in figures:
            raise KeyError(f"no figure named {t.figure!r} was measured; measured: {', '.join(sorted(figures))}.")
        value = float(figures[t.figure])
        met = math.isfinite(value) and value >= t.at_least
        unmeasured = timebox.why_not_measured(t.figure) if math.isnan(value) else None
        rows.append({"figure": t.figure, "unit": results.figure_unit(t.figure)[0], "measured": value,
                     "at least": t.at_least, "most on this node": t.bound, "met": met,
                     "asserted": t.required and scale == "full" and unmeasured is None,
                     "why": t.why if unmeasured is None else f"not measured here: {unmeasured}"})
        if t.required and not met and unmeasured is None:
            missed.append(f"{t.figure} = {value:.3g}, wanted ≥ {t.at_least:g} ({t.why})")
    if missed and scale == "full":
        raise AssertionError("full-scale target missed: " + "; ".join(missed))
    df = pd.DataFrame(rows)
    as_named = lambda row: results.figure_unit(row["figure"])[1]  # noqa: E731  each figure as its name reads
    df.attrs["formats"] = {"measured": as_named, "at least": as_named, "most on this node": as_named}
    df.attrs["missing"] = {"measured": "not measured here (why says what stopped it)",
                           "most on this node": "only a figure this machine bounds (its CPU, say) has a most"}
    return df
