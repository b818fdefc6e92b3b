"""Static SVG charts (helpers.svg): well-formed, escaped, drawn where the data says."""

from __future__ import annotations

from xml.etree import ElementTree

from helpers import figure_check, svg

NS = "{http://www.w3.org/2000/svg}"


def _parse(text: str) -> ElementTree.Element:
    return ElementTree.fromstring(text)


def test_a_line_chart_draws_each_series_with_its_label_escaped():
    root = _parse(svg.line_chart([svg.Series("a <b> & c", [0, 1, 2], [0, 50, 100]),
                                  svg.Series("d", [0, 2], [10, 20], dashed=True)],
                                 title="util", x_label="s", y_label="%", hline=(90, "target")))
    lines = list(root.iter(f"{NS}polyline"))
    assert len(lines) == 2 and lines[1].get("stroke-dasharray")
    texts = ["".join(t.itertext()) for t in root.iter(f"{NS}text")]
    assert "a <b> & c" in texts and "target" in texts and "util" in texts
    # y grows upwards: the point at 100 is drawn above the one at 0
    ys = [float(p.split(",")[1]) for p in lines[0].get("points").split()]
    assert ys[2] < ys[1] < ys[0]


def test_empty_or_missing_data_still_gives_a_chart_that_says_so():
    assert "nothing recorded" in svg.line_chart([svg.Series("a", [], [])], title="t", x_label="x", y_label="y")
    assert "nothing recorded" in svg.timeline({"GPU kernels": []}, title="t")
    assert "no points" in svg.roofline([], roof=lambda x: x, ridge=1.0, title="t")
    _parse(svg.line_chart([svg.Series("a", [0, 1], [None, float("nan")])], title="t", x_label="x", y_label="y"))


def test_log_axes_tick_at_round_values():
    root = _parse(svg.line_chart([svg.Series("p99", [1, 4, 16, 64, 256], [0.2, 0.3, 0.9, 3.0, 11.0])],
                                 title="t", x_label="batch", y_label="ms", x_log=True, y_log=True))
    ticks = {"".join(t.itertext()) for t in root.iter(f"{NS}text")}
    assert {"1", "10", "100"} <= ticks  # powers of ten
    root = _parse(svg.line_chart([svg.Series("p", [1, 8], [1, 2])], title="t", x_label="b", y_label="ms", x_log=True))
    assert {"1", "2", "5"} <= {t.text for t in root.iter(f"{NS}text")}  # under three decades: 2× and 5× too
    # the report's throughput (img/s): large ticks read 10k, 20k, not 1e4 and 2e4
    root = _parse(svg.line_chart([svg.Series("img/s", [0, 1, 2], [800, 9000, 21000])], title="t", x_label="s",
                                 y_label="img/s", y_log=True))
    ticks = {"".join(t.itertext()) for t in root.iter(f"{NS}text")}
    assert {"1k", "10k", "20k"} <= ticks and not any("e" in t and t[0].isdigit() for t in ticks)
    assert not any("," in t for t in ticks)  # one style on an axis: not "5,000" beside "10k"
    root = _parse(svg.line_chart([svg.Series("img/s", [0, 1], [800, 6000])], title="t", x_label="s", y_label="img/s",
                                 y_log=True))
    assert "1,000" in {t.text for t in root.iter(f"{NS}text")}  # below 10,000 thousands read whole


def test_bars_timeline_and_roofline_draw_one_shape_per_item():
    bars = _parse(svg.bar_chart(["a", "b", "c"], [1.0, 2.5, None], title="MFU", unit="%", marks=[(2.0, "goal")]))
    assert len(list(bars.iter(f"{NS}rect"))) == 1 + 2  # the background and one bar per value
    assert "2.5%" in {t.text for t in bars.iter(f"{NS}text")}
    tl = _parse(svg.timeline({"CPU ops": [(0.0, 1.0, "x"), (1.0, 0.5, "y")], "GPU kernels": [(0.5, 2.0, "k<1>")]},
                             title="t", max_per_row=1))
    boxes = [r for r in tl.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    assert [b.find(f"{NS}title").text for b in boxes] == ["x", "k<1>"]  # the longest of each row, names escaped
    roof = _parse(svg.roofline([("conv", 300.0, 500.0), ("pool", 0.2, 0.5)], roof=lambda x: min(700.0, 3.0 * x),
                               ridge=233.0, title="roofline"))
    assert len(list(roof.iter(f"{NS}circle"))) == 2


def test_a_roofline_label_near_the_right_edge_turns_left_and_the_rate_takes_its_unit():
    roof = _parse(svg.roofline([("fully connected (GEMM)", 600.0, 500.0), ("pool", 0.2, 0.5)],
                               roof=lambda x: min(700.0, 3.0 * x), ridge=233.0, title="r", y_unit="GFLOP/s"))
    labels = {t.text: t for t in roof.iter(f"{NS}text")}
    gemm, pool = labels["fully connected (GEMM)"], labels["pool"]
    assert gemm.get("text-anchor") == "end" and pool.get("text-anchor") == "start"
    assert "GFLOP/s" in labels  # the y axis names the unit it was given


def test_bars_write_their_values_as_the_caller_rounds_them():
    bars = _parse(svg.bar_chart(["a"], [0.8012], title="MFU", unit="%", fmt=lambda v: f"{v:.1f}"))
    assert "0.8%" in {t.text for t in bars.iter(f"{NS}text")}


def test_dots_at_the_ends_of_the_data_are_drawn_whole_inside_the_frame():
    """The report's p99 chart: the fastest call at batch 1 sat in the frame's corner, its dot halved by the axes."""
    root = _parse(svg.line_chart([svg.Series("p99", [1, 4, 16, 64, 256], [0.2, 0.3, 0.9, 3.0, 11.0])],
                                 title="t", x_label="batch", y_label="ms", x_log=True, y_log=True))
    frame = next(r for r in root.iter(f"{NS}rect") if r.get("fill") == "none")
    x0, y0 = float(frame.get("x")), float(frame.get("y"))
    x1, y1 = x0 + float(frame.get("width")), y0 + float(frame.get("height"))
    dots = [(float(c.get("cx")), float(c.get("cy")), float(c.get("r"))) for c in root.iter(f"{NS}circle")]
    assert len(dots) == 5
    assert all(x0 + r <= x <= x1 - r and y0 + r <= y <= y1 - r for x, y, r in dots)


def test_a_roofline_label_is_not_written_across_the_roof():
    """The report's roofline (06, one H200) wrote "fully connected (GEMM)" and "fused pool forward" across the roof."""
    from helpers import figure_check

    def roof(x):
        return min(800.0, 4.233 * x)

    pts = [("convolutions", 332.7, 461.1), ("fully connected (GEMM)", 170.4, 387.0),
           ("fused pool forward", 0.727, 2.50), ("fused pool backward", 0.1818, 0.516)]
    root = _parse(svg.roofline(pts, roof=roof, ridge=189.0, title="r"))
    line = next(p for p in root.iter(f"{NS}polyline"))
    curve = [tuple(map(float, xy.split(","))) for xy in line.get("points").split()]
    for t in root.iter(f"{NS}text"):
        if t.text not in {name for name, _x, _y in pts}:
            continue
        x, y, w = float(t.get("x")), float(t.get("y")), figure_check.text_width(t.text, 11)
        l = x if t.get("text-anchor") == "start" else x - w if t.get("text-anchor") == "end" else x - w / 2
        # the roof's segments: no point of them inside the label's box (sampled finely)
        for (x0, y0), (x1, y1) in zip(curve, curve[1:]):
            for k in range(11):
                a, b = x0 + (x1 - x0) * k / 10, y0 + (y1 - y0) * k / 10
                assert not (l <= a <= l + w and y - 10 <= b <= y + 2), (t.text, a, b)


def test_a_long_title_wraps_inside_the_frame_and_the_chart_moves_down_for_it():
    """The report's utilisation titles ran off both sides of an 820 px chart."""
    title = ("+ padded conv1: utilisation over the run, timed steps 2.4–3.3 s (shaded; before them set-up and "
             "warm-up, after them the held-out evaluation and the profiled steps)")
    text = svg.line_chart([svg.Series("u", [0, 1, 2, 3, 4], [0, 90, 95, 90, 10])], title=title, x_label="s",
                          y_label="%", spans=[(2.4, 3.3)], span_label="timed steps")
    root = _parse(text)
    lines = [t.text for t in root.find(f"{NS}text").iter(f"{NS}tspan")]
    assert len(lines) >= 2 and " ".join(lines) == title
    width = float(root.get("width"))
    assert all(figure_check.text_width(line, svg.TITLE_FONT_PX) <= width - 20 for line in lines)
    assert float(root.get("height")) == 300 + 16 * (len(lines) - 1)  # the title's lines added, the chart kept
    assert root.find(f"{NS}g").get("transform") == f"translate(0 {16 * (len(lines) - 1)})"
    shade = [r for r in root.iter(f"{NS}rect") if r.get("fill-opacity") == "0.10"]
    assert len(shade) == 1 and float(shade[0].get("width")) > 0  # the timed steps, shaded, and named in the legend
    assert "timed steps" in ["".join(t.itertext()) for t in root.iter(f"{NS}text")]
    assert svg.wrap_title("short", 820) == ["short"]


def test_a_timeline_leaves_room_for_its_longest_row_name():
    """A fixed 100 px cut "GPU ranges (NVTX, steps)" to "ges (NVTX, steps)"."""
    name = "GPU ranges (NVTX, steps)"
    root = _parse(svg.timeline({name: [(0.0, 1.0, "step 1")], "GPU kernels": [(0.2, 0.5, "conv")]}, title="t"))
    label = next(t for t in root.iter(f"{NS}text") if t.text == name)
    assert float(label.get("x")) - figure_check.text_width(name, svg.LABEL_FONT_PX) >= 0
    frame = root.find(f"{NS}g").find(f"{NS}rect")
    assert float(frame.get("x")) > float(label.get("x"))  # the bands start right of the names
