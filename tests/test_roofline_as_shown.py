"""Every share of a roof, ridge and speed-up the roofline tables print is the reader's arithmetic on the figures
printed beside it: the cases a review of the H200 exports found (bf16 matmul 786.5 TFLOP/s printed 787, copy
4,263.8 GB/s printed 4,264), each share once computed from the unrounded rates."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from helpers import models, roofline, tables
from helpers.bench import Ceilings
from helpers.challenge.step_roofline import StepKernels
from helpers.gpt import step_kernels

#: The H200's ceilings as measured: printed "787 TFLOP/s" and "4,264 GB/s".
H200 = Ceilings("NVIDIA H200", 786.53, "bfloat16", 8192, 4263.8, 2**31)


def _point(name: str, kind: str, *, intensity: float, achieved_tflops: float, flops: float = 1e11):
    """A timed op at ``intensity`` FLOP/byte that reached ``achieved_tflops``."""
    return roofline.RooflinePoint(name, flops, flops / intensity, kind, ms=flops / (achieved_tflops * 1e12) * 1e3)


def _exact_pct(p: roofline.RooflinePoint, ceil: Ceilings) -> str:
    """The share as it read before: the unrounded rates' quotient."""
    return tables.percent(100 * p.achieved_tflops / roofline.attainable_tflops(p.intensity, ceil))


def _shown_quotient(row, achieved: str = "achieved TFLOP/s", roof: str = "roof TFLOP/s") -> str:
    """The reader's own division of a shown row's two rates, as a table prints a percent."""
    return tables.percent(100 * tables.as_shown(row[achieved]) / tables.as_shown(row[roof]))


# 03's reference ops: each exact share a last digit off the shown rates' quotient
OPS = [_point("conv1", "convolution", intensity=25.8, achieved_tflops=10.54),     # 10.5 ÷ 110: 9.5, not 9.6
       _point("pool·1", "pooling", intensity=0.1668, achieved_tflops=0.2524),     # 0.252 ÷ 0.711: 35.4, not 35.5
       _point("conv3", "convolution", intensity=767.0, achieved_tflops=408.4),    # 408 ÷ 787: 51.8, not 51.9
       _point("fc1", "GEMM", intensity=170.6, achieved_tflops=286.6),             # 287 ÷ 727: 39.5, not 39.4
       _point("given: matmul", "GEMM", intensity=1365.0, achieved_tflops=774.2)]  # 774 ÷ 787: 98.3, not 98.4


def test_the_fixture_reproduces_the_reported_cases():
    assert [_exact_pct(p, H200) for p in OPS] == ["9.6", "35.5", "51.9", "39.4", "98.4"]


def test_the_points_tables_share_of_roof_is_the_shown_rates_quotient():
    table = roofline.points_table(OPS, H200)
    shown = tables.readable(table).shown.set_index("op")
    assert list(shown["share of roof %"]) == ["9.6", "35.5", "51.9", "39.4", "98.5"]
    for p, (_, row) in zip(OPS, shown.iterrows()):
        assert row["share of roof %"] == _shown_quotient(row)
        # every derived cell is the reader's arithmetic on the cells beside it (03 read "0.206 GFLOP … 0.195 ms …
        # 1.05 TFLOP/s", where 0.206 ÷ 0.195 is 1.06), to four figures
        gflop, mb, ms = (tables.as_shown(row[c]) for c in ("GFLOP", "MB moved", "ms"))
        assert row["FLOP/byte"] == tables.sig(p.intensity, 4)  # the op's own: its counts are exact
        assert 1e3 * gflop / mb == pytest.approx(tables.as_shown(row["FLOP/byte"]), rel=1e-3)  # within their rounding
        assert row["roof TFLOP/s"] == tables.sig(min(787, tables.as_shown(row["FLOP/byte"]) * 4.264), 4)
        assert row["achieved TFLOP/s"] == tables.sig(gflop / ms, 4)
        if row["bound"] == "memory":  # MB ÷ ms over the bandwidth: the share the counts give, to its last digit
            assert abs(float(row["share of roof %"]) - 100 * mb / ms / 4264) <= 0.1 + 1e-9
    # the figure 03 records from the column reads as the table does
    assert dict(zip(table.op, table["share of roof"]))["conv3"] == pytest.approx(0.519)


def test_a_chain_of_three_figure_cells_no_longer_drifts_from_the_counts():
    """03's relu·3 read 99.1% (1.05 ÷ 1.06 TFLOP/s), where its 822 MB in 0.197 ms over 4,243 GB/s is 98.3%; the
    "given: matmul" row read 1,356 FLOP/byte (137 ÷ 101), where 4,096 ÷ 3 is 1,365 (one H200, 2026-11-30)."""
    ceil = Ceilings("NVIDIA H200", 798.2, "bfloat16", 8192, 4243.3, 2**31)
    relu3 = roofline.RooflinePoint("relu·3", 822e6 / 4, 822e6, "elementwise", ms=0.197)
    n = 4096
    matmul = roofline.RooflinePoint("given: matmul", 2 * n**3, 3 * n * n * 2, "GEMM", ms=0.174)
    shown = tables.readable(roofline.points_table([relu3, matmul], ceil)).shown.set_index("op")
    assert shown.loc["relu·3", "share of roof %"] == tables.percent(100 * 822 / 0.197 / 4243)  # 98.3
    assert shown.loc["given: matmul", "FLOP/byte"] == "1,365"


def test_the_shares_of_roof_sentences_read_as_the_table():
    table = roofline.points_table(OPS, H200)
    assert roofline.shares_of_roof(table, "memory") == ("memory-bound: conv1 9.6%, pool·1 35.5%, fc1 39.4% of "
                                                        "their roofs")
    assert roofline.shares_of_roof(table, "compute") == ("compute-bound: conv3 51.9%, given: matmul 98.5% of "
                                                         "their roofs")


def test_a_share_past_its_roof_keeps_its_reason_and_one_the_shown_rates_do_not_pass_needs_none():
    cpu = Ceilings("a CPU", 0.0352, "float32", 64, 12.3, 1, bounds=False)
    over = _point("relu", "elementwise", intensity=0.25, achieved_tflops=0.0045)  # 1.5× the stand-in's memory roof
    table = roofline.points_table([over], cpu)
    assert table["share of roof"].iloc[0] > 1 and "stand-ins" in table.attrs["above_roof"]["share of roof"]
    assert any("stand-ins" in n for n in tables.readable(table).notes)
    # 03's relu·1 read 100.0% beside 1.07 and 1.07, where its bytes over its time gave 100.2%: at four figures the
    # table shows it past its roof, with the reason (within the spread of two measurements)
    at_roof = _point("relu·1", "elementwise", intensity=0.25, achieved_tflops=1.0689)
    assert _exact_pct(at_roof, H200) == "100.3"
    table = roofline.points_table([at_roof], H200)
    assert tables.readable(table).shown["share of roof %"].iloc[0] == "100.2"  # 1.069 ÷ 1.066, as shown
    assert "spread of two measurements" in table.attrs["above_roof"]["share of roof"]
    # a share that is 100.0 as shown owes no reason
    exact = _point("relu·1", "elementwise", intensity=0.25, achieved_tflops=1.066)
    assert "above_roof" not in roofline.points_table([exact], H200).attrs


def test_the_ridge_is_the_printed_ceilings_quotient_on_the_chart_and_in_the_sentence():
    """03 printed "ridge point: 184 FLOP/byte" beside 787 TFLOP/s and 4,264 GB/s: 787 ÷ 4.264 is 184.6."""
    assert f"{H200.matmul_tflops * 1e3 / H200.copy_gb_per_s:.0f}" == "184"  # the unrounded ceilings' ridge
    assert roofline.ceilings_as_shown(H200) == (787.0, 4264.0)
    assert roofline.ridge_intensity(H200) == pytest.approx(787 / 4.264)
    assert f"{roofline.ridge_intensity(H200):.0f}" == "185"
    fig = roofline.roofline_figure(OPS, H200)
    assert [a.text for a in fig.layout.annotations if a.text.startswith("ridge")] == ["ridge 185 FLOP/byte"]
    assert "787 TFLOP/s" in fig.layout.title.text and "4,264 GB/s" in fig.layout.title.text


def test_the_ridge_of_round_ceilings_and_which_roof_bounds_an_op_are_unchanged():
    ceil = Ceilings("test CPU", 1.0, "float32", 64, 100.0, 1)
    assert roofline.ridge_intensity(ceil) == pytest.approx(10.0)
    assert _point("x", "GEMM", intensity=9.9, achieved_tflops=0.5).bound(ceil) == "memory"
    assert _point("y", "GEMM", intensity=10.1, achieved_tflops=0.5).bound(ceil) == "compute"


def test_channels_last_speed_up_is_the_shown_times_quotient():
    """03's conv3 read "1.76 … 1.16 … 1.51", where 1.76 ÷ 1.16 is 1.52."""
    df = pd.DataFrame({"conv": ["conv3"], "channels": ["128→256"], "NCHW ms": [1.7558],
                       "channels_last ms": [1.1635]})
    df["speed-up"] = df["NCHW ms"] / df["channels_last ms"]
    assert tables.sig(df["speed-up"].iloc[0]) == "1.51"  # the case as it was
    out = roofline._speed_ups_as_shown(df)
    shown = tables.readable(out).shown
    assert shown["speed-up ×"].iloc[0] == "1.52" and out["speed-up"].iloc[0] == pytest.approx(1.52)
    assert out["NCHW ms"].iloc[0] == 1.7558  # the times keep every digit


def test_conv_layouts_speed_ups_read_as_the_shown_times_divide():
    df = roofline.conv_layouts(models.ReferenceCNN(16), batch=2, repeats=2)
    shown = tables.readable(df).shown
    for _, row in shown.iterrows():
        quotient = tables.as_shown(row["NCHW ms"]) / tables.as_shown(row["channels_last ms"])
        assert row["speed-up ×"] == tables.sig(quotient)
    assert [tables.sig(v) for v in df["speed-up"]] == list(shown["speed-up ×"])  # the recorded median reads alike


def _step_kernels(points) -> StepKernels:
    return StepKernels(points=points, shares={p.name: 100 / len(points) for p in points}, unplaced={},
                       step_kernel_ms=sum(p.ms for p in points))


def test_06s_top_rung_table_shares_are_the_shown_rates_quotient():
    """06 read "FC … 384 … 726 … 52.8" (384 ÷ 726 is 52.9) and "fused pool forward … 2.50 … 3.10 … 80.5" (80.6)."""
    fc = _point("fully connected (GEMM)", "GEMM", intensity=170.25, achieved_tflops=383.55)
    pool = _point("fused pool forward", "pooling", intensity=0.72705, achieved_tflops=2.4960)
    assert [_exact_pct(p, H200) for p in (fc, pool)] == ["52.8", "80.5"]
    kernels = _step_kernels([fc, pool])
    shown = kernels.readable(H200).shown
    # the roof is FLOP/byte × 4.264 as shown (170 × 4.264 = 725, not the unrounded 726); both rows sit under the
    # sloped roof, so each share is the GB/s moved over the copy ceiling, the four-figure arithmetic: 06 read
    # "2.49 … 3.11 … 3,425 … 80.1", where 3,425 ÷ 4,271 is 80.2
    assert list(shown["roof TFLOP/s"]) == ["725", "3.10"] and list(shown["% of roof"]) == ["53.0", "80.7"]
    for _, row in shown.iterrows():
        fpb, achieved = tables.as_shown(row["FLOP/byte"]), tables.as_shown(row["achieved TFLOP/s"])
        assert row["roof TFLOP/s"] == tables.sig(min(787, fpb * 4.264))
        assert row["GB/s moved"] == tables.sig(1e3 * achieved / fpb)  # 06 read 2,247 where 383 ÷ 170 is 2,253
        assert row["% of roof"] == tables.percent(100 * tables.as_shown(row["GB/s moved"]) / 4264)
        # and within what the three-figure rates' own rounding allows
        half = 0.5 * 10 ** (math.floor(math.log10(achieved)) - 2)
        roof, roof_half = tables.as_shown(row["roof TFLOP/s"]), 0.5 * 10 ** (math.floor(math.log10(
            tables.as_shown(row["roof TFLOP/s"]))) - 2)
        low, high = 100 * (achieved - half) / (roof + roof_half), 100 * (achieved + half) / (roof - roof_half)
        assert low <= tables.as_shown(row["% of roof"]) <= high
    # the figures 06 records from the table read as the table does
    recorded = kernels.table(H200).set_index("kernels")["% of roof"]
    assert recorded["fused pool forward"] == 80.7 and recorded["fully connected (GEMM)"] == 53.0


def test_06s_table_keeps_the_reason_for_a_share_past_its_roof():
    past = _point("fused pool backward", "pooling", intensity=0.5, achieved_tflops=2.6)  # 2.60 ÷ 2.13: 122%
    notes = " ".join(_step_kernels([past]).readable(H200).notes)
    assert "Above 100% in % of roof (fused pool backward)" in notes and "the bandwidth one copy kernel" in notes


def test_07s_step_roofline_gemm_share_is_the_shown_rates_quotient():
    """07 read "GEMM … 719 … 787 … 91.5", where 719 ÷ 787 is 91.4."""
    gemm = _point(step_kernels.GEMM, "GEMM", intensity=600.0, achieved_tflops=719.3)
    assert _exact_pct(gemm, H200) == "91.5"
    shown = step_kernels.readable_kernels(_step_kernels([gemm]), H200).shown
    row = shown.loc[step_kernels.GEMM]
    assert row["% of roof"] == "91.4" == _shown_quotient(row)
