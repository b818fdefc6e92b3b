"""The final challenge's harness judges a run where the work is done: networks that compute less in training than
the reference network are refused (whatever the check's batch, mode or copy looks like), honest variants pass, and
whatever a submission raises ends in a refused verdict, never a crash, and never trains a run already refused."""

from __future__ import annotations

import copy
import dataclasses
import math
import random
import types

import pytest
import torch
from torch import nn

from helpers import leaderboard, models
from helpers.challenge import harness
from helpers.challenge.function_check import check_function, fresh_seed, map_parameters
from helpers.challenge.harness import Submission, judge, readable_table
from helpers.challenge.report import reflection, write_report
from helpers.challenge.step_roofline import step_roofline
from helpers.kernels.relu_pool_triton import fuse_relu_pool
from helpers.train import TrainConfig, Trainer

from fakes import DrawsStep, tiny_challenge, tiny_session

TINY, FAST = tiny_challenge()
STEPS = TINY.images // FAST.batch_size  # 4 steps of 16: the spot check's step is one of 0..3


@pytest.fixture(scope="module")
def session():
    return tiny_session(TINY)


@pytest.fixture(scope="module")
def baseline(session):
    return judge(Submission("baseline", FAST), session)


@pytest.fixture
def spot_at(monkeypatch):
    """Make the spot check's step a known one (drawn at random, after each step has run, when judging)."""
    def at(step: int):
        monkeypatch.setattr(harness, "_judging_draws", lambda: DrawsStep(step))
    return at


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if the harness builds a Trainer (a run refused before training must not train)."""
    built = []
    monkeypatch.setattr(harness, "Trainer", lambda *a, **k: built.append(1) or pytest.fail("it trained"))
    return built


def _with_block(m: nn.Module, block) -> nn.Module:
    m._block = types.MethodType(block, m)
    return m


# -- the cheats: each computes less (or else) in training than the reference network ------------------------------

def train_noise(m):
    """Adds noise to its logits, only in training mode."""
    inner = m.forward

    def forward(x):
        y = inner(x)
        return y + 0.05 * torch.randn_like(y) if m.training else y

    m.forward = forward
    return m


def train_cheap_conv3(m):
    """Trains a 1×1 conv3 (nine times fewer FLOPs); the reference's 3×3 only in evaluation mode."""
    m.cheap = nn.Conv2d(128, 256, 1)
    plain = m._block

    def block(self, conv, x):
        return plain(self.cheap if self.training and conv is self.conv3 else conv, x)

    return _with_block(m, block)


class BatchOf4(nn.Module):
    """The reference network on a batch of 4 images (the old check's), a cheap one otherwise (held-out too)."""

    def __init__(self, m):
        super().__init__()
        self.ref = m
        self.cheap = copy.deepcopy(m)
        self.cheap.conv3 = nn.Conv2d(128, 256, 1)

    def forward(self, x):
        return self.ref(x) if x.shape[0] == 4 else self.cheap(x)


class Cached(nn.Module):
    """Computes once, then returns the logits it cached for any batch of that size."""

    def __init__(self, m):
        super().__init__()
        self.m, self.cache = m, None

    def forward(self, x):
        if self.cache is None or self.cache.shape[0] != x.shape[0]:
            self.cache = self.m(x)
        return self.cache


def detached_conv1(m):
    """Cuts the graph after the first block: conv1 never trains (a backward pass cheaper by a layer)."""
    plain = m._block

    def block(self, conv, x):
        y = plain(conv, x)
        return y.detach() if conv is self.conv1 else y

    return _with_block(m, block)


def train_skips_conv2(m):
    """In training mode, conv2's block is skipped (its channels doubled by repetition, its pool kept)."""
    plain = m._block

    def block(self, conv, x):
        if self.training and conv is self.conv2:
            return self.pool(torch.cat([x, x], 1))
        return plain(conv, x)

    return _with_block(m, block)


def cheats_unless_copied(m):
    """Honest in any copy of itself (where a check would run), cheap in the network that trains."""
    m.born_as = id(m)
    plain = m._block

    def block(self, conv, x):
        if id(self) == self.born_as and conv is self.conv3:
            conv = self.conv3_cheap
        return plain(conv, x)

    m.conv3_cheap = nn.Conv2d(128, 256, 1)
    return _with_block(m, block)


def honest_then_cheap(m):
    """Honest for its first two calls (each copy counts its own), cheap after: only a spot check later sees it."""
    m.calls = 0
    m.cheap = nn.Conv2d(128, 256, 1)
    plain = m._block

    def block(self, conv, x):
        if conv is self.conv1:
            self.calls += 1
        return plain(self.cheap if self.calls > 2 and conv is self.conv3 else conv, x)

    return _with_block(m, block)


CHEATS = [  # (build_model, what the reason must say)
    (train_noise, "training-mode logits"),
    (train_cheap_conv3, "training-mode logits"),
    (BatchOf4, "training-mode logits"),
    (Cached, "evaluation-mode logits"),
    (detached_conv1, "gradients: the input, conv1.weight, conv1.bias got none"),
    (train_skips_conv2, "training-mode logits"),
]


@pytest.mark.parametrize("build, why", CHEATS, ids=[getattr(c[0], "__name__", "") for c in CHEATS])
def test_a_network_that_computes_else_in_training_is_refused_before_training(session, baseline, no_training,
                                                                             build, why):
    v = judge(Submission("cheat", FAST, build_model=build), session, baseline=baseline)
    assert v.refused and v.stopped == "before training" and v.train is None and v.images_seen == 0
    assert v.reasons[0].startswith("same_function: it differs from the reference network on the same weights, on 16 "
                                   "images drawn at judging: "), v.reasons
    assert why in v.reasons[0]
    assert str(v).startswith("cheat: refused before training: same_function: it differs")
    assert not no_training


def test_the_old_checks_batch_of_4_passes_the_reference_and_nothing_else(session, baseline):
    # the batch-of-4 cheat is the reference network at 4 images: judged at the run's batch (16), it is refused
    torch.manual_seed(0)
    ref = models.ReferenceCNN(16)
    assert check_function(BatchOf4(copy.deepcopy(ref)), ref, image_size=16, batch=4, heldout=64).ok
    assert not check_function(BatchOf4(copy.deepcopy(ref)), ref, image_size=16, batch=16, heldout=64).ok


class OddCallsHonest(nn.Module):
    """Honest on its odd calls, cheap on even ones in training: with two micro-batches a step, only the first of
    each step is the reference's."""

    def __init__(self, m):
        super().__init__()
        self.m, self.calls = m, 0
        self.cheap = copy.deepcopy(m)
        self.cheap.conv3 = nn.Conv2d(128, 256, 1)

    def forward(self, x):
        self.calls += 1
        return self.cheap(x) if self.training and self.calls % 2 == 0 else self.m(x)


def test_the_spot_check_sees_every_micro_batch_of_its_step(session, baseline, spot_at):
    spot_at(0)
    accum = dataclasses.replace(FAST, grad_accum=2)
    v = judge(Submission("accumulates", accum, build_model=OddCallsHonest), session, baseline=baseline)
    assert v.stopped == "in training, at step 0 of 2" and "the spot check at training step 0" in v.reasons[0]
    spot_at(1)
    v = judge(Submission("honest", accum), session, baseline=baseline)
    assert not v.refused, v.reasons


@pytest.mark.parametrize("build, step", [(cheats_unless_copied, 0), (honest_then_cheap, STEPS - 1)])
def test_a_network_honest_only_where_checked_is_caught_by_the_spot_check(session, baseline, spot_at, build, step):
    spot_at(step)
    v = judge(Submission("sly", FAST, build_model=build), session, baseline=baseline)
    assert v.checks["same_function"][0] is False and v.stopped == f"in training, at step {step} of {STEPS}"
    assert len(v.reasons) == 1 and v.reasons[0].startswith(
        f"same_function: the spot check at training step {step} of {STEPS}, against the reference network on the same "
        f"weights and batch ({FAST.batch_size} images): the logits the training computed differ by up to "), v.reasons
    # the step was copied when drawn and compared after the run (nothing of the check is taken out of its time): the
    # run trained to its end, and is refused with no figures
    assert v.images_seen == TINY.images and v.train is None and math.isnan(v.img_per_s)
    assert str(v).startswith(f"sly: refused in training, at step {step} of {STEPS}, after {v.images_seen} images: "
                             "same_function: the spot check")


def test_weights_the_reference_finds_non_finite_at_the_spot_check_are_refused_whatever_the_run_answers(
        session, baseline, spot_at, monkeypatch):
    """A diverged run (or a weight the training forward never reads, planted non-finite to blind the check) leaves
    the spot check nothing to compare: the run trains to its end, and is refused by the accuracy rule with the
    reason, whatever accuracy its own forward reports on the held-out images."""
    from helpers.challenge import function_check

    spot_at(1)
    real = function_check.SpotCheck.reference_step

    def nan_logits(self, step):
        logits, grads = real(self, step)
        return [torch.full_like(w, math.nan) for w in logits], grads

    monkeypatch.setattr(function_check.SpotCheck, "reference_step", nan_logits)
    v = judge(Submission("blinded", FAST), session, baseline=baseline)
    assert v.checks["same_function"][0] and v.train is not None and not v.stopped  # trained to its end
    ok, why = v.checks["accuracy_not_worse"]
    assert not ok and f"at the spot check (training step 1 of {STEPS}) the weights had diverged" in why, why


def test_the_unchanged_reference_checked_against_itself_differs_by_nothing_in_either_memory_format():
    """The held-out batch comes channels_last; the reference ran on it so while a contiguous submission ran on a
    contiguous copy, and on a CPU the two algorithms' last bits differ: CI refused the classic loop itself, its
    conv1 gradient 2% from the reference's. Each side now runs the submission's own format."""
    torch.manual_seed(3)
    ref = models.ReferenceCNN(16)
    for channels_last in (False, True):
        sub = copy.deepcopy(ref)
        if channels_last:
            sub = sub.to(memory_format=torch.channels_last)
        for seed in range(3):
            check = check_function(sub, ref, image_size=16, batch=8, seed=seed, heldout=64)
            assert check.ok, check.why
            if not channels_last:  # one algorithm on both sides: the same bits
                assert check.logits_gap == 0.0 and check.grads_gap == 0.0, (seed, check.why)


def test_the_check_batches_seed_is_drawn_afresh_after_the_network_is_built(session, monkeypatch):
    """build_model runs the submission's code: a seed drawn before it could be read from the call stack."""
    from helpers.challenge import function_check

    order = []
    monkeypatch.setattr(function_check, "fresh_seed", lambda: order.append("seed") or fresh_seed())
    judge(Submission("honest", FAST, build_model=lambda m: order.append("build_model") or m), session)
    assert order == ["build_model", "seed"]
    torch.manual_seed(0)
    ref = models.ReferenceCNN(16)
    seeds = {check_function(ref, ref, image_size=16, batch=2, heldout=64).seed for _ in range(3)}
    assert len(seeds) == 3
    assert isinstance(harness._judging_draws(), random.SystemRandom)  # the spot step: the operating system's


# -- crashes are refusals ------------------------------------------------------------------------------------------

class _NoParameters(nn.Module):
    def forward(self, x):
        return x.mean((1, 2, 3))[:, None].expand(-1, 10)


class _Tuple(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x), x


def _raises(m):
    raise ValueError("my build broke")


def _drop_conv3(m):
    m.conv3 = nn.Identity()  # 128 channels reach fc1, which expects 256: shapes change
    return m


CRASHES = [
    (_drop_conv3, "same_function: it raised RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
    (lambda m: _NoParameters(), "same_function: it differs from the reference network"),
    (_Tuple, "same_function: in training mode it returned a tuple where the reference network returns its logits"),
    (_raises, "same_function: build_model raised ValueError: my build broke: it must take the reference network"),
    (lambda m: None, "same_function: build_model returned NoneType; it must return the network to train"),
]


@pytest.mark.parametrize("build, why", CRASHES, ids=["shape change", "no parameters", "tuple", "raises", "None"])
def test_a_submission_that_crashes_is_refused_before_training_with_the_exception(session, baseline, no_training,
                                                                                 build, why):
    v = judge(Submission("crash", FAST, build_model=build), session, baseline=baseline)
    assert v.refused and v.stopped == "before training" and v.train is None and not no_training
    assert v.reasons[0].startswith(why), v.reasons
    assert "\n" not in v.reasons[0]
    assert str(v) == "crash: refused before training: " + "; ".join(v.reasons)


def test_a_network_with_no_parameters_is_refused_for_its_missing_weights_where_its_logits_agree(session, baseline):
    # it returns the reference's own logits (kept from a network it hides from its parameters)
    class Hidden(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.__dict__["m"] = m  # not a submodule: no parameters

        def forward(self, x):
            return self.m(x)

    v = judge(Submission("hidden", FAST, build_model=Hidden), session, baseline=baseline)
    assert v.stopped == "before training"
    assert "got none" in v.reasons[0] or "could not be found in it" in v.reasons[0], v.reasons


def test_a_crash_in_training_is_a_refusal_and_one_in_the_submissions_own_evaluation_is_not_judged(session, baseline):
    class BreaksAtItsThirdCall(nn.Module):  # each copy counts its own calls: the check's copy makes two
        def __init__(self, m):
            super().__init__()
            self.m, self.calls = m, 0

        def forward(self, x):
            self.calls += 1
            if self.calls == 3:  # the judged network's third call: training step 2
                raise RuntimeError("a kernel fell over")
            return self.m(x)

    v = judge(Submission("breaks", FAST, build_model=BreaksAtItsThirdCall), session, baseline=baseline)
    assert v.stopped == f"in training, at step 2 of {STEPS}" and v.train is None
    assert v.reasons == [f"images_seen: training stopped at step 2 of {STEPS}: it raised RuntimeError: a kernel fell "
                         "over; every step of the run must train"]

    class BigBatchesBreak(nn.Module):  # the held-out evaluation runs 64 images at once
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            if x.shape[0] > 32:
                raise MemoryError("no room")
            return self.m(x)

    # the held-out evaluation runs the reference network's forward on the trained weights, not the submission's:
    # what its own forward does on the held-out batches (64 images at once) is not judged
    v = judge(Submission("held-out", FAST, build_model=BigBatchesBreak), session, baseline=baseline)
    assert not v.stopped and v.train is not None and v.images_seen == TINY.images
    assert list(v.checks) == ["same_function", "images_seen", "accuracy_not_worse"] and not v.refused, v.reasons
    assert v.accuracy > 0 and v.img_per_s > 0


def test_a_verdict_that_never_trained_reads_as_one_everywhere(session, baseline, tmp_path):
    v = judge(Submission("refused", FAST, build_model=_drop_conv3), session, baseline=baseline)
    assert math.isnan(v.img_per_s) and math.isnan(v.mfu_pct) and math.isnan(v.accuracy) and v.peak_mem_gb is None
    assert v.figures()["img_per_s"] != v.figures()["img_per_s"]  # NaN
    shown = readable_table([baseline, v])
    row = shown.shown.loc["refused"]
    assert row["img/s"] == row["MFU %"] == row["held-out accuracy %"] == row["step ms"] == row["speed-up ×"] == "—"
    assert row["rules"] == "REFUSED before training: same_function"
    assert any("stopped" in n for n in shown.notes)
    path = tmp_path / "board.sqlite"
    with pytest.raises(leaderboard.EntryRefused, match="not ranked.*same_function"):
        leaderboard.add(v.entry(path=path), path=path)
    r = reflection([baseline, v], step_roofline(v.profile, models.ReferenceCNN(16), image_size=16, batch=16), session)
    assert "refused" in r.biggest_bottleneck and "nan" not in r.paid_most.lower()
    page = write_report(session, [baseline, v], path=tmp_path / "r.html").read_text()
    assert "refused" in page


# -- honest variants pass ------------------------------------------------------------------------------------------

def test_every_rung_of_the_ladder_computes_the_reference_function():
    from helpers.challenge.ladder import ladder

    torch.manual_seed(0)
    ref = models.ReferenceCNN(16)
    for rung in ladder("smoke", TINY):
        build = rung.submission.build_model or (lambda m: m)
        cfg = rung.submission.config
        check = check_function(build(copy.deepcopy(ref)), ref, image_size=16, batch=16, heldout=64,
                               channels_last=cfg.channels_last)
        assert check.ok, (rung.name, check.why)
        assert len(check.mapping) == len(list(ref.parameters()))


def test_the_padded_first_conv_maps_back_to_the_reference_weights():
    torch.manual_seed(0)
    ref = models.ReferenceCNN(16)
    padded = fuse_relu_pool(models.pad_first_conv(copy.deepcopy(ref))).to(memory_format=torch.channels_last)
    mapping, missing = map_parameters(padded, ref)
    assert not missing and ("conv1.weight", "conv1.conv.weight", (slice(0, 64), slice(0, 3), slice(0, 3),
                                                                   slice(0, 3))) in mapping
    assert all(r == s for r, s, _ in mapping if not r.startswith("conv1."))


@pytest.mark.parametrize("dtype, channels_last, build", [
    ("bf16", True, None),  # bf16 autocast where this CPU has it (fp32 where not), NHWC
    ("bf16", True, lambda m: fuse_relu_pool(models.pad_first_conv(m))),  # the fused Triton kernels, interpreted
])
def test_honest_runs_pass_the_spot_check_at_the_last_step(session, baseline, spot_at, dtype, channels_last, build):
    spot_at(STEPS - 1)
    cfg = dataclasses.replace(FAST, dtype=dtype, channels_last=channels_last)
    v = judge(Submission("honest", cfg, build_model=build), session, baseline=baseline)
    assert not v.stopped and v.checks["same_function"][0], v.reasons
    assert v.images_seen == TINY.images


def test_the_compiled_top_rung_passes(session, baseline, spot_at):
    from helpers.challenge.ladder import top_rung

    spot_at(STEPS - 1)
    ref = top_rung("smoke", TINY)
    v = judge(dataclasses.replace(ref, config=dataclasses.replace(ref.config, batch_size=16)), session,
              baseline=baseline)
    assert not v.stopped and v.checks["same_function"][0], v.reasons


def test_the_trainer_calls_the_spot_check_once_with_the_weights_that_computed_the_logits():
    seen = []

    def spot(s):
        (b,) = s.micro_batches
        with torch.no_grad():
            again = trainer.model(b.x)  # the weights before this step's update
        seen.append((s.index, b.x.shape[0], torch.equal(again, b.logits), s.grad_accum, s.grad_scale))

    cfg = TrainConfig(batch_size=8, steps=3, warmup_steps=1, data="gpu", image_size=16, dataset_size=64)
    trainer = Trainer(cfg, spot_check=spot, spot_steps={2})
    result = trainer.run(boxed=False)
    assert seen == [(2, 8, True, 1, None)] and trainer.steps_done == 4 and result.steps == 3
    assert trainer.spot_check_s > 0


def test_the_spot_the_cheat_suspects_still_split_as_they_should(session):
    from helpers.exercises import nb06

    small = judge(Submission("baseline", dataclasses.replace(FAST, batch_size=4)), session)  # ×16 fits 64 images
    runs = nb06.suspects(session, small, seed=0)
    answer = nb06.cheats_solution(runs)
    cheaper = [name for name, rule in answer.items() if rule == "same_function"]
    assert len(cheaper) == 1 and runs[cheaper[0]].stopped == "before training"  # the cheaper network, not trained
    assert None in answer.values()  # the honest run passes
    assert "images_seen" in answer.values()
    assert nb06.check_spot_the_cheat(answer, runs).passed


def test_the_suspects_evidence_tells_each_rule_apart_without_the_verdicts(session):
    """06.1 shows what was measured, not the verdicts: the cheaper network has fewer FLOPs and a large logits gap,
    the short run fewer images, and nothing in the table names a rule or says refused. The cheaper network, which the
    harness stops before training, is trained for the table all the same: no row of dashes gives it away."""
    from helpers.exercises import nb06

    small = judge(Submission("baseline", dataclasses.replace(FAST, batch_size=4)), session)
    runs = nb06.suspects(session, small, seed=0)
    answer = nb06.cheats_solution(runs)
    ev = runs.evidence
    honest = next(n for n, r in answer.items() if r is None)
    cheaper = next(n for n, r in answer.items() if r == "same_function")
    short = next(n for n, r in answer.items() if r == "images_seen")
    assert ev[cheaper].gflop_per_image < ev[honest].gflop_per_image and ev[cheaper].logits_gap_pct > 10
    assert ev[honest].logits_gap_pct < 1e-3 and ev[cheaper].images == ev[honest].images == TINY.images
    assert ev[short].images < ev[honest].images
    for e in ev.values():  # every row has every figure
        assert e.images > 0 and all(math.isfinite(x) for x in (e.accuracy, e.loss_first, e.loss_last, e.img_per_s))
    table = nb06.evidence_table(runs)
    shown = repr(table)
    for word in ("same_function", "images_seen", "accuracy_not_worse", "REFUSED", "passed", "stopped", "not trained"):
        assert word not in shown
    assert not table.notes


def test_the_evidence_table_says_why_a_diverged_runs_loss_shows_a_dash():
    """A run whose loss became inf or NaN (the learning-rate suspect on a small GPU) shows "—" in its loss column,
    with a note that says the run diverged: a dash with no reason is refused by the notebook runs."""
    from helpers.exercises import nb06

    runs = nb06.Suspects()
    runs.evidence = {
        "run A": nb06.Evidence("run A", 4096, 12.1, 0.0, 0.9, 2.2, 0.7, 560.0),
        "run B": nb06.Evidence("run B", 4096, 12.1, 0.0, 0.108, 3.5, math.nan, 590.0),
    }
    table = nb06.evidence_table(runs)
    assert table.shown.loc["run B", "loss, last quarter"] == "—"
    assert any("diverged" in n for n in table.notes) and not any("not measured" in n for n in table.notes)
    runs.evidence["run B"] = nb06.Evidence("run B", 4096, 12.1, 0.0, 0.108, 3.5, math.inf, 590.0)
    assert nb06.evidence_table(runs).shown.loc["run B", "loss, last quarter"] == "—"
    runs.evidence.pop("run B")
    assert not nb06.evidence_table(runs).notes


def test_start_model_gives_the_initialised_network_a_fresh_copy_each_time_and_leaves_the_generator_as_init_would():
    """start_model keeps the initialised weights once per (size, seed): each call returns the same weights as
    ``torch.manual_seed(seed); ReferenceCNN(size)`` would, in tensors of its own (training one run cannot change
    the next run's start), and leaves the random generator where that initialisation leaves it."""
    from helpers.challenge.start import start_model

    rules = types.SimpleNamespace(seed=7, image_size=16, warm_start_images=0)
    torch.manual_seed(7)
    want = models.ReferenceCNN(16)
    after = torch.rand(3)
    for _ in range(2):
        got = start_model(rules)
        assert torch.equal(torch.rand(3), after)  # the generator past the initialisation's draws
        for (k, a), (_, b) in zip(got.state_dict().items(), want.state_dict().items()):
            assert torch.equal(a, b) and a.device.type == "cpu", k
        with torch.no_grad():
            got.fc1.weight.add_(1.0)  # a run trains it ...
    assert torch.equal(start_model(rules).fc1.weight, want.fc1.weight)  # ... the next starts as before
    assert all(p.requires_grad for p in start_model(rules).parameters())
    other = start_model(rules, seed=8)
    assert not torch.equal(other.fc1.weight, want.fc1.weight)
