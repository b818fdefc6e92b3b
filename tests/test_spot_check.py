"""The spot check in training compares the gradients too, and nothing a submission's forward can read says which
step it will check: the step is drawn only once each step's forward and backward have run, exactly one per run,
each as likely as any other. Honest runs (micro-batches, fp16's scaled gradients) pass; a network that trains its
convolutions without gradients once the checks before training are behind it does not."""

from __future__ import annotations

import collections
import copy
import dataclasses
import math
import random
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import env, models
from helpers.challenge import harness
from helpers.challenge.function_check import (TOLERANCES, SpotCheck, SpotCheckFailed, map_parameters,
                                              spot_precision)
from helpers.challenge.harness import Submission, judge
from helpers.train import SpotBatch, SpotStep, TrainConfig, Trainer

from fakes import DrawsStep, tiny_challenge, tiny_session

TINY, FAST = tiny_challenge()
STEPS = TINY.images // FAST.batch_size  # 4 steps of 16


@pytest.fixture(scope="module")
def session():
    return tiny_session(TINY)  # each run below is judged as a baseline: the spot check is what is looked at


def _reference(image_size: int = 16):
    torch.manual_seed(0)
    ref = models.ReferenceCNN(image_size)
    return ref, map_parameters(ref, ref)[0]


def _step(model, batches, *, index=0, scale=None) -> SpotStep:
    """A training step as the Trainer leaves it for the spot check: each micro-batch's loss over their number (times
    fp16's ``scale``) backpropagated into ``model``'s ``.grad``."""
    model.zero_grad(set_to_none=True)
    kept = []
    for x, y in batches:
        logits = model(x)
        (F.cross_entropy(logits, y) / len(batches) * (scale or 1.0)).backward()
        kept.append(SpotBatch(x, y, logits.detach().clone()))
    return SpotStep(index, tuple(kept), len(batches), scale)


def _honest(trainer: Trainer) -> float:
    """The most an honest run's gradients may be off where ``trainer`` trains: fp32's rounding on a CPU; on a GPU,
    whose fp32 convolutions run in TF32, a quarter of its tolerance."""
    return 1e-4 if trainer.device.type == "cpu" else TOLERANCES[spot_precision("fp32", trainer.device)].grads / 4


def _batch(n=6, image_size=16, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, image_size, image_size, generator=g), torch.randint(0, 10, (n,), generator=g)


# -- a network that drops its convolutions' gradients once the checks before training are behind it ---------------

def without_conv_gradients(m: models.ReferenceCNN, x: torch.Tensor) -> torch.Tensor:
    """The reference network's logits, its convolutions run without gradients (they never train; the backward is
    three layers cheaper)."""
    with torch.no_grad():
        for conv in (m.conv1, m.conv2, m.conv3):
            x = m._block(conv, x)
    return m.fc2(m.relu(m.fc1(torch.flatten(x, 1))))


class NoGradConvsAfter(nn.Module):
    """The reference network for its first ``honest`` calls (each copy counts its own: the check before training
    makes two), then, in training, its convolutions run without gradients: the logits are the reference's, conv1
    to conv3 never train, and the backward is three layers cheaper."""

    def __init__(self, m, honest: int = 2):
        super().__init__()
        self.m, self.calls, self.honest = m, 0, honest

    def forward(self, x):
        self.calls += 1
        return self.m(x) if not self.training or self.calls <= self.honest else without_conv_gradients(self.m, x)


def test_convolutions_without_gradients_in_training_are_refused_by_the_gradients(session, monkeypatch):
    monkeypatch.setattr(harness, "_judging_draws", lambda: DrawsStep(STEPS - 1))
    v = judge(Submission("no grads", FAST, build_model=NoGradConvsAfter), session)
    assert v.stopped == f"in training, at step {STEPS - 1} of {STEPS}" and v.train is None
    (why,) = v.reasons
    assert why.startswith(f"same_function: the spot check at training step {STEPS - 1} of {STEPS}, against the "
                          "reference network on the same weights and batch (16 images): the gradients it computed "
                          "differ for conv1.weight (none), conv1.bias (none), conv2.weight (none), conv2.bias (none) "
                          "and 2 more"), why
    assert "logits" not in why.split(": the gradients")[0]  # its logits were the reference's: only gradients differ
    assert "a layer run without gradients trains less" in why


def test_the_same_network_passes_where_only_its_honest_steps_are_checked(session, monkeypatch):
    # honest for its first three steps, the check before training passed it: a step drawn among all of the run's
    # catches it one time in four here (its last step), and no honest step is refused
    monkeypatch.setattr(harness, "_judging_draws", lambda: DrawsStep(0))
    v = judge(Submission("no grads", FAST, build_model=lambda m: NoGradConvsAfter(m, honest=3)), session)
    assert v.checks["same_function"][0] and not v.stopped, v.reasons


# -- nothing a forward can read says whether its step will be checked --------------------------------------------

class Peeks(nn.Module):
    """The reference network, whose forward looks up the call stack for whatever might name the checked step: the
    spot check (its attributes), the Trainer (its fixed steps), the locals of the Trainer's step."""

    def __init__(self, m):
        super().__init__()
        self.m, self.seen = m, []

    def forward(self, x):
        spots, trainers, locals_ = [], [], {}
        frame = sys._getframe(1)
        while frame is not None:
            for name, value in frame.f_locals.items():
                if isinstance(value, SpotCheck):
                    spots.append(value)
                elif isinstance(value, Trainer):
                    trainers.append(value)
            if frame.f_code.co_name == "step":  # the Trainer's step: what it keeps for the check, and whether
                locals_ = {k: repr(frame.f_locals.get(k)) for k in ("spot", "keep")}
            frame = frame.f_back
        if self.training and trainers:
            trainer = trainers[0]
            state = [{k: v for k, v in vars(s).items() if k not in ("_model", "_reference", "_rng", "_params")}
                     for s in spots]  # (_params: the parameter objects, whose values train)
            self.seen.append({"step": trainer.steps_done, "spots": spots, "state": repr(state),
                              "fixed": trainer.steps_done in trainer._spot_steps, "locals": locals_})
        return self.m(x)


def test_nothing_a_forward_can_read_says_whether_its_step_will_be_checked(session):
    built = []
    # the harness's own draw, with the operating system's randomness
    v = judge(Submission("peeks", FAST, build_model=lambda m: built.append(Peeks(m)) or built[0]), session)
    assert not v.refused, v.reasons
    seen = built[0].seen
    assert [s["step"] for s in seen] == list(range(STEPS))
    (spot,) = {id(s): s for s in seen[0]["spots"]}.values()  # it found the spot check and the Trainer
    assert spot.step is not None and 0 <= spot.step < STEPS  # one step was checked ...
    before = [s for s in seen if s["step"] <= spot.step]
    assert all(not s["fixed"] for s in seen)  # ... no step fixed in advance ...
    assert {s["state"] for s in before} == {seen[0]["state"]}  # ... and up to it the check looked the same each step
    assert "'step': None" in seen[0]["state"]
    assert all(s["locals"] == {"spot": "[]", "keep": "True"} for s in before), seen


def test_the_trainer_draws_after_the_steps_forward_and_backward():
    asked = []
    forwards = []
    cfg = TrainConfig(batch_size=4, steps=3, warmup_steps=1, data="gpu", image_size=16, dataset_size=32, grad_accum=2)
    model = models.ReferenceCNN(16)
    model.register_forward_hook(lambda *a: forwards.append(1))

    def draw(step):
        asked.append((step, len(forwards), model.conv1.weight.grad is not None))
        return step == 2

    checked = []
    trainer = Trainer(cfg, model=model, spot_check=lambda s: checked.append(s.index), spot_draw=draw)
    trainer.run(boxed=False)
    # each step asked once, after both of its micro-batches' forwards, with their gradients in place
    assert asked == [(i, 2 * (i + 1), True) for i in range(4)] and checked == [2]
    with pytest.raises(ValueError, match="not both"):
        Trainer(cfg, spot_check=print, spot_steps={1}, spot_draw=draw)


def test_the_draw_checks_exactly_one_step_each_equally_likely():
    n, runs = 20, 4000
    ref, mapping = _reference()
    spot = SpotCheck(ref, mapping, image_size=16, precision="fp32", steps=n)
    counts = collections.Counter()
    for _ in range(runs):
        spot.step = None  # a fresh run (the same check object: building one 4,000 times costs seconds)
        drawn = [i for i in range(n) if spot.draw(i)]
        assert len(drawn) == 1 and spot.step == drawn[0]
        counts[drawn[0]] += 1
    want = runs / n  # 200 a step, binomial sd 13.8
    chi2 = sum((counts[i] - want) ** 2 / want for i in range(n))
    assert chi2 < 80, counts  # 19 degrees of freedom: mean 19, sd 6.2; 80 is ten sd (never flakes)
    assert all(100 < counts[i] < 300 for i in range(n)), counts  # each step 7 sd either side
    assert not spot.draw(n + 3)  # after the run (the profiled steps): already drawn, never again
    assert type(SpotCheck(ref, mapping, image_size=16, precision="fp32")._rng) is random.SystemRandom  # by default


def test_a_fixed_step_draws_nothing_and_the_check_says_which_step_it_ran():
    ref, mapping = _reference()
    spot = SpotCheck(ref, mapping, image_size=16, precision="fp32")
    with pytest.raises(ValueError, match="steps"):
        spot.draw(0)
    spot(_step(ref, [_batch()], index=7))
    assert spot.step == 7 and spot.measured.grads < 1e-5


# -- micro-batches, fp16's scaled gradients ----------------------------------------------------------------------

def test_the_gradients_are_compared_summed_over_the_steps_micro_batches():
    ref, mapping = _reference()
    spot = SpotCheck(ref, mapping, image_size=16, precision="fp32")
    two = [_batch(seed=1), _batch(seed=2)]
    spot(_step(ref, two))  # each micro-batch's loss over 2, summed: the reference's, within fp32's rounding
    assert spot.measured.grads < 1e-5 and spot.measured.logits < 1e-6
    step = _step(ref, two)
    ref.zero_grad(set_to_none=True)
    (F.cross_entropy(ref(two[0][0]), two[0][1]) / 2).backward()  # the first micro-batch's gradients alone
    with pytest.raises(SpotCheckFailed, match="the gradients it computed differ for"):
        spot(step)


class OddCallsNoGradConvs(nn.Module):
    """The reference's logits every call; on its even calls in training, the convolutions without gradients: with
    two micro-batches a step, only the first trains them."""

    def __init__(self, m):
        super().__init__()
        self.m, self.calls = m, 0

    def forward(self, x):
        self.calls += 1
        return without_conv_gradients(self.m, x) if self.training and self.calls % 2 == 0 else self.m(x)


def test_every_micro_batch_of_the_checked_step_counts_for_the_gradients():
    cfg = TrainConfig(batch_size=4, steps=2, warmup_steps=0, data="gpu", image_size=16, dataset_size=32, grad_accum=2)
    for build, refused in ((lambda m: m, False), (OddCallsNoGradConvs, True)):
        ref, _ = _reference()
        model = build(copy.deepcopy(ref))
        spot = SpotCheck(model, map_parameters(model, ref)[0], image_size=16, steps=2, rng=DrawsStep(1),
                         precision=spot_precision("fp32", env.device()))  # a GPU's fp32 training runs TF32
        trainer = Trainer(cfg, model=model, spot_check=spot, spot_draw=spot.draw)
        if refused:
            with pytest.raises(SpotCheckFailed, match=r"the spot check at training step 1 of 2, .* \(8 images\): "
                                                      r"the gradients it computed differ for conv1\.weight \("):
                trainer.run(boxed=False)
        else:
            trainer.run(boxed=False)
            assert spot.step == 1 and spot.measured.grads < _honest(trainer), spot.measured


def test_fp16s_scaled_gradients_are_unscaled_and_an_overflowed_step_is_skipped_not_refused():
    ref, mapping = _reference()
    x, y = _batch()
    spot = SpotCheck(ref, mapping, image_size=16, precision="fp16")
    spot(_step(ref, [(x, y)], scale=1024.0))  # GradScaler's gradients, times 1,024: unscaled, the reference's
    assert spot.measured.grads < 1e-5 and not spot.measured.grads_skipped
    scaled = _step(ref, [(x, y)], scale=1024.0)
    with pytest.raises(SpotCheckFailed, match="gradients it computed differ"):
        spot(dataclasses.replace(scaled, grad_scale=None))  # read as unscaled: 1,024 times the reference's
    ref.conv2.weight.grad[0, 0, 0, 0] = math.inf  # the scaled gradients overflowed: GradScaler skips the update
    spot(scaled)
    assert spot.measured.grads_skipped.startswith("the scaled fp16 gradients overflowed")
    assert not spot.diverged and math.isnan(spot.measured.grads) and spot.measured.logits < 1e-6
    bf16 = SpotCheck(ref, mapping, image_size=16, precision="bf16")  # no scaler: an inf gradient is a difference
    with pytest.raises(SpotCheckFailed, match=r"conv2\.weight \(inf%\)"):
        bf16(scaled)


def test_the_trainer_hands_the_spot_check_its_grad_scalers_scale():
    cfg = TrainConfig(batch_size=4, steps=2, warmup_steps=0, data="gpu", image_size=16, dataset_size=32)
    ref, _ = _reference()
    model = copy.deepcopy(ref)
    spot = SpotCheck(model, map_parameters(model, ref)[0], image_size=16, precision="fp16")
    seen = []
    trainer = Trainer(cfg, model=model, spot_check=lambda s: seen.append(s.grad_scale) or spot(s), spot_steps={1})
    # fp16's GradScaler on fp32 training (a CPU runs fp16 as fp32): the gradients carry its scale all the same
    trainer.scaler = torch.amp.GradScaler(trainer.device.type, init_scale=256.0)
    trainer.run(boxed=False)
    assert seen == [256.0] and spot.measured.grads < _honest(trainer), spot.measured


# -- moved from test_judging: the tolerances, and divergence -------------------------------------------------------

def test_tolerances_are_one_table_and_the_training_precision_picks_one():
    assert set(TOLERANCES) == {"fp32", "tf32", "bf16", "fp16"}
    assert TOLERANCES["fp32"].logits <= TOLERANCES["tf32"].logits <= TOLERANCES["bf16"].logits
    assert all(0 < t.grads < 1 for t in TOLERANCES.values())  # a gradient that is not there (100% off) never passes
    assert spot_precision("fp32", torch.device("cpu")) == "fp32"
    assert spot_precision("bf16", torch.device("cpu")) == "bf16"
    ref, mapping = _reference()
    spot = SpotCheck(ref, mapping, image_size=16, precision="fp32")
    spot(_step(ref, [_batch(3)]))  # the reference itself passes
    assert spot.gap is not None and spot.gap <= TOLERANCES["fp32"].logits
    assert spot.measured.grads <= TOLERANCES["fp32"].grads


def test_a_spot_check_on_weights_that_overflow_fp16_is_divergence_not_another_function():
    """A learning rate too large in fp16 grows the weights until the training's logits overflow to inf, while the
    reference's fp32 logits stay finite: the spot check calls that divergence (the accuracy rule judges it), not a
    different function, because the reference network itself overflows in fp16 on those weights. Non-finite logits
    from weights the reference handles in fp16 are still another function."""
    ref, mapping = _reference()
    x, y = _batch(3)

    def inf_logits(step):
        return dataclasses.replace(step, micro_batches=tuple(dataclasses.replace(b, logits=torch.full_like(
            b.logits, math.inf)) for b in step.micro_batches))

    spot = SpotCheck(ref, mapping, image_size=16, precision="fp16")
    with pytest.raises(SpotCheckFailed):
        spot(inf_logits(_step(ref, [(x, y)])))  # sane weights: inf logits are not the reference's
    assert not spot.diverged
    with torch.no_grad():
        ref.fc1.weight.mul_(1e7)  # diverged: fp32 still finite, fp16's range (65,504) passed
        assert torch.isfinite(ref(x)).all()
    step = inf_logits(_step(ref, [(x, y)]))
    spot = SpotCheck(ref, mapping, image_size=16, precision="fp16")
    spot(step)
    assert spot.diverged and spot.gap != spot.gap  # NaN: nothing compared
    spot = SpotCheck(ref, mapping, image_size=16, precision="tf32")  # fp32's range: no overflow to blame
    with pytest.raises(SpotCheckFailed):
        spot(step)


def test_the_failure_says_how_far_the_logits_and_the_gradients_were():
    ref, mapping = _reference()
    step = _step(ref, [_batch()])
    off = dataclasses.replace(step, micro_batches=tuple(dataclasses.replace(b, logits=b.logits * 1.5)
                                                        for b in step.micro_batches))
    with torch.no_grad():
        ref.fc2.weight.grad.mul_(2)
    spot = SpotCheck(ref, mapping, image_size=16, precision="fp32", steps=9)
    with pytest.raises(SpotCheckFailed) as e:
        spot(off)
    why = str(e.value)
    assert why.startswith("the spot check at training step 0 of 9, against the reference network on the same weights "
                          "and batch (6 images): the logits the training computed differ by up to "), why
    assert "% of the largest; fp32 allows 0.1%)" in why
    assert "; the gradients it computed differ for fc2.weight (100.0%) (the norm of the difference over the " \
           "reference's gradient; fp32 allows 2%)" in why, why


# -- deferred: the step is copied where it was drawn and compared after the run ------------------------------------

def _deferred_run(model, steps: int = 4):
    """A Trainer run of ``model`` (built from the reference network of the tiny challenge) with a deferred spot check
    drawn after each step; returns (trainer, spot)."""
    ref = models.ReferenceCNN(16)
    model = model(copy.deepcopy(ref)) if callable(model) and not isinstance(model, nn.Module) else model
    mapping, _ = map_parameters(model, ref)
    cfg = TrainConfig(batch_size=16, warmup_steps=0, steps=steps, data="gpu", image_size=16, dataset_size=256)
    spot = SpotCheck(model, mapping, image_size=16, precision=spot_precision("fp32", env.device()), steps=steps,
                     deferred=True)
    trainer = Trainer(cfg, model=model, spot_check=spot, spot_draw=spot.draw)
    trainer.run(boxed=False)
    return trainer, spot


def test_a_deferred_check_takes_nothing_out_of_the_runs_time_and_still_judges_its_step():
    trainer, spot = _deferred_run(lambda m: m)
    assert spot.step is not None and spot.measured is None  # copied during the run, not yet compared
    assert trainer.spot_check_s == 0.0  # nothing subtracted from any step's time or the run's
    spot.finish()
    assert spot.measured is not None and spot.measured.logits <= spot.tolerance.logits
    spot.finish()  # the copies are gone: a second call compares nothing and says nothing


def test_a_deferred_check_compares_the_weights_of_its_step_not_those_after_the_run():
    # a network whose convolutions never get gradients in training: whichever step is drawn, the copy holds that
    # step's weights and gradients, and the comparison after the run refuses it as a check in place would
    refused = 0
    for _ in range(8):
        _, spot = _deferred_run(lambda m: NoGradConvsAfter(m, honest=0))
        try:
            spot.finish()
        except SpotCheckFailed as e:
            refused += 1
            assert "gradients" in str(e) and f"training step {spot.step} of 4" in str(e)
    assert refused == 8


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the allocator's peak is a GPU's")
def test_a_deferred_checks_copies_are_left_out_of_the_runs_peak_memory():
    # at batch 2 and 224² the copies (fc1's weights and gradients: about 0.8 GB) are larger than the step's
    # activations: counted, they would set the run's peak
    def peak(spot_on: bool) -> float:
        torch.cuda.empty_cache()
        ref = models.ReferenceCNN(224)
        mapping = map_parameters(copy.deepcopy(ref), ref)[0]  # on the CPU: no second network on the GPU
        model = ref.cuda()
        cfg = TrainConfig(batch_size=2, warmup_steps=1, steps=3, data="gpu", image_size=224, dataset_size=64)
        kw = {}
        if spot_on:
            spot = SpotCheck(model, mapping, image_size=224, precision="tf32", steps=4, deferred=True)
            kw = {"spot_check": spot, "spot_draw": spot.draw}
        trainer = Trainer(cfg, model=model, **kw)
        result = trainer.run(boxed=False, peak_over="run")
        if spot_on:
            assert trainer._spot_copy is not None and trainer._spot_copy[1] > 0.5 * 2**30
            spot.finish()
        return result.peak_allocated_gib

    without, with_copies = peak(False), peak(True)
    assert with_copies == pytest.approx(without, rel=0.05), (without, with_copies)
