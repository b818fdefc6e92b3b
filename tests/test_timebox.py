"""Time boxes: loops stop at their box as well as at their count, say so once, and never hand on an unstable figure."""

from __future__ import annotations

import math
import time

import pytest
import torch

from helpers import bench, loaders, timebox, train
from helpers.exercises import Target, check_targets
from helpers.memory import search


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    timebox.forget()
    monkeypatch.delenv(timebox.FACTOR_ENV, raising=False)
    yield
    timebox.forget()


def test_every_box_has_seconds_at_both_scales_and_the_factor_scales_them(monkeypatch):
    for name, box in timebox.BOXES.items():
        assert box.name == name and box.bounds
        assert 0 < box.smoke_s <= box.full_s, name
    full = timebox.seconds("training_window", "full")
    monkeypatch.setenv(timebox.FACTOR_ENV, "0.1")
    assert timebox.seconds("training_window", "full") == pytest.approx(full / 10)
    monkeypatch.setenv(timebox.FACTOR_ENV, "fast")
    with pytest.raises(ValueError, match="HELPERS_TIMEBOX_FACTOR='fast' is not a factor"):
        timebox.seconds("training_window")
    with pytest.raises(KeyError, match="no time box named 'nope'"):
        timebox.seconds("nope")


def test_a_window_ends_at_its_count_when_time_allows():
    win = timebox.Window("training_window", planned=4, seconds_=60)
    n = 0
    while win.more():
        n += 1
        win.tick()
    assert n == 4 and win.cut is None and win.stable and timebox.cuts() == []


def test_a_window_cut_by_its_box_says_so_once_and_below_its_minimum_is_unstable(capsys):
    win = timebox.Window("training_window", planned=100, minimum=5, seconds_=0.05, left_out="later steps not run")
    while win.more():
        time.sleep(0.03)
        win.tick()
    assert 1 <= win.done < 5 and not win.stable
    assert not win.more()  # asking again neither runs more nor says it twice
    out = capsys.readouterr().out
    assert out.count("⏱ time box 'training_window'") == 1
    assert f"after {win.done} of 100 steps" in out and "not measured here" in out and "later steps not run" in out
    assert timebox.cuts() == [win.cut]


def test_keep_minimum_runs_the_minimum_past_the_box():
    win = timebox.Window("timing_repeats", planned=10, minimum=3, keep_minimum=True, seconds_=0.0, say="once")
    n = 0
    while win.more():
        n += 1
        win.tick()
    assert n == 3 and win.stable and win.cut is not None and win.cut.stable


def test_time_it_trims_repeats_at_its_box_but_keeps_three(monkeypatch, capsys):
    monkeypatch.setenv(timebox.FACTOR_ENV, "0.001")  # the smoke box of 4 s becomes 4 ms
    m = bench.time_it(lambda: time.sleep(0.01), warmup=0, repeats=50, device="cpu")
    assert bench.MIN_REPEATS <= m.repeats < 50
    assert "time box 'timing_repeats'" in capsys.readouterr().out


def test_a_training_window_cut_below_its_minimum_gives_no_figure(monkeypatch):
    monkeypatch.setenv(timebox.FACTOR_ENV, "0.00001")
    cfg = train.TrainConfig(batch_size=4, image_size=32, data="gpu", steps=50, warmup_steps=0, dataset_size=16)
    r = train.train(cfg, device="cpu")
    assert r.steps < train.MIN_STABLE_STEPS and not r.stable and math.isnan(r.img_per_s)
    assert r.summary().startswith("not measured here")
    # check_targets: a NaN that a cut explains is shown, not asserted, even at full scale
    table = check_targets({"img_per_s": r.img_per_s}, [Target("img_per_s", 1.0, "trains")], scale="full")
    assert not table.loc[0, "asserted"] and "not measured here" in table.loc[0, "why"]


def test_a_nan_nothing_explains_still_fails_at_full_scale():
    with pytest.raises(AssertionError, match="full-scale target missed"):
        check_targets({"x": float("nan")}, [Target("x", 1.0, "measured")], scale="full")
    figures = {}
    timebox.not_measured(figures, "x", "the grid was cut short")
    table = check_targets(figures, [Target("x", 1.0, "measured")], scale="full")
    assert table.loc[0, "why"] == "not measured here: the grid was cut short"


def test_a_search_cut_by_its_box_says_the_edge_was_not_found(monkeypatch):
    def probe(batch):  # every batch up to 4096 fits; each trial takes 20 ms
        time.sleep(0.02)
        return float(batch), 1.0
    monkeypatch.setenv(timebox.FACTOR_ENV, "0.004")  # 10 s → 40 ms: two or three trials
    found = search.largest_batch(probe, start=1, limit=4096, label="bf16")
    assert not found.edge_found and found.largest < 4096 and "bf16's largest batch" in str(found.cut)
    monkeypatch.setenv(timebox.FACTOR_ENV, "1000")  # a box no host's speed reaches: the search runs to its edge
    done = search.largest_batch(lambda b: (float(b), 1.0), start=1, limit=4096)
    assert done.edge_found and done.largest == 4096


def test_a_grid_cut_by_its_box_keeps_its_measured_cells(monkeypatch):
    monkeypatch.setenv(timebox.FACTOR_ENV, "0.00001")
    ds = torch.utils.data.TensorDataset(torch.zeros(256, 3, 8, 8), torch.zeros(256, dtype=torch.long))
    df = loaders.grid(ds, batch_sizes=[4, 8], workers=[0], pins=[False], batches=5, device="cpu", progress=False)
    assert len(df) == 1 and df.attrs["cut"].done == 1 and df.attrs["cut"].planned == 2


def test_a_boxed_warm_up_keeps_five_steps_and_an_unboxed_one_runs_them_all(monkeypatch):
    monkeypatch.setenv(timebox.FACTOR_ENV, "0.00001")  # every box ends at once: the warm-up keeps its minimum
    cfg = train.TrainConfig(batch_size=4, image_size=32, data="gpu", steps=5, warmup_steps=12, dataset_size=16)
    boxed = train.Trainer(cfg, device="cpu")
    boxed.run()
    assert boxed.images_trained == (5 + 1) * 4  # five warm-up steps (the minimum), then the window's first
    warm = [c for c in timebox.cuts() if c.box == "warm_up"]
    assert len(warm) == 1 and warm[0].done == 5 and warm[0].planned == 12 and warm[0].stable
    assert "figures" not in str(warm[0])  # a warm-up gives none: its line does not speak of them
    unboxed = train.Trainer(cfg, device="cpu")
    unboxed.run(boxed=False)  # the challenge: every warm-up step counts towards the images seen
    assert unboxed.images_trained == (12 + 5) * 4


def test_a_window_told_the_next_items_time_cuts_before_an_item_that_would_end_past_the_box():
    win = timebox.Window("serving_sweep", planned=5, seconds_=10.0)
    assert win.more(next_s=100.0)  # the first item always runs
    win.tick()
    assert win.more(next_s=1.0)  # ends well inside the box
    assert not win.more(next_s=60.0) and win.cut is not None and win.cut.done == 1
