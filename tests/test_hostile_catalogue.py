"""A learner who wants first place, against every judge of the final challenge: the ladder (harness.judge), the
learner's own training to the target (to_target.judge_training), the class judge (classroom.judge_class) and the
leaderboard. Each attempt is one case: it asserts that the judge refuses it with a reason that names what it did, or
ranks it only on figures the judge measured itself (so the attempt gains nothing), and never crashes.

An attempt that got through (ranked better than it should, crashed the judge, or was refused for a reason that does
not say what it did) is marked ``xfail(strict=True)`` with the hole in its reason: the assertion stays what the
judge promises. Out of scope, as the course's threat model says (06's "What the judging protects against, and what
it does not" and classroom's docstring): editing the harness in one's own copy, training before the clock on
images made at import in class mode, forging the image count or the checks inside a class child, and code in the
notebook's process patching the harness's internals. ``CATALOGUE`` lists every attempt by judge."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import data as _data
from helpers import env, leaderboard
from helpers.challenge import classroom, harness, sandbox, to_target
from helpers.challenge.accuracy import AccuracyTarget, heldout_accuracy, time_target
from helpers.challenge.harness import Submission, Verdict, judge
from helpers.challenge.rules import RuleBroken, Rules
from helpers.challenge.to_target import judge_training
from helpers.train import TrainConfig

from fakes import tiny_session
from test_judging import FAST, TINY, spot_at  # noqa: F401 - the tiny challenge, and the spot check's step fixed
from test_to_target import EASY, HARD, sgd

pytestmark = pytest.mark.slow  # judges the hostile catalogue in sandboxed child processes: `make test-slow`

ROOT = Path(__file__).resolve().parents[1]

#: Every attempt of the catalogue: (the judge it is made on, what it does).
CATALOGUE: list[tuple[str, str]] = []
JUDGES = ("ladder", "to-target", "class mode", "leaderboard")


def attempt(judge_name: str, what: str):
    """Register a test as one attempt of the catalogue."""
    assert judge_name in JUDGES

    def register(fn):
        CATALOGUE.append((judge_name, what))
        return fn

    return register


def _hole(why: str, raises=(AssertionError, pytest.fail.Exception)):
    """An attempt that got through: its test fails where it asserts what the judge promises (``raises``: what that
    failure raises; anything else is a failure of the test itself)."""
    return pytest.mark.xfail(strict=True, raises=raises, reason=f"GOT THROUGH: {why}")


@pytest.fixture(scope="module")
def session():
    """The tiny challenge, with a ceiling far above what a CPU reaches: MFU stays far under 100% (as on a GPU), so
    that every entry an honest run makes is one the leaderboard takes."""
    return tiny_session(TINY, matmul_tflops=50.0)


@pytest.fixture(scope="module")
def baseline(session):
    return judge(Submission("baseline", FAST), session)


@pytest.fixture(scope="module")
def honest(session, baseline):
    """The reference network trained as the ladder trains it: what every attempt that trains honestly must match."""
    return judge(Submission("honest", FAST), session, baseline=baseline)


@pytest.fixture
def evaluated(monkeypatch):
    """The networks the judges evaluate on the held-out images (the ladder's and to_target's), as they were."""
    seen: list[dict[str, torch.Tensor]] = []
    for module in (harness, to_target):
        real = module.heldout_accuracy

        def spy(net, *, _real=real, **kw):
            seen.append({k: v.detach().clone() for k, v in net.state_dict().items()})
            return _real(net, **kw)

        monkeypatch.setattr(module, "heldout_accuracy", spy)
    return seen


@pytest.fixture
def honest_weights(session, baseline, evaluated):
    """The weights an honest run leaves, as each judge evaluates them: {"ladder": ..., "to-target": ...}."""
    judge(Submission("honest", FAST), session, baseline=baseline)
    judge_training(sgd(), session, EASY, name="honest")
    weights = {"ladder": evaluated[0], "to-target": evaluated[1]}
    evaluated.clear()
    return weights


def _same_weights(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor], *, rtol: float = 0.0) -> bool:
    return got.keys() == want.keys() and all(torch.allclose(got[k], want[k], rtol=rtol, atol=0) for k in want)


# == the ladder: harness.judge ======================================================================================

class _Wrap(nn.Module):
    """The reference network inside a module of the learner's (its parameters under m.*: the check maps them)."""

    def __init__(self, m: nn.Module) -> None:
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)

    def head(self, y):
        """The layers after the convolutions, on their output ``y``."""
        return self.m.fc2(self.m.relu(self.m.fc1(torch.flatten(y, 1))))


def _in_training(net: nn.Module, x: torch.Tensor) -> bool:
    """A training step's forward, not the check's: the check's training-mode input requires its gradient."""
    return net.training and torch.is_grad_enabled() and not x.requires_grad


class LazyConv1Grads(_Wrap):
    """conv1's block runs without gradients in training (its backward, at full resolution, is skipped: conv1 never
    trains); its gradients are computed only when someone reads the network's parameters by name, as the spot check
    does at the step it draws, after that step's backward."""

    def __init__(self, m):
        super().__init__(m)
        self.__dict__["pending"] = []  # (input, gradient at conv1's block output) of this step's micro-batches

    def forward(self, x):
        if not _in_training(self, x):
            return self.m(x)
        m = self.m
        if m.conv2.weight.grad is None:  # the optimizer's zero_grad: a new step
            self.pending.clear()
        with torch.no_grad():
            h = m._block(m.conv1, x)
        h.requires_grad_(True)
        record = {"x": x.detach()}
        h.register_hook(lambda g: record.__setitem__("g", g))
        self.pending.append(record)
        return self.head(m._block(m.conv3, m._block(m.conv2, h)))

    def named_parameters(self, *args, **kwargs):
        done, self.__dict__["pending"] = [r for r in self.pending if "g" in r], []
        if done:
            conv = self.m.conv1
            with torch.enable_grad():
                grads = [torch.autograd.grad(self.m._block(conv, r["x"]), [conv.weight, conv.bias], r["g"])
                         for r in done]
            conv.weight.grad, conv.bias.grad = (sum(g[i] for g in grads) for i in (0, 1))
        return super().named_parameters(*args, **kwargs)


class NoBackward(_Wrap):
    """Trains nothing and runs no backward through the network: its training forward runs without gradients and
    hands back logits that are a leaf; every gradient is computed only when the parameters are read by name (the
    spot check, at the step it draws)."""

    def __init__(self, m):
        super().__init__(m)
        self.__dict__["pending"] = []

    def forward(self, x):
        if not _in_training(self, x):
            return self.m(x)
        if self.m.fc2.bias.grad is None:
            self.pending.clear()
        with torch.no_grad():
            out = self.m(x)
        out.requires_grad_(True)
        record = {"x": x.detach()}
        out.register_hook(lambda g: record.__setitem__("g", g))
        self.pending.append(record)
        return out

    def named_parameters(self, *args, **kwargs):
        done, self.__dict__["pending"] = [r for r in self.pending if "g" in r], []
        if done:
            params = list(self.m.parameters())
            with torch.enable_grad():
                grads = [torch.autograd.grad(self.m(r["x"]), params, r["g"]) for r in done]
            for i, p in enumerate(params):
                p.grad = sum(g[i] for g in grads)
        return super().named_parameters(*args, **kwargs)



#: Networks that skip work in training and compute what the spot check asks for only when it asks: (the network,
#: what it does, what it gained here).
LAZY = [
    (LazyConv1Grads, "conv1's backward skipped, its gradients computed only when the spot check reads them",
     "conv1 runs without gradients (it never trains); passed at 1.0-1.1x the honest img/s on this CPU (16x16, and "
     "32x32 at the course's smoke rules, where the accuracy target passed too): conv1's backward is cheap here, "
     "not measured at 224x224 on a GPU"),
    (NoBackward, "no backward at all, every gradient computed only when the spot check reads it",
     "a forward without gradients and no backward through the network trains nothing, yet passed at 1.4x (16x16) "
     "and 1.7x (32x32, the course's smoke rules, accuracy target passed) the honest img/s on this CPU (at full scale "
     "weights trained beforehand, swapped in at the first step, would pass the target)"),
]
CATALOGUE.extend(("ladder", what) for _, what, _ in LAZY)


@pytest.mark.parametrize("build", [pytest.param(b, id=b.__name__) for b, _, _ in LAZY])
def test_gradients_made_only_when_read(session, baseline, build):
    v = judge(Submission("lazy", FAST, build_model=build), session, baseline=baseline)
    assert v.refused and "gradients" in " ".join(v.reasons), v.reasons


class LabelsWhenNoGrad(_Wrap):
    """Answers with the held-out labels it regenerated (looked up by image content) whenever gradients are off and
    the batch is larger than the check's: its own forward would score 100% on the held-out set."""

    def __init__(self, m, rules):
        super().__init__(m)
        images, labels = _data.heldout_images(rules.heldout, task=rules.task)
        x = _data.gpu_resize_normalize(torch.from_numpy(images).permute(0, 3, 1, 2), rules.image_size)
        self.__dict__["answers"] = {hashlib.sha1(img.numpy().tobytes()).hexdigest(): int(y) for img, y in
                                    zip(x, labels)}

    def forward(self, x):
        if torch.is_grad_enabled() or x.shape[0] <= 16:
            return self.m(x)
        keys = [hashlib.sha1(img.detach().cpu().float().numpy().tobytes()).hexdigest() for img in x]
        labels = torch.tensor([self.answers.get(k, 0) for k in keys], device=x.device)
        return 100 * F.one_hot(labels, 10).float()


@attempt("ladder", "held-out labels answered by image content whenever gradients are off")
def test_held_out_labels_answered_without_gradients(session, baseline, honest_weights, evaluated):
    rules = session.rules
    v = judge(Submission("labels", FAST, build_model=lambda m: LabelsWhenNoGrad(m, rules)), session,
              baseline=baseline)
    assert not v.refused, v.reasons
    own = LabelsWhenNoGrad(harness.start_model(rules), rules)
    assert heldout_accuracy(own, image_size=rules.image_size, n=rules.heldout, task=rules.task) == 1.0  # if asked
    # the judge never asked its forward: the reference network's forward on the weights an honest run trains
    (judged,) = evaluated
    assert _same_weights(judged, honest_weights["ladder"]) and v.accuracy < 0.9


class CheapUnlessInputGrad(_Wrap):
    """The reference network where the input requires its gradient (the check's batch); a 1x1 conv3 otherwise."""

    def __init__(self, m):
        super().__init__(m)
        self.cheap = nn.Conv2d(128, 256, 1)

    def forward(self, x):
        if not _in_training(self, x):
            return self.m(x)
        m = self.m
        return self.head(m._block(self.cheap, m._block(m.conv2, m._block(m.conv1, x))))


class OtherUnderAutocast(_Wrap):
    """Honest in fp32 (the check runs with autocast off); its logits scaled under autocast (the training's bf16)."""

    def forward(self, x):
        y = self.m(x)
        return 1.2 * y if torch.is_autocast_enabled(x.device.type) else y


class DetachesAfterTwoSteps(_Wrap):
    """Honest for its first two training calls, then conv1 and conv2 run without gradients (a cheaper backward)."""

    def __init__(self, m):
        super().__init__(m)
        self.calls = 0

    def forward(self, x):
        if not _in_training(self, x):
            return self.m(x)
        self.calls += 1
        m = self.m
        h = m._block(m.conv2, m._block(m.conv1, x))
        return self.head(m._block(m.conv3, h.detach() if self.calls > 2 else h))


class NaNInAMappedWeight(_Wrap):
    """Computes conv3 with a copy of its own and, once training starts, makes the conv3 weight the judge reads NaN,
    so that the spot check has nothing finite to compare."""

    def __init__(self, m):
        super().__init__(m)
        self.__dict__["conv3"] = copy.deepcopy(m.conv3)  # not a submodule: never mapped

    def forward(self, x):
        if not _in_training(self, x):
            return self.m(x)
        with torch.no_grad():
            self.m.conv3.weight.fill_(math.nan)
        m = self.m
        return self.head(m._block(self.conv3, m._block(m.conv2, m._block(m.conv1, x))))


@attempt("ladder", "NaN planted in a weight the forward no longer reads, to blind the spot check")
def test_nan_planted_in_a_mapped_weight(session, baseline):
    v = judge(Submission("nan", FAST, build_model=NaNInAMappedWeight), session, baseline=baseline)
    ok, why = v.checks["accuracy_not_worse"]
    assert not ok and "the weights had diverged" in why, v.reasons


@attempt("ladder", "a NaN parameter of its own that nothing reads")
def test_nan_in_a_parameter_nothing_reads(session, baseline, honest_weights, evaluated):
    def build(m):
        m.spare = nn.Parameter(torch.full((3,), math.nan))
        return m

    v = judge(Submission("spare nan", FAST, build_model=build), session, baseline=baseline)
    assert not v.refused, v.reasons
    assert _same_weights(evaluated[0], honest_weights["ladder"])  # the reference's weights only, trained as honestly


class HidesConv3(_Wrap):
    """Leaves conv3 out of its parameters: the optimizer (and the judge) never see it; conv3 never trains."""

    def named_parameters(self, *args, **kwargs):
        return ((n, p) for n, p in super().named_parameters(*args, **kwargs) if "conv3" not in n)


@attempt("ladder", "named_parameters() hides conv3 (a frozen layer the optimizer never sees)")
def test_named_parameters_hide_a_layer(session, baseline):
    v = judge(Submission("hides", FAST, build_model=HidesConv3), session, baseline=baseline)
    # the judge (its checks, the optimizer) reads nn.Module's own parameters, never the override: conv3 is found and
    # trained, and the run is judged as the honest network it is: the hiding gains nothing
    assert not v.refused and v.images_seen == TINY.images, v.reasons


@attempt("ladder", "one parameter registered under two names (an alias)")
def test_a_parameter_under_two_names(session, baseline, honest_weights, evaluated):
    def build(m):
        m.again = m.conv1  # the same module twice: its weights once in the optimizer, once in the mapping
        return m

    v = judge(Submission("alias", FAST, build_model=build), session, baseline=baseline)
    assert not v.refused and _same_weights(evaluated[0], honest_weights["ladder"]), v.reasons


class Float64Logits(_Wrap):
    def forward(self, x):
        return self.m(x).double()


@attempt("ladder", "logits returned in float64")
def test_logits_in_another_dtype(session, baseline, honest_weights, evaluated):
    v = judge(Submission("f64", FAST, build_model=Float64Logits), session, baseline=baseline)
    # the same function (its loss in float64): the weights an honest run trains, to float32's rounding
    # (1e-3: an AVX2-only CPU's kernels round the two losses' gradients apart by more than 1e-4 over four steps)
    assert not v.refused and _same_weights(evaluated[0], honest_weights["ladder"], rtol=1e-3), v.reasons


class ElevenLogits(_Wrap):
    def forward(self, x):
        y = self.m(x)
        return torch.cat([y, y[:, :1]], 1)


@attempt("ladder", "logits of another shape (an eleventh class)")
def test_logits_of_another_shape(session, baseline):
    v = judge(Submission("eleven", FAST, build_model=ElevenLogits), session, baseline=baseline)
    assert v.stopped == "before training" and "returned (16, 11) where the reference network returns (16, 10)" in \
        v.reasons[0], v.reasons


class HonestCopies(_Wrap):
    """Every deep copy of it (where a check would run) has the plain forward; the network that trains adds noise to
    its logits."""

    def forward(self, x):
        y = self.m(x)
        return y + 0.1 * torch.randn_like(y) if _in_training(self, x) else y

    def __deepcopy__(self, memo):
        return _Wrap(copy.deepcopy(self.m, memo))  # the same names, the plain forward


class NoGradInside(_Wrap):
    """conv1 and conv2 under torch.no_grad() inside the forward, in training."""

    def forward(self, x):
        if not _in_training(self, x):
            return self.m(x)
        m = self.m
        with torch.no_grad():
            h = m._block(m.conv2, m._block(m.conv1, x))
        return self.head(m._block(m.conv3, h))


#: Networks honest wherever a check before training looks, another function where the training runs: (the
#: network, what it does, the training's precision, the step the spot check draws (None: as the judge draws it),
#: what its refusal must say). The spot check compares the step's own logits and gradients, whichever step it draws.
CAUGHT_IN_TRAINING = [
    (CheapUnlessInputGrad, "honest only where the input requires its gradient (the check's batch)", "fp32", None,
     "the logits the training computed differ"),
    (OtherUnderAutocast, "another function only under autocast (the check runs in fp32)", "bf16", None,
     "bf16 allows"),
    (DetachesAfterTwoSteps, "conv1 and conv2 detached after two honest training steps", "fp32", 3,
     "none: no gradient at all"),
    (HonestCopies, "__deepcopy__ hands the checks an honest copy while the live network cheats", "fp32", None,
     "the logits the training computed differ"),
    (NoGradInside, "torch.no_grad() inside the training forward", "fp32", None, "conv1.weight (none)"),
]
CATALOGUE.extend(("ladder", what) for _, what, _, _, _ in CAUGHT_IN_TRAINING)
_NO_BF16 = pytest.mark.skipif(env.resolve_dtype("bf16", torch.device(env.device())) != "bf16",
                              reason="this device trains bf16 as fp32: no autocast to hide behind")


@pytest.mark.parametrize("build, dtype, step, why", [
    pytest.param(b, d, st, why, id=b.__name__, marks=[_NO_BF16] if d == "bf16" else [])
    for b, _, d, st, why in CAUGHT_IN_TRAINING])
def test_honest_where_checked_is_refused_in_training(session, baseline, spot_at, build, dtype, step, why):
    if step is not None:
        spot_at(step)  # the run's last step (one warm-up step, three measured): drawn after it ran, when judging
    v = judge(Submission("sly", dataclasses.replace(FAST, dtype=dtype), build_model=build), session,
              baseline=baseline)
    assert v.stopped.startswith("in training, at step") and v.train is None, (v.stopped, v.reasons)
    assert v.reasons[0].startswith("same_function: the spot check at training step") and why in v.reasons[0], v.reasons


@attempt("ladder", "build_model turns gradients off for the whole process")
def test_gradients_turned_off_for_the_process(session, baseline):
    try:
        v = judge(Submission("grad off", FAST, build_model=lambda m: (torch.set_grad_enabled(False), m)[1]), session,
                  baseline=baseline)
    finally:
        torch.set_grad_enabled(True)
    # grad mode is put back when build_model returns: the run is judged as the honest network it is, nothing gained
    assert torch.is_grad_enabled() and not v.refused, v.reasons


@attempt("ladder", "build_model makes 'meta' the default device (the judge's tensors then hold no data)")
def test_default_device_changed_by_build_model(session, baseline):
    try:
        v = judge(Submission("meta", FAST, build_model=lambda m: (torch.set_default_device("meta"), m)[1]), session,
                  baseline=baseline)
    finally:
        torch.set_default_device(None)
    # put back when build_model returns: judged as the honest network it is, and the judge did not crash
    assert not v.refused and torch.get_default_device().type == "cpu", v.reasons


def _exits(m):
    raise SystemExit("the build is done")


class ExitsAtStepTwo(_Wrap):
    def __init__(self, m):
        super().__init__(m)
        self.calls = 0

    def forward(self, x):
        if _in_training(self, x):
            self.calls += 1
            if self.calls == 2:
                raise SystemExit(2)
        return self.m(x)


EXITS = [  # (the network, what it does, why it got through)
    (_exits, "build_model raises SystemExit",
     "_build catches Exception, and SystemExit is a BaseException (to_target's timed call catches it)"),
    (ExitsAtStepTwo, "the training forward raises SystemExit",
     "a training step's SystemExit passes its `except Exception`; the docstring says whatever a submission raises in "
     "training ends in a refused verdict"),
]
CATALOGUE.extend(("ladder", what) for _, what, _ in EXITS)


@pytest.mark.parametrize("build", [pytest.param(b, id=what) for b, what, _ in EXITS])
def test_system_exit_from_the_submission(session, baseline, build):
    v = judge(Submission("exits", FAST, build_model=build), session, baseline=baseline)
    assert v.refused and "SystemExit" in v.reasons[0]


@attempt("ladder", "fit=False with fewer steps than the rules' images")
def test_fewer_images_with_fit_off(session, baseline):
    cfg = dataclasses.replace(session.rules.fit(FAST), warmup_steps=0, steps=2)
    v = judge(Submission("short", cfg, fit=False), session, baseline=baseline)
    assert v.checks["images_seen"] == (False, "it trained on 32 images; every run trains on 64"), v.reasons


@attempt("ladder", "judged under rules of its own: a smaller challenge (8x8 images), ranked beside the real one")
def test_rules_of_its_own(session, honest, tmp_path):
    small = Rules(images=64, image_size=8, dataset_size=64, heldout=64, size="mine")
    cfg = TrainConfig(batch_size=16, warmup_steps=1, data="gpu", image_size=8, dataset_size=64)
    v = judge(Submission("small images", cfg), tiny_session(small, matmul_tflops=50.0))
    db = tmp_path / "board.sqlite"
    leaderboard.add(honest.entry(path=db), path=db)
    added = leaderboard.add(v.entry(path=db), path=db)
    # ranked only among runs of its own rules, on a board whose heading says so; the honest run's board is its own
    assert (added.rank, added.of) == (1, 1) and added.challenge == small.challenge() != session.rules.challenge()
    assert "rules of its own ('mine'): 64 images at 8²" in str(added)
    boards = {b.challenge: list(t["name"]) for b, t in leaderboard.tables(path=db).items()}
    assert boards == {session.rules.challenge(): ["honest"], small.challenge(): ["small images"]}


class Sleeps(_Wrap):
    def forward(self, x):
        if _in_training(self, x):
            time.sleep(0.05)
        return self.m(x)


@attempt("ladder", "a slowed run from another session passed as the baseline")
def test_a_slowed_baseline_from_another_session(session, tmp_path):
    other = tiny_session(TINY, matmul_tflops=0.2)
    slow = judge(Submission("baseline", FAST, build_model=Sleeps), other)
    with pytest.raises(RuleBroken):
        judge(Submission("mine", FAST), session, baseline=slow)


# == the learner's own training: to_target.judge_training ==========================================================

@pytest.fixture(scope="module")
def honest_run(session):
    return judge_training(sgd(), session, EASY, name="honest")


@attempt("to-target", "returns a compiled wrapper around another network")
def test_returns_a_compiled_wrapper_of_another_network(session):
    def train(model, data, device):
        other = copy.deepcopy(model)
        return torch.compile(sgd()(other, data, device), backend="eager")

    v = judge_training(train, session, EASY)
    assert not v.reached and "that is not the network it was given" in v.checks["same_function"][1]


class FakeCompiled(nn.Module):
    """Looks like torch.compile's wrapper (``_orig_mod``) and answers every batch with class 0 itself."""

    def __init__(self, inner):
        super().__init__()
        self._orig_mod = inner

    def forward(self, x):
        return F.one_hot(torch.zeros(x.shape[0], dtype=torch.long), 10).float()


@attempt("to-target", "returns a fake compile wrapper whose own forward lies")
def test_a_fake_compile_wrapper(session, honest_weights, evaluated):
    v = judge_training(lambda m, d, dev: FakeCompiled(sgd()(m, d, dev)), session, EASY)
    # judged on the network inside, by the reference network's forward, as the honest run
    assert v.reached and _same_weights(evaluated[0], honest_weights["to-target"]), v.reasons


@attempt("to-target", "a worker thread started in the rehearsal keeps training after the timed call returns")
def test_a_thread_from_the_rehearsal_left_running(session):
    go, stop, calls, timed = threading.Event(), threading.Event(), [], {}

    def worker():  # started outside the clock; trains the timed run's network once that call has returned
        go.wait(60)
        while not stop.is_set():
            with torch.no_grad():
                timed["model"].fc2.bias.add_(1e-3)
            time.sleep(0.005)

    def train(model, data, device):
        calls.append(1)
        if len(calls) == 1:  # the rehearsal: outside the clock
            threading.Thread(target=worker, name="rehearsal worker", daemon=True).start()
        out = sgd()(model, data, device)
        if len(calls) == 2:
            timed["model"] = model
            go.set()
        return out

    try:
        v = judge_training(train, session, EASY)
    finally:
        go.set()
        stop.set()
    assert not v.reached and "the network changed after the function returned (fc2.bias differs" in \
        v.checks["same_function"][1], v.reasons


@pytest.fixture
def left_behind():
    """Processes an attempt leaves behind, ended when the test is over (pids, or Popen objects)."""
    procs: list = []
    yield procs
    for p in procs:
        if isinstance(p, subprocess.Popen):
            p.kill()
            p.wait()
        else:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


@attempt("to-target", "a Python process started with subprocess, left running")
def test_a_subprocess_left_running(session, monkeypatch, left_behind):
    monkeypatch.setattr(to_target, "LEFT_RUNNING_GRACE_S", 0.3)
    calls = []

    def train(model, data, device):
        calls.append(1)
        if len(calls) == 2:  # the timed call (the first is the rehearsal)
            left_behind.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]))
        return sgd()(model, data, device)

    v = judge_training(train, session, EASY)
    assert not v.reached and f"process {left_behind[0].pid}" in v.checks["images_seen"][1], v.reasons


def _double_fork(seconds: float) -> int:
    """A grandchild in a session of its own (setsid), its parent gone: returns its pid."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            time.sleep(seconds)
            os._exit(0)
        os.write(w, str(grandchild).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(w)
    found = int(os.read(r, 32))
    os.close(r)
    return found


@attempt("to-target", "a daemon (double fork, setsid) left running after the timed call")
def test_a_daemon_left_running(session, left_behind):
    def train(model, data, device):
        out = sgd()(model, data, device)
        if data.images_handed_out >= 256 and not left_behind:  # the timed call: the rehearsal stops sooner
            left_behind.append(_double_fork(5))
        return out

    v = judge_training(train, session, EASY)
    assert not v.reached and "work still running" in v.checks["images_seen"][1], v.reasons


@attempt("to-target", "work done by a finalizer once the judge lets go of the data")
def test_work_in_a_finalizer(session, honest_weights, evaluated):
    late = []

    def train(model, data, device):
        out = sgd()(model, data, device)

        def more_training():  # runs when the judge drops the data: after the clock, after the evaluation
            with torch.no_grad():
                model.fc2.bias.add_(1.0)
            late.append(True)

        weakref.finalize(data, more_training)
        return out

    v = judge_training(train, session, EASY)
    assert late and v.reached and _same_weights(evaluated[0], honest_weights["to-target"])


@attempt("to-target", "floods stdout with terminal escapes during the timed call")
def test_stdout_flood(session, capsys):
    spent = []

    def train(model, data, device):
        t = time.perf_counter()
        out = sgd()(model, data, device)
        for _ in range(20_000):
            print("\x1b[2J\x1b[H\x1b]0;first place\x07", end="")
        spent.append(time.perf_counter() - t)
        return out

    v = judge_training(train, session, EASY)
    capsys.readouterr()
    assert v.reached and v.train_s >= spent[-1]  # the flood is on the clock


@attempt("to-target", "build_model raises SystemExit before the training is judged")
def test_system_exit_from_build_model_to_target(session):
    v = judge_training(sgd(), session, EASY, build_model=_exits)
    assert v.stopped == "before training" and "SystemExit" in v.reasons[0]


class _Quit(BaseException):
    """Neither an Exception nor SystemExit nor KeyboardInterrupt."""


class QuitsWhenChecked(_Wrap):
    def __init__(self, m):
        super().__init__(m)
        self.armed = False

    def forward(self, x):
        if self.armed and x.requires_grad:
            raise _Quit("not checked today")
        return self.m(x)


@attempt("to-target", "the returned network raises a BaseException in the judge's end check")
def test_base_exception_in_the_end_check(session):
    def train(model, data, device):
        out = sgd()(model, data, device)
        model.armed = True
        return out

    v = judge_training(train, session, EASY, build_model=QuitsWhenChecked)
    assert not v.reached and "_Quit" in " ".join(v.reasons)


@attempt("to-target", "trains on the held-out images, regenerated inside the timed call")
def test_trains_on_the_held_out_images(session):
    rules = session.rules

    def memorises(stream):
        def train(model, data, device):
            for _ in data.on_device(device, batch_size=16):
                break
            images, labels = _data.heldout_images(rules.heldout, seed=0, task=rules.task, stream=stream)
            x = _data.gpu_resize_normalize(torch.from_numpy(images).permute(0, 3, 1, 2).to(device), data.image_size)
            y = torch.as_tensor(labels).to(device)
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            for _ in range(30):
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            return model
        return train

    # the public held-out draw (what any code can regenerate), and for comparison as many images of another draw
    public = judge_training(memorises(_data.HELDOUT_STREAM), session, EASY, name="the public held-out images")
    other = judge_training(memorises(987_654_321), session, EASY, name="as many other images")
    # judged on images drawn after it returned: learning the public draw gains no more than learning any other
    # images does (64 held-out images: each accuracy's standard error is about 6 points)
    assert public.accuracy <= other.accuracy + 0.25, (public.accuracy, other.accuracy)


@attempt("to-target", "a collate_fn that repeats the labels, to be counted a hundred times")
def test_labels_repeated_by_the_collate_fn(session):
    def train(model, data, device):
        loader = data.loader(batch_size=16, transform=_data.reference_transform(data.image_size),
                             collate_fn=lambda items: (torch.stack([x for x, _ in items]),
                                                       torch.tensor([y for _, y in items]).repeat(100)))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in loader:
            loss = F.cross_entropy(model(x), y[: x.shape[0]])
            opt.zero_grad()
            loss.backward()
            opt.step()
        return model

    v = judge_training(train, session, EASY)
    assert v.images == TINY.dataset_size, v.images


def _one_batch(model, data, device):
    """Takes one batch, trains nothing, returns at once."""
    for _ in data.on_device(device, batch_size=16):
        break
    return model


@attempt("to-target", "judged against a target of its own making (0%)")
def test_a_target_of_its_own(session, tmp_path):
    db = tmp_path / "board.sqlite"
    # what the honest run reaches here, judged on 64 held-out images drawn afresh: one of them right
    course = AccuracyTarget("course", (0.01, 0.01), device="test", date="today")
    honest = judge_training(sgd(epochs=2), session, course, name="honest")
    leaderboard.add(honest.entry(session=session, path=db), path=db)
    mine = judge_training(_one_batch, session, AccuracyTarget("mine", (0.0, 0.0), device="mine", date="today"),
                          name="zero target")
    added = leaderboard.add(mine.entry(session=session, path=db), path=db)
    # ranked only beside runs judged to the same target: a board of its own, whose heading names its 0% target
    assert (added.rank, added.of) == (1, 1) and "to 0% on 64 held-out" in added.challenge, added
    boards = {b.challenge: list(t["name"]) for b, t in leaderboard.tables(path=db, kind="to_target").items()}
    assert boards[session.rules.challenge(honest.target)] == ["honest"] and len(boards) == 2


@attempt("to-target", "a run that missed the target, its accuracy and checks edited before its entry")
def test_missed_run_with_accuracy_and_checks_edited(session, tmp_path):
    missed = judge_training(_one_batch, session, HARD, name="missed")
    assert not missed.reached
    forged = dataclasses.replace(missed, accuracy=1.0, checks={k: (True, "") for k in missed.checks})
    db = tmp_path / "board.sqlite"
    with pytest.raises(leaderboard.EntryRefused, match="its time_to_target_s, accuracy, checks no longer match what "
                                                       "judge_training measured"):
        leaderboard.add(forged.entry(session=session, path=db), path=db)


@attempt("to-target", "one batch and back, at the course's smoke rules and target")
def test_one_batch_at_the_smoke_rules():
    rules = Rules.at_scale("smoke")
    v = judge_training(_one_batch, tiny_session(rules), time_target(rules), name="one batch")
    assert not v.reached, (v.accuracy, v.target)


class CopyRefusedWhenArmed(_Wrap):
    def __init__(self, m):
        super().__init__(m)
        self.__dict__["armed"] = False

    def __deepcopy__(self, memo):
        if self.armed:
            raise RuntimeError("no copies during training")
        return CopyRefusedWhenArmed(copy.deepcopy(self.m, memo))


@attempt("to-target", "a network that cannot be copied once training starts (to dodge the spot check)")
def test_no_copies_during_training(session):
    def train(model, data, device):
        model.__dict__["armed"] = True
        return sgd()(model, data, device)

    v = judge_training(train, session, EASY, build_model=CopyRefusedWhenArmed)
    assert not v.reached and "could not copy the network to check it (RuntimeError: no copies during training)" in \
        v.checks["same_function"][1], v.reasons


@attempt("to-target", "returns the network with NaN weights")
def test_returns_nan_weights(session):
    def train(model, data, device):
        out = sgd()(model, data, device)
        with torch.no_grad():
            model.fc2.weight.fill_(math.nan)
        return out

    v = judge_training(train, session, EASY)
    assert not v.reached and v.checks["same_function"][1].startswith("the network returned: it differs") and \
        "by up to inf" in v.checks["same_function"][1], v.reasons


@attempt("to-target", "makes 'meta' the default device before returning")
def test_default_device_changed_before_returning(session):
    def train(model, data, device):
        out = sgd()(model, data, device)
        torch.set_default_device("meta")
        return out

    try:
        v = judge_training(train, session, EASY)
    finally:
        torch.set_default_device(None)
    # put back when the function returns: the run is judged on its trained weights, as it would have been
    assert v.reached and torch.get_default_device().type == "cpu", v.reasons


# == the class judge: classroom.judge_class =========================================================================

# the classic loop's recipe for one epoch (what the target measures): it reaches the target, at smoke scale too
_HONEST = "from helpers.challenge.recipes import classic_training\ntrain = classic_training(batch_size=32, lr=0.01, " \
          "images=1024)\n"
_FORGED_FIGURES = {"time_to_target_s": 1e-4, "train_s": 1e-4, "img_per_s": 2.56e6, "accuracy": 1.0,
                   "target_accuracy": 0.0, "mfu_pct": 99.0}

#: The class's files: (what the file does, the source, what the judge must say: "passed" or a phrase of the reason).
CLASS: dict[str, tuple[str, str, str]] = {
    "forges_result.py": ("rewrites the verdict its process writes (0.1 ms, 100%) after training honestly",
                         textwrap.dedent(f"""
        import sys
        harness = sys.modules["__main__"]  # the child runs as python -m helpers.challenge.class_children
        real = harness._write_atomic

        def forged(path, data):
            if data.get("figures"):
                figures = {{**data["figures"], **{_FORGED_FIGURES!r}}}
                data = {{**data, "passed": True, "reasons": [], "figures": figures}}
            real(path, data)

        harness._write_atomic = forged
        """) + _HONEST, "passed"),
    "nested_result.py": ("writes its verdict as JSON nested 200,000 deep", textwrap.dedent("""
        import sys
        from pathlib import Path
        sys.modules["__main__"]._write_atomic = lambda path, data: Path(path).write_text("[" * 200_000 + "]" * 200_000)
        """) + _HONEST, "decoding a JSON array"),
    "odd_name.py": ("a NAME of 10,000 characters with terminal escapes and a NUL, printed too", textwrap.dedent("""
        NAME = "\\x1b[2J\\x1b]0;owned\\x07" + "A" * 10_000 + "\\x00"
        print(NAME)
        """) + _HONEST, "passed"),
    "gate_first.py": ("speaks the gate's protocol itself at import: ready, then zero weights at once",
                      textwrap.dedent("""
        import os, sys
        from helpers.challenge.isolation import reference_shapes
        from helpers.challenge.rules import Rules
        r, w = (int(fd) for fd in sys.argv[sys.argv.index("--gate") + 1].split(","))
        os.write(w, b"R")
        assert os.read(r, 1) == b"G"
        n = 4 * sum(s.numel() for _, s in reference_shapes(Rules.at_scale().image_size))
        os.write(w, b"D" + n.to_bytes(8, "little"))
        zeros = bytes(n)
        while zeros:
            zeros = zeros[os.write(w, zeros):]
        os._exit(0)
        """), "its process ended without a readable verdict"),
    "gate_junk.py": ("writes a byte of its own to the judge's pipe before the harness does", textwrap.dedent("""
        import os, sys
        os.write(int(sys.argv[sys.argv.index("--gate") + 1].split(",")[1]), b"Z")
        """) + _HONEST, "what the harness never writes"),
    "gate_closed.py": ("closes both ends of the gate at import", textwrap.dedent("""
        import os, sys
        for fd in sys.argv[sys.argv.index("--gate") + 1].split(","):
            os.close(int(fd))
        """) + _HONEST, "images_seen: the run raised OSError: [Errno 9] Bad file descriptor"),
    "daemon_in_train.py": ("leaves a daemon (double fork, setsid) from inside the timed call", textwrap.dedent("""
        import os, time
        from helpers.challenge.recipes import classic_training
        honest = classic_training(batch_size=16, lr=0.01, images=256)

        def train(model, data, device):
            out = honest(model, data, device)
            pid = os.fork()
            if pid == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(120)
                os._exit(0)
            os.waitpid(pid, 0)
            return out
        """), "left 1 process running after its own ended"),
    "build_not_callable.py": ("build_model is a number", "build_model = 42\n" + _HONEST, "build_model is a int"),
    "escapes_then_exits.py": ("prints terminal escapes and exits at import with an escape-laden message",
                              textwrap.dedent("""
        print("\\x1b[2J\\x1b]0;owned\\x07\\x1b[31m", flush=True)
        raise SystemExit("\\x1b[31mjudge me\\x1b[0m")
        """), "the file did not import: SystemExit: [31mjudge me[0m"),
    "fills_folder.py": ("fills its working folder (100 MB) and deletes its own file, then trains", textwrap.dedent("""
        from pathlib import Path
        with open("ballast.bin", "wb") as f:
            for _ in range(100):
                f.write(bytes(1 << 20))
        Path(__file__).unlink()
        """) + _HONEST, "passed"),
}
if sandbox.landlock_abi():  # without Landlock, reading and writing these is the documented fallback's gap
    CLASS.update({
        "reads_classmate.py": ("reads the other submissions (to copy the quickest) from the folders it may not read",
                               textwrap.dedent("""
            import sys
            from pathlib import Path
            stolen = {f.name: f.read_text() for i, a in enumerate(sys.argv) if a == "--hide"
                      and Path(sys.argv[i + 1]).is_dir() for f in Path(sys.argv[i + 1]).glob("*.py")}
            """) + _HONEST, "the file did not import: PermissionError"),
        "poisons_cache.py": ("overwrites the judge's data cache (the start weights every later run loads)",
                             textwrap.dedent("""
            from helpers import data
            for f in data.cache_dir().rglob("*"):
                if f.is_file():
                    f.write_bytes(b"poison")
            """) + _HONEST, "the file did not import: PermissionError"),
    })
CLASS["kills_own_group.py"] = ("kills its own process group (SIGKILL) at import, its verdict never written",
                                textwrap.dedent("""
    import os, signal
    os.killpg(0, signal.SIGKILL)
    """), "its process ended without a verdict (killed by signal 9 (SIGKILL))")
if sandbox.landlock_abi() >= 6:  # elsewhere it could stop this test's own process: it probes first all the same
    CLASS["stops_judge.py"] = ("stops the class judge's whole process group (SIGSTOP)", textwrap.dedent("""
        import os, signal
        group = os.getpgid(os.getppid())
        os.kill(os.getppid(), 0)  # PermissionError where the judge cannot be signalled
        raise RuntimeError(f"it could signal the class judge: not confined (group {group} left alone)")
        os.killpg(group, signal.SIGSTOP)
        """), "the file did not import: PermissionError: [Errno 1] Operation not permitted")

_CLASS_HOLES: dict[str, str] = {}  # every class attempt is refused for what it did
CATALOGUE.extend(("class mode", what) for what, _, _ in CLASS.values())


def _class_ceilings():
    from test_classroom import _ceilings

    return _ceilings()


@pytest.fixture(scope="module")
def judged_class(tmp_path_factory, warm_start_cache):
    """Every class-mode attempt, and the honest classic loop beside them, judged in one session at smoke scale into a
    leaderboard of their own."""
    folder = tmp_path_factory.mktemp("hostile_class")
    for name, (_, text, _) in CLASS.items():
        (folder / name).write_text(text)
    (folder / "classic_loop.py").write_text((ROOT / "examples" / "class" / "classic_loop.py").read_text())
    originals = {p.name: p.read_bytes() for p in folder.glob("*.py")}
    lines = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HELPERS_SCALE", "smoke")
        mp.setenv("HELPERS_RESULTS", str(folder.parent / "results"))
        mp.setenv("HELPERS_CACHE", str(warm_start_cache(folder.parent / "cache")))
        # a board of this class's own (the default path is read once per process: an earlier test's class is on it)
        board = folder.parent / "results" / "class-board.sqlite"
        res = classroom.judge_class(folder, out_dir=folder.parent / "judged", time_limit_s=240,
                                    leaderboard_path=board, ceilings=_class_ceilings(), say=lines.append)
        cache = sorted((p.relative_to(folder.parent / "cache"), p.read_bytes()) for p in
                       (folder.parent / "cache").rglob("*") if p.is_file())
    return res, board, originals, cache


def _judged(res, file):
    return next(j for j in res.judged if j.file == file)


@pytest.mark.parametrize("file", [pytest.param(f, marks=_hole(_CLASS_HOLES[f])) if f in _CLASS_HOLES else f
                                  for f in CLASS])
def test_each_class_attempt_is_refused_or_ranked_on_the_judges_figures(judged_class, file):
    res, _, _, _ = judged_class
    j = _judged(res, file)
    want = CLASS[file][2]
    if want == "passed":
        assert j.passed and j.reasons == (), j.reasons
    else:
        assert not j.passed and any(want in r for r in j.reasons), j.reasons
    assert all(c.isprintable() for r in j.reasons for c in r) and all(c.isprintable() for c in j.name)
    assert len(j.name) <= 80


def test_the_class_ranks_every_run_on_the_judges_own_clock_and_accuracy(judged_class):
    res, board, originals, cache = judged_class
    assert {j.file for j in res.judged} == set(CLASS) | {"classic_loop.py"}  # every file judged: the judge never fell
    for j in res.judged:
        if j.passed:  # the judge's clock and evaluation, never the process's own figures
            assert j.figures["train_s"] > 1e-2 and j.figures["train_s"] != _FORGED_FIGURES["train_s"]
            assert j.figures["accuracy"] < 1.0 and j.figures["target_accuracy"] == res.target > 0.5
    rows = leaderboard.entries(path=board, kind="to_target")
    assert sorted(rows["name"]) == sorted(j.name for j in res.judged if j.passed)
    assert all(t > 1e-2 for t in rows["time_to_target_s"])
    assert "\x1b" not in res.markdown() and "\x00" not in Path(res.out_dir, "class.json").read_text()
    # the file that deleted itself is judged by the file it handed in: its configuration is that file's hash
    fills = _judged(res, "fills_folder.py")
    want = leaderboard.configuration_of({"file": "fills_folder.py",
                                         "sha256": hashlib.sha256(originals["fills_folder.py"]).hexdigest()})
    assert fills.configuration == want
    assert all(b"poison" != data for _, data in cache)  # the data cache is the judge's


def test_the_class_judge_leaves_no_process_of_a_submission_behind(judged_class):
    res, _, _, _ = judged_class
    daemon = _judged(res, "daemon_in_train.py")
    pid = int(daemon.reasons[0].split("(pid ")[1].split(",")[0].split(")")[0])
    assert not Path(f"/proc/{pid}").exists() or "State:\tZ" in Path(f"/proc/{pid}/status").read_text()


# == the leaderboard and the verdicts it takes ======================================================================

def _forged(value):
    """A value of the same kind, chosen to rank better (or just to differ)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, float):
        return value * 10 if math.isfinite(value) else 1.0
    if isinstance(value, int):
        return value * 2
    if isinstance(value, str):
        return value + " (forged)"
    if value is None:
        return 99.0
    if isinstance(value, dict):
        return {**{k: (True, "forged") for k in value}, "extra": (True, "forged")}
    if isinstance(value, TrainConfig):
        return dataclasses.replace(value, batch_size=value.batch_size * 2)
    return None


@attempt("leaderboard", "any field of a ladder verdict replaced (dataclasses.replace), one at a time")
@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Verdict)])
def test_every_field_of_a_verdict_replaced(honest, baseline, field, tmp_path):
    db = tmp_path / "board.sqlite"
    want = honest.entry(path=db)
    value = baseline.token if field == "token" else _forged(getattr(honest, field))
    edited = dataclasses.replace(honest, **{field: value})
    try:
        got = edited.entry(path=db)
    except leaderboard.EntryRefused as e:
        assert "no longer match what judge measured" in str(e) or "judge made no such verdict" in str(e), e
        return
    # taken: then only on what judge recorded (the name is the learner's to choose)
    assert (got.figures, got.checks, got.configuration) == (want.figures, want.checks, want.configuration), field


@attempt("leaderboard", "a verdict built from scratch with the Verdict constructor")
def test_a_verdict_built_from_scratch(honest, tmp_path):
    forged = Verdict(**{**{f.name: getattr(honest, f.name) for f in dataclasses.fields(Verdict)},
                        "img_per_s": 10 * honest.img_per_s, "token": ""})
    with pytest.raises(leaderboard.EntryRefused, match="judge made no such verdict in this process"):
        forged.entry(path=tmp_path / "board.sqlite")


@attempt("leaderboard", "a verdict built from scratch carrying a real verdict's token")
def test_a_verdict_with_a_stolen_token(honest, baseline, tmp_path):
    forged = dataclasses.replace(baseline, name="first place", img_per_s=10 * honest.img_per_s, token=honest.token)
    with pytest.raises(leaderboard.EntryRefused, match="no longer match what judge measured"):
        forged.entry(path=tmp_path / "board.sqlite")


@attempt("leaderboard", "a refused verdict with every check replaced by a pass")
def test_a_refused_verdict_with_its_checks_passed(session, baseline, tmp_path):
    refused = judge(Submission("refused", FAST, build_model=ElevenLogits), session, baseline=baseline)
    passed = dataclasses.replace(refused, checks={k: (True, "") for k in refused.checks})
    with pytest.raises(leaderboard.EntryRefused, match="its checks no longer match"):
        passed.entry(path=tmp_path / "board.sqlite")


@attempt("leaderboard", "a verdict pickled, edited, and carried to another process")
def test_a_pickled_verdict(honest, tmp_path):
    db = tmp_path / "board.sqlite"
    again = pickle.loads(pickle.dumps(honest))
    assert again.entry(path=db).figures == honest.entry(path=db).figures  # the same verdict: nothing gained
    with pytest.raises(leaderboard.EntryRefused, match="no longer match"):
        pickle.loads(pickle.dumps(dataclasses.replace(honest, img_per_s=10 * honest.img_per_s))).entry(path=db)
    (tmp_path / "v.pkl").write_bytes(pickle.dumps(honest))
    code = ("import pickle, sys\nfrom helpers import leaderboard\nv = pickle.load(open(sys.argv[1], 'rb'))\n"
            "try:\n    v.entry(path=sys.argv[2])\nexcept leaderboard.EntryRefused as e:\n    print('REFUSED', e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "v.pkl"), str(db)], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert "REFUSED" in out.stdout and "judge made no such verdict in this process" in out.stdout, out.stderr[-2000:]


@attempt("leaderboard", "an entry name with terminal escapes and a NUL")
def test_a_name_with_control_characters(honest, tmp_path):
    db = tmp_path / "board.sqlite"
    with pytest.raises(leaderboard.EntryRefused, match=r"holds '\\x1b' at character 1"):
        leaderboard.add(honest.entry("\x1b[2Jfirst place\x00", path=db), path=db)


@attempt("leaderboard", "an entry name of 10,000 characters")
def test_a_name_of_ten_thousand_characters(honest, tmp_path):
    db = tmp_path / "board.sqlite"
    with pytest.raises(leaderboard.EntryRefused, match="it has 10,000 characters"):
        leaderboard.add(honest.entry("A" * 10_000, path=db), path=db)


@attempt("leaderboard", "an entry built by hand, every check passed, no seal")
def test_an_entry_built_by_hand(honest, tmp_path):
    entry = leaderboard.Entry.of("first place", {**honest.figures(), "speedup": honest.speedup},
                                 {k: True for k in leaderboard.LADDER.checks},
                                 challenge=honest.entry(path=tmp_path / "board.sqlite").challenge)  # the honest one's
    with pytest.raises(leaderboard.EntryRefused, match="was not produced by the harness"):
        leaderboard.add(entry, path=tmp_path / "board.sqlite")


@attempt("leaderboard", "an entry with a seal of its own (64 hex digits)")
def test_an_entry_with_a_made_up_seal(honest, tmp_path):
    db = tmp_path / "board.sqlite"
    real = honest.entry(path=db)
    made_up = dataclasses.replace(real, name="first place", seal="ab" * 32)
    with pytest.raises(leaderboard.EntryRefused, match="does not match its seal"):
        leaderboard.add(made_up, path=db)


@attempt("leaderboard", "an entry sealed for another leaderboard file")
def test_an_entry_sealed_for_another_board(honest, tmp_path):
    mine = tmp_path / "mine.sqlite"
    theirs = tmp_path / "theirs.sqlite"
    leaderboard.add(honest.entry(path=theirs), path=theirs)  # that board has a key of its own
    with pytest.raises(leaderboard.EntryRefused, match="does not match its seal"):
        leaderboard.add(honest.entry("first place", path=mine), path=theirs)


@attempt("leaderboard", "a sealed ladder entry moved to the to-target table (its kind changed)")
def test_a_sealed_entry_with_its_kind_changed(honest, tmp_path):
    db = tmp_path / "board.sqlite"
    entry = honest.entry(path=db)
    with pytest.raises(leaderboard.EntryRefused, match="unknown checks|unknown figures|does not match its seal"):
        leaderboard.add(dataclasses.replace(entry, kind="to_target"), path=db)
    assert leaderboard.entries(path=db, kind="to_target").empty


class _Huge(float):
    """A float that says it is below every bound and above every other."""

    def __lt__(self, other):
        return True

    def __le__(self, other):
        return True

    def __gt__(self, other):
        return True

    def __ge__(self, other):
        return True


@attempt("leaderboard", "a sealed entry whose img/s is an int of 5,000 digits")
def test_a_figure_of_five_thousand_digits(honest, tmp_path):
    db = tmp_path / "board.sqlite"
    entry = honest.entry(path=db)
    huge = dataclasses.replace(entry, figures={**entry.figures, "img_per_s": 10 ** 5000})
    with pytest.raises(leaderboard.EntryRefused, match="too large to be a figure"):
        leaderboard.add(huge, path=db)


@attempt("leaderboard", "a sealed entry whose img/s is a float subclass that lies in comparisons")
def test_a_figure_that_lies_in_comparisons(honest, tmp_path):
    db = tmp_path / "board.sqlite"
    entry = honest.entry(path=db)
    liar = dataclasses.replace(entry, figures={**entry.figures, "img_per_s": _Huge(1e12)})
    with pytest.raises(leaderboard.EntryRefused, match="does not agree with its img/s over the baseline's"):
        leaderboard.add(liar, path=db)
    assert leaderboard.entries(path=db).empty


# == the catalogue ==================================================================================================

def test_the_catalogue_holds_forty_distinct_attempts_on_every_judge():
    whats = [what for _, what in CATALOGUE]
    assert len(whats) == len(set(whats)), "an attempt is listed twice"
    by_judge = {j: sum(1 for k, _ in CATALOGUE if k == j) for j in JUDGES}
    assert len(CATALOGUE) >= 40 and all(n >= 8 for n in by_judge.values()), by_judge
