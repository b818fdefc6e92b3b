"""Figures drawn right: a label on a log axis placed at the value's log10, axes that hold their data, and the check
that catches the mistake (plotly reads a log axis annotation's coordinate as an exponent: 255 is drawn at 10^255)."""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots
import pytest

from helpers import figure_check, roofline
from helpers.bench import Ceilings
from helpers.inference import LatencyPoint, ServingSweep


def test_a_label_placed_at_its_value_on_a_log_axis_is_caught():
    fig = go.Figure(go.Scatter(x=[1, 10, 100], y=[1, 2, 3]))
    fig.update_xaxes(type="log", title_text="FLOP/byte")
    figure_check.readable_log_axes(fig)
    fig.add_vline(x=255, annotation_text="ridge")  # the mistake every roofline made
    found = figure_check.problems(fig)
    assert len(found) == 1 and "'ridge' on the log axis 'FLOP/byte' sits at x=255" in found[0]
    assert "10^255" in found[0] and "math.log10" in found[0]


def test_log_marker_places_its_label_at_the_log_of_the_value():
    fig = go.Figure(go.Scatter(x=[1, 10, 100], y=[1, 2, 3]))
    fig.update_xaxes(type="log")
    figure_check.readable_log_axes(fig)
    figure_check.log_marker(fig, x=255, text="ridge")
    (ann,) = fig.layout.annotations
    assert math.isclose(ann.x, math.log10(255)) and ann.yref == "y domain"
    assert figure_check.problems(fig) == []
    linear = go.Figure(go.Scatter(x=[1, 10, 100], y=[1, 2, 3]))
    figure_check.log_marker(linear, y=2.5, text="target")  # a linear axis keeps the value itself
    assert linear.layout.annotations[0].y == 2.5
    with pytest.raises(ValueError, match="give x .* or y"):
        figure_check.log_marker(linear, x=1, y=1, text="both")


def test_an_explicit_range_that_leaves_data_out_is_caught():
    fig = go.Figure(go.Scatter(x=[1, 10, 1000], y=[1, 2, 3]))
    fig.update_xaxes(type="log", range=[0, 2])
    assert "shows 10^0…10^2 but its data run 10^0…10^3" in figure_check.problems(fig)[0]


def test_a_linear_range_that_misses_its_data_by_a_rounding_passes_and_by_a_pixel_fails():
    """05's stream timeline (two H200s, 2026-11-27): its range ended at 61.7745849609 ms, computed from float32
    timestamps, and its last bar at 61.7745851562: the same end to a millionth, refused as 'widen the range'."""
    bars = go.Figure(go.Bar(x=[2.0, 3.7745851562], base=[0.0, 58.0], y=["a", "b"], orientation="h"))
    bars.update_xaxes(range=[0, 61.7745849609375])
    assert figure_check.problems(bars) == []
    bars.update_xaxes(range=[0, 61.5])  # a quarter of a millisecond short: the last bar's end is cut
    assert "shows 0…61.5 but its data run 0…61.7746" in figure_check.problems(bars)[0]


def test_a_log_axis_with_plotlys_bare_digit_ticks_is_caught_and_readable_ticks_fix_it():
    """03's attention chart, 04's largest batch, 06's serving chart: over a few decades plotly labels the ticks
    between powers of ten with a bare digit, and a reader saw "10, 2, 5, 100, 2, 5". The check names the axis;
    readable_log_axes ticks it 1, 2, 5, 10, 20 ... 10k."""
    fig = go.Figure(go.Scatter(x=[1, 8, 64, 512], y=[3, 30, 300, 3000]))
    fig.update_xaxes(type="log", title_text="batch size")
    found = figure_check.problems(fig)
    assert len(found) == 1 and "'batch size'" in found[0] and "bare digits" in found[0]
    figure_check.readable_log_axes(fig)
    assert figure_check.problems(fig) == []
    assert list(fig.layout.xaxis.ticktext) == ["1", "2", "5", "10", "20", "50", "100", "200", "500"]
    # a few decades: 1, 2, 5 in each; many: powers of ten, read as 10k, not 1e4
    assert figure_check.log_ticks(8, 300)[1] == ["10", "20", "50", "100", "200"]
    assert figure_check.log_ticks(0.1, 2e5)[1] == ["0.1", "1", "10", "100", "1k", "10k", "100k"]
    assert figure_check.log_ticks(1800, 2500)[1] == ["1.8k", "2k", "2.2k", "2.4k"]  # within a decade: evenly
    # many decades on a long axis: plotly labels only powers of ten, nothing to fix
    wide = go.Figure(go.Scatter(x=[1e-3, 1e9], y=[1, 2]))
    wide.update_xaxes(type="log")
    assert figure_check.problems(wide) == []
    # an axis under a decade is ticked evenly by plotly, with whole labels
    narrow = go.Figure(go.Scatter(x=[1, 2], y=[1, 2]))
    narrow.update_xaxes(type="log")
    assert figure_check.problems(narrow) == []


def test_every_log_chart_the_helpers_draw_has_readable_ticks():
    from helpers.kernels.attention import sweep_figure
    from helpers.memory.search import BatchSearch, Trial, search_figure
    import pandas as pd

    df = pd.DataFrame({"seq_len": [256, 512, 1024, 2048, 4096], "naive ms": [0.2, 0.6, 2.1, 8.0, 31.0],
                       "SDPA ms": [0.1, 0.2, 0.5, 1.6, 5.8], "naive peak GiB": [0.01, 0.05, 0.2, 0.8, 3.1],
                       "SDPA peak GiB": [0.01, 0.02, 0.03, 0.06, 0.1], "naive kept for backward MiB": [None] * 5,
                       "SDPA kept for backward MiB": [None] * 5, "SDPA kernel": ["flash"] * 5})
    serving = ServingSweep(points=tuple(LatencyPoint(v, "bf16", b, 0.5 + b / 100, 0.6 + b / 90, 0.55 + b / 95, 100, 0.0)
                                        for v in ("eager", "compiled") for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)),
                           skipped={}, image_size=224, device="H100")
    search = BatchSearch("bf16", tuple(Trial(b, b <= 512, b / 400 if b <= 512 else None, 900.0 + b if b <= 512 else None)
                                       for b in (8, 16, 32, 64, 128, 256, 512, 1024)), budget_gib=1.6)
    for fig in (sweep_figure(df), serving.figure(p99_target_ms=5)):
        logs = [fig.layout[k] for k in fig.layout if k[1:5] == "axis" and fig.layout[k].type == "log"]
        assert logs and all(a.tickmode == "array" for a in logs)
        assert all(v >= 10 ** 3.9 or "e" not in t for a in logs for v, t in zip(a.tickvals, a.ticktext))  # 10k
        assert figure_check.problems(fig) == []
    # the largest-batch chart draws the batch linearly (the peak grows by so much per image: a straight line, which
    # the estimate of a failed batch's need extends), so it has no log axis to tick
    fig = search_figure([search])
    assert all(fig.layout[k].type != "log" for k in fig.layout if k[1:5] == "axis")
    assert figure_check.problems(fig) == []
    assert "10k" in serving.figure().layout.yaxis2.ticktext


def test_the_roofline_and_the_serving_chart_hold_their_data():
    ceil = Ceilings("a GPU", 800.0, "bfloat16", 8192, 3000.0, 2**31)
    points = [roofline.RooflinePoint("conv1", 1e12, 1e10, "convolution", 2.0),
              roofline.RooflinePoint("relu", 1e8, 1e9, "elementwise", 0.5)]
    fig = roofline.roofline_figure(points, ceil)
    assert figure_check.problems(fig) == []
    (ridge,) = fig.layout.annotations
    assert ridge.text == "ridge 267 FLOP/byte" and math.isclose(10**ridge.x, 800e12 / 3000e9)
    sweep = ServingSweep(points=tuple(LatencyPoint("eager fp32", "fp32", b, 0.1 * b, 0.2 * b, 0.15 * b, 100, 0.0)
                                      for b in (1, 4, 16)), skipped={}, image_size=32, device="a GPU")
    chart = sweep.figure(p99_target_ms=2.0)
    assert figure_check.problems(chart) == []
    (target,) = chart.layout.annotations[-1:]
    assert target.text == "target 2 ms" and math.isclose(target.y, math.log10(2.0))


def test_a_notebook_cell_that_draws_a_figure_wrong_fails():
    """The notebook runs' hook (the repository's conftest.py) reads the figures a cell displayed."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)

    bad = go.Figure(go.Scatter(x=[1, 10], y=[1, 2]))
    bad.update_xaxes(type="log")
    bad.add_vline(x=255, annotation_text="ridge")
    outputs = [{"data": {"application/vnd.plotly.v1+json": bad.to_plotly_json()}}]
    assert conftest.misdrawn_figures(outputs) and not conftest.misdrawn_figures([{"data": {"text/plain": "x"}}])


def test_a_title_wider_than_the_figure_a_clipped_legend_and_labels_over_one_another_are_caught():
    fig = go.Figure([go.Bar(y=["step"], x=[v], name=n, orientation="h") for n, v in
                     (("data 120 ms (72%)", 120), ("compute 40 ms (24%)", 40), ("other 6 ms (4%)", 6))])
    fig.update_layout(barmode="stack", height=220, title="Median step: 166 ms")  # 01's chart: 3 entries, 40 px
    assert any("the legend's 3 entries need about 67 px" in p for p in figure_check.problems(fig))
    fig.update_layout(height=300, legend=dict(orientation="h", y=-0.4))
    assert figure_check.problems(fig) == []
    wide = go.Figure(go.Scatter(x=[1, 2], y=[1, 2]))
    wide.update_layout(title="Roofline of CPU (x86_64, 2 cores): 0 TFLOP/s (float32 matmul), 28 GB/s (copy)")
    assert "needs about 759 px of a 700 px wide figure" in figure_check.problems(wide)[0]
    wide.update_layout(title="Roofline of CPU (x86_64, 2 cores)<br><sup>352 GFLOP/s (float32 matmul)</sup>")
    assert figure_check.problems(wide) == []
    over = go.Figure(go.Scatter(x=[0, 10], y=[0, 1]))
    for name, x in (("optimizer", 4.0), ("forward", 4.6), ("backward", 9.0)):  # 04's phase labels
        over.add_annotation(x=x, y=1.02, yref="paper", text=name, showarrow=False)
    found = figure_check.problems(over)
    assert found == ["the labels 'optimizer' and 'forward' are drawn over one another: shorten them, move one, or "
                     "make the figure wider"]


def test_a_y_axis_title_longer_than_its_axis_is_caught():
    # 03's attention chart on an H100: the memory panel's axis title ran up into the panel titles and the subtitle
    fig = make_subplots(rows=1, cols=2, subplot_titles=("forward + backward", "memory"))
    fig.add_trace(go.Scatter(x=[1, 2], y=[1, 2]), row=1, col=1)
    fig.add_trace(go.Scatter(x=[1, 2], y=[1, 2]), row=1, col=2)
    fig.update_yaxes(title_text="GiB at the allocator's peak, above the inputs", row=1, col=2)
    fig.update_layout(height=400)
    assert figure_check.problems(fig) == [
        "the title of the axis 'GiB at the allocator's peak, above the inputs' needs about 365 px along an axis "
        "220 px long: it runs into the titles above it; name the unit there and say the rest in the figure's title"]
    fig.update_yaxes(title_text="GiB", row=1, col=2)
    assert figure_check.problems(fig) == []


def test_ticks_past_ten_to_the_fifteen_nan_labels_and_far_away_lines_are_caught():
    fig = go.Figure(go.Scatter(x=[1, 100], y=[0.5, 22.6]))
    fig.update_xaxes(type="log", range=[0, 255])
    assert any("runs to 10^255" in p and "NaN and Infinity" in p for p in figure_check.problems(fig))
    ticks = go.Figure(go.Scatter(x=[1, 2], y=[1, 2]))
    ticks.update_xaxes(tickvals=[1, 2], ticktext=["1", "NaN"])
    assert "tick label 'NaN'" in figure_check.problems(ticks)[0]
    line = go.Figure(go.Scatter(x=[1, 2, 3], y=[0.5, 10, 22.6]))
    line.add_hline(y=500, annotation_text="target 500 ms")  # a linear axis stretched twenty times past the data
    found = figure_check.problems(line)
    assert any("the line" in p and "y=500" in p for p in found) and any("the label 'target 500 ms'" in p for p in found)
    line.update_yaxes(range=[5, 30])
    assert any("shows 5…30 but its data run 0.5…22.6" in p for p in figure_check.problems(line))
    near = go.Figure(go.Scatter(x=[1, 2, 3], y=[0.5, 10, 22.6]))
    near.add_hline(y=30, annotation_text="target 30 ms")  # a target just past the data is what a reader needs
    assert figure_check.problems(near) == []


def test_a_flop_rate_reads_in_its_unit():
    from helpers.bench import flops_rate

    assert (flops_rate(786.4), flops_rate(58.2), flops_rate(0.352), flops_rate(0.0352)) == (
        "786 TFLOP/s", "58.2 TFLOP/s", "352 GFLOP/s", "35.2 GFLOP/s")
    assert Ceilings("cpu", 0.352, "float32", 1024, 28.0, 2**28).matmul_rate == "352 GFLOP/s"


def test_phase_labels_of_a_short_phase_go_on_another_row_and_the_check_sees_it():
    """04's memory timeline: a short optimizer phase and the next forward, named side by side, ran together."""
    from helpers.memory.timeline import MemoryTimeline, timeline_figure

    phases = (("forward", 0.0, 10.0), ("backward", 10.0, 20.0), ("optimizer", 20.0, 21.0), ("forward", 21.0, 31.0))
    tl = MemoryTimeline("cuda", (0.0, 15.0, 31.0), (0, 2**30, 0), (2**30, 2**30, 2**30), phases)
    fig = timeline_figure(tl)
    assert figure_check.problems(fig) == []
    rows = [a.y for a in fig.layout.annotations]
    assert rows[2] != rows[3] and rows[0] == rows[1] == rows[2]  # the short phase's neighbour moved down a row
    same_row = go.Figure(fig)
    for a in same_row.layout.annotations:
        a.y = 1
    assert any("'optimizer' and 'forward' are drawn over one another" in p for p in figure_check.problems(same_row))
    assert figure_check.label_rows([(0, 60), (50, 90), (100, 140)]) == [0, 1, 0]


def test_roofline_points_on_one_another_share_a_label_and_near_ones_move_apart():
    ceil = Ceilings("cpu", 0.33, "float32", 1024, 39.0, 2**28)  # a CPU: the axis reads GFLOP/s
    points = [roofline.RooflinePoint(f"relu·{i}", 1e6, 8e6, "elementwise", ms) for i, ms in ((1, 0.1), (2, 0.1))]
    points += [roofline.RooflinePoint("conv2", 1e9, 6e6, "convolution", 5.0),
               roofline.RooflinePoint("conv3", 1.3e9, 6e6, "convolution", 6.0)]  # 12 px to the right
    fig = roofline.roofline_figure(points, ceil)
    assert fig.layout.yaxis.title.text == "GFLOP/s"
    texts = {t.name: (list(t.text), list(t.textposition)) for t in fig.data if t.name != "roof"}
    # a label is the marker's text, or, where no place beside it is free, an annotation joined to it by a line
    away = [a.text for a in fig.layout.annotations if a.showarrow]
    shown = [x for t in fig.data if t.name != "roof" for x in t.text if x] + away
    assert shown.count("relu·1, relu·2") == 1 and "relu·1" not in shown  # the same place: one label
    assert texts["elementwise"][0][1] == ""  # on the first of the two markers only
    assert {"conv2", "conv3"} <= set(shown)
    (conv2, conv3), positions = texts["convolution"]
    if conv2 and conv3:  # both beside their points: side by side, apart
        assert positions[0] != positions[1]



def test_a_roofline_label_goes_where_no_line_crosses_it():
    """03's and 06's exports wrote kernels' names across the roof and the ridge's dotted line: a label whose box a
    line runs through is placed elsewhere, where there is room."""
    pt = roofline.RooflinePoint("pool·1", 70.0, 1.0, "elementwise", 1.0)  # 70 FLOP/byte, 70 on a flat roof of 100
    ys = {id(pt): 70.0}
    kw = dict(x_span=(1.0, 1000.0), y_span=(1.0, 1000.0))
    assert roofline._labels([pt], ys, **kw)[id(pt)][1] == "top center"  # nothing in the way: above its point
    under_roof = roofline._labels([pt], ys, roof=lambda x: 100.0, **kw)[id(pt)][1]
    assert under_roof != "top center" and not under_roof.startswith("top")  # above, the roof would cross it
    beside_ridge = roofline._labels([pt], ys, ridge=(80.0, "ridge 80 FLOP/byte"), **kw)[id(pt)][1]
    assert beside_ridge not in ("top center", "bottom center", "middle right")  # the ridge runs through those


def test_a_roofline_label_goes_on_the_side_nearer_its_own_point_than_any_other():
    """03's roofline (one H200, 2026-11-29) put conv2's label above it and conv3's below it, conv3 being up and to
    the right of conv2: each label sat toward the other point, and they read crosswise."""
    ceil = Ceilings("NVIDIA H200", 800.0, "bfloat16", 8192, 4233.0, 2**31)
    at = [("conv1", 25.791, 10.368, "convolution"), ("conv2", 383.954, 262.339, "convolution"),
          ("conv3", 767.265, 407.347, "convolution"), ("fc1", 170.521, 301.571, "GEMM"),
          ("fc2", 9.4458, 0.05605, "GEMM"), ("relu·1", 0.25, 1.063, "elementwise"),
          ("relu·4", 0.25, 0.00383, "elementwise"), ("pool·1", 0.1667, 0.2476, "pooling")]
    points = [roofline.RooflinePoint(n, y * 1e9, y * 1e9 / x, k, 1.0) for n, x, y, k in at]
    fig = roofline.roofline_figure(points, ceil)
    pos = {name: p for t in fig.data[1:] for name, p in zip(t.text, t.textposition)}
    assert not pos["conv2"].startswith("top")  # conv3 is above it
    assert not pos["conv3"].startswith("bottom")  # conv2 is below it
    assert figure_check.problems(fig) == []


def test_a_roofline_label_with_no_free_place_beside_its_point_goes_further_out_on_a_leader_line():
    """06's top rung: "fully connected (GEMM)" just under the roof's corner, fenced in by the sloped roof and the
    ridge's dotted line, was written across both; "convolutions", right of the ridge under the flat roof, across the
    ridge's line. Each now goes where nothing crosses it, joined to its point by a thin line."""
    ceil = Ceilings("NVIDIA H200", 800.0, "bfloat16", 8192, 4233.0, 2**31)
    points = [roofline.RooflinePoint("convolutions", 461.1e9, 461.1e9 / 332.7, "convolution", 1.0),
              roofline.RooflinePoint("fully connected (GEMM)", 387.0e9, 387.0e9 / 170.4, "GEMM", 1.0),
              roofline.RooflinePoint("fused pool forward", 2.5e9, 2.5e9 / 0.727, "pooling", 1.0)]
    fig = roofline.roofline_figure(points, ceil)
    assert figure_check.problems(fig) == []
    away = {a.text: a for a in fig.layout.annotations if a.showarrow}
    assert set(away) == {"convolutions", "fully connected (GEMM)"}
    gemm = away["fully connected (GEMM)"]
    assert gemm.x == pytest.approx(math.log10(170.4), abs=0.01) and (gemm.ax, gemm.ay) != (0, 0)  # at its point
    pool = next(t for t in fig.data if t.name == "pooling")
    assert list(pool.text) == ["fused pool forward"]  # room beside it: the marker's own text, no line
    # _labels says the same on its own: both away from their points, the pool beside its own
    ys = {id(p): p.achieved_tflops for p in points}
    placed = roofline._labels(points, ys, x_span=(10 ** fig.layout.xaxis.range[0], 10 ** fig.layout.xaxis.range[1]),
                              y_span=(10 ** fig.layout.yaxis.range[0], 10 ** fig.layout.yaxis.range[1]),
                              ridge=(roofline.ridge_intensity(ceil), "ridge 189 FLOP/byte"),
                              roof=lambda x: roofline.attainable_tflops(x, ceil))
    assert all(pos.startswith("far ") == (name != "fused pool forward") for name, pos in placed.values())

LONG_DEVICE = "NVIDIA GeForce RTX 4090 Laptop GPU as two-core"  # a learner's GPU under a profile: a long name


def test_figures_that_name_the_device_keep_their_titles_and_labels_whole_for_a_long_device_name():
    from helpers.memory.timeline import MemoryTimeline, timeline_figure

    ceil = Ceilings(LONG_DEVICE, 800.0, "bfloat16", 8192, 3000.0, 2**31)
    points = [roofline.RooflinePoint("conv1", 1e12, 1e10, "convolution", 2.0)]
    variants = ("eager fp32", "eager bf16", "compiled bf16", "CUDA graphs bf16")  # a legend beside the panels
    sweep = ServingSweep(points=tuple(LatencyPoint(v, "fp32", b, 0.1 * b, 0.2 * b, 0.15 * b, 100, 0.0)
                                      for v in variants for b in (1, 4, 16)),
                         skipped={}, image_size=224, device=LONG_DEVICE)
    tl = MemoryTimeline(LONG_DEVICE, (0.0, 1.0, 2.0), (2**30, 2**31, 2**30), (2**31,) * 3,
                        (("forward", 0.0, 1.0), ("backward", 1.0, 2.0)))
    for fig in (roofline.roofline_figure(points, ceil), sweep.figure(p99_target_ms=2.0), timeline_figure(tl)):
        assert LONG_DEVICE in fig.layout.title.text
        assert figure_check.problems(fig) == []


def test_a_cell_that_prints_log_lines_on_stderr_fails_and_a_python_warning_passes():
    """The notebook runs' hook fails a cell whose stderr holds anything but a Python warning (PyTorch 2.14's
    profiler wrote "USDT: ... profiler_start" around every profile: red boxes a learner reads as errors)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)

    def err(text):
        return [{"output_type": "stream", "name": "stderr", "text": text}]

    usdt = "USDT:2026-11-24 00:16:05 24026:24026 SyncActivityProfilerHandler.cpp:39] profiler_start\n"
    warning = ("/work/helpers/loaders.py:87: UserWarning: 16 workers on 2 cores\n  warnings.warn(\n")
    assert conftest.stray_stderr(err(usdt)) == [usdt.strip()]
    assert conftest.stray_stderr(err(warning)) == []
    assert conftest.stray_stderr(err(warning + usdt)) == [usdt.strip()]  # a log line after a warning still counts
    assert conftest.stray_stderr([{"output_type": "stream", "name": "stdout", "text": usdt}]) == []


def test_a_cell_that_prints_a_ratio_of_what_was_not_measured_fails_and_words_that_say_so_pass():
    """02 printed "= nan× the baseline" when a time box cut the baseline's run short on a loaded 2-core CPU: the
    notebook runs' hook now fails such a cell, and tables.times_over says what was not measured instead."""
    import importlib.util
    from pathlib import Path

    from helpers import tables

    spec = importlib.util.spec_from_file_location("root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)

    def out(text, kind="stream"):
        return [{"output_type": "stream", "name": "stdout", "text": text} if kind == "stream"
                else {"output_type": "execute_result", "data": {"text/plain": text}}]

    assert conftest.not_a_number_printed(out("the step alone: 4,000 img/s = nan× the baseline\n")) == ["nan×"]
    assert conftest.not_a_number_printed(out("MFU inf%, rate nan img/s", "display")) == ["inf%", "nan img/s"]
    said = "the step alone: 4,000 img/s = " + tables.times_over(4000.0, float("nan")) + "\n"
    assert conftest.not_a_number_printed(out(said)) == [] and "not measured" in said
    assert conftest.not_a_number_printed(out("a financial nanny in 3 s; 12.5× the baseline")) == []
    # a ratio beside the figures it comes from, which their printed values do not give
    assert conftest.arithmetic_printed(out("eager 0.704 ms, compiled 0.129 ms (5.4×)\n")) == [
        "0.704 ms, compiled 0.129 ms (5.4×"]
    assert conftest.arithmetic_printed(out("eager 0.704 ms, compiled 0.129 ms (5.5×)\n", "display")) == []


@pytest.mark.slow  # profiles in a child process: `make test-slow`
def test_the_profiler_writes_nothing_on_stderr_once_the_helpers_are_imported():
    import subprocess
    import sys

    code = ("import helpers, torch\nfrom torch.profiler import profile, ProfilerActivity\n"
            "with profile(activities=[ProfilerActivity.CPU]):\n    torch.ones(8) @ torch.ones(8)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""


def test_category_tick_labels_wider_than_their_slot_are_caught_and_broken_ones_pass():
    names = ["weights", "gradients", "optimizer state", "activations kept", "workspace", "reserved after",
             "GPU used"]
    crowded = go.Figure(go.Bar(x=names, y=list(range(7))))
    crowded.update_layout(width=500)
    found = figure_check.problems(crowded)
    assert any("run into one another" in p and "'activations kept'" in p for p in found), found
    broken = go.Figure(go.Bar(x=[n.replace(" ", "<br>") for n in names], y=list(range(7))))
    broken.update_layout(width=800)  # "activations" alone needs about 77 px; each slot is about 91
    assert figure_check.problems(broken) == []
    angled = go.Figure(go.Bar(x=names, y=list(range(7))))
    angled.update_layout(width=500, xaxis_tickangle=-45)
    assert figure_check.problems(angled) == []


def test_rooflines_keep_one_colour_per_kind_and_the_ridges_label_clear_of_the_roof():
    """03's roofline drew GEMM red and 06's step roofline drew its convolutions red; the ridge's label hung from the
    plot's top onto the flat roof, and ran into the legend where the ridge sat near the right edge (06)."""
    from helpers.challenge import step_roofline

    ceil = Ceilings("NVIDIA H100 80GB HBM3", 620.0, "bf16", 8192, 2600.0, 2**30)
    ops = [roofline.RooflinePoint("conv1", 2e12, 2e10, "convolution", 0.9),
           roofline.RooflinePoint("fc1", 2e9, 1.2e7, "GEMM", 0.05),
           roofline.RooflinePoint("given: add", 2**26, 3 * 2**27, "elementwise", 0.16),
           roofline.RooflinePoint("pool·1", 2e9, 2.5e9, "pooling", 0.3)]
    step = [roofline.RooflinePoint(g, f, b, step_roofline._KIND[g], ms) for g, f, b, ms in (
        ("convolutions", 3e12, 4e9, 12.0), ("fully connected (GEMM)", 2e10, 1e8, 0.3),
        ("fused pool forward", 2e9, 3e9, 1.5), ("fused pool backward", 3e9, 5e9, 2.5))]
    colours = {}
    for fig in (roofline.roofline_figure(ops, ceil), roofline.roofline_figure(step, ceil)):
        assert figure_check.problems(fig) == []
        for t in fig.data[1:]:
            assert colours.setdefault(t.name, t.marker.color) == t.marker.color == roofline.KIND_COLORS[t.name]
            assert t.cliponaxis is False  # a label near the plot's edge is drawn whole
        (ridge,) = [a for a in fig.layout.annotations if a.text.startswith("ridge")]
        assert ridge.yref == "y domain" and ridge.y == 1 and ridge.yanchor == "top"
        lo, hi = fig.layout.yaxis.range
        roof_top = math.log10(max(fig.data[0].y))
        assert (hi - roof_top) / (hi - lo) * 300 >= 14  # head room above the flat roof for the label's line
    assert set(colours) == {"convolution", "GEMM", "elementwise", "pooling"}
    near_edge = roofline.roofline_figure(step, ceil)  # the ridge 1.4 decades from the right edge: label to its left
    assert [a for a in near_edge.layout.annotations if a.text.startswith("ridge")][0].xanchor == "right"


def test_the_shares_of_roof_line_rounds_as_the_table_beside_it():
    """03 printed 'fc2 0% of their roofs' beside a table that said 0.21."""
    from helpers.tables import readable

    ceil = Ceilings("a GPU", 800.0, "bfloat16", 8192, 3000.0, 2**31)
    points = [roofline.RooflinePoint("fc2", 2 * 256 * 512 * 10, 2 * (256 * 512 + 5120 + 2560), "GEMM", 0.05),
              roofline.RooflinePoint("relu·1", 1e8, 4e8, "elementwise", 0.2)]
    table = roofline.points_table(points, ceil)
    line = roofline.shares_of_roof(table, "memory")
    shown = readable(table).shown.set_index(readable(table).shown.columns[0])
    fc2 = shown.loc["fc2"].iloc[-1]
    assert fc2 != "0" and f"fc2 {fc2}%" in line and line.startswith("memory-bound: ")


def test_a_second_axis_left_to_plotlys_ticks_is_caught_and_the_monitors_clock_axis_has_its_own_steps():
    from plotly.subplots import make_subplots

    from helpers.monitor.record import MonitorRecord
    from helpers.monitor.view import build_figure

    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=[0, 1], y=[400, 500]), secondary_y=False)
    fig.add_trace(go.Scatter(x=[0, 1], y=[1980, 1755]), secondary_y=True)
    assert any("lies over another" in p for p in figure_check.problems(fig))
    fig.update_yaxes(tickmode="linear", dtick=500, secondary_y=True)
    assert figure_check.problems(fig) == []

    samples = [dict(t_s=k * 0.1, gpu=0, util_pct=95.0, power_w=500.0 + k, sm_clock_mhz=1980.0 - 30 * (k % 2))
               for k in range(30)]
    monitor = build_figure(MonitorRecord(source="nvml", devices=[0], period_s=0.1, samples=samples))
    clock = [a for a in monitor.to_plotly_json()["layout"].values() if isinstance(a, dict) and a.get("overlaying")]
    assert len(clock) == 1 and clock[0]["tickmode"] == "linear" and clock[0]["dtick"] % 100 == 0
    assert figure_check.problems(monitor) == []


def test_bars_drawn_from_a_base_span_their_whole_length():
    """A timeline's bars (base = start, x = duration): a phase label at 65 ms sits inside bars that run to 122 ms,
    and outside bars whose lengths alone reach 2 ms."""
    import plotly.graph_objects as go

    def timeline(base):
        fig = go.Figure(go.Bar(y=["stream 7 (compute)"] * 3, x=[1.0, 2.0, 0.5], base=base, orientation="h"))
        fig.add_vrect(x0=65, x1=66, annotation_text="forward", annotation_position="top left")
        return fig.update_layout(xaxis_title="ms")

    assert figure_check.problems(timeline([0, 60, 120])) == []
    assert any("far outside the data (0.5…2)" in p for p in figure_check.problems(timeline(None)))


def test_the_kept_outputs_keep_each_title_above_its_table():
    """nbval merges every stream of a cell into its first one; the executed notebooks (and the exports made from
    them) keep each printed title beside the table displayed after it, as Jupyter shows them."""
    from nbformat import NotebookNode

    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)

    def stream(text, name="stdout"):
        return NotebookNode(output_type="stream", name=name, text=text)

    table = NotebookNode(output_type="display_data", data={"text/plain": "t"}, metadata={})
    outs = [stream("kernels\n"), table, stream("CUDA API\n"), stream("(top 8)\n"), table, stream("warn\n", "stderr"),
            stream("NVTX\n"), table, stream("10%\r50%\r100%\n"), stream("ab\x08c\n")]
    got = conftest.coalesce_in_order([NotebookNode(o) for o in outs])
    assert [(o.output_type, o.get("text")) for o in got] == [
        ("stream", "kernels\n"), ("display_data", None), ("stream", "CUDA API\n(top 8)\n"), ("display_data", None),
        ("stream", "warn\n"), ("stream", "NVTX\n"), ("display_data", None), ("stream", "100%\nac\n")]
    import nbval.plugin

    assert nbval.plugin.coalesce_streams.__name__ == "coalesce_in_order"  # loading the hooks puts it in nbval's place


def test_a_label_box_scores_what_is_in_its_way():
    plot = (0.0, 100.0, 0.0, 100.0)
    assert figure_check.label_clashes((10, 30, 10, 20), bounds=plot, lines=[], taken=[]) == 0
    assert figure_check.label_clashes((90, 110, 10, 20), bounds=plot, lines=[], taken=[]) == 4  # past the edge
    assert figure_check.label_clashes((10, 30, 10, 20), bounds=plot, lines=[(20, 15)], taken=[]) == 2  # a line
    assert figure_check.label_clashes((10, 30, 10, 20), bounds=plot, lines=[],
                                      taken=[(25, 40, 12, 18), (0, 5, 0, 5)]) == 3  # over one label, not the other


def test_shaded_phase_labels_on_two_rows_stand_a_line_of_text_apart():
    """04's memory timeline: "optimizer" and the "forward" on the row under it touched, 16 px apart at font 12."""
    import plotly.graph_objects as go

    from helpers import figure_check

    fig = go.Figure(go.Scatter(x=[0, 9], y=[0, 1]))
    phases = [("forward", 0.0, 1.2), ("backward", 1.3, 3.5), ("optimizer", 3.6, 4.4), ("forward", 4.5, 5.7)]
    figure_check.shade_phases(fig, phases, [0, 8.6], colors={}, height=380, legend_w=228)
    plot_h = 380 - 180
    ys = {round((1 - a.y) * plot_h, 3) for a in fig.layout.annotations}
    assert len(ys) >= 2 and min(b - a for a, b in zip(sorted(ys), sorted(ys)[1:])) >= 1.5 * 12
