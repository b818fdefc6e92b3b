"""03's exercise "your training step, in channels_last, compiled and captured": the reference passes on a CPU (CUDA
graphs and speed are judged on a GPU: tests/test_kernels_gpu.py); each known-wrong step is refused by the part it
misses, with what to change."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers.exercises import nb03

BF16 = torch.bfloat16


def _step_of(forward, opt, *, zero=True, returns=lambda loss: loss.detach(), forward_loss=F.cross_entropy):
    def step(x, y):
        with torch.autocast(x.device.type, dtype=BF16):
            loss = forward_loss(forward(x), y)
        if zero:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return returns(loss)
    return step


def eager_in_channels_last(model, opt):
    model.to(memory_format=torch.channels_last)
    return _step_of(model, opt)


def compiles_something_else(model, opt):  # a compile that is not the network's: the forward still runs eagerly
    model.to(memory_format=torch.channels_last)
    torch.compile(lambda t: t * 2 + 1)(torch.ones(3))
    return _step_of(model, opt, forward_loss=torch.compile(F.cross_entropy))


def compiled_in_nchw(model, opt):
    return _step_of(torch.compile(model), opt)


def forgets_zero_grad(model, opt):
    model.to(memory_format=torch.channels_last)
    return _step_of(torch.compile(model), opt, zero=False)


def returns_a_float(model, opt):
    model.to(memory_format=torch.channels_last)
    return _step_of(torch.compile(model), opt, returns=lambda loss: loss.item())


def _check(fn, seed=0):
    return nb03.check_fast_step(fn, device="cpu", dtype=BF16, image_size=32, batch=4, steps=3, seed=seed)


def test_the_reference_step_passes_on_fresh_batches():
    res = _check(nb03.fast_step, seed=1)
    assert res.passed and "compiled" in res.message and "on a GPU" in res.message, res.message


@pytest.mark.slow  # trains each known-wrong step: `make test-slow`
def test_each_missing_part_is_refused_with_what_to_change():
    for fn, says in ((lambda m, o: nb03.eager_step(m, o, dtype=BF16), "weights are still NCHW"),
                     (compiled_in_nchw, "weights are still NCHW"),
                     (eager_in_channels_last, "the network's forward ran eagerly"),
                     (compiles_something_else, "the network's forward ran eagerly"),
                     (forgets_zero_grad, "trains differently from the eager step"),
                     (returns_a_float, "returned float")):
        res = _check(fn, seed=2)
        assert res.status == "failed" and says in res.message, (says, res.message)
        assert res.value is nb03.fast_step


def test_blank_unwritten_crashing_and_not_a_step():
    def unwritten(model, opt):
        raise NotImplementedError

    for blank in (None, ..., unwritten):
        res = _check(blank)
        assert res.status == "not done" and "[03-step-2]" in (res.message if blank is not unwritten else "[03-step-2]")
    res = _check(lambda m, o: 42)
    assert res.status == "failed" and "a function step(x, y)" in res.message
    res = _check(lambda m, o: (lambda x, y: x.view(-1, 7)))
    assert res.status == "failed" and "raised RuntimeError" in res.message


def test_a_right_step_passes_again_when_its_cell_is_run_twice():
    """The compiler's cache finds the network compiled already: the check reads what ran, not the compile counters."""
    for _ in range(2):
        res = _check(nb03.fast_step, seed=9)
        assert res.passed, res.message
