"""Running out of GPU memory: the error says what to change, and the failed run's memory is free again before the
notebook's next cell (an error a notebook keeps must not keep the failed step's tensors, nor its network)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from helpers import train
from helpers.kernels import compile_modes


def _oom_after_holding(monkeypatch) -> list:
    """Make every training step hold a large tensor and then run out of memory; return weak references to what a
    failed run held (its activation, its network)."""
    held: list = []

    def step(self, *, measure: bool = True):
        activation = torch.empty(4_000_000)
        held.extend([weakref.ref(activation), weakref.ref(self.model)])
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.06 GiB.")

    monkeypatch.setattr(train.Trainer, "step", step)
    return held


@pytest.mark.parametrize("run", ["train", "step alone", "compile_modes"])
def test_a_failed_run_says_what_to_change_and_leaves_nothing_behind(monkeypatch, run):
    held = _oom_after_holding(monkeypatch)
    cfg = train.TrainConfig(batch_size=8, image_size=32, data="gpu", dataset_size=16, dtype="bf16", steps=2,
                            warmup_steps=0)
    call = {"train": lambda: train.train(cfg), "step alone": lambda: train.compute_only_img_per_s(cfg),
            "compile_modes": lambda: compile_modes.time_train_step(cfg)}[run]
    with pytest.raises(torch.OutOfMemoryError) as caught:
        call()
    message = str(caught.value)
    assert message.startswith("batch_size=8 at 32×32 (bf16) ran out of GPU memory. Try batch_size=4, or grad_accum")
    assert "dtype='bf16'" not in message  # it runs in bf16 already
    assert "Tried to allocate 3.06 GiB" in message
    gc.collect()
    assert held and all(ref() is None for ref in held), "the failed run's tensors or network are still alive"
    del caught  # as a notebook keeps the last error: even while it was held, nothing was


def test_fp32_is_told_to_try_bf16():
    e = torch.OutOfMemoryError("CUDA out of memory.")
    cfg = train.TrainConfig(batch_size=256, image_size=224, dtype="fp32")
    assert "Try batch_size=128, dtype='bf16', or grad_accum" in str(train.explain_out_of_memory(cfg, e))
