"""What a leaderboard entry is, and everything about its content that the leaderboard refuses: the two kinds of
run it ranks (:data:`KINDS`: the ladder's runs by img/s, :data:`LADDER`; the learner's training by its time to the
accuracy target, :data:`TO_TARGET`), each with the figures it keeps (the range a real run falls in) and the rules
the harness checks; :class:`Entry` with the checks of its name, checks, figures (numbers, in range, agreeing with
one another) and where it ran; and :func:`configuration_of`, which names a training configuration the same way each
time.

    entry = Entry.of("my run", verdict.figures(), checks, configuration=configuration_of(config))
    entry.validate()  # raises EntryRefused with the reason in one line, or returns quietly
    Entry.of("my run", training_verdict.figures(session), checks, kind="to_target")  # the learner's training

An entry made here is not sealed, and ``leaderboard.add`` refuses it: ``verdict.entry(name)`` makes and seals it
(:mod:`.seal`); :mod:`.store` writes it.
"""

from __future__ import annotations

import dataclasses
import decimal
import json
import math
import numbers
from typing import Any, Mapping

from .. import results, tables

__all__ = ["REQUIRED", "OPTIONAL", "CHECKS", "NAME_MAX", "Kind", "KINDS", "LADDER", "TO_TARGET", "Entry",
           "EntryRefused", "configuration_of"]

#: MFU as the PaLM paper counts it, beside the measured ceiling's: the same run over a figure that does not move.
_SHEET = ("model FLOPs per second over the GPU data sheet's dense bf16 peak, in % (none where the course knows no "
          "data sheet for the GPU, or on a CPU)")
#: Figures every entry must carry, with the range a real run falls in (name → (lowest, highest, what it is)).
REQUIRED: dict[str, tuple[float, float, str]] = {
    "img_per_s": (0.0, math.inf, "training images per second in steady state"),
    "speedup": (0.0, math.inf, "img/s over the same session's baseline"),
    "mfu_pct": (0.0, 100.0, "model FLOPs per second over the measured bf16 matmul ceiling, in %"),
    "accuracy": (0.0, 1.0, "held-out accuracy, a fraction"),
}
#: Figures an entry may leave as None where this device cannot measure them.
OPTIONAL: dict[str, tuple[float, float, str]] = {
    "peak_mem_gb": (0.0, math.inf, "peak GPU memory allocated by PyTorch, GB (none on a CPU)"),
    "nvml_util_pct": (0.0, 100.0, "NVML's GPU utilisation in steady state, in %"),
    "gpm_sm_pct": (0.0, 100.0, "GPM's SM activity in steady state, in %"),
    "speedup_bound": (0.0, math.inf, "the most a speed-up can be on this node: the ceiling over the baseline"),
    "baseline_img_per_s": (0.0, math.inf, "the same session's baseline"),
    "datasheet_mfu_pct": (0.0, 100.0, _SHEET),
}
_POSITIVE = {"img_per_s", "speedup", "mfu_pct", "speedup_bound", "baseline_img_per_s"}  # more than zero in a run
_NUMBER = (numbers.Real, decimal.Decimal)  # int, float, Fraction, numpy's scalars, Decimal: any real number
_REL_TOL = 1e-5  # figures re-derived from others agree within rounding (float32 figures included)

#: The rules the harness checks; an entry must carry each, passed.
CHECKS: dict[str, str] = {
    "same_function": "the model's outputs match the reference network's on the same weights",
    "images_seen": "it trained on as many images as the baseline",
    "accuracy_not_worse": "its held-out accuracy is at least the accuracy target (what 99% of the baseline's reruns reach)",
}
NAME_MAX = 80  #: the longest name, in characters
CHALLENGE_MAX = 400  #: the longest challenge (:attr:`Entry.challenge`), in characters
_NAME_RULE = f"a name has 1 to {NAME_MAX} printable characters, no space at either end"
_HARNESS = "make it with verdict.entry(name)"


@dataclasses.dataclass(frozen=True, eq=False)  # its figures are dicts: a Kind is compared and hashed as itself
class Kind:
    """One kind of run the leaderboard ranks, in a table of its own: the figures its entries keep (name → (lowest,
    highest, what it is); optional ones may be None where a device cannot measure them), the harness's checks each
    must pass, and the figure it is ranked by."""

    name: str
    title: str  # a table's heading, in words
    required: Mapping[str, tuple[float, float, str]]
    optional: Mapping[str, tuple[float, float, str]]
    checks: Mapping[str, str]
    score: str  # the figure ranked on
    higher_is_better: bool
    positive: frozenset[str]  # figures more than zero in any real run


#: The ladder's runs (``harness.Verdict.entry``): every run trains the same images, so the fastest (img/s) ranks
#: first (MFU would rank them the same on one device).
LADDER = Kind("ladder", "the ladder's runs, fastest first (img/s)", REQUIRED, OPTIONAL, CHECKS, "img_per_s", True,
              frozenset(_POSITIVE))

#: The learner's own training judged to the accuracy target (``to_target.TrainingVerdict.entry``): the quickest to
#: the target ranks first; img/s and MFU stand beside it.
TO_TARGET = Kind(
    "to_target", "training to the accuracy target, quickest first (seconds)",
    required={
        "time_to_target_s": (0.0, math.inf, "seconds the timed training took, for a run that reached the target"),
        "train_s": (0.0, math.inf, "seconds of the timed training call, from its start until it returned with all "
                                    "its work done"),
        "images": (0.0, math.inf, "training images the harness handed out during the timed call"),
        "img_per_s": (0.0, math.inf, "images handed out per second of the timed call"),
        "accuracy": (0.0, 1.0, "held-out accuracy of the trained weights, a fraction"),
        "target_accuracy": (0.0, 1.0, "the held-out accuracy the run had to reach, a fraction"),
        "ceiling_img_per_s": (0.0, math.inf, "the session's compute ceiling: img/s at the measured matmul rate"),
    },
    optional={
        "mfu_pct": (0.0, 100.0, "model FLOPs per second over the session's matmul ceiling, in % (none where that "
                                "ceiling bounds nothing: a CPU)"),
        "datasheet_mfu_pct": (0.0, 100.0, _SHEET),
        "peak_mem_gib": (0.0, math.inf, "peak GPU memory allocated by PyTorch, GiB (none on a CPU)"),
        "nvml_util_pct": (0.0, 100.0, "NVML's GPU utilisation during the timed call, in %"),
        "gpm_sm_pct": (0.0, 100.0, "GPM's SM activity during the timed call, in %"),
    },
    checks={
        "same_function": "the network computes the reference's function before, during and after training",
        "images_seen": "it trained on images the harness handed out, returned the network it was given, and left "
                       "nothing running",
        "accuracy_target": "its held-out accuracy reached the target",
    },
    score="time_to_target_s", higher_is_better=False,
    positive=frozenset({"time_to_target_s", "train_s", "images", "img_per_s", "ceiling_img_per_s", "mfu_pct"}))

#: Every kind, by the name an entry carries (``Entry.kind``).
KINDS: dict[str, Kind] = {k.name: k for k in (LADDER, TO_TARGET)}


class EntryRefused(ValueError):
    """An entry the leaderboard will not take; the message (one line) says what to change."""


def _num(x: float) -> str:
    """A figure in a message as a person reads it: six significant figures, thousands separated (20,339.1, not
    20339.123456789; 9,000 ÷ 500 = 18)."""
    return f"{x:,.6g}"


def _show(value: Any, width: int = 24) -> str:
    """A real number as :func:`_num` writes it, anything else as ``repr(value)``, cut to ``width`` characters: a
    message stays one short line whatever it quotes."""
    if isinstance(value, _NUMBER) and not _is_bool(value):
        try:
            x = float(value)
        except (OverflowError, ValueError):
            x = math.nan
        if math.isfinite(x) and abs(x) < 1e15:
            return _num(x)
    try:
        s = repr(value)
    except ValueError:  # an int past Python's 4,300-digit limit for text
        s = f"<an {type(value).__name__} of over 4,300 digits>"
    return s if len(s) <= width else s[:width - 1] + "…"


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool) or (type(v).__module__ == "numpy" and type(v).__name__ in ("bool", "bool_"))


def _name_problem(name: Any) -> str | None:
    if not isinstance(name, str):
        return f"it is not text but {type(name).__name__}"
    if not name:
        return "it is empty"
    if len(name) > NAME_MAX:
        return f"it has {len(name):,} characters"
    bad = next((c for c in name if not c.isprintable()), None)
    if bad is not None:
        return f"it holds {bad!r} at character {name.index(bad) + 1}"
    if name != name.strip():
        return "it has a space at one end"
    return None


@dataclasses.dataclass(frozen=True)
class Entry:
    """One judged run: its name, where it ran, the harness's rule checks, its figures, its configuration, its kind
    (:data:`KINDS`) and the seal that says the harness made it. Make it with ``verdict.entry(name)``; one built by
    hand is refused."""

    name: str
    figures: Mapping[str, float | None]
    checks: Mapping[str, bool]
    header: Mapping[str, Any]  # device, driver, torch, cuda, host_cpu, date (results.device_header())
    configuration: str = ""  # the run's training configuration as canonical JSON (configuration_of)
    seal: str = dataclasses.field(default="", repr=False)  # HMAC-SHA256 by the key beside the database
    kind: str = "ladder"  # which table it goes to and how it is ranked (KINDS); the seal covers it
    # the challenge it was judged on, in words (Rules.challenge: the rules, and the target of a run to the target):
    # ranked only beside runs of the same challenge; the seal covers it
    challenge: str = ""

    @classmethod
    def of(cls, name: str, figures: Mapping[str, float | None], checks: Mapping[str, bool],
           header: Mapping[str, Any] | None = None, *, configuration: str = "", kind: str = "ladder",
           challenge: str = "") -> "Entry":
        """An unsealed entry for a run on this machine (its device, versions and today's date); the harness
        seals it (``verdict.entry``), and :func:`add` takes no other."""
        return cls(name, dict(figures), dict(checks), dict(header or results.device_header()), configuration,
                   kind=kind, challenge=challenge)

    @property
    def kind_spec(self) -> Kind:
        """Its :class:`Kind`; raises :class:`EntryRefused` for a kind the leaderboard does not rank."""
        kind = KINDS.get(self.kind) if isinstance(self.kind, str) else None
        if kind is None:
            raise EntryRefused(f"{self.name!r}: kind {_show(self.kind)} is not one the leaderboard ranks "
                               f"({', '.join(KINDS)}); {_HARNESS}.")
        return kind

    def validate(self) -> None:
        """Raise :class:`EntryRefused` saying what is wrong; return quietly when the entry's content can be ranked
        (:func:`add` also checks the seal)."""
        self._figures()

    def _figures(self) -> dict[str, float | None]:
        """The figures as floats, after every check of content; raises :class:`EntryRefused`."""
        problem = _name_problem(self.name)
        if problem:
            raise EntryRefused(f"name {_show(self.name)} refused ({problem}): {_NAME_RULE}.")
        who = repr(self.name)
        kind = self.kind_spec
        for part in ("figures", "checks", "header"):
            if not isinstance(getattr(self, part), Mapping):
                raise EntryRefused(f"{who}: its {part} are a {type(getattr(self, part)).__name__}, not a dict; "
                                   f"{_HARNESS}.")
        unknown = sorted(map(str, set(self.checks) - set(kind.checks)))
        if unknown:
            raise EntryRefused(f"{who}: unknown checks {unknown}; the harness checks {', '.join(kind.checks)}.")
        for k, v in self.checks.items():
            if not _is_bool(v):
                raise EntryRefused(f"{who}: check {k} is {_show(v)}; each check is True or False (a verdict's "
                                   f"checks are (passed, why) pairs: {_HARNESS}).")
        failed = [k for k in kind.checks if not self.checks.get(k, False)]
        if failed:
            # the rule's name and what it asks (the check's description says what passing means, not what failed)
            why = "; ".join(f"{k}, the rule that {kind.checks[k]}" if k in self.checks else f"{k}: not checked"
                            for k in failed)
            raise EntryRefused(f"{who} was not ranked: the harness did not pass it ({why}). Fix the run and "
                               "judge it again; a refused run never enters the leaderboard.")
        unknown = sorted(map(str, set(self.figures) - set(kind.required) - set(kind.optional)))
        if unknown:
            raise EntryRefused(f"{who}: unknown figures {unknown}; the leaderboard keeps {sorted(kind.required)} "
                               f"and, where measured, {sorted(kind.optional)}.")
        out: dict[str, float | None] = {}
        for name, (lo, hi, what) in {**kind.required, **kind.optional}.items():
            value = self.figures.get(name)
            if value is None:
                if name in kind.required:
                    raise EntryRefused(f"{who}: the figure {name!r} ({what}) is missing; every entry needs "
                                       f"{', '.join(kind.required)}.")
                out[name] = None
                continue
            if _is_bool(value) or not isinstance(value, _NUMBER):
                raise EntryRefused(f"{who}: {name}={_show(value)} is a {type(value).__name__}; it must be a "
                                   f"number ({what}).")
            try:
                x = float(value)
            except ValueError:  # a signalling NaN
                x = math.nan
            except OverflowError:
                raise EntryRefused(f"{who}: {name}={_show(value)} is too large to be a figure ({what}: {_num(lo)} to "
                                   f"{_num(hi)}). Judge the run with the harness rather than typing figures.") from None
            if kind is LADDER and name == "mfu_pct" and self.figures.get("speedup_bound") is None:
                # no bound here (a CPU: bench.Ceilings.bounds): MFU can pass 100% and is not ranked on it, as the
                # harness does not print it
                hi = math.inf
            if not math.isfinite(x) or not lo <= x <= hi or (name in kind.positive and x <= 0):
                raise EntryRefused(f"{who}: {name}={_show(value)} is outside what a run can measure ({what}: "
                                   f"{_num(lo)} to {_num(hi)}). Judge the run with the harness rather than typing figures.")
            out[name] = x
        (_agree if kind is LADDER else _agree_to_target)(who, out)
        missing = [h for h in ("device", "torch", "date") if not self.header.get(h)]
        if missing:
            raise EntryRefused(f"{who}: where it ran is missing ({', '.join(missing)}); {_HARNESS}, which reads "
                               "them from this machine.")
        if not isinstance(self.configuration, str):
            raise EntryRefused(f"{who}: its configuration is a {type(self.configuration).__name__}, not text; "
                               f"{_HARNESS}.")
        if not isinstance(self.challenge, str) or not self.challenge.strip() or len(self.challenge) > CHALLENGE_MAX \
                or not self.challenge.isprintable():
            raise EntryRefused(f"{who}: the challenge it was judged on is {_show(self.challenge)}; every entry names "
                               f"its challenge in 1 to {CHALLENGE_MAX} printable characters (it is ranked only beside "
                               f"runs of the same one); {_HARNESS}.")
        return out


def _agree(who: str, f: Mapping[str, float | None]) -> None:
    """Refuse figures that contradict each other: what the harness derives from others must match."""
    img, speedup, mfu = f["img_per_s"], f["speedup"], f["mfu_pct"]
    base, bound = f["baseline_img_per_s"], f["speedup_bound"]
    tail = "figures typed or edited by hand are never ranked: judge the run with the harness."
    if base is not None and not math.isclose(speedup, img / base, rel_tol=_REL_TOL):
        given, derived = _apart(speedup, img / base)
        raise EntryRefused(f"{who}: its speed-up, {given}×, does not agree with its img/s over the baseline's: "
                           f"{_operand(img)} ÷ {_operand(base)} = {derived}×; {tail}")
    if bound is not None and not math.isclose(mfu, 100 * speedup / bound, rel_tol=_REL_TOL):
        given, derived = _apart(mfu, 100 * speedup / bound)
        raise EntryRefused(f"{who}: its MFU, {given}%, does not agree with 100 × its speed-up ÷ the most a run could "
                           f"gain: 100 × {_operand(speedup)} ÷ {_operand(bound)} = {derived}% (both "
                           f"are img/s over the ceiling); {tail}")


def _agree_to_target(who: str, f: Mapping[str, float | None]) -> None:
    """The learner's training: the score is the timed call of a run that reached the target, and img/s and MFU are
    derived from it as the harness derives them."""
    t, train, images, img = f["time_to_target_s"], f["train_s"], f["images"], f["img_per_s"]
    tail = "figures typed or edited by hand are never ranked: judge the run with the harness."
    if not math.isclose(t, train, rel_tol=_REL_TOL):
        given, derived = _apart(t, train)
        raise EntryRefused(f"{who}: its time to the target, {given} s, is not its timed training, {derived} s (the "
                           f"score is the timed call of a run that reached the target); {tail}")
    if images != round(images):
        raise EntryRefused(f"{who}: images={_show(images)} is not a whole number of images; {tail}")
    if not math.isclose(img, images / train, rel_tol=_REL_TOL):  # thousands: six figures tell them apart
        raise EntryRefused(f"{who}: its img/s, {_num(img)}, does not agree with its images over its training time: "
                           f"{_operand(images)} ÷ {_operand(train)} s = {_num(images / train)}; {tail}")
    if f["accuracy"] < f["target_accuracy"]:
        raise EntryRefused(f"{who}: its held-out accuracy, {f['accuracy']:.1%}, is below its target, "
                           f"{f['target_accuracy']:.1%}: a run that missed the target has no time to it; {tail}")
    mfu, ceiling = f["mfu_pct"], f["ceiling_img_per_s"]
    # MFU is the rate the verdict prints over the ceiling: its images over its training time as printed (three
    # figures), so "1.62 s (22,756 img/s, MFU 34.3%)" divides as it reads (judge_training)
    printed_s, shown = tables.sig(train), tables.rate_as_shown(images, train)
    if mfu is not None and not math.isclose(mfu, 100 * shown / ceiling, rel_tol=_REL_TOL):
        given, derived = _apart(mfu, 100 * shown / ceiling)
        raise EntryRefused(f"{who}: its MFU, {given}%, does not agree with 100 × its images over its training time as "
                           f"printed ÷ the session's ceiling: 100 × {_operand(images)} ÷ {printed_s} s ÷ "
                           f"{_operand(ceiling)} = {derived}%; {tail}")


def _operand(x: float) -> str:
    """A figure a derived one is computed from, as a reader takes it in: four significant figures (572.3, not
    572.347121), whole from 1,000 on (20,000)."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:,.4g}"


def _apart(given: float, derived: float) -> tuple[str, str]:
    """Two figures with as few significant figures as tell them apart, three at least (29.3 and 32.9, not 29.3193 and
    32.9133; 30.0001 and 30.0004 where that is the whole difference); thousands separated."""
    for digits in range(3, 9):
        a, b = f"{given:,.{digits}g}", f"{derived:,.{digits}g}"
        if a != b:
            return a, b
    return f"{given:,.9g}", f"{derived:,.9g}"


def configuration_of(config: Any) -> str:
    """A training configuration (a dataclass such as ``TrainConfig``, or a dict) as canonical JSON: the same
    configuration always gives the same text, which is how the leaderboard knows a re-run."""
    fields = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config)
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
