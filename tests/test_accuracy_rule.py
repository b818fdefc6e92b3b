"""The final challenge's accuracy rule: a target measured from the baseline recipe's reruns, a learning-rate schedule
and rerun seeds to measure it with, and a smoke scale whose runs learn enough for the rule to mean something."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

from helpers.challenge import accuracy
from helpers.challenge.accuracy import AccuracyTarget, accuracy_check, accuracy_target, write_targets
from helpers.challenge.rules import SIZES, RuleBroken, Rules
from helpers.data import NUM_CLASSES
from helpers.train import TrainConfig, Trainer

ROOT = Path(__file__).resolve().parents[1]


# -- the learning rate's schedule and rerun seeds -------------------------------------------------------------------
def test_lr_schedule_ramps_up_then_decays_to_zero_at_the_last_step():
    cfg = TrainConfig(lr=0.04, lr_warmup_steps=5, lr_decay="cosine", warmup_steps=3, steps=45)
    assert [round(cfg.lr_at(i), 6) for i in (0, 4, 5, 47)] == [0.008, 0.04, 0.04, 0.0]
    assert cfg.lr_at(26) == pytest.approx(0.02)  # halfway through the decay
    lin = dataclasses.replace(cfg, lr_decay="linear")
    assert lin.lr_at(26) == pytest.approx(0.02) and lin.lr_at(47) == 0.0
    flat = TrainConfig(lr=0.01)
    assert not flat.scheduled and {flat.lr_at(i) for i in range(300)} == {0.01}
    assert all(0 < cfg.lr_at(i) <= cfg.lr for i in range(47))


@pytest.mark.parametrize("field,value", [("lr_decay", "step"), ("lr_warmup_steps", -1), ("init_seed", 1.5),
                                         ("init_seed", True)])
def test_a_bad_schedule_or_seed_says_what_to_use(field, value):
    with pytest.raises(ValueError, match=f"TrainConfig.{field}="):
        TrainConfig(**{field: value})


def _tiny(**kw) -> TrainConfig:
    return TrainConfig(batch_size=8, steps=3, warmup_steps=1, data="gpu", image_size=16, dataset_size=64, **kw)


def test_the_trainer_follows_the_schedule():
    cfg = _tiny(lr=0.05, lr_warmup_steps=2, lr_decay="linear")
    trainer = Trainer(cfg, device="cpu")
    seen = []
    for _ in range(4):
        trainer.step(measure=False)
        seen.append(trainer.optimizer.param_groups[0]["lr"])
    assert seen == pytest.approx([cfg.lr_at(i) for i in range(4)]) and seen[-1] == 0.0


def test_another_init_seed_trains_the_same_data_from_other_weights_in_another_order():
    a, b, same = Trainer(_tiny(), device="cpu"), Trainer(_tiny(init_seed=3), device="cpu"), Trainer(_tiny(), device="cpu")
    wa, wb, ws = (next(t.model.parameters()).detach() for t in (a, b, same))
    assert torch.equal(wa, ws) and not torch.equal(wa, wb)
    ya, yb, ys = (next(t._batches)[1] for t in (a, b, same))
    assert torch.equal(ya, ys) and not torch.equal(ya, yb)


def test_the_challenge_refuses_a_picked_seed():
    rules = Rules(images=64, image_size=16, dataset_size=256, heldout=64, size="tiny")
    cfg = rules.fit(_tiny(init_seed=7))
    with pytest.raises(RuleBroken, match="same weights, in the same batch order.*leave init_seed at None"):
        rules.check_data(cfg)
    rules.check_data(rules.fit(_tiny()))  # the default passes


# -- the target ---------------------------------------------------------------------------------------------------
def test_the_target_is_a_prediction_interval_over_the_seeds():
    t = AccuracyTarget(size="x", accuracies=(0.90, 0.91, 0.92, 0.91), device="d", date="2026-11-24")
    assert t.mean == pytest.approx(0.91) and t.sd == pytest.approx(math.sqrt(0.0002 / 3))
    assert t.margin == pytest.approx(4.541 * t.sd * math.sqrt(1.25))  # t(0.99, 3 df)
    assert t.threshold == pytest.approx(t.mean - t.margin)
    assert "91.0%" in t.describe() and "4 seeds" in t.describe() and f"{t.threshold:.1%}" in t.describe()
    with pytest.raises(ValueError, match="at least two seeds"):
        AccuracyTarget(size="x", accuracies=(0.9,), device="d", date="")


def test_more_seeds_narrow_the_interval():
    few = AccuracyTarget("x", (0.90, 0.92), "d", "")
    many = AccuracyTarget("x", (0.90, 0.92) * 8, "d", "")
    assert many.margin < few.margin / 5


def test_targets_are_written_from_a_probe_and_read_back(tmp_path, monkeypatch):
    path = tmp_path / "targets.json"
    probe = {"size": "gpu", "date": "2026-11-24", "device_label": "GPU X", "torch": "2.x",
             "baseline": [{"seed": s, "accuracy": a} for s, a in enumerate((0.9, 0.91, 0.905))]}
    assert write_targets(probe, source="/somewhere/probe.json", path=path) == ["gpu"]
    raw = json.loads(path.read_text())
    assert raw["gpu"]["source"] == "probe.json" and raw["gpu"]["accuracies"] == [0.9, 0.91, 0.905]
    monkeypatch.setattr(accuracy, "TARGETS_FILE", path)
    accuracy._targets.cache_clear()
    try:
        t = accuracy_target("gpu")
        assert t.device == "GPU X" and t.mean == pytest.approx(0.905) and accuracy_target("smoke") is None
    finally:
        accuracy._targets.cache_clear()


def test_every_size_has_a_measured_target_well_above_chance_from_a_recorded_probe():
    for size in SIZES:
        t = accuracy_target(size)
        assert t is not None, f"no accuracy target measured for {size}"
        assert t.threshold > 3 / NUM_CLASSES, f"{size}: a run at chance would nearly pass ({t.threshold:.1%})"
        assert len(t.accuracies) >= 5 and (ROOT / "results" / "archive" / t.source).exists(), t.source


def test_the_rule_refuses_a_run_one_point_below_the_large_gpus_mean():
    rules = Rules.at_scale("full", "gpu")
    t = accuracy_target("gpu")
    ok, why = accuracy_check(t.mean, rules)
    assert ok and "99% of its reruns" in why
    ok, why = accuracy_check(t.mean - 0.01, rules)
    assert not ok and f"{t.mean - 0.01:.1%}" in why


def test_rules_without_a_target_compare_with_the_sessions_baseline_and_say_so():
    rules = Rules(images=64, image_size=16, dataset_size=256, heldout=64, size="tiny")
    ok, why = accuracy_check(0.5, rules)
    assert ok and "this is the baseline" in why and "no measured target" in why

    class Base:
        accuracy = 0.6

    assert accuracy_check(0.55, rules, Base())[0]  # within two standard errors on 64 images
    ok, why = accuracy_check(0.2, rules, Base())
    assert not ok and "no measured target" in why


# -- smoke scale: runs that learn ---------------------------------------------------------------------------------
@pytest.mark.slow  # trains the smoke baseline and a diverged run: `make test-slow`
def test_smoke_runs_start_warm_so_the_baseline_ends_well_above_chance_and_a_diverged_run_is_refused():
    from fakes import tiny_session

    from helpers.challenge.harness import Submission, judge
    from helpers.challenge.ladder import ladder

    rules = Rules.at_scale("smoke")
    assert rules.warm_start_images > rules.images
    session = tiny_session(rules)
    base = judge(ladder("smoke", rules)[0].submission, session)
    assert base.accuracy >= 3 / NUM_CLASSES and not base.refused, str(base)
    fast = rules.fit(dataclasses.replace(base.config, data="gpu", sync_each_step=False, item_each_step=False))
    diverged = judge(Submission("lr 10", dataclasses.replace(fast, lr=10.0)), session, baseline=base)
    assert diverged.refused and [r.split(":")[0] for r in diverged.reasons] == ["accuracy_not_worse"], str(diverged)
    honest = judge(Submission("honest", fast), session, baseline=base)
    assert not honest.refused, str(honest)


def test_the_warm_start_is_cached_and_a_corrupted_cache_is_trained_again(tmp_path, monkeypatch):
    from helpers import data
    from helpers.challenge import start

    monkeypatch.setattr(data, "cache_dir", lambda: tmp_path)
    rules = Rules(images=16, image_size=16, dataset_size=64, heldout=64, size="tiny", warm_start_images=64)
    start._warm_state.cache_clear()
    try:
        first = start.start_model(rules)
        files = list((tmp_path / "challenge").glob("*.pt"))
        assert len(files) == 1
        cold = Rules(images=16, image_size=16, dataset_size=64, heldout=64, size="tiny")
        assert not torch.equal(next(first.parameters()), next(start.start_model(cold).parameters()))
        files[0].write_bytes(b"not a checkpoint")
        start._warm_state.cache_clear()
        again = start.start_model(rules)  # trained again, the same weights (the same seeds)
        assert all(torch.allclose(a, b) for a, b in zip(first.state_dict().values(), again.state_dict().values()))
        assert "64 of the challenge's images" in start.describe_start(rules)
        assert "initialised from seed 0" in start.describe_start(cold)
    finally:
        start._warm_state.cache_clear()
