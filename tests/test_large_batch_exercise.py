"""04's exercise "a batch eight times larger that learns as much", on a CPU at smoke scale (the setup a learner
without a GPU gets): the reference recipe is accepted from fresh seeds; the known-wrong recipes (the baseline's
learning rate, the linear scaling rule without warm-up, AdamW at a rate too high, a schedule of zeros) are refused
with what their loss did; malformed answers get a message that says what to write."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import large_batch as lb
from helpers.exercises import nb04

pytestmark = pytest.mark.slow  # trains several runs to a held-out accuracy: `make test-slow`

SETUP = lb.setup_for("smoke")


def _sgd(lr):
    return lambda params: torch.optim.SGD(params, lr=lr, momentum=0.9)


def test_schedules_and_the_setup_mean_what_they_say():
    assert [lb.warmup_decay(0.1, 2)(s, 10) for s in (0, 1, 2, 9)] == pytest.approx([0.05, 0.1, 0.1, 0.0])
    assert nb04.large_batch_lr(0, SETUP.large_steps) < nb04.large_batch_lr(SETUP.large_steps // 10,
                                                                           SETUP.large_steps)
    assert nb04.large_batch_lr(SETUP.large_steps - 1, SETUP.large_steps) == 0.0
    assert SETUP.large_batch == 8 * SETUP.base_batch and SETUP.large_steps * 8 == SETUP.base_steps


def test_a_run_uses_the_schedule_at_every_step_and_reads_the_loss_once():
    small = lb.Setup(task=SETUP.task, image_size=16, images=256, heldout=64, pool=512)
    run = lb.train_run(small, _sgd(0.01), lb.warmup_decay(0.04, 2), batch=32, seed=1, device="cpu")
    assert run.steps == 8 and run.images == 256 and len(run.lrs) == 8
    assert run.lrs == pytest.approx([lb.warmup_decay(0.04, 2)(s, 8) for s in range(8)])
    assert math.isfinite(run.final_loss) and 0 <= run.accuracy <= 1 and run.curve[0][0] == 32


def test_the_reference_keeps_the_baselines_accuracy_from_fresh_seeds():
    check = nb04.check_large_batch(nb04.large_batch_optimizer, nb04.large_batch_lr, setup=SETUP, device="cpu")
    assert check.passed, check.message
    runs, base = check.value
    assert len(runs) == lb.learner_seeds("smoke") and all(r.batch == SETUP.large_batch for r in runs)
    assert {r.name for r in runs}.isdisjoint({b.name for b in base})  # fresh seeds, not the baseline's


@pytest.mark.parametrize("name, optimizer, schedule, says", [
    ("the baseline's learning rate", _sgd(0.01), lb.constant(0.01), "ended at"),
    ("the linear scaling rule, no warm-up", _sgd(0.08), lb.constant(0.08), "loss"),
    ("AdamW at a rate too high", lambda p: torch.optim.AdamW(p, lr=1e-2), lb.constant(1e-2), "loss"),
    ("a schedule of zeros", _sgd(0.08), lb.constant(0.0), "zero at every step"),
])
def test_known_wrong_recipes_are_refused_with_what_the_loss_did(name, optimizer, schedule, says):
    check = nb04.check_large_batch(optimizer, schedule, setup=SETUP, device="cpu")
    assert check.status == "failed", (name, check.message)
    assert "needed" in check.message and says in check.message, check.message


def test_a_diverged_run_is_named_as_such():
    check = nb04.check_large_batch(_sgd(50.0), lb.constant(50.0), setup=SETUP, device="cpu", seeds=1)
    assert check.status == "failed" and "inf or NaN" in check.message, check.message


def _not_written(params):
    raise NotImplementedError  # as the notebook hands it out


@pytest.mark.parametrize("optimizer, schedule, status, says", [
    (None, None, "not done", "Write my_optimizer"),
    (_not_written, lb.constant(0.01), "not done", "Write my_optimizer"),
    (_sgd(0.01), lambda step, steps: float("nan"), "failed", "at step 0"),
    (_sgd(0.01), lambda step, steps: -0.1, "failed", "finite number ≥ 0"),
    (_sgd(0.01), lambda step, steps: "0.01", "failed", "finite number ≥ 0"),
    (lambda params: "sgd", lb.constant(0.01), "failed", "not a torch.optim.Optimizer"),
    (lambda params: torch.optim.SGD(list(params)[:2], lr=0.01), lb.constant(0.01), "failed", "exactly the parameters"),
    ("sgd", lb.constant(0.01), "failed", "my_optimizer"),
])
def test_malformed_answers_say_what_to_write(optimizer, schedule, status, says):
    check = nb04.check_large_batch(optimizer, schedule, setup=SETUP, device="cpu")
    assert check.status == status and says in check.message, check.message
