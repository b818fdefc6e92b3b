"""The fused ReLU + 2×2 max-pool (helpers/kernels/relu_pool_triton.py) on a CPU, both ways a CPU runs it (the Triton
kernels through Triton's interpreter, and the same function in PyTorch's ops): forward and backward equal to PyTorch's two ops, bit for bit, in both layouts, in fp32 and bf16, with ties and
odd sides, whether its backward reads the kept input or the argmax its forward wrote; a ReferenceCNN with it fused
computes the same function with the same gradients."""

from __future__ import annotations

import pytest
import torch

from helpers import models
from helpers.kernels import relu_pool_triton as rp


@pytest.fixture(autouse=True, params=["interpreter", "pytorch ops"])
def cpu_path(request, monkeypatch):
    """Every test, once with the Triton kernels in the interpreter and once with the CPU's PyTorch ops."""
    monkeypatch.setenv("HELPERS_TRITON_ON_CPU", "1" if request.param == "interpreter" else "0")
    assert rp.on_cpu() == request.param
    return request.param


@pytest.mark.parametrize("keep", rp.KEEPS)
@pytest.mark.parametrize("fmt", [torch.contiguous_format, torch.channels_last], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (2, 5, 7, 9), (1, 1, 2, 2)])
def test_forward_and_backward_equal_pytorchs_relu_then_pool(fmt, dtype, shape, keep):
    g = torch.Generator().manual_seed(sum(shape) * 7 + (dtype == torch.bfloat16))
    x = torch.randn(shape, generator=g).to(dtype).contiguous(memory_format=fmt)
    x = (x * 2).round() / 2  # coarse values: windows with ties and with all-negative values are common
    mine, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    y, want = rp.relu_maxpool2x2(mine, keep=keep), rp.relu_maxpool2x2_reference(ref)
    torch.testing.assert_close(y, want, rtol=0, atol=0)
    assert y.is_contiguous(memory_format=fmt)  # the output keeps the input's layout
    grad = torch.randn(want.shape, generator=g).to(dtype)
    y.backward(grad)
    want.backward(grad)
    # the first largest of a tie gets the gradient, as PyTorch's pool picks it; nothing flows where all were ≤ 0
    torch.testing.assert_close(mine.grad, ref.grad, rtol=0, atol=0)
    assert mine.grad.is_contiguous(memory_format=fmt)


@pytest.mark.parametrize("keep", rp.KEEPS)
@pytest.mark.parametrize("fmt", [torch.contiguous_format, torch.channels_last], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_with_a_bias_it_equals_adding_the_bias_first_and_gives_the_bias_its_gradient(fmt, dtype, keep):
    g = torch.Generator().manual_seed(3 + (dtype == torch.bfloat16))
    shape = (3, 70, 6, 10)  # 70 channels: no power of two, so part of a channel tile is masked off
    x = ((torch.randn(shape, generator=g) * 2).round() / 2).to(dtype).contiguous(memory_format=fmt)
    b = (torch.randn(shape[1], generator=g) * 2).round() / 2  # halves: x + b is exact in bf16 too
    mine_x, ref_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    mine_b, ref_b = b.clone().requires_grad_(), b.clone().requires_grad_()
    y, want = rp.relu_maxpool2x2(mine_x, mine_b, keep=keep), rp.relu_maxpool2x2_reference(ref_x, ref_b)
    torch.testing.assert_close(y, want, rtol=0, atol=0)
    grad = torch.randn(want.shape, generator=g).to(dtype)
    y.backward(grad)
    want.backward(grad)
    torch.testing.assert_close(mine_x.grad, ref_x.grad, rtol=0, atol=0)
    # the bias's gradient is a sum, added in another order (and in fp32 here): close, not bit for bit
    torch.testing.assert_close(mine_b.grad, ref_b.grad, rtol=2e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-4)
    assert mine_b.grad.dtype == b.dtype


def test_a_bias_of_the_wrong_size_is_refused_clearly():
    with pytest.raises(ValueError, match="one value per channel"):
        rp.relu_maxpool2x2(torch.randn(1, 4, 8, 8), torch.zeros(3))


def test_a_non_4d_input_is_refused_clearly():
    with pytest.raises(ValueError, match="4-D"):
        rp.relu_maxpool2x2(torch.randn(3, 8, 8))
    with pytest.raises(ValueError, match="4-D"):
        rp.relu_maxpool2x2(torch.randn(3, 8, 8), keep="argmax")


def test_an_unknown_keep_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="argmax"):
        rp.relu_maxpool2x2(torch.randn(1, 4, 8, 8), keep="indices")
    with pytest.raises(ValueError, match="argmax"):
        rp.fuse_relu_pool(models.ReferenceCNN(16), keep="indices")


def test_keeping_the_argmax_keeps_a_byte_per_output_not_the_input():
    """What autograd saves for the backward: the argmax variant a uint8 tensor a quarter of the input's elements."""
    x = torch.randn(2, 8, 16, 16, requires_grad=True)
    saved: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        rp.relu_maxpool2x2(x * 1, keep="argmax")
    assert [(t.dtype, t.numel()) for t in saved] == [(torch.uint8, x.numel() // 4)]
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        rp.relu_maxpool2x2(x * 1, keep="input")
    assert [(t.dtype, t.numel()) for t in saved] == [(torch.float32, x.numel())]


@pytest.mark.parametrize("keep", rp.KEEPS)
@pytest.mark.parametrize("padded", [False, True], ids=["conv1", "conv1_padded_to_8"])
def test_a_reference_cnn_with_the_fused_op_is_the_same_function(padded, keep):
    torch.manual_seed(0)
    ref = models.ReferenceCNN(16)
    fused = models.ReferenceCNN(16)
    fused.load_state_dict(ref.state_dict())
    if padded:
        models.pad_first_conv(fused)
    rp.fuse_relu_pool(fused, keep=keep)
    assert fused.relu_pool_keeps == keep
    x = torch.randn(2, 3, 16, 16).contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(fused(x), ref(x), rtol=0, atol=0)
    fused(x).sum().backward()
    ref(x).sum().backward()
    for (name, a), b in zip(fused.named_parameters(), ref.parameters()):
        grad = a.grad
        if padded and name == "conv1.conv.weight":  # the zero channels get zero gradients
            torch.testing.assert_close(grad[:, 3:], torch.zeros_like(grad[:, 3:]), rtol=0, atol=0)
            grad = grad[:, :3]
        torch.testing.assert_close(grad, b.grad, rtol=1e-6, atol=1e-7, msg=lambda m, name=name: f"{name}: {m}")
    with pytest.raises(TypeError, match="ReferenceCNN"):
        rp.fuse_relu_pool(torch.nn.Linear(2, 2))


def test_the_ladder_says_what_runs_the_fused_op_on_a_cpu_beside_the_rung_that_brings_it(cpu_path):
    from helpers.challenge import ladder

    notes = {r.name: r.slow_on_cpu for r in ladder.ladder("smoke") if r.slow_on_cpu}
    assert list(notes) == ["+ custom kernels"]  # not the later rungs, which keep the op and change something else
    assert ("interpreter" in notes["+ custom kernels"]) == (cpu_path == "interpreter")
    assert ("several PyTorch ops" in notes["+ custom kernels"]) == (cpu_path == "pytorch ops")
