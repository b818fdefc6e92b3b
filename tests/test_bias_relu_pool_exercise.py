"""03's exercise "bias + ReLU + max-pool fused in Triton": a kernel written the way the notebook's skeleton asks is
accepted (run by Triton's interpreter on this CPU), as is the reference; each known-wrong answer is refused with a
reason that says what to change."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from helpers.exercises import nb03

# MODE: 0 right; 1 no ReLU; 2 NCHW strides assumed (wrong for channels_last); 3 the input's row read as 2·OW long
# (wrong for an odd width); 4 the bias added before a ReLU applied to the max only of the first value


@triton.jit
def _kernel(y_ptr, x_ptr, b_ptr, n_out, C, OH, OW, H, W, sxn, sxc, sxh, sxw, syn, syc, syh, syw,
            BLOCK: tl.constexpr, MODE: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n_out
    ow = i % OW
    oh = (i // OW) % OH
    c = (i // (OW * OH)) % C
    n = i // (OW * OH * C)
    if MODE == 2:  # strides as if x were NCHW and contiguous
        sxw, sxh, sxc, sxn = 1, W, H * W, C * H * W
    if MODE == 3:
        sxh = 2 * OW
    base = n * sxn + c * sxc + (2 * oh) * sxh + (2 * ow) * sxw
    v = tl.maximum(tl.maximum(tl.load(x_ptr + base, mask=mask), tl.load(x_ptr + base + sxw, mask=mask)),
                   tl.maximum(tl.load(x_ptr + base + sxh, mask=mask), tl.load(x_ptr + base + sxh + sxw, mask=mask)))
    v = v + tl.load(b_ptr + c, mask=mask)
    if MODE != 1:
        v = tl.maximum(v, 0.0)
    tl.store(y_ptr + n * syn + c * syc + oh * syh + ow * syw, v, mask=mask)


def _learners(mode: int):
    def bias_relu_pool(x, bias):
        N, C, H, W = x.shape
        y = torch.empty((N, C, H // 2, W // 2), device=x.device, dtype=x.dtype)
        _kernel[(triton.cdiv(y.numel(), 1024),)](y, x, bias, y.numel(), C, H // 2, W // 2, H, W, *x.stride(),
                                                 *y.stride(), BLOCK=1024, MODE=mode)
        return y
    return bias_relu_pool


def test_a_kernel_written_as_the_skeleton_asks_passes_on_fresh_inputs():
    for seed in (1, 2):
        res = nb03.check_bias_relu_pool(_learners(0), device="cpu", seed=seed)
        assert res.passed, res.message
        assert "runs your Triton kernel (_kernel)" in res.message and "interpreter" in res.message


def test_the_reference_passes():
    res = nb03.check_bias_relu_pool(nb03.bias_relu_pool, device="cpu", seed=3)
    assert res.passed, res.message


@pytest.mark.parametrize("mode, says", [
    (1, "the ReLU is missing"),
    (2, "read x through its strides"),
    (3, "an odd one"),
])
def test_a_kernel_wrong_in_one_way_is_refused_with_what_to_change(mode, says):
    res = nb03.check_bias_relu_pool(_learners(mode), device="cpu", seed=4)
    assert res.status == "failed" and says in res.message, res.message
    assert res.value is nb03.bias_relu_pool  # the notebook carries on with the reference


def test_pytorchs_ops_and_a_compiled_function_are_refused():
    for not_mine in (nb03.unfused_bias_relu_pool,
                     torch.compile(nb03.unfused_bias_relu_pool, backend="aot_eager")):
        res = nb03.check_bias_relu_pool(not_mine, device="cpu", seed=5)
        assert res.status == "failed" and "launched no Triton kernel of its own" in res.message, res.message


def test_the_wrong_shape_an_input_changed_and_a_crash_are_refused():
    def full_size(x, bias):
        return F.relu(x + bias[:, None, None])

    def in_place(x, bias):
        x.add_(bias[:, None, None]).relu_()
        return F.max_pool2d(x, 2)

    def crashes(x, bias):
        raise RuntimeError("index out of bounds")

    for fn, says in ((full_size, "the pool halves each side"), (in_place, "changed its input"),
                     (crashes, "raised RuntimeError")):
        res = nb03.check_bias_relu_pool(fn, device="cpu", seed=6)
        assert res.status == "failed" and says in res.message, (fn.__name__, res.message)


def test_blank_or_unwritten_is_not_done_and_names_the_cell_that_shows_the_pattern():
    def unwritten(x, bias):
        raise NotImplementedError

    for blank in (None, ..., unwritten):
        res = nb03.check_bias_relu_pool(blank, device="cpu")
        assert res.status == "not done", res.message
    assert "[03-32]" in nb03.check_bias_relu_pool(None, device="cpu").message
    assert "my_bias_relu_pool" in nb03.check_bias_relu_pool(42, device="cpu").message


@triton.jit
def _noop(p, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(p + i, tl.zeros((BLOCK,), tl.float32), mask=i < n)


def test_a_token_kernel_launched_beside_pytorchs_ops_is_refused():
    def token(x, bias):
        _noop[(1,)](torch.zeros(1, device=x.device), 1, BLOCK=16)  # a kernel ran...
        return nb03.unfused_bias_relu_pool(x, bias)                 # ...but PyTorch made the result

    res = nb03.check_bias_relu_pool(token, device="cpu", seed=8)
    assert res.status == "failed" and "memory no kernel of yours was handed" in res.message, res.message

    def token_softmax(x):
        _noop[(1,)](torch.zeros(1, device=x.device), 1, BLOCK=16)
        return torch.softmax(x, -1)

    res = nb03.check_fused_softmax(token_softmax, device="cpu", seed=8)
    assert res.status == "failed" and "memory no kernel of yours was handed" in res.message, res.message
