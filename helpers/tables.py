"""Tables a person reads at a glance, beside the full-precision DataFrame they were made from.

A measured table holds ``7362.606991`` and ``0.054789``; a reader wants ``7,363 img/s`` and ``5.5 %``.
:func:`readable` turns a DataFrame into a :class:`Table` that shows each number to the precision it
deserves, units in the column names, and "—" for a missing value with a note saying why; ``table.data``
keeps every digit for whoever computes with it::

    df = results.comparison_table(path)       # full precision
    readable(df)                               # shown in the notebook: img/s 7,363 · step ms 53.1 · data wait % 73.8

How a column reads follows from its name, as the course names things (``img_per_s``, ``step_ms``, ``_pct``,
``share``), and the code that builds a DataFrame can say more in ``df.attrs`` (kept by pandas through
``set_index``, ``.T``, ``head`` and the like):

- ``attrs["missing"] = {column: why}``: the note shown when that column has a missing value ("no GPU
  allocator on a CPU"); a row's name works too (``df.T`` keeps its reasons). A missing value nobody
  explained reads "not measured in this run", and the notebook runs flag it (:func:`unreadable_cells`).
- ``attrs["formats"] = {column: kind}``: a kind of :data:`KINDS`, where the name does not say it; or a
  function of the row that returns one (a column of mixed figures, each read as its own name says).
- ``attrs["above_roof"] = {column: why}`` (or one reason for every column): why a share of a measured roof
  (``share of roof``, ``% of roof``, ``share of copy bandwidth``, ``MFU %``) may pass 100% in this table (a CPU's
  stand-in ceilings; bytes the L2 cache served). A share above 100% nobody explained gets a note saying so, and
  the notebook runs flag it (:func:`unreadable_cells`): a figure past its roof is a wrong roof or a wrong count
  until a reason says otherwise.
- ``attrs["notes"] = [sentence, ...]``: sentences about the table's figures, shown under it with the others.
- ``attrs["spread"] = column``: a column of relative spreads in %; the row's numbers get the significant
  figures that spread supports (:func:`digits_for_spread`); ``attrs["spread_of"] = [columns]``: only those
  (the timed figures, not a compile time measured once beside them).
- ``attrs["ratio_of"] = {ratio column: (column, base row, "base/row" or "row/base")}``: a ratio column
  (``× vs eager``) computed from another column's figures (or ``(column, other column, "column/column")``: one
  column over another, row by row); it is shown computed from those figures *as shown*,
  so a reader's own division agrees with it (03's optimizer table read "× vs for-loop 9.6" beside 1.3 ms and
  0.13 ms, where the unrounded times gave 9.6 and the printed ones give 10). ``table.data`` keeps the unrounded
  ratio; a helper whose ratio column is recorded as a figure returns :func:`with_ratios_as_shown` instead.
  ``(column, base row, "saved % of base")``: a saving against the base row in % (100 × (1 − row ÷ base)),
  computed from the figures as shown the same way (04's "memory saved vs fp32 %" read 31.7 beside peaks of 11.9
  and 8.10 GiB, where those give 31.9).
- ``attrs["derived"] = {column: function(row) -> value}``: a column computed from other columns of its row, shown
  as computed from those columns *as shown*, in the order given (a later one may use an earlier one's shown cell).
  ``row[name]`` is the number that column's cell shows (a ``"fraction"`` column's in %, as printed), or None where
  it shows none; the function returns the value in the column's own units (a fraction 0–1), or None to keep the
  cell. 03's roofline read "0.206 GFLOP … 0.195 ms … 1.05 TFLOP/s", where 0.206 ÷ 0.195 is 1.06.
  :func:`with_ratios_as_shown` writes these cells back into the data as well.
- ``attrs["decimals"] = {column: n}``: that column to ``n`` decimal places, as a sentence beside the table prints
  it (04's peaks, "11.85 GiB" in its sentences, read 11.9 in its table).

Kinds: ``"whole"`` (``7,363``), ``"sig"`` (three significant figures, ``53.1``, ``0.0548``, whole numbers with
thousands separators from 1,000 on), ``"sig4"`` (four: a figure the sentences beside it divide by, as 00's
12.06 GFLOP per image, which read 12.1 in its table beside the 65,340 img/s that 788 ÷ 12.06 gives), ``"percent"`` (already in %: ``73.8``), ``"fraction"`` (a share 0–1 shown
in %: ``0.738`` → ``73.8``, and its column gains "%"), ``"text"`` (as it is). Booleans read yes/no.
"""

from __future__ import annotations

import dataclasses
import html
import math
import re
from typing import Any, Callable, Mapping, Sequence, Union

__all__ = ["KINDS", "Table", "readable", "set_device_caption", "label", "sig", "whole", "times", "times_as_shown", "change_as_shown", "rounded", "percents_as_shown", "shown_number", "shown_numbers", "times_over", "rate_text", "rate_of_text", "not_a_number_figures", "arithmetic_disagreements", "percent", "digits_for_spread", "column_kind",
           "unreadable_cells", "NOT_EXPLAINED", "ABOVE_ROOF_UNEXPLAINED"]

KINDS = ("whole", "sig", "sig4", "percent", "fraction", "text")
MISSING = "—"
#: A column's kind, or a function of the row that gives the kind of that row's cell.
Kind = Union[str, Callable[[Any], str]]
#: The note of a missing value whose table did not say why (the notebook runs refuse to show it).
NOT_EXPLAINED = "not measured in this run"
#: The note of a share above 100% of a roof whose table did not say why (the notebook runs refuse to show it).
ABOVE_ROOF_UNEXPLAINED = "past its roof, and the table says no reason why"
# Columns that are a share of a measured roof or ceiling: above 100% they need a reason (attrs["above_roof"]).
_ROOF_SHARE = re.compile(r"(share of (the |its )?(roof|copy bandwidth|memory roof|compute roof|ceiling|peak))|"
                         r"(% of (the |its )?(roof|ceiling|peak))|(^mfu\b)", re.I)


def sig(v: float, digits: int = 3) -> str:
    """``v`` to ``digits`` significant figures, never in e-notation from 0.0001 up, with thousands separators.

    >>> sig(7362.606991), sig(53.143297), sig(0.054789), sig(1.0), sig(0.00013), sig(2.4e-06)
    ('7,363', '53.1', '0.0548', '1.00', '0.000130', '2.4e-06')

    (03's roofline had printed a small elementwise kernel's work as "1.3e-04" GFLOP in a column of decimals.)
    """
    if v == 0:
        return "0"
    if not math.isfinite(v):
        return str(v)
    mag = math.floor(math.log10(abs(v)))
    if mag >= digits - 1:
        return f"{v:,.0f}"  # whole numbers: more figures than asked, but never 7.36e+03
    if mag < -4:
        return f"{v:.{max(digits - 2, 0)}e}"
    decimals = digits - 1 - mag
    out = f"{v:.{decimals}f}"
    if abs(float(out)) >= 10 ** (mag + 1):  # 9.996 rounds up to 10.00: one decimal too many
        out = f"{v:.{max(decimals - 1, 0)}f}"
    return out


def whole(v: float) -> str:
    """A count or a rate as a whole number with thousands separators: ``whole(7362.6) == '7,363'``."""
    return f"{v:,.0f}"


def as_shown(text: str) -> float:
    """The number a reader sees in ``text``: a figure printed beside the figures it is computed from is computed
    from them as printed, so the reader's arithmetic agrees with it (the report read "703 W against the baseline's
    222 W … at 3.18× the power", where 703 ÷ 222 is 3.17).

    >>> as_shown("1,290"), as_shown("43.7%"), as_shown("3.18×")
    (1290.0, 43.7, 3.18)
    """
    return float(text.replace(",", "").strip().rstrip("×%").strip())


def rate_as_shown(count: float, time: float, digits: int = 3) -> float:
    """``count`` per unit of ``time``, the time *as printed* to ``digits`` figures: the rate a reader's own division
    of the two printed figures gives (06 printed "36,864 images in 1.62 s (22,694 img/s)" from the unrounded
    1.6244 s, where 36,864 ÷ 1.62 is 22,756). NaN where the time is not a positive, finite number.

    >>> round(rate_as_shown(36_864, 1.6244)), round(1e3 * rate_as_shown(65_536, 1504.9, 4))   # img/s; tok/s from ms
    (22756, 43546)
    """
    if not (time > 0 and math.isfinite(time)):
        return math.nan
    return count / as_shown(sig(time, digits))


def ratio_as_shown(top: float, bottom: float) -> float:
    """``top`` over ``bottom``, two rates as a line prints them (whole, :func:`whole`), divided: the ratio a reader's
    own division of the printed figures gives (06 read "7.76×" beside 5,591 and 721 img/s, where 5,591 ÷ 721 is
    7.75). NaN where either is not finite; the unrounded ratio where ``bottom`` prints as 0.

    >>> round(ratio_as_shown(5591.49, 720.6), 4), round(5591.49 / 720.6, 4)
    (7.7545, 7.7595)
    """
    if not (math.isfinite(top) and math.isfinite(bottom)):
        return math.nan
    shown_top, shown_bottom = as_shown(whole(top)), as_shown(whole(bottom))
    return shown_top / shown_bottom if shown_bottom > 0 else top / bottom


def times_as_shown(top: str, bottom: str, digits: int = 3) -> str:
    """``top`` over ``bottom``, two figures as a sentence prints them, as "N×": the ratio printed beside them is the
    reader's own division of what they read (03 printed "eager 0.704 ms, compiled 0.129 ms (5.4×)" from the
    unrounded times, where 0.704 ÷ 0.129 is 5.46).

    >>> times_as_shown("0.704", "0.129", digits=2), times_as_shown("1,290 MiB", "114 MiB")
    ('5.5×', '11.3×')
    """
    return times(as_shown(top.split()[0]) / as_shown(bottom.split()[0]), digits)


def change_as_shown(before: str, after: str) -> str:
    """The change from ``before`` to ``after``, two figures as a sentence prints them, in whole %: the reader's own
    arithmetic on them (06 printed "1.64 → 5.56 GiB (+240%)" from the unrounded GiB, where 5.56 ÷ 1.64 is 3.39).

    >>> change_as_shown("1.64", "5.56"), change_as_shown("29.5 mJ", "33.4 mJ")
    ('+239%', '+13%')
    """
    a, b = as_shown(before.split()[0]), as_shown(after.split()[0])
    return f"{100 * (b / a - 1):+.0f}%" if a else "from nothing"


def rounded(v: float, digits: int = 3) -> str:
    """``v`` rounded to ``digits`` significant figures, whole numbers too, with thousands separators: a figure
    computed from figures printed to three (797 TFLOP/s ÷ 12.06 GFLOP is 66,086 img/s) shown no finer than they
    allow, so the reader's arithmetic agrees with it.

    >>> rounded(66117.2), rounded(45.31), rounded(0.012345)
    ('66,100', '45.3', '0.0123')
    """
    if v == 0 or not math.isfinite(v):
        return sig(v, digits)
    return sig(float(f"{v:.{digits}g}"), digits)


def percents_as_shown(shares: Sequence[float], groups: Sequence[Any]) -> tuple[dict[Any, float], float]:
    """Rows' shares of one whole (0–1) added up by group as a table prints them (:func:`percent`), and the rest
    (what no row shows): 100 less every row as printed. A reader who adds the table's column gets the same
    figures. 06 had printed its kinds as whole percents, "the rows below them: 9%", beside rows of one decimal
    that leave 10.1%; rounded alone, its kinds had added to 101%.

    >>> by_kind, rest = percents_as_shown([0.5846, 0.2244, 0.0261, 0.0043], ["conv", "pool", "conv", "copy"])
    >>> {k: percent(v) for k, v in by_kind.items()}, percent(rest)
    ({'conv': '61.1', 'pool': '22.4', 'copy': '0.43'}, '16.1')

    Groups come in order of their sums, largest first; the rest never reads below zero.
    """
    sums: dict[Any, float] = {}
    for share, group in zip(shares, groups, strict=True):
        sums[group] = sums.get(group, 0.0) + as_shown(percent(100 * share))
    by_group = dict(sorted(sums.items(), key=lambda kv: kv[1], reverse=True))
    return by_group, max(100.0 - sum(by_group.values()), 0.0)


def times(v: float, digits: int = 3) -> str:
    """A ratio as "N×" with ``digits`` significant figures, the one way a speed-up or its bound is printed (in a
    sentence, a table's note, a report), so the same bound never reads 1.8× in one place and 2× in another.

    >>> times(1.8349), times(23.94), times(1236.8)
    ('1.83×', '23.9×', '1,237×')
    """
    return f"{sig(v, digits)}×"


def times_over(rate: float, base: float, what: str = "the baseline") -> str:
    """``rate`` over ``base`` as "N× ``what``", or, where either was not measured (NaN: a time box cut its run
    short) or ``base`` is not above zero, words that say so: never "nan×" in a sentence. The two rates are divided
    as the sentences beside it print them, whole (02 read "4,359 img/s = 6.88× the baseline" beside the baseline's
    633 img/s, where 4,359 ÷ 633 is 6.89).

    >>> times_over(1200.0, 400.0), times_over(1200.0, float("nan")), times_over(4358.8, 633.4)
    ('3.00× the baseline', 'no ratio to the baseline (a figure of it was not measured in this run)', '6.89× the baseline')
    """
    if not (math.isfinite(rate) and math.isfinite(base) and round(base) > 0):
        return f"no ratio to {what} (a figure of it was not measured in this run)"
    return f"{times_as_shown(whole(rate), whole(base))} {what}"


#: What a sentence says in place of a rate a time box cut short (NaN).
NOT_MEASURED_HERE = "not measured here (a time box cut its run short)"


def rate_text(v: float, unit: str = "img/s") -> str:
    """A measured rate as "1,234 img/s", or, where a time box cut its run short (NaN), words that say so: never
    "nan img/s" in a sentence.

    >>> rate_text(1234.4), rate_text(float("nan"))
    ('1,234 img/s', 'not measured here (a time box cut its run short)')
    """
    return f"{v:,.0f} {unit}" if math.isfinite(v) else NOT_MEASURED_HERE


def rate_of_text(v: float, ceiling: float, what: str = "the ceiling", unit: str = "img/s") -> str:
    """A measured rate with its share of ``ceiling``: "1,234 img/s (62% of the ceiling)"; the rate alone where the
    ceiling was not measured, and :func:`rate_text`'s words where the rate was not.

    >>> rate_of_text(1234.4, 2000.0), rate_of_text(1234.4, float("nan")), rate_of_text(float("nan"), 2000.0)
    ('1,234 img/s (62% of the ceiling)', '1,234 img/s', 'not measured here (a time box cut its run short)')
    """
    if not (math.isfinite(v) and math.isfinite(ceiling) and ceiling > 0):
        return rate_text(v, unit)
    return f"{rate_text(v, unit)} ({v / ceiling:.0%} of {what})"


#: A number that is not one (NaN, inf) printed with a unit, as a measured figure would be: "nan× the baseline",
#: "inf%", "nan img/s". Each is a ratio or share of something a run did not measure, shown as if it had.
_NOT_A_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:nan|inf)\s?(?:×|%|x\b|(?:img/s|ms|µs|s|GiB|GB/s|TFLOP/s)\b)", re.I)


def not_a_number_figures(text: str) -> list[str]:
    """Where ``text`` (a cell's printed output) shows NaN or inf with a unit: ``['nan×']`` for "= nan× the baseline".
    The notebook runs refuse such a cell: say what was not measured instead (:func:`times_over`)."""
    return list(dict.fromkeys(m.group(0) for m in _NOT_A_NUMBER.finditer(text)))


_NUM = r"\d[\d,]*(?:\.\d+)?"
_UNITS = r"(?:ms|µs|s|GiB|MiB|GB|GB/s|TFLOP/s|img/s|tok/s|W|mJ)"
_A_AND_B = rf"(?<![\w.])(?P<a>{_NUM}) (?P<u>{_UNITS})(?![\w/])[^()\n]{{0,90}}?(?<![\w.])(?P<b>{_NUM}) (?P=u)(?![\w/])"
#: Two figures of one unit and, after them, their ratio: "eager 0.704 ms, compiled 0.129 ms (5.5×)", "1,290 MiB …,
#: fused attention 122 MiB: 10.6× less"; or a figure, its ratio and the other: "3.36 ms, 0.991× the 3.39 ms".
_RATIOS = (re.compile(_A_AND_B + rf"[^()\n\d]{{0,12}}\((?P<r>{_NUM})×"),
           re.compile(_A_AND_B + rf": (?P<r>{_NUM})× (?:less|more|faster|slower)"),
           re.compile(rf"(?<![\w.])(?P<a>{_NUM}) (?P<u>{_UNITS})(?![\w/]),? (?P<r>{_NUM})× the (?P<b>{_NUM}) (?P=u)(?![\w/])"))
#: A division written out beside its result, the units' prefixes making it a power of ten apart: "about 65,700 img/s
#: (793 TFLOP/s ÷ 12.06 GFLOP per image)", "the bound is 4.46× (303 ÷ 68 µs)", "793 ÷ 12.06 = 65.8".
_WORD = r"(?: [A-Za-zµ/]+)?"
_QUOTIENTS = (re.compile(rf"(?<![\w.])(?P<r>{_NUM})×?{_WORD}{_WORD} \((?P<a>{_NUM}){_WORD} ÷ (?P<b>{_NUM})(?![\d,.])"),
              re.compile(rf"(?<![\w.])(?P<a>{_NUM}){_WORD} ÷ (?P<b>{_NUM}){_WORD} = (?P<r>{_NUM})(?![\d,.])"))
#: A change in % beside the two figures it is computed from: "peak memory 1.64 → 5.56 GiB (+239%)".
_CHANGE = re.compile(rf"(?<![\w.])(?P<a>{_NUM})(?: {_UNITS})? → (?P<b>{_NUM}) (?:{_UNITS}|%)(?![\w/]) \((?P<p>[-+−]{_NUM})%\)")


def arithmetic_disagreements(text: str) -> list[str]:
    """Where ``text`` (a cell's printed output) prints a ratio or a change in % beside the two figures it comes from,
    and the reader's own arithmetic on those figures, as printed, gives another value to the last digit shown:
    ``['0.704 ms, compiled 0.129 ms (5.4×']`` (0.704 ÷ 0.129 is 5.46). The notebook runs refuse such a cell: compute
    the figure from the figures as printed (:func:`times_as_shown`, :func:`as_shown`).

    >>> arithmetic_disagreements("eager 0.704 ms, compiled 0.129 ms (5.4×)"), arithmetic_disagreements("1.64 → 5.56 GiB (+239%)")
    (['0.704 ms, compiled 0.129 ms (5.4×'], [])
    """
    out = []
    for m in (m for pattern in _RATIOS for m in pattern.finditer(text)):
        a, b, r = as_shown(m["a"]), as_shown(m["b"]), as_shown(m["r"])
        if a and b and all(abs(r - x) > _half_step(m["r"]) for x in (a / b, b / a)):
            out.append(m.group(0))
    for m in (m for pattern in _QUOTIENTS for m in pattern.finditer(text)):
        a, b, r = as_shown(m["a"]), as_shown(m["b"]), as_shown(m["r"])
        if not (a and b and r):
            continue
        # the units' prefixes (TFLOP/s ÷ GFLOP is thousands of img/s) put the result a power of ten from a ÷ b
        q = a / b * 10 ** round(math.log10(r * b / a))
        if abs(r - q) > _half_step(m["r"], whole_rounded=True):
            out.append(m.group(0))
    for m in _CHANGE.finditer(text):
        a, b, p = as_shown(m["a"]), as_shown(m["b"]), float(m["p"].replace("−", "-").replace(",", ""))
        if a and abs(100 * (b / a - 1) - p) > _half_step(m["p"]):
            out.append(m.group(0))
    return list(dict.fromkeys(out))


def _half_step(t: str, whole_rounded: bool = False) -> float:
    """Half the step of the last digit ``t`` (a number as printed) shows, and a hair for binary fractions. With
    ``whole_rounded``, a whole number's trailing zeros are taken as rounding (65,700 from :func:`rounded`: ± 50)."""
    t = t.replace(",", "")
    if "." in t:
        return 0.5 * 10 ** -len(t.split(".")[1]) * 1.001 + 1e-12
    zeros = len(t) - len(t.rstrip("0")) if whole_rounded and t.strip("0") else 0
    return 0.5 * 10 ** zeros * 1.001 + 1e-12


def percent(p: float) -> str:
    """A percentage (already ×100): one decimal from 1 % on, two significant figures below.

    >>> percent(73.8051), percent(0.5646), percent(100.0), percent(1502.04)
    ('73.8', '0.56', '100.0', '1,502')

    From 1,000 % on (a share of a CPU's stand-in ceiling can pass it), whole and thousands separated.
    """
    if p == 0:
        return "0"
    if abs(p) >= 1000:
        return f"{p:,.0f}"
    return f"{p:.1f}" if abs(p) >= 1 else sig(p, 2)


def digits_for_spread(spread_pct: float | None, default: int = 3) -> int:
    """Significant figures a number supports when repeated readings spread by ``spread_pct`` % (2 to 4).

    A 0.05 % spread supports four figures (1,866.2), 5 % two (34 ms), 37 % still two (the first figure
    moves, but one figure hides too much).
    """
    if spread_pct is None or not math.isfinite(spread_pct) or spread_pct <= 0:
        return default
    return max(2, min(4, 1 + math.floor(-math.log10(spread_pct / 100))))


_TOKENS = {"cpu": "CPU", "gpu": "GPU", "gpus": "GPUs", "mfu": "MFU", "nvml": "NVML", "gpm": "GPM", "sm": "SM",
           "dram": "DRAM", "gib": "GiB", "gb": "GB", "mib": "MiB", "pct": "%", "us": "µs", "tflops": "TFLOP/s",
           "speedup": "speed-up", "x": "×", "bw": "bandwidth", "frac": "%"}


def label(name: Any) -> str:
    """A column name as a reader reads it: ``img_per_s`` → ``img/s``, ``peak_allocated_gib`` → ``peak
    allocated GiB``, ``util_pct`` → ``util %``, ``speedup_x`` → ``speed-up ×``. Names with spaces are kept;
    a share (0–1) gains "%" (its values are shown ×100)."""
    if not isinstance(name, str):
        return name
    out = name
    if " " not in name:
        text = name.replace("img_per_s", "img/s").replace("_per_s", "/s")
        words = [_TOKENS.get(w, w) for w in text.split("_")]
        out = " ".join(words)
        if "speed-up" in words and "×" not in words:
            out += " ×"
    if column_kind(name, None) == "fraction" and not out.endswith("%"):
        out += " %"
    return out


def column_kind(name: Any, values) -> str:
    """The kind (:data:`KINDS`) a column's name implies; ``values`` (a Series or None) breaks ties by dtype."""
    n = str(name).lower()
    tokens = set(re.split(r"[\s_]+", n))
    if values is not None and _all_bool(values):
        return "text"
    if "%" in n or "pct" in tokens:
        return "percent"
    if tokens & {"share", "frac", "accuracy"}:
        return "fraction"
    if "img/s" in n or "img_per_s" in n or n.endswith(" per s"):
        return "whole"
    if values is not None and str(getattr(values, "dtype", "")).lower().startswith(("int", "uint")):
        return "whole"
    if values is not None and not tokens & _MEASURED_UNITS and "×" not in n and _all_whole(values):
        return "whole"  # counts kept as floats (ncu's registers, kernels per step): 03 printed "registers 32.0"
    return "sig"


#: Units of a measured quantity in a column's name: such a column keeps its significant figures even where its
#: values happen to be whole (a test's 8.0 ms; a time is never a count).
_MEASURED_UNITS = {"ms", "µs", "us", "s", "gib", "mib", "gb", "gb/s", "tflop/s", "w", "mhz", "x"}


def _all_whole(values) -> bool:
    """Every value present is a whole number, of two or more (a count: a measured float is never exactly whole
    in every row; ``[1.0]`` alone, a ratio to itself, is not a count)."""
    present = [v for v in values if not _missing(v)]
    try:
        nums = [float(v) for v in present]
    except (TypeError, ValueError):
        return False
    return bool(nums) and all(math.isfinite(x) and x == int(x) for x in nums) and max(abs(x) for x in nums) >= 2


def _all_bool(values) -> bool:
    present = [v for v in values if not _missing(v)]
    return bool(present) and all(isinstance(v, bool) or type(v).__name__ == "bool_" for v in present)


def _missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        import pandas as pd

        out = pd.isna(v)
        return bool(out) if isinstance(out, (bool,)) or type(out).__name__ == "bool_" else False
    except (TypeError, ValueError):
        return False


def _cell(v: Any, kind: str, digits: int) -> str:
    if _missing(v):
        return MISSING
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return "yes" if v else "no"
    if not isinstance(v, (int, float)) and not type(v).__name__.startswith(("float", "int", "uint")):
        return str(v)
    v = float(v)
    if kind == "whole":
        return whole(v)
    if kind == "percent":
        return percent(v)
    if kind == "fraction":
        return percent(100 * v)
    if kind == "text":
        return str(v)
    if kind == "sig4":
        return sig(v, 4)
    return sig(v, digits)


@dataclasses.dataclass(frozen=True, eq=False)  # DataFrames have no truth value to compare by
class Table:
    """A table to read (``shown``: strings) and the full-precision DataFrame behind it (``data``); ``notes``
    say why a cell shows "—". Shows itself in a notebook as an HTML table with its notes below."""

    data: Any
    shown: Any
    notes: tuple[str, ...] = ()
    caption: str | None = dataclasses.field(default_factory=lambda: _device_caption)

    def _repr_html_(self) -> str:
        notes = "".join(f'<p class="table-note" style="font-size:smaller;margin:2px 0">{html.escape(n)}</p>'
                        for n in self.notes)
        head = (f'<p class="table-device" style="font-weight:bold;margin:2px 0">{html.escape(self.caption)}</p>'
                if self.caption else "")
        return head + self.shown.to_html() + notes

    def __repr__(self) -> str:
        head = f"{self.caption}\n" if self.caption else ""
        return head + self.shown.to_string() + "".join("\n" + n for n in self.notes)


_device_caption: str | None = None


def set_device_caption(text: str | None) -> None:
    """A line above every table made from now on (a learner-machine profile names itself there, so no table of a
    stand-in run is read as real hardware's); None removes it."""
    global _device_caption
    _device_caption = text


def readable(df, *, formats: Mapping[str, Kind] | None = None, missing: Mapping[str, str] | None = None,
             spread: str | None = None, digits: int = 3) -> Table:
    """``df`` as a :class:`Table` to read (the module's docstring says how each column reads).

    ``formats``, ``missing`` and ``spread`` add to (and win over) ``df.attrs``' own; ``digits``: significant
    figures where no spread says otherwise.
    """
    import pandas as pd

    formats = {**df.attrs.get("formats", {}), **(formats or {})}
    why = {**df.attrs.get("missing", {}), **(missing or {})}
    spread = spread or df.attrs.get("spread")
    spread_of = df.attrs.get("spread_of")
    decimals = dict(df.attrs.get("decimals") or {})
    for kind in formats.values():
        if not callable(kind) and kind not in KINDS:
            raise ValueError(f"unknown column kind {kind!r}; use one of {', '.join(KINDS)}.")
    row_digits = ([digits_for_spread(_float_or_none(s), digits) for s in df[spread]]
                  if spread is not None and spread in df.columns else [digits] * len(df))
    cells: list[list[str]] = []
    digits_of: list[list[int]] = []
    notes: dict[str, list[str]] = {}  # why → the columns it explains, so one reason is said once
    for j, col in enumerate(df.columns):  # by position: two columns may share a name
        values = df.iloc[:, j]
        kind = formats.get(col) or column_kind(col, values)
        kinds = [kind(row) for _, row in df.iterrows()] if callable(kind) else [kind] * len(df)
        follows = col != spread and (spread_of is None or col in spread_of)
        col_digits = row_digits if follows else [digits] * len(df)
        if col in decimals:  # the column's own decimal places win over the spread's figures
            cells.append([MISSING if _missing(v) else f"{float(v):,.{decimals[col]}f}" for v in values])
        else:
            cells.append([_cell(v, k, d) for v, k, d in zip(values, kinds, col_digits)])
        digits_of.append(col_digits)
        for row, v in zip(df.index, values):
            if _missing(v):  # the column's reason, else the row's (a transposed table keeps its reasons by name)
                name, reason = ((row, why[row]) if col not in why and _hashable(row) and row in why
                                else (col, why.get(col, NOT_EXPLAINED)))
                labels = notes.setdefault(reason, [])
                if str(label(name)) not in labels:
                    labels.append(str(label(name)))
    _ratios_as_shown(df, cells, digits_of)
    _derived_as_shown(df, cells, digits_of, formats)
    above = df.attrs.get("above_roof", {})
    for j, col in enumerate(df.columns):  # a share of a measured roof past 100%: said why, or flagged
        kind = formats.get(col) or column_kind(col, df.iloc[:, j])
        if callable(kind) or kind not in ("percent", "fraction") or not _ROOF_SHARE.search(str(col)):
            continue
        full = 1.0 if kind == "fraction" else 100.0
        over = [row for row, v in zip(df.index, df.iloc[:, j]) if _float_or_none(v) is not None and float(v) > full]
        if over:
            reason = above.get(col) if isinstance(above, Mapping) else above
            names = _row_names(df)
            rows = ", ".join(str(label(names.get(r, r))) for r in over)
            notes.setdefault(f"Above 100% in {label(col)} ({rows}): {reason or ABOVE_ROOF_UNEXPLAINED}", [])
    for sentence in df.attrs.get("notes", ()):  # what the code that built the table says about its figures
        notes.setdefault(str(sentence).rstrip("."), [])
    shown = pd.DataFrame(dict(enumerate(cells)), index=df.index)
    shown.columns = [label(c) for c in df.columns]
    if df.index.nlevels == 1 and str(df.index.dtype).startswith("float"):
        shown.index = [_cell(v, "sig", digits) for v in df.index]
    shown.index.names = [label(n) for n in df.index.names]
    shown.columns.name = df.columns.name
    return Table(data=df, shown=shown,
                 notes=tuple(f"{MISSING} in {', '.join(cols)}: {reason}." if cols else f"{reason}."
                             for reason, cols in notes.items()))


def with_ratios_as_shown(df):
    """``df`` (a copy, its attrs kept) whose ``attrs["ratio_of"]`` columns hold what :func:`readable` shows in them:
    a figure recorded from a ratio column then reads as the table beside it does (03's Summary read 5.19 for the
    fused softmax while its table, from the shown 1.38 and 0.265 ms, read 5.21). The rounding is the table's, at
    the digits the row's spread supports, so the figure keeps what the measurement can say.

        df = tables.with_ratios_as_shown(df)   # in a helper that builds a table with a ratio column
        figures["speedup"] = float(df["× vs eager"].iloc[1])
    """
    shown = readable(df).shown
    out = df.copy()
    out.attrs = dict(df.attrs)
    columns = list(df.columns)
    for ratio in (*(df.attrs.get("ratio_of") or {}), *(df.attrs.get("derived") or {})):
        if ratio not in columns:
            continue
        j = columns.index(ratio)
        per_cent = column_kind(ratio, df.iloc[:, j]) == "fraction"  # shown in %, kept as a share
        for i, cell in enumerate(shown.iloc[:, j]):
            v = shown_number(cell)
            if v is not None:
                out.iloc[i, j] = v / 100 if per_cent else v
    return out


def _ratios_as_shown(df, cells: list[list[str]], digits_of: list[list[int]]) -> None:
    """Each ``attrs["ratio_of"]`` column's cells recomputed from the shown cells of the column it divides."""
    columns = list(df.columns)
    for ratio, spec in (df.attrs.get("ratio_of") or {}).items():
        of, base, how = spec
        if how not in ("base/row", "row/base", "column/column", "saved % of base"):
            raise ValueError(f"ratio_of[{ratio!r}]: say 'base/row' (a speed-up from times), 'row/base', "
                             f"'column/column' or 'saved % of base', not {how!r}.")
        by_column = how == "column/column"
        if ratio not in columns or of not in columns or (base not in columns if by_column else base not in df.index):
            continue  # a part of the table (a column or the base row left out): its ratios stay as computed
        j_ratio, j_of = columns.index(ratio), columns.index(of)
        if by_column:
            bases = [shown_number(c) for c in cells[columns.index(base)]]
        else:
            at = df.index.get_loc(base)
            if not isinstance(at, int):
                raise ValueError(f"ratio_of[{ratio!r}]: its base row {base!r} must name exactly one row.")
            bases = [shown_number(cells[j_of][at])] * len(df)
        for i, (cell, b) in enumerate(zip(cells[j_of], bases)):
            v = shown_number(cell)
            if b is None or v is None or b == 0 or v == 0:
                continue  # "—" or a cut-short run: the cell keeps what it said
            if how == "saved % of base":
                cells[j_ratio][i] = percent(100 * (1 - v / b))
            else:
                cells[j_ratio][i] = sig(b / v if how == "base/row" else v / b, digits_of[j_ratio][i])


class _ShownRow(Mapping):
    """One row of a table as its cells show it: column name → the number shown (None where none is)."""

    def __init__(self, columns: list[Any], cells: list[list[str]], i: int):
        self._columns, self._cells, self._i = columns, cells, i

    def __getitem__(self, name: Any) -> float | None:
        return shown_number(self._cells[self._columns.index(name)][self._i])

    def __iter__(self):
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)


def _derived_as_shown(df, cells: list[list[str]], digits_of: list[list[int]], formats: Mapping[str, Any]) -> None:
    """Each ``attrs["derived"]`` column's cells computed from its row's cells as shown, in the order given."""
    columns = list(df.columns)
    for col, fn in (df.attrs.get("derived") or {}).items():
        if col not in columns:
            continue
        j = columns.index(col)
        kind = formats.get(col) or column_kind(col, df.iloc[:, j])
        for i in range(len(df)):
            try:
                v = fn(_ShownRow(columns, cells, i))
            except (TypeError, ZeroDivisionError):  # an input shows "—" (None) or 0: the cell keeps what it said
                continue
            if v is None or not math.isfinite(v):
                continue
            k = kind(df.iloc[i]) if callable(kind) else kind
            cells[j][i] = _cell(v, k, digits_of[j][i])


def shown_number(cell: Any) -> float | None:
    """The number a table's cell shows (:func:`as_shown`), or None where it shows none ("—", "not measured").

    >>> shown_number("1,165"), shown_number("—")
    (1165.0, None)
    """
    try:
        out = as_shown(str(cell))
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def shown_numbers(df, column: str) -> list[float | None]:
    """The numbers :func:`readable` shows in ``df``'s ``column``, one per row (None where a cell shows none): what a
    figure computed from that column as printed starts from (a gain over the row before, a share of the total).

    >>> import pandas as pd
    >>> shown_numbers(pd.DataFrame({"img/s": [671.4, 1165.2, float("nan")]}), "img/s")
    [671.0, 1165.0, None]
    """
    return [shown_number(cell) for cell in readable(df).shown.iloc[:, list(df.columns).index(column)]]


def _row_names(df) -> dict:
    """Index → what names its row: the index itself, or, under a plain 0, 1, 2 … index, the first text column's
    value (a roofline table's op: "pool·1", not "2")."""
    import pandas as pd

    if not isinstance(df.index, pd.RangeIndex):
        return {}
    text = [j for j in range(df.shape[1])
            if pd.api.types.is_string_dtype(df.iloc[:, j]) or df.iloc[:, j].dtype == object]
    return dict(zip(df.index, df.iloc[:, text[0]])) if text else {}


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


def _float_or_none(v) -> float | None:
    try:
        return None if _missing(v) else float(v)
    except (TypeError, ValueError):
        return None


_NUMBER = re.compile(r"^-?[\d,]*\.\d+$")
_RAW_MISSING = {"None", "NaN", "nan", "<NA>", "NaT"}


def unreadable_cells(table_html: str, *, max_digits: int = 4) -> list[str]:
    """What makes an HTML table hard to read: a number with more than ``max_digits`` significant figures
    (``7362.606991``), a missing value printed as ``None``/``NaN``, a "—" without a note saying why, a note
    that does not say why. Empty when the table reads at a glance (the notebook runs check every table)."""
    problems: list[str] = []
    cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
             for c in re.findall(r"<td[^>]*>(.*?)</td>", table_html, flags=re.S)]
    for c in cells:
        if c in _RAW_MISSING:
            problems.append(f"a missing value printed as {c!r}")
        elif _NUMBER.match(c) and len(c.replace(",", "").replace("-", "").replace(".", "").lstrip("0")) > max_digits:
            problems.append(f"a raw number {c!r}")
    if MISSING in cells and "table-note" not in table_html:
        problems.append(f"a {MISSING!r} with no note saying why")
    if NOT_EXPLAINED in table_html:
        problems.append(f"a missing value whose note does not say why ({NOT_EXPLAINED!r})")
    if ABOVE_ROOF_UNEXPLAINED in html.unescape(table_html):
        problems.append("a share of a roof above 100% whose table does not say why")
    return list(dict.fromkeys(problems))

