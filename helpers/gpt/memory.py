"""Bytes per parameter of training the GPT, measured by walking the tensors a training step leaves behind.

    b = measure_training_bytes(GPTConfig.smoke(), recipe="fp32", optimizer="adamw")
    b.bytes_per_param, b.as_row()            # 16.0…: 4 weights + 4 gradients + 8 Adam moments, + the step counters
    textbook_bytes_per_param("bf16_master", "adamw")   # 16: what the accounting below predicts

**The textbook figures.** Training with AdamW keeps, per parameter: the weight, its gradient, and two moments
(``exp_avg``, ``exp_avg_sq``). All in fp32: 4 + 4 + 4 + 4 = **16 bytes**. The ZeRO paper's mixed-precision
accounting: fp16/bf16 weights 2 + fp16/bf16 gradients 2 + an fp32 master copy of the weights 4 + two fp32
moments 8 = **16 bytes** too: lower precision shrinks the matmuls' inputs and the activations, not the state
(ZeRO writes it 2 + 2 + K with K = 12 for the "optimizer states", master copy included). SGD without momentum
keeps weights and gradients (8 bytes in fp32); with momentum, one buffer more (12).

The recipes measured here (``RECIPES``):

- ``"fp32"``: fp32 weights, gradients and moments;
- ``"autocast_bf16"``: PyTorch's automatic mixed precision: the weights *stay* fp32 (they are the master copy),
  ``torch.autocast`` casts each matmul's inputs to bf16 on the fly; gradients and moments fp32: still 16;
- ``"bf16_master"``: the weights the model computes with are bf16, with bf16 gradients; the optimizer updates
  an fp32 master copy and writes it back rounded (the ZeRO accounting above). The fp32 copy of the gradient the
  optimizer reads is made at the step and freed after it (ZeRO counts it as transient too);
- ``"bf16"``: everything bf16, moments included (AdamW keeps its state in the parameter's dtype): 8 bytes, but
  an update below half the spacing of bf16 numbers near the weight (1/512 to 1/256 of its size: bf16 keeps 8
  significant bits) rounds away, and the weight does not move.

Adam's per-parameter step counter (one 0-dim fp32 tensor per parameter *tensor*, not per element) is counted
apart: a few hundred bytes. On a GPU the walk is also compared with ``torch.cuda.memory_allocated``.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

import torch

from .model import GPT, GPTConfig, unique_params

__all__ = ["RECIPES", "OPTIMIZERS", "TrainingBytes", "tensor_bytes", "textbook_bytes_per_param",
           "measure_training_bytes"]

RECIPES = ("fp32", "autocast_bf16", "bf16_master", "bf16")
OPTIMIZERS = ("adamw", "sgd", "sgd_momentum")
_STATE_PER_ELEMENT = {"adamw": 2, "sgd": 0, "sgd_momentum": 1}  # Adam's two moments; SGD's momentum buffer


@dataclasses.dataclass(frozen=True)
class TrainingBytes:
    """What one training step leaves in memory, in bytes, walked tensor by tensor (activations freed)."""

    recipe: str
    optimizer: str
    n_params: int
    weights: int  # the parameters the model computes with
    grads: int  # their .grad (and the master copies' .grad, where one is still held)
    master: int  # fp32 master copies of bf16 weights ("bf16_master" only)
    optimizer_state: int  # per-element state: Adam's exp_avg and exp_avg_sq, SGD's momentum_buffer
    step_counters: int  # Adam's 0-dim step tensors (one per parameter tensor)
    # torch.cuda.memory_allocated() grown by the model and its step (GPU only). Compare it with total minus
    # step_counters: AdamW keeps its step counters on the CPU unless fused=True or capturable=True.
    cuda_allocated: int | None = None

    @property
    def total(self) -> int:
        return self.weights + self.grads + self.master + self.optimizer_state + self.step_counters

    @property
    def bytes_per_param(self) -> float:
        return self.total / self.n_params

    @property
    def bytes_per_param_without_counters(self) -> float:
        """The per-element figure the textbook accounting gives (16 for AdamW in fp32): counters left out."""
        return (self.total - self.step_counters) / self.n_params

    def as_row(self) -> dict:
        n = self.n_params
        return {"recipe": self.recipe, "optimizer": self.optimizer, "parameters": n,
                "weights B/param": self.weights / n, "gradients B/param": self.grads / n,
                "fp32 master B/param": self.master / n, "optimizer state B/param": self.optimizer_state / n,
                "step counters B": self.step_counters, "total B/param": self.bytes_per_param,
                "textbook B/param": textbook_bytes_per_param(self.recipe, self.optimizer),
                "CUDA allocated B/param": None if self.cuda_allocated is None else self.cuda_allocated / n}


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of ``tensors``, each tensor once (a tied weight reached twice is one tensor)."""
    alive = [t for t in tensors if t is not None]  # held while counting: a freed tensor's id can come back
    seen: set[int] = set()
    total = 0
    for t in alive:
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total


def textbook_bytes_per_param(recipe: str, optimizer: str) -> int:
    """The accounting in the module docstring: weights + gradients + master copy + optimizer state, per element."""
    _check(recipe, optimizer)
    low = recipe in ("bf16_master", "bf16")  # the weights the model computes with are bf16
    weight = 2 if low else 4
    master = 4 if recipe == "bf16_master" else 0
    state = _STATE_PER_ELEMENT[optimizer] * (2 if recipe == "bf16" else 4)
    return weight + weight + master + state


def _check(recipe: str, optimizer: str) -> None:
    if recipe not in RECIPES:
        raise ValueError(f"recipe={recipe!r}: use one of {', '.join(map(repr, RECIPES))}.")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer={optimizer!r}: use one of {', '.join(map(repr, OPTIMIZERS))}.")


def _make_optimizer(name: str, params: list[torch.Tensor]) -> torch.optim.Optimizer:
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3)
    return torch.optim.SGD(params, lr=1e-2, momentum=0.9 if name == "sgd_momentum" else 0.0)


def measure_training_bytes(cfg: GPTConfig, *, recipe: str = "fp32", optimizer: str = "adamw",
                           device: torch.device | str = "cpu", batch_size: int = 2, seq_len: int | None = None,
                           seed: int = 0) -> TrainingBytes:
    """Build the GPT, run one training step under ``recipe`` with ``optimizer``, and count what is left.

    Measured after ``optimizer.step()`` and before ``zero_grad``: the moment weights, gradients and state all
    exist (the gradients are freed at the next ``zero_grad(set_to_none=True)``, the rest lives on).
    """
    _check(recipe, optimizer)
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.synchronize(dev)
        before = torch.cuda.memory_allocated(dev)
    torch.manual_seed(seed)
    with dev:  # built where it trains (GPT-2 small's weights are drawn in a moment on a GPU, seconds on a CPU)
        model = GPT(cfg)
    low = recipe in ("bf16_master", "bf16")
    master: list[torch.Tensor] = []
    if recipe == "bf16_master":
        master = [p.detach().clone().float() for p in unique_params(model)]  # fp32, before rounding to bf16
    if low:
        model.to(torch.bfloat16)
    params = unique_params(model)
    opt = _make_optimizer(optimizer, master or params)  # the master copies are what the optimizer updates

    g = torch.Generator().manual_seed(seed)
    T = seq_len or cfg.block_size
    idx = torch.randint(0, cfg.vocab_size, (batch_size, T + 1), generator=g).to(dev)
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=recipe == "autocast_bf16"):
        _, loss = model(idx[:, :-1], idx[:, 1:])
    loss.backward()
    del loss  # the activations go with the graph: what is left is the persistent state
    if master:
        for m, p in zip(master, params):
            m.grad = p.grad.float()  # transient: made for the update, freed right after it
    opt.step()
    if master:
        with torch.no_grad():
            for m, p in zip(master, params):
                p.copy_(m)  # the updated fp32 weights, rounded to the bf16 the model computes with
                m.grad = None

    moments, counters = [], []
    for state in opt.state.values():
        for v in state.values():
            if isinstance(v, torch.Tensor):
                (counters if v.dim() == 0 else moments).append(v)
    cuda_allocated = None
    if cuda:
        torch.cuda.synchronize(dev)
        cuda_allocated = torch.cuda.memory_allocated(dev) - before - idx.numel() * idx.element_size()
    return TrainingBytes(recipe=recipe, optimizer=optimizer, n_params=sum(p.numel() for p in params),
                         weights=tensor_bytes(params),
                         grads=tensor_bytes([p.grad for p in params] + [m.grad for m in master]),
                         master=tensor_bytes(master), optimizer_state=tensor_bytes(moments),
                         step_counters=tensor_bytes(counters), cuda_allocated=cuda_allocated)
