"""The fused ReLU + 2×2 max-pool (helpers/kernels/relu_pool_triton.py) on a CPU, through Triton's interpreter:
forward and backward equal to PyTorch's two ops, bit for bit, in both layouts, in fp32 and bf16, with ties and
odd sides; a ReferenceCNN with it fused computes the same function with the same gradients."""

from __future__ import annotations

import pytest
import torch

from helpers import models
from helpers.kernels import relu_pool_triton as rp


@pytest.mark.parametrize("fmt", [torch.contiguous_format, torch.channels_last], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (2, 5, 7, 9), (1, 1, 2, 2)])
def test_forward_and_backward_equal_pytorchs_relu_then_pool(fmt, dtype, shape):
    g = torch.Generator().manual_seed(sum(shape) * 7 + (dtype == torch.bfloat16))
    x = torch.randn(shape, generator=g).to(dtype).contiguous(memory_format=fmt)
    x = (x * 2).round() / 2  # coarse values: windows with ties and with all-negative values are common
    mine, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    y, want = rp.relu_maxpool2x2(mine), rp.relu_maxpool2x2_reference(ref)
    torch.testing.assert_close(y, want, rtol=0, atol=0)
    assert y.is_contiguous(memory_format=fmt)  # the output keeps the input's layout
    grad = torch.randn(want.shape, generator=g).to(dtype)
    y.backward(grad)
    want.backward(grad)
    # the first largest of a tie gets the gradient, as PyTorch's pool picks it; nothing flows where all were ≤ 0
    torch.testing.assert_close(mine.grad, ref.grad, rtol=0, atol=0)
    assert mine.grad.is_contiguous(memory_format=fmt)


def test_a_non_4d_input_is_refused_clearly():
    with pytest.raises(ValueError, match="4-D"):
        rp.relu_maxpool2x2(torch.randn(3, 8, 8))


def test_a_reference_cnn_with_the_fused_op_is_the_same_function():
    torch.manual_seed(0)
    ref = models.ReferenceCNN(16)
    fused = models.ReferenceCNN(16)
    fused.load_state_dict(ref.state_dict())
    rp.fuse_relu_pool(fused)
    x = torch.randn(2, 3, 16, 16).contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(fused(x), ref(x), rtol=0, atol=0)
    fused(x).sum().backward()
    ref(x).sum().backward()
    for (name, a), b in zip(fused.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-6, atol=1e-7, msg=lambda m, name=name: f"{name}: {m}")
    with pytest.raises(TypeError, match="ReferenceCNN"):
        rp.fuse_relu_pool(torch.nn.Linear(2, 2))
