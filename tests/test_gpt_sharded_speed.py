"""ZeRO and FSDP2 against DDP in speed (helpers.gpt.sharded_speed): the launch on two gloo ranks of a CPU (slow
tier), and how the ranks' records become one figure per variant, without a launch. The speed itself is a GPU
figure, measured where two GPUs are (tests/test_gpt_sharded_speed_gpu.py)."""

from __future__ import annotations

import pytest

from helpers.ddp.launch import LaunchResult, leftover_processes
from helpers.gpt import sharded_speed
from helpers.gpt.model import GPTConfig


def _line(variant, rank, step_ms, *, peak=0, losses=(2.0, 1.5), backend="gloo"):
    return {"variant": variant, "rank": rank, "world_size": 2, "step_ms": list(step_ms), "peak_bytes": peak,
            "losses": list(losses), "device": "cpu", "backend": backend, "dtype": "float32"}


def _fake(monkeypatch, results, seen=None):
    def fake_launch(spec, *, on_line=None):
        if seen is not None:
            seen["spec"] = spec
        return LaunchResult(("torchrun",), 0, False, 1.0, (), tuple(results))

    monkeypatch.setattr(sharded_speed, "launch", fake_launch)


def test_a_steps_time_is_its_slowest_ranks_and_tokens_count_every_rank(monkeypatch):
    seen = {}
    _fake(monkeypatch, [_line("ddp", 0, [10, 30, 10], peak=3 * 2**30, backend="nccl"),
                        _line("ddp", 1, [20, 10, 20], peak=2**30, backend="nccl"),
                        _line("fsdp2", 0, [40, 40, 40], peak=2**30, backend="nccl"),
                        _line("fsdp2", 1, [40, 40, 40], peak=2**29, backend="nccl")], seen)
    r = sharded_speed.measure_speed(2, batch_per_rank=4, seq_len=100, variants=("ddp", "fsdp2"))
    assert seen["spec"].module == "helpers.gpt.sharded_speed" and seen["spec"].nproc_per_node == 2
    ddp = r.variant("ddp")
    # step by step, the slower rank: 20, 30, 20 ms; the median 20 ms, for 4 × 100 tokens on each of 2 ranks
    assert ddp.step.median_ms == 20 and ddp.step.max_ms == 30 and ddp.tokens_per_step == 800
    assert ddp.tokens_per_s == pytest.approx(800 / 0.020)
    assert ddp.peak_gib == 3.0  # the fullest rank's
    assert r.over("fsdp2") == pytest.approx(0.5)
    table = r.table()
    assert list(table.index) == ["DDP", "FSDP2 (fully_shard)"]
    assert table.loc["FSDP2 (fully_shard)", "× DDP"] == pytest.approx(0.5)
    assert table.loc["DDP", "peak GiB, fullest rank"] == 3.0


def test_a_variant_that_failed_says_why_and_bad_arguments_say_what_to_change(monkeypatch):
    _fake(monkeypatch, [_line("ddp", 0, [10]), _line("ddp", 1, [10]),
                        {"variant": "zero", "rank": 0, "error": "RuntimeError: no fused AdamW here"},
                        {"variant": "zero", "rank": 1, "error": "RuntimeError: no fused AdamW here"}])
    r = sharded_speed.measure_speed(2, variants=("ddp", "zero", "fsdp2"))
    assert r.variant("zero").error == "RuntimeError: no fused AdamW here" and r.variant("zero").ranks == ()
    assert r.variant("fsdp2").error == "no rank reported"
    assert [v.variant for v in r.ran] == ["ddp"]
    assert list(r.table().index) == ["DDP"]  # a CPU's rows have no allocator peak: said in the table's note
    assert r.table()["peak GiB, fullest rank"].isna().all()
    with pytest.raises(KeyError, match="was not measured"):
        r.variant("zero3")
    with pytest.raises(ValueError, match="use some of ddp, zero, fsdp2"):
        sharded_speed.measure_speed(2, variants=("zero3",))
    with pytest.raises(ValueError, match="one timed step or more"):
        sharded_speed.measure_speed(2, steps=0)
    monkeypatch.setattr(sharded_speed, "launch", lambda spec, on_line=None: LaunchResult(
        ("torchrun",), 1, False, 1.0, ("torch.OutOfMemoryError: CUDA out of memory",), ()))
    with pytest.raises(RuntimeError, match="OutOfMemoryError"):
        sharded_speed.measure_speed(2)


@pytest.mark.slow
def test_two_gloo_ranks_time_every_variant_from_the_same_start():
    r = sharded_speed.measure_speed(2, cfg=GPTConfig.smoke(), batch_per_rank=2, seq_len=32, warmup=1, steps=2,
                                    timeout_s=240, on_line=None)
    assert [v.variant for v in r.ran] == ["ddp", "zero", "fsdp2"], [v.error for v in r.variants]
    first = r.variant("ddp").ranks[0].losses
    for v in r.ran:
        assert [x.rank for x in v.ranks] == [0, 1] and all(len(x.step_ms) == 2 for x in v.ranks)
        assert all(x.backend == "gloo" and x.device == "cpu" for x in v.ranks)
        # the same weights, batches and arithmetic: the sharding changes no loss beyond fp32's order of sums
        # (measured 2026-11-28: every variant's four losses equal to DDP's to the last bit printed)
        assert v.ranks[0].losses == v.ranks[1].losses
        assert max(abs(a - b) for a, b in zip(v.ranks[0].losses, first)) < 1e-4, v.variant
        assert v.tokens_per_s > 0
    assert not leftover_processes("helpers.gpt.sharded_speed")


def test_the_figures_and_the_sentences_come_from_the_measurement(monkeypatch):
    _fake(monkeypatch, [_line("ddp", 0, [10, 10, 10], peak=4 * 2**30, backend="nccl"),
                        _line("ddp", 1, [10, 10, 10], peak=4 * 2**30, backend="nccl"),
                        _line("zero", 0, [10.1, 10.1, 10.1], peak=3 * 2**30, backend="nccl"),
                        _line("zero", 1, [10.1, 10.1, 10.1], peak=3 * 2**30, backend="nccl"),
                        _line("fsdp2", 0, [12.5, 12.5, 12.5], peak=2**31, backend="nccl"),
                        _line("fsdp2", 1, [12.5, 12.5, 12.5], peak=2**31, backend="nccl")])
    r = sharded_speed.measure_speed(2, batch_per_rank=8, seq_len=1024)
    figs = sharded_speed.figures(r)
    assert set(figs) == set(sharded_speed.FIGURES)
    assert figs["gpt_shard_gpus"] == 2 and figs["gpt_shard_fsdp2_vs_ddp_x"] == pytest.approx(0.8)
    assert figs["gpt_shard_zero_peak_gib"] == 3.0 and figs["gpt_shard_fsdp2_peak_gib"] == 2.0
    text = sharded_speed.reading(r)
    # no spread in these steps: 0.99× is slower, not "about the same"; with a spread of 5% it would be
    assert "0.99× DDP (slower)" in text and "0.80× DDP (slower)" in text and "FSDP2 2.0 GiB" in text
    # gloo ranks on a CPU: the mechanics, and no figure of a GPU's
    _fake(monkeypatch, [_line("ddp", 0, [10, 20, 30]), _line("ddp", 1, [10, 20, 30]),
                        _line("zero", 0, [11, 21, 31]), _line("zero", 1, [11, 21, 31])])
    cpu = sharded_speed.measure_speed(2, variants=("ddp", "zero"))
    assert sharded_speed.figures(cpu) == {} and "GiB" not in sharded_speed.reading(cpu)
    assert "(about the same)" in sharded_speed.reading(cpu)  # 1.05× slower within a spread of 50%


def test_on_gpus_the_variants_run_twice_in_turn_and_the_second_round_is_measured(monkeypatch):
    from helpers.gpt import sharded

    calls, reported = [], []
    monkeypatch.setattr(sharded, "report", reported.append)
    monkeypatch.setattr(sharded.dist, "barrier", lambda: None)
    monkeypatch.setattr(sharded, "shutdown", lambda: None)

    def run_one(variant):
        calls.append(variant)
        if variant == "zero":
            raise RuntimeError("no fused AdamW here\nsecond line")
        return {"variant": variant, "round": calls.count(variant)}

    sharded.run_variants(("ddp", "zero", "fsdp2"), run_one, rank=0, rounds=2)
    # in turn, twice; a variant that failed is said once and not run again
    assert calls == ["ddp", "zero", "fsdp2", "ddp", "fsdp2"]
    assert reported == [{"variant": "zero", "rank": 0, "error": "RuntimeError: no fused AdamW here"},
                        {"variant": "ddp", "round": 2}, {"variant": "fsdp2", "round": 2}]

    seen = {}
    _fake(monkeypatch, [_line("ddp", 0, [10]), _line("ddp", 1, [10])], seen)
    cpu = sharded_speed.measure_speed(2, variants=("ddp",))
    args = list(seen["spec"].args)
    assert args[args.index("--rounds") + 1] == "1" and cpu.rounds == 1  # gloo ranks time no figure: one round
    two = sharded_speed.measure_speed(2, variants=("ddp",), rounds=2)
    args = list(seen["spec"].args)
    assert args[args.index("--rounds") + 1] == "2" and two.rounds == 2
    assert "ran 2 times in turn and the last round was timed" in sharded_speed.reading(two)
    assert "in turn" not in sharded_speed.reading(cpu)
    with pytest.raises(ValueError, match="each variant runs once at least"):
        sharded_speed.measure_speed(2, rounds=0)
