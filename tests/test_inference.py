"""Serving latency (helpers.inference) on a CPU: every variant that can run here runs and is checked against fp32;
the rest are left out with the reason; percentiles are values that were measured."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from helpers import env, inference, models
from helpers.inference import VARIANTS, LatencyPoint, ServingSweep, ServingVariant, percentile, serve_sweep


def test_percentile_is_the_nearest_rank():
    xs = list(range(1, 201))  # 1..200
    assert percentile(xs, 50) == 100 and percentile(xs, 99) == 198 and percentile(xs, 100) == 200
    assert percentile([5.0], 99) == 5.0 and percentile([3, 1, 2], 50) == 2
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1], 0)


@pytest.fixture(scope="module")
def sweep():
    return serve_sweep(models.ReferenceCNN(16), image_size=16, batches=(1, 4), samples=100, warmup=2)


def test_a_sweep_on_a_cpu_measures_what_can_run_and_says_why_the_rest_cannot(sweep):
    cpu = torch.device("cpu")
    assert {"eager bf16 + CUDA graph", "compiled bf16 + CUDA graph"} <= set(sweep.skipped)
    assert all("CUDA graph needs a GPU" in sweep.skipped[v] for v in sweep.skipped if "CUDA graph" in v)
    bf16 = env.resolve_dtype("bf16", cpu) == "bf16"
    expected = ["eager fp32", "eager bf16", "compiled bf16"] if bf16 else ["eager fp32", "compiled fp32"]
    assert list(dict.fromkeys(p.variant for p in sweep.points)) == expected
    if not bf16:
        assert "it would run as eager fp32" in sweep.skipped["eager bf16"]
    for p in sweep.points:
        assert 100 <= p.samples <= 1000 and 0 < p.p50_ms <= p.p99_ms and p.img_per_s == pytest.approx(p.batch / p.mean_ms * 1e3, rel=0.005)
        assert p.correct, p  # every variant computes what eager fp32 does, within its precision
    assert not sweep.wrong
    assert sweep.of("eager fp32")[0].max_rel_err == 0.0  # the reference itself


def test_meeting_a_target_picks_the_largest_batch_within_it():
    pts = tuple(LatencyPoint("v", "fp32", b, p50, p99, p50, 100, 0.0)
                for b, p50, p99 in ((1, 1.0, 1.5), (4, 2.0, 2.5), (16, 5.0, 9.0)))
    pts += (LatencyPoint("w", "fp32", 1, 3.0, 4.0, 3.0, 100, 0.0),)
    s = ServingSweep(pts, {}, 16, "test")
    assert s.meeting(3.0) == {"v": pts[1], "w": None}
    assert s.meeting(10.0)["v"].batch == 16
    assert s.p99_ms(1) == pts[0] and s.best_throughput() == pts[2]
    with pytest.raises(KeyError, match="batch 2 was not measured"):
        s.p99_ms(2)
    with pytest.raises(KeyError, match="no variant 'x'"):
        s.of("x")
    assert not dataclasses.replace(pts[0], precision="bf16", max_rel_err=0.2).correct
    shown = s.readable()
    assert list(shown.shown.columns) == ["variant", "batch", "p50 ms", "p99 ms", "mean ms", "calls",
                                         "img/s (batch ÷ mean)", "error vs fp32 %"]
    assert any("at least 100" in n and "slowest hundredth" in n for n in shown.notes)


def test_short_calls_are_timed_more_often_than_the_minimum_and_never_fewer():
    """A p99 of 200 calls rests on the two slowest: where calls are short, a point keeps calling within its spare
    time (up to ten times the minimum), so the p99 rests on more."""
    from helpers.inference import MOST_SAMPLES, _time_calls

    cpu = torch.device("cpu")
    def call():
        return torch.zeros(1)

    assert len(_time_calls(call, cpu, samples=100, warmup=1, more_within_s=0.0)) == 100
    many = _time_calls(call, cpu, samples=100, warmup=1, more_within_s=5.0)
    assert len(many) == MOST_SAMPLES * 100  # a trivial call fills the whole allowance long before 5 s


def test_bad_arguments_say_what_to_change():
    m = models.ReferenceCNN(16)
    with pytest.raises(ValueError, match="at least 100 calls"):
        serve_sweep(m, image_size=16, batches=(1,), samples=50)
    with pytest.raises(ValueError, match="each 1 or more"):
        serve_sweep(m, image_size=16, batches=(0, 4))
    with pytest.raises(ValueError, match="make it eager fp32"):
        serve_sweep(m, image_size=16, batches=(1,), variants=VARIANTS[1:])


def test_a_cuda_graph_variant_cannot_run_on_a_cpu():
    assert ServingVariant("g", "fp32", cuda_graph=True).on(torch.device("cpu")) == "a CUDA graph needs a GPU"


def test_the_serving_box_leaves_out_the_largest_batches_of_every_variant_alike(monkeypatch):
    from helpers import timebox

    monkeypatch.setenv(timebox.FACTOR_ENV, "0.00001")  # the box ends after the first batch size
    cut = serve_sweep(models.ReferenceCNN(16), image_size=16, batches=(1, 4, 8), samples=100, warmup=1,
                      variants=VARIANTS[:2])
    assert {p.batch for p in cut.points} == {1} and len({p.variant for p in cut.points}) >= 1
    assert "the time box 'serving_sweep'" in cut.skipped["batch 4, 8"]


def test_an_fp16_variant_serves_in_fp16_channels_last():
    from helpers.inference import _prepare

    m = _prepare(models.ReferenceCNN(16), ServingVariant("eager fp16", "fp16"), torch.device("cpu"))
    w = next(m.parameters())
    assert w.dtype == torch.float16 and w.is_contiguous(memory_format=torch.channels_last)


def test_a_bf16_variant_is_found_under_the_name_it_ran_as(sweep):
    ran = sweep.of("eager bf16")[0].variant  # on a CPU without bf16 it ran as eager fp32 (its twin, measured once)
    assert ran == ("eager bf16" if env.resolve_dtype("bf16", torch.device("cpu")) == "bf16" else "eager fp32")
    with pytest.raises(KeyError) as e:  # its message, not str(KeyError): that is a repr, escaped by what it quotes
        sweep.of("eager int8")
    assert e.value.args[0].startswith("no variant 'eager int8' was measured")


def test_a_variant_slower_at_a_smaller_batch_is_said_under_the_table():
    """06's compiled bf16 read a p50 of 0.854 ms at batch 1 against 0.606 ms at batch 16, with nothing said."""
    pts = tuple(LatencyPoint("compiled bf16", "bf16", b, p50, p50, p50, 200, 0.0)
                for b, p50 in ((1, 0.854), (4, 0.867), (16, 0.606), (64, 1.80)))
    pts += tuple(LatencyPoint("eager bf16", "bf16", b, p50, p50, p50, 200, 0.0) for b, p50 in ((1, 0.49), (16, 1.0)))
    s = ServingSweep(pts, {}, 224, "test")
    said = s.slower_when_smaller()
    assert said == ["compiled bf16: batch 4 took longer than batch 16 (p50 0.867 ms against 0.606 ms): less "
                    "arithmetic, more time, so the extra is something else: the host's work per call (its Python, a "
                    "compiled function's guards, the launches) or a GPU that short calls leave idle running slower, "
                    "not measured apart here"]  # the widest gap of that variant; eager grows with the batch: nothing
    assert said[0] in s.readable().notes
    within = ServingSweep(tuple(dataclasses.replace(p, p50_ms=0.6 * 1.05) if p.batch == 4 else p for p in pts[:3]),
                          {}, 224, "test")
    assert within.slower_when_smaller() == ["compiled bf16: batch 1 took longer than batch 16 (p50 0.854 ms against "
                                            "0.606 ms): less arithmetic, more time, so the extra is something else: "
                                            "the host's work per call (its Python, a compiled function's guards, the "
                                            "launches) or a GPU that short calls leave idle running slower, not "
                                            "measured apart here"]


def test_img_per_s_is_the_batch_over_the_mean_call_as_the_table_prints_it():
    # 06's serving table read 40,106 img/s beside batch 64 and a mean of 1.60 ms, which give 40,000
    p = inference.LatencyPoint(variant="compiled + graph", precision="bf16", batch=64, p50_ms=1.58, p99_ms=1.7,
                               mean_ms=1.59577, samples=500, max_rel_err=0.0)
    sweep = inference.ServingSweep(points=(p,), skipped={}, image_size=224, device="cuda")
    row = sweep.readable().shown.iloc[0]
    assert (row["batch"], row["mean ms"], row["img/s (batch ÷ mean)"]) == ("64", "1.60", "40,000")
    assert p.img_per_s == pytest.approx(40_000.0)
