"""The weights every judged run starts from.

    model = start_model(rules)            # the reference network every run of this challenge starts from
    rerun = start_model(rules, seed=3)    # the same recipe from other weights (to measure run-to-run variation)

On a GPU that is the reference network as ``torch.manual_seed(rules.seed)`` initialises it. At smoke scale (a CPU,
CI) every run continues from weights already trained on the challenge's data (:attr:`Rules.warm_start_images`
images, batch 32, learning rate 0.02): from its random start this network learns almost nothing in its first
hundred or so steps (held-out accuracy stays at chance, 10%, after 256 images at batch 16 on a CPU), so the few
hundred images a CPU can afford per run would leave every run at chance and the accuracy rule could not tell a run
that learned from one that diverged. From the warm start the baseline stays well above chance and a diverged run
falls to it. The warm start is trained once per machine and kept in the data cache (a few seconds on two cores).
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

import torch
from torch import nn

from .. import data as _data
from ..models import ReferenceCNN

__all__ = ["start_model", "describe_start", "WARM_START_BATCH", "WARM_START_LR"]

WARM_START_BATCH = 32
WARM_START_LR = 0.02


def start_model(rules, *, seed: int | None = None) -> nn.Module:
    """The network a run of ``rules`` starts from, on the CPU: initialised from ``seed`` (the rules' by default),
    then, where the rules ask for a warm start, trained on the challenge's data (the same images, another order for
    another seed)."""
    seed = rules.seed if seed is None else seed
    state, rng_after = _initialised(rules.image_size, seed)
    torch.manual_seed(seed)  # every device's generator, as initialising here would leave them ...
    torch.set_rng_state(rng_after)  # ... and the CPU's past the initialisation's draws
    with torch.device("meta"):  # no second initialisation: its weights are the cached ones, copied
        model = ReferenceCNN(image_size=rules.image_size)
    model.load_state_dict({k: v.clone() for k, v in state.items()}, assign=True)
    if rules.warm_start_images:
        state = _warm_state(rules.image_size, rules.dataset_size, rules.warm_start_images, rules.seed, seed)
        model.load_state_dict(state)
    return model


@functools.lru_cache(maxsize=4)
def _initialised(image_size: int, seed: int) -> tuple[dict, torch.Tensor]:
    # Cached: 06 starts about 30 runs from the same weights, and initialising the network's large fully connected
    # layer took about 0.5 s each on two cores (scripts/probes/judging_costs.py, the t4 profile). Returns the
    # weights and the CPU generator's state right after them, so a caller's later random draws stay the same.
    torch.manual_seed(seed)
    model = ReferenceCNN(image_size=image_size)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, torch.get_rng_state()


def _warm_path(image_size: int, dataset_size: int, images: int, data_seed: int, seed: int) -> Path:
    """Where the data cache keeps these warm-start weights."""
    # the CPU's instruction set in the key: weights trained with AVX-512's rounding are not reused under AVX2
    isa = torch.backends.cpu.get_cpu_capability()
    key = f"warm-start-{torch.__version__}-{isa}-s{image_size}-n{dataset_size}-i{images}-d{data_seed}-seed{seed}.pt"
    return _data.cache_dir() / "challenge" / key


@functools.lru_cache(maxsize=4)
def _warm_state(image_size: int, dataset_size: int, images: int, data_seed: int, seed: int) -> dict:
    path = _warm_path(image_size, dataset_size, images, data_seed, seed)
    if path.exists():
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception:  # noqa: BLE001 - a cut or corrupted cache file: train it again
            pass
    state = _train_warm(image_size, dataset_size, images, data_seed, seed)
    _save_atomic(state, path)
    return state


def _train_warm(image_size: int, dataset_size: int, images: int, data_seed: int, seed: int) -> dict:
    from ..train import TrainConfig, Trainer  # train imports models; keep this module light to import

    steps = max(1, images // WARM_START_BATCH)
    cfg = TrainConfig(batch_size=WARM_START_BATCH, lr=WARM_START_LR, steps=steps, warmup_steps=0,
                      image_size=image_size, dataset_size=dataset_size, seed=data_seed, init_seed=seed)
    torch.manual_seed(seed)
    trainer = Trainer(cfg, device="cpu", model=ReferenceCNN(image_size=image_size))
    for _ in range(steps):
        trainer.step(measure=False)
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def _save_atomic(state: dict, path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        os.close(fd)
        torch.save(state, tmp)
        os.replace(tmp, path)
    except OSError:  # a read-only cache: train again next time, nothing lost
        pass


def describe_start(rules) -> str:
    """One line for the notebook: where runs of ``rules`` start."""
    if not rules.warm_start_images:
        return "Every run starts from the same weights (the reference network initialised from seed 0)."
    return (f"Every run starts from the same weights: at this scale the reference network already trained on "
            f"{rules.warm_start_images:,} of the challenge's images (batch {WARM_START_BATCH}, learning rate "
            f"{WARM_START_LR}), since from a random start it learns almost nothing in the few hundred images a CPU "
            "can afford per run.")

