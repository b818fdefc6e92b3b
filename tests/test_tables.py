"""Tables a person reads at a glance: helpers.tables, and the tables the helpers build for it."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from helpers import leaderboard, results, tables
from helpers.exercises.common import Target, check_targets
from helpers.tables import MISSING, NOT_EXPLAINED, readable, unreadable_cells


@pytest.mark.parametrize("value, digits, shown", [
    (7362.606991, 3, "7,363"),  # whole numbers from 1,000 on, never 7.36e+03
    (529.881788, 3, "530"),
    (53.143297, 3, "53.1"),
    (0.054789, 3, "0.0548"),
    (1.0, 3, "1.00"),  # a speed-up of exactly one still says how exact it is
    (9.996, 3, "10.0"),  # rounds up into the next decade: one decimal fewer
    (0.9996, 3, "1.00"),
    (-3.14159, 3, "-3.14"),
    (2.4e-06, 3, "2.4e-06"),
    (0.00013, 3, "0.000130"),  # a decimal from 0.0001 up: 03's roofline had read "1.3e-04" GFLOP
    (0.0, 3, "0"),
    (1866.235, 4, "1,866"),
    (64.989552, 2, "65"),
])
def test_sig_gives_the_figures_asked_for(value, digits, shown):
    assert tables.sig(value, digits) == shown


def test_percent_and_whole():
    assert tables.percent(73.8051) == "73.8" and tables.percent(0.5646) == "0.56" and tables.percent(0) == "0"
    assert tables.whole(14922.867803) == "14,923"
    # a share of a CPU's stand-in roof can pass 1,000%: it reads as a number, not as "1502.0"
    df = __import__("pandas").DataFrame({"share of roof %": [1502.04, 99.5]})
    df.attrs["above_roof"] = "a CPU's stand-in ceiling"
    assert tables.percent(1502.04) == "1,502" and tables.unreadable_cells(tables.readable(df)._repr_html_()) == []


def test_a_share_past_its_roof_needs_its_reason():
    import pandas as pd

    df = pd.DataFrame({"share of roof": [1.31, 0.42], "share of the step": [1.5, 0.1]}, index=["pool·1", "conv1"])
    t = tables.readable(df)
    # only the roof's share is judged (a share of the step is no roof); the row past it is named in the note
    assert [n for n in t.notes if "Above 100%" in n] == [
        f"Above 100% in share of roof % (pool·1): {tables.ABOVE_ROOF_UNEXPLAINED}."]
    assert "a share of a roof above 100% whose table does not say why" in tables.unreadable_cells(t._repr_html_())
    df.attrs["above_roof"] = {"share of roof": "its bytes fit in the L2 cache"}
    t = tables.readable(df)
    assert "Above 100% in share of roof % (pool·1): its bytes fit in the L2 cache." in t.notes
    assert tables.unreadable_cells(t._repr_html_()) == []
    # under a plain 0, 1, 2 index, the row is named by its first text column (the op)
    plain = pd.DataFrame({"op": ["given: add", "relu"], "share of roof": [1.2, 0.5]})
    assert any("(given: add)" in n for n in tables.readable(plain).notes)
    # at or under 100%: no note at all
    assert not any("Above" in n for n in tables.readable(pd.DataFrame({"MFU %": [99.9]})).notes)


@pytest.mark.parametrize("spread, digits", [(0.05, 4), (0.5, 3), (5.0, 2), (37.4, 2), (None, 3), (float("nan"), 3)])
def test_digits_follow_the_spread(spread, digits):
    assert tables.digits_for_spread(spread) == digits


@pytest.mark.parametrize("name, shown", [
    ("img_per_s", "img/s"), ("step_ms_median", "step ms median"), ("peak_allocated_gib", "peak allocated GiB"),
    ("util_pct", "util %"), ("speedup_x", "speed-up ×"), ("speedup", "speed-up ×"), ("GB/s", "GB/s"), ("calls", "calls"), ("speedup_bound", "speed-up bound ×"),
    ("data_wait_share", "data wait share %"), ("self_cpu_ms", "self CPU ms"), ("total_us", "total µs"),
    ("share", "share %"), ("share of copy bandwidth", "share of copy bandwidth %"), ("step ms", "step ms"),
    ("mfu_pct", "MFU %"), ("accuracy", "accuracy %"),
])
def test_labels_carry_units(name, shown):
    assert tables.label(name) == shown


def comparison() -> pd.DataFrame:
    df = pd.DataFrame({"variant": ["baseline", "compiled_step"], "img_per_s": [529.881788, 14922.867803],
                       "step_ms_p95": [106.145203, float("nan")], "data_wait_share": [0.738051, None],
                       "met": [True, False], "calls": [810, 10]}).set_index("variant")
    df.attrs["missing"] = {"step_ms_p95": "timed as the step alone"}
    return df


def test_readable_formats_each_column_as_its_name_says_and_keeps_the_data():
    df = comparison()
    t = readable(df)
    assert t.data is df and df.loc["baseline", "img_per_s"] == 529.881788  # full precision stays behind it
    row = t.shown.loc["baseline"]
    assert row["img/s"] == "530" and row["step ms p95"] == "106" and row["data wait share %"] == "73.8"
    assert row["met"] == "yes" and row["calls"] == "810"
    assert t.shown.loc["compiled_step", "img/s"] == "14,923"
    assert t.shown.loc["compiled_step", "step ms p95"] == MISSING
    assert t.shown.index.name == "variant"


def test_a_missing_value_comes_with_a_note_saying_why():
    t = readable(comparison())
    assert f"{MISSING} in step ms p95: timed as the step alone." in t.notes
    # nobody said why data_wait_share is missing: the note says so, and the notebook runs refuse it
    assert any(NOT_EXPLAINED in n and "data wait share %" in n for n in t.notes)
    assert any(NOT_EXPLAINED in p for p in unreadable_cells(t._repr_html_()))
    explained = readable(comparison(), missing={"data_wait_share": "timed as the step alone"})
    assert explained.notes == (f"{MISSING} in step ms p95, data wait share %: timed as the step alone.",)  # said once
    assert unreadable_cells(explained._repr_html_()) == []
    assert "timed as the step alone" in repr(explained)


def test_columns_that_share_a_name_are_each_shown():
    df = pd.DataFrame([[1.23456, 2.34567]], columns=["SGD, fp32", "SGD, fp32"])  # bf16 ran as fp32 on this CPU
    assert readable(df).shown.iloc[0].tolist() == ["1.23", "2.35"]


def test_a_transposed_table_keeps_its_reasons():
    df = pd.DataFrame({"variant": ["sgd", "adam"], "weights GiB": [0.009, 0.009], "peak GiB": [None, None]})
    df = df.set_index("variant")
    df.attrs["missing"] = {"peak GiB": "no GPU allocator on a CPU"}
    assert readable(df.T).notes == (f"{MISSING} in peak GiB: no GPU allocator on a CPU.",)


def test_the_spread_column_sets_each_rows_figures():
    df = pd.DataFrame({"variant": ["eager", "graph"], "step ms": [64.989552, 0.779984], "spread %": [0.05, 8.4]})
    t = readable(df, spread="spread %")
    assert list(t.shown["step ms"]) == ["64.99", "0.78"]  # 0.05 % supports four figures, 8.4 % two


def test_a_kind_can_depend_on_the_row_and_unknown_kinds_are_refused():
    df = pd.DataFrame({"figure": ["x_img_per_s", "y_share"], "value": [7362.6, 0.935415]})
    t = readable(df, formats={"value": lambda row: results.figure_unit(row["figure"])[1]})
    assert list(t.shown["value"]) == ["7,363", "93.5"]
    with pytest.raises(ValueError, match="unknown column kind"):
        readable(df, formats={"value": "pretty"})


def test_unreadable_cells_finds_what_a_raw_dataframe_shows():
    raw = comparison().to_html()
    problems = unreadable_cells(raw)
    assert "a raw number '529.881788'" in problems and "a missing value printed as 'NaN'" in problems
    assert "a missing value printed as 'None'" in unreadable_cells(pd.DataFrame({"a": [None, "x"]}, dtype=object).to_html())
    assert "a missing value printed as '<NA>'" in unreadable_cells(
        pd.DataFrame({"a": [1, None]}).astype("Int64").to_html())
    bare_dash = pd.DataFrame({"a": ["1", MISSING]}).to_html()
    assert any("no note" in p for p in unreadable_cells(bare_dash))
    assert unreadable_cells(pd.DataFrame({"a": ["7,363", "0.0548", "1.00", "2.4e-06", "65,536"]}).to_html()) == []


def test_figures_table_gives_each_figure_its_unit(tmp_path):
    path = results.record({"baseline_img_per_s": 646.1234, "baseline_data_wait_share": 0.716957,
                           "sdpa_speedup": 7.605377, "max_batch_bf16": 2816.0}, path=tmp_path / "r.json")
    df = results.figures_table(path)
    assert df.set_index("figure").loc["sdpa_speedup", "value"] == 7.605377
    t = readable(df).shown.set_index("figure")
    assert t.loc["baseline_img_per_s"].tolist() == ["646", "img/s"]
    assert t.loc["baseline_data_wait_share"].tolist() == ["71.7", "%"]
    assert t.loc["sdpa_speedup"].tolist() == ["7.61", "×"]
    assert t.loc["max_batch_bf16"].tolist() == ["2,816", ""]


def test_comparison_table_says_why_a_row_lacks_a_column(tmp_path):
    path = tmp_path / "r.json"
    row = {"img_per_s": 43.1, "step_ms_median": 372.1, "step_ms_p95": 394.3, "peak_allocated_gib": None}
    results.add_comparison_row("baseline", row, path=path)
    results.add_comparison_row("compiled_step", {"img_per_s": 127.2, "step_ms_median": 62.9}, path=path,
                               measured_as="the training step alone, on data already on the device")
    df = results.comparison_table(path)
    assert "measured_as" not in df.columns and df.loc["compiled_step", "speedup_x"] == pytest.approx(127.2 / 43.1)
    notes = readable(df).notes
    assert any("compiled_step: measured as the training step alone" in n and "step ms p95" in n for n in notes)
    assert not any(NOT_EXPLAINED in n for n in notes)


def test_check_targets_reads_each_figure_in_its_unit():
    df = check_targets({"loader_tuned_share_of_ceiling": 0.935415, "loader_tuned_speedup": 9.060487},
                       [Target("loader_tuned_share_of_ceiling", 0.85, "fed"),
                        Target("loader_tuned_speedup", 5.0, "goal", required=False, bound=9.686058)], scale="smoke")
    t = readable(df)
    share = t.shown.iloc[0]
    assert (share["unit"], share["measured"], share["at least"], share["met"]) == ("%", "93.5", "85.0", "yes")
    assert t.shown.iloc[1]["most on this node"] == "9.69" and share["most on this node"] == MISSING
    assert unreadable_cells(t._repr_html_()) == []
    assert df.loc[0, "measured"] == 0.935415


def test_leaderboard_says_why_a_cpu_entry_has_no_gpu_figures(tmp_path):
    assert set(leaderboard.WHY_MISSING) == set(leaderboard.OPTIONAL)  # every optional figure has its reason
    df = pd.DataFrame([{"rank": 1, "name": "a", "date": "2026-11-23", "img_per_s": 26.862949, "speedup": 1.0,
                        "mfu_pct": 0.143880, "datasheet_mfu_pct": None, "accuracy": 0.9, "peak_mem_gb": None, "nvml_util_pct": None,
                        "gpm_sm_pct": None, "speedup_bound": 10.291567, "baseline_img_per_s": 26.9,
                        "torch": "2.14.1", "device": "cpu"}])
    board = leaderboard._board(df)
    assert unreadable_cells(readable(board)._repr_html_()) == []
    assert math.isclose(board.loc[1, "img_per_s"], 26.862949)


def test_a_run_to_the_target_reads_its_time_images_and_why_a_cpu_has_no_mfu():
    assert set(leaderboard.WHY_MISSING_TO_TARGET) == set(leaderboard.TO_TARGET.optional)
    df = pd.DataFrame([{"rank": 1, "name": "Ada", "date": "2026-11-25", "time_to_target_s": 2.016732,
                        "train_s": 2.016732, "images": 49152.0, "img_per_s": 24372.3, "accuracy": 0.861,
                        "target_accuracy": 0.78297, "ceiling_img_per_s": 1000.0, "mfu_pct": None, "datasheet_mfu_pct": None,
                        "peak_mem_gib": None,
                        "nvml_util_pct": None, "gpm_sm_pct": None, "torch": "2.14.1", "device": "cpu"}])
    t = readable(leaderboard._board(df, "to_target"))
    assert unreadable_cells(t._repr_html_()) == []
    row = t.shown.iloc[0]
    assert (row["time to target s"], row["images"], row["accuracy %"], row["target accuracy %"]) == (
        "2.02", "49,152", "86.1", "78.3")
    assert any("MFU is not meaningful on a CPU" in n for n in t.notes)


@pytest.mark.parametrize("v,ceiling", [(float("nan"), 2000.0), (1234.0, float("nan")), (1234.0, 0.0)])
def test_a_rate_a_time_box_cut_reads_as_not_measured_never_nan(v, ceiling):
    from helpers.tables import NOT_MEASURED_HERE, not_a_number_figures, rate_of_text, rate_text

    said = f"pageable: {rate_of_text(v, ceiling)}; one worker: {rate_text(float('nan'))}"
    assert not_a_number_figures(said) == [] and NOT_MEASURED_HERE in said
    assert rate_of_text(1234.4, 2000.0) == "1,234 img/s (62% of the ceiling)"
    assert rate_text(2.5e3, "GB/s") == "2,500 GB/s"


def test_a_float_column_of_counts_prints_whole_and_a_measured_one_keeps_its_figures():
    """03's tables printed ncu's "registers 32.0" and "blocks by registers 2.00", and "kernels per step 68.0"."""
    import pandas as pd

    df = pd.DataFrame({"registers": [32.0, 18.0], "kernels per step": [68.0, 1.0], "total ms": [8.0, 2.0],
                       "speed-up ×": [2.0, 4.0], "ratio": [1.0, 1.0], "mean": [2.5, 3.0]})
    shown = tables.readable(df).shown
    assert list(shown["registers"]) == ["32", "18"] and list(shown["kernels per step"]) == ["68", "1"]
    assert list(shown["total ms"]) == ["8.00", "2.00"] and list(shown["speed-up ×"]) == ["2.00", "4.00"]
    assert list(shown["ratio"]) == ["1.00", "1.00"] and list(shown["mean"]) == ["2.50", "3.00"]


def test_a_ratio_column_is_computed_from_the_figures_as_shown():
    """03's optimizer table read "× vs for-loop 9.6" beside 1.3 ms and 0.13 ms: the ratio came from the unrounded
    times. Shown from the shown times, a reader's division agrees; the data keeps the unrounded ratio."""
    df = pd.DataFrame({"step": ["loop", "foreach", "fused"], "step ms": [1.3049, 0.3102, 0.1349],
                       "spread %": [2.7, 9.3, 8.6]})
    df["× vs loop"] = df["step ms"].iloc[0] / df["step ms"]
    df.attrs.update(spread="spread %", spread_of=["step ms", "× vs loop"],
                    ratio_of={"× vs loop": ("step ms", 0, "base/row")})
    t = readable(df)
    assert list(t.shown["step ms"]) == ["1.3", "0.31", "0.13"]
    assert list(t.shown["× vs loop"]) == ["1.0", "4.2", "10"]  # 1.3 ÷ 0.13, not 9.67
    assert t.data["× vs loop"].iloc[2] == pytest.approx(1.3049 / 0.1349)
    # a slow-down over the last row, and one column over another, row by row
    slow = pd.DataFrame({"ms": [14.5123, 0.30612, 0.032644]}, index=["1000 add_", "foreach", "one add_"])
    slow["× slower"] = slow["ms"] / slow["ms"].iloc[-1]
    slow.attrs["ratio_of"] = {"× slower": ("ms", "one add_", "row/base")}
    assert list(readable(slow).shown["× slower"]) == ["445", "9.39", "1.00"]  # unrounded: 444.6, 9.378
    mem = pd.DataFrame({"manual MiB": [114.4, 1290.4], "fused MiB": [40.1, 122.3]}, index=[1024, 4096])
    mem["manual ÷ fused ×"] = mem["manual MiB"] / mem["fused MiB"]
    mem.attrs["ratio_of"] = {"manual ÷ fused ×": ("manual MiB", "fused MiB", "column/column")}
    assert list(readable(mem).shown["manual ÷ fused ×"]) == ["2.84", "10.6"]  # 114 ÷ 40.1, 1,290 ÷ 122
    # a part of the table without the column or the base row: its ratios stay as computed
    assert list(readable(df[["× vs loop"]]).shown["× vs loop"]) == ["1.00", "4.21", "9.67"]
    assert list(readable(df.iloc[1:]).shown["× vs loop"]) == ["4.2", "9.7"]
    df.attrs["ratio_of"] = {"× vs loop": ("step ms", 0, "sideways")}
    with pytest.raises(ValueError, match="base/row"):
        readable(df)


def test_a_figure_beside_the_figures_it_is_computed_from_reads_as_their_arithmetic():
    """00 read "66,117 img/s (797 TFLOP/s ÷ 12.06 GFLOP per image)", where 797 ÷ 12.06 is 66,086; 07 read "grows
    11.4×" beside 1,290 and 114, 11.3×; 06's kinds and the rest added to 101%."""
    assert tables.rounded(797.4e12 / 12.06e9) == "66,100"
    assert tables.rounded(45.31) == "45.3" and tables.rounded(0.0123456) == "0.0123"
    assert tables.times_as_shown("1,290", "114") == "11.3×"
    assert tables.times_as_shown("0.704 ms", "0.129 ms", digits=2) == "5.5×"
    # 06's kinds and the rest, summed from the rows as the table prints them (58.5, 22.5, 5.5, 3.5): the rest is
    # 100 less those, 10.0, where the unrounded shares leave 10.16; whole percents had read 9% beside 10.1%
    by_kind, rest = tables.percents_as_shown([0.5846, 0.2246, 0.0546, 0.0346], ["conv", "pool", "conv", "copy"])
    assert list(by_kind) == ["conv", "pool", "copy"]  # largest first
    assert [tables.percent(v) for v in by_kind.values()] == ["64.0", "22.5", "3.5"]
    assert tables.percent(rest) == "10.0"
    # rows below 1% print two figures (0.46), and the sums use them as printed
    by_kind, rest = tables.percents_as_shown([0.5, 0.0046, 0.0024], ["a", "b", "b"])
    assert by_kind["b"] == pytest.approx(0.70) and rest == pytest.approx(49.3)
    assert tables.percents_as_shown([0.6, 0.45], ["a", "b"])[1] == 0.0  # never below zero



@pytest.mark.parametrize("text, flagged", [
    ("eager 0.704 ms, compiled 0.129 ms (5.4×)", True),          # 03: 0.704 ÷ 0.129 is 5.46
    ("eager 0.704 ms, compiled 0.129 ms (5.5×)", False),
    ("the eager step's 3.35 ms (1.15× its speed)", False),       # one figure only: nothing to divide
    ("2.91 ms a step against the eager step's 3.35 ms (1.15× its speed)", False),
    ("took 2.5 ms, 1.04× the 2.3 ms of the compiled model", True),  # 03: 2.5 ÷ 2.3 is 1.09
    ("took 3.36 ms, 0.991× the 3.39 ms of the compiled model", False),
    ("keeps 1,290 MiB per block, fused attention 114 MiB: 10.6× less", True),
    ("keeps 1,290 MiB per block, fused attention 122 MiB: 10.6× less", False),
    ("peak memory 1.64 → 5.56 GiB (+240%)", True),               # 06: 5.56 ÷ 1.64 is 3.390
    ("peak memory 1.64 → 5.56 GiB (+239%)", False),
    ("energy per image 29.5 → 33.4 mJ (+13%)", False),
    ("1.2 ms for 4.0 GiB (2.0×)", False),                        # two units: not a pair to divide
    # a division written out beside its result, a power of ten apart by the units' prefixes
    ("about 65,700 img/s (793 TFLOP/s ÷ 12.06 GFLOP per image)", True),   # 00: 793 ÷ 12.06 is 65,755
    ("about 65,800 img/s (793 TFLOP/s ÷ 12.06 GFLOP per image)", False),
    ("the bound is 4.46× (303 ÷ 68 µs)", False),
    ("the bound is 4.40× (303 ÷ 68 µs)", True),
    ("793 ÷ 12.06 = 65.8", False),
    ("793 ÷ 12.06 = 65.5", True),
])
def test_a_ratio_printed_beside_its_figures_is_checked_against_them(text, flagged):
    assert bool(tables.arithmetic_disagreements(text)) is flagged, tables.arithmetic_disagreements(text)


def test_with_ratios_as_shown_records_what_the_table_reads():
    # 03's Summary read 5.19 for the fused softmax while its table, from the shown 1.38 and 0.265 ms, read 5.21;
    # here the unrounded 5.20 is recorded as the table's 1.38 ÷ 0.265
    df = pd.DataFrame({"variant": ["unfused", "fused"], "ms": [1.3800, 0.26530], "spread_pct": [0.1, 0.45]})
    df["× vs unfused"] = df["ms"].iloc[0] / df["ms"]
    df.attrs["spread"] = "spread_pct"
    df.attrs["ratio_of"] = {"× vs unfused": ("ms", df.index[0], "base/row")}
    assert round(float(df["× vs unfused"].iloc[1]), 2) == 5.20  # 1.38 ÷ 0.2653
    shown = tables.with_ratios_as_shown(df)
    assert float(shown["× vs unfused"].iloc[1]) == tables.as_shown(tables.readable(df).shown.iloc[1, 3]) == 5.21
    assert shown.attrs["ratio_of"] == df.attrs["ratio_of"] and float(shown["ms"].iloc[1]) == 0.2653  # times kept
    assert round(float(df["× vs unfused"].iloc[1]), 2) == 5.20  # the caller's frame is not changed


def test_a_derived_column_is_the_arithmetic_of_its_rows_cells_as_shown_in_order():
    # 03's roofline read "0.206 GFLOP … 0.195 ms … 1.05 TFLOP/s", where 0.206 ÷ 0.195 is 1.06
    df = pd.DataFrame({"GFLOP": [0.20612, 1.0], "ms": [0.19514, None], "achieved TFLOP/s": [1.0563, None],
                       "roof TFLOP/s": [1.0662, 1.0662], "share of roof": [0.9907, None]})
    df.attrs["derived"] = {"achieved TFLOP/s": lambda r: r["GFLOP"] / r["ms"],
                           "share of roof": lambda r: r["achieved TFLOP/s"] / r["roof TFLOP/s"]}
    shown = tables.readable(df).shown
    assert list(shown.iloc[0]) == ["0.206", "0.195", "1.06", "1.07", "99.1"]  # the share from 1.06 ÷ 1.07
    assert list(shown.iloc[1])[1:3] == [tables.MISSING, tables.MISSING]  # an input shows none: the cell keeps "—"
    kept = tables.with_ratios_as_shown(df)
    assert kept["achieved TFLOP/s"].iloc[0] == 1.06 and kept["share of roof"].iloc[0] == pytest.approx(0.991)
    assert df["achieved TFLOP/s"].iloc[0] == 1.0563  # the frame passed in is left as it was


def test_a_saving_against_the_base_row_and_a_column_to_fixed_decimals_read_as_shown():
    # 04 read "memory saved vs fp32 %" 31.7 beside peaks of 11.9 and 8.10 GiB (which give 31.9), and the sentences
    # beside it printed the peaks to the hundredth
    df = pd.DataFrame({"peak GiB": [11.8514, 8.0966, 16.6449]}, index=["fp32", "bf16", "no TF32"])
    df["saved %"] = 100 * (1 - df["peak GiB"] / df.loc["fp32", "peak GiB"])
    df.attrs["ratio_of"] = {"saved %": ("peak GiB", "fp32", "saved % of base")}
    df.attrs["decimals"] = {"peak GiB": 2}
    shown = tables.readable(df).shown
    assert list(shown["peak GiB"]) == ["11.85", "8.10", "16.64"]
    assert list(shown["saved %"]) == ["0", "31.6", "-40.4"]
    with pytest.raises(ValueError, match="saved % of base"):
        tables.readable(df.assign(x=1.0).pipe(lambda d: d.attrs.update(ratio_of={"x": ("peak GiB", "fp32", "?")})
                                              or d))


def test_two_rates_and_a_rate_over_a_time_divide_as_printed():
    # 06 read "7.76×" beside 5,591 and 721 img/s (5,591 ÷ 721 is 7.75); 02 read "7.1% more" beside a gain of 7.0
    assert tables.ratio_as_shown(5591.49, 720.6) == 5591 / 721
    assert round(100 * (tables.ratio_as_shown(4892.4, 4569.6) - 1), 1) == 7.0  # 4,892 ÷ 4,570, as the table's gain
    assert round(100 * (4892.4 / 4569.6 - 1), 1) == 7.1  # what the unrounded rates had printed beside it
    assert math.isnan(tables.ratio_as_shown(math.nan, 721)) and math.isnan(tables.ratio_as_shown(5591, math.inf))
    assert tables.ratio_as_shown(3.0, 0.4) == 7.5  # a rate that prints as 0: no division of printed figures exists
    # a time to three figures: 36,864 images in 1.6244 s read "1.62 s", and 36,864 ÷ 1.62 is 22,756
    assert round(tables.rate_as_shown(36_864, 1.6244)) == 22_756
    assert math.isnan(tables.rate_as_shown(36_864, 0.0)) and math.isnan(tables.rate_as_shown(1, math.nan))
