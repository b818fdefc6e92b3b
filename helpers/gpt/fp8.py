"""FP8 matmuls for training, through torchao's float8 training: the one place the course touches torchao.

    why = fp8_unavailable("cuda")        # None where the FP8 rung can run; else why not, in one line
    model = to_float8(model)             # every nn.Linear but the output layer computes its matmuls in FP8

Hopper (and Ada) tensor cores multiply 8-bit floats at twice bf16's rate. ``torchao.float8`` swaps each chosen
``nn.Linear`` for a ``Float8Linear``: its weight stays in the precision it had (the master copy), and each matmul
of the forward and backward passes casts its two inputs to float8 with a scale per tensor (e4m3 forward, e5m2 for
the gradients), multiplies with ``torch._scaled_mm`` and accumulates in higher precision. The casts are extra
memory traffic: they pay only where the matmuls are large and ``torch.compile`` fuses the casts into the kernels
around them.

The output layer (``lm_head``) is left in bf16: it is tied to the token table, and the logits are where FP8's
three mantissa bits would cost the most. Without a GPU of compute capability 8.9 or newer, or without torchao,
:func:`fp8_unavailable` says so and the rung is skipped (torchao is an optional install: ``pip install torchao``,
in a version built for the installed PyTorch).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from typing import Iterator

import torch
from torch import nn

from .. import env

__all__ = ["FP8_CAPABILITY", "fp8_unavailable", "linear_filter", "to_float8"]

#: The first compute capability with FP8 tensor cores: Ada (8.9); Hopper is 9.0.
FP8_CAPABILITY = (8, 9)


def _capability(dev: torch.device) -> tuple[tuple[int, int], str]:
    """(compute capability, the GPU's name): under a learner-machine profile, those of the GPU it stands for."""
    p = env.profile()
    if p is not None and p.stands_for is not None and getattr(p.stands_for, "capability", None):
        major, minor = (int(v) for v in str(p.stands_for.capability).split("."))
        return (major, minor), p.stands_for.name
    return tuple(torch.cuda.get_device_capability(dev)), env.device_label(torch.cuda.get_device_name(dev))


def fp8_unavailable(device: torch.device | str) -> str | None:
    """None where FP8 training can run on ``device``; else why not, in one line (no GPU, a GPU older than Ada, or
    torchao missing or failing to import)."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return ("no GPU here: FP8 matmuls need an NVIDIA GPU of compute capability 8.9 or newer (Ada, Hopper), "
                "so this rung runs on a GPU node")
    (major, minor), name = _capability(dev)
    if (major, minor) < FP8_CAPABILITY:
        return (f"the {name} has compute capability {major}.{minor}: its tensor cores have no FP8 (8.9 or newer: "
                "Ada, Hopper), so this rung runs on such a GPU")
    try:
        with _quiet_import():
            from torchao.float8 import convert_to_float8_training  # noqa: F401
    except Exception as e:  # not installed, or built for another PyTorch: say which, in one line
        said = (str(e).strip().splitlines() or [""])[0][:160]
        return (f"torchao's float8 training is not importable here ({type(e).__name__}: {said}); install torchao "
                "built for this PyTorch (pip install torchao) to run this rung")
    return None


@contextlib.contextmanager
def _quiet_import() -> Iterator[None]:
    """torchao logs on stderr when its compiled extensions do not load (they are not needed for float8 training),
    torch logs a deprecation as torchao registers its types, and Python 3.12 warns of an invalid escape in one of
    torchao's docstrings as it compiles the file: kept off the learner's screen while it is imported."""
    loggers = [logging.getLogger(n) for n in ("torchao", "torch.utils._pytree")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            for category in (SyntaxWarning, DeprecationWarning):  # 3.12 and later; 3.11
                warnings.filterwarnings("ignore", category=category, message="invalid escape sequence")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def linear_filter(module: nn.Module, fqn: str) -> bool:
    """Which layers compute in FP8: every ``nn.Linear`` but the output layer, whose sides are multiples of 16 (what
    ``torch._scaled_mm`` takes)."""
    return (isinstance(module, nn.Linear) and fqn.split(".")[-1] != "lm_head"
            and module.in_features % 16 == 0 and module.out_features % 16 == 0)


def to_float8(model: nn.Module) -> nn.Module:
    """``model`` with its linear layers (:func:`linear_filter`) computing their matmuls in FP8, through torchao."""
    with _quiet_import():
        from torchao.float8 import convert_to_float8_training

    return convert_to_float8_training(model, module_filter_fn=linear_filter)
