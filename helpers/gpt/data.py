"""Tokens that need no download: a random Markov chain with a fixed seed, whose best possible loss is known.

    src = MarkovSource(vocab_size=256)                 # each token is followed by one of 4 tokens, fixed weights
    for x, y in src.batches(batch_size=8, block_size=64, seed=0):   # endless; y is x shifted by one token
        ...
    uniform_loss(256)        # ln(256) = 5.545 nats: what a model that knows nothing scores
    src.entropy_rate()       # the floor: no model predicts this chain better (0.90 nats with the defaults)

Each token has ``branching`` possible successors with weights drawn once from a Dirichlet distribution: a
table of 256 × 4 entries at smoke scale that the tiny GPT learns fast, so the loss falls from
``ln(vocab)`` towards the entropy rate within a few hundred steps on a CPU. Sequences start from the chain's
stationary distribution, so every position of a sequence has the same best loss. At full scale (vocab 50,304)
the data serve speed, not language: a GPU run measures tokens per second and MFU, not what the model learns.
The walk is serial in the sequence: 8 × 1,024 tokens at vocab 50,304 took 61 ms on one core of a shared
2-core CPU (2026-11-27), so a timed GPU loop draws its batches before the clock starts.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Iterator

import torch

__all__ = ["MAX_BRANCHING", "MarkovSource", "uniform_loss"]

#: Successors per token, at most: a learnable table, and few enough to draw distinct ones fast at any vocabulary.
MAX_BRANCHING = 64


def uniform_loss(vocab: int) -> float:
    """``ln(vocab)``: the cross-entropy (nats) of predicting every token with probability ``1 / vocab``."""
    if vocab < 1:
        raise ValueError(f"vocab={vocab}: a vocabulary has at least one token.")
    return math.log(vocab)


@dataclasses.dataclass(frozen=True)
class MarkovSource:
    """A first-order Markov chain over ``vocab_size`` tokens (module docstring).

    ``concentration`` is the Dirichlet's parameter: small values make one successor dominate (a lower entropy
    rate, an easier chain), large ones spread the weight evenly over the ``branching`` successors.
    """

    vocab_size: int = 256
    branching: int = 4
    concentration: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size={self.vocab_size}: give at least 2 tokens.")
        if not 1 <= self.branching <= min(self.vocab_size, MAX_BRANCHING):
            raise ValueError(f"branching={self.branching}: give 1 to {min(self.vocab_size, MAX_BRANCHING)} successors "
                             f"per token (at most the vocabulary, and at most {MAX_BRANCHING}).")
        if self.concentration <= 0:
            raise ValueError(f"concentration={self.concentration}: the Dirichlet's parameter must be positive.")

    @functools.cached_property
    def _tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(successors, probs)``, each ``(vocab, branching)``: token i is followed by ``successors[i, j]`` with
        probability ``probs[i, j]``."""
        g = torch.Generator().manual_seed(self.seed)
        V, k = self.vocab_size, self.branching
        # i+1 (mod V) is always among the successors: every token can reach every other, so the chain has one
        # stationary distribution. The other k-1 are distinct offsets from i, drawn among {0, 2, 3, …, V-1}.
        successors = torch.cat([((torch.arange(V) + 1) % V)[:, None], self._other_successors(g)], dim=1)
        gamma = torch.distributions.Gamma(torch.full((V, k), self.concentration), torch.ones(V, k))
        with torch.random.fork_rng(devices=[]):  # the Dirichlet draw must not depend on (or move) the global seed
            torch.manual_seed(self.seed)
            weights = gamma.sample().double() + 1e-12
        return successors, (weights / weights.sum(dim=1, keepdim=True))

    def _other_successors(self, g: torch.Generator) -> torch.Tensor:
        V, k = self.vocab_size, self.branching
        if V <= 2048:  # small: a random permutation per row (a V×V table, 16 MB at most)
            ranks = torch.rand(V, V - 1, generator=g).argsort(dim=1)[:, : k - 1]
        else:  # large (50,304 at full scale: V×V would be 10 GB): draw, and draw again the rows with a repeat
            ranks = torch.randint(0, V - 1, (V, k - 1), generator=g)
            for _ in range(1000):
                s = ranks.sort(dim=1).values
                bad = (s[:, 1:] == s[:, :-1]).any(dim=1)
                if not bad.any():
                    break
                ranks[bad] = torch.randint(0, V - 1, (int(bad.sum()), k - 1), generator=g)
        offsets = ranks + (ranks >= 1).long()  # 0 stays (a token may follow itself); 1, 2, … become 2, 3, …
        return (torch.arange(V)[:, None] + offsets) % V

    @functools.cached_property
    def stationary(self) -> torch.Tensor:
        """The chain's stationary distribution (float64, sums to 1), by power iteration on the lazy chain."""
        successors, probs = self._tables
        pi = torch.full((self.vocab_size,), 1.0 / self.vocab_size, dtype=torch.float64)
        for _ in range(10_000):
            step = torch.zeros_like(pi).index_add_(0, successors.reshape(-1), (pi[:, None] * probs).reshape(-1))
            new = 0.5 * (pi + step)  # lazy: the same fixed point, and no oscillation on a periodic chain
            if (new - pi).abs().max() < 1e-13:
                return new / new.sum()
            pi = new
        return pi / pi.sum()

    def entropy_rate(self) -> float:
        """The best loss any model can reach on this chain (nats per token): each token's successor entropy,
        averaged over the stationary distribution."""
        _, probs = self._tables
        h = -(probs * probs.log()).sum(dim=1)
        return float((self.stationary * h).sum())

    def reference_losses(self) -> list[tuple[str, float]]:
        """What to read a training loss against, highest first, as ``(what scores it, nats per token)``: here the
        chain's floor, which no model goes below."""
        return [("the chain's best possible loss", self.entropy_rate())]

    def sample(self, n_seq: int, length: int, *, generator: torch.Generator) -> torch.Tensor:
        """``(n_seq, length)`` token ids (int64), each row a walk of the chain from a stationary start."""
        successors, probs = self._tables
        cum = probs.cumsum(dim=1).float()
        cum[:, -1] = 2.0  # past any draw: rounding in the sum can never make a row pick nothing
        u = torch.rand(n_seq, length - 1, generator=generator)  # all the draws at once; the walk itself is serial
        out = torch.empty(n_seq, length, dtype=torch.long)
        out[:, 0] = torch.multinomial(self.stationary, n_seq, replacement=True, generator=generator)
        for t in range(1, length):
            prev = out[:, t - 1]
            j = (cum[prev] < u[:, t - 1, None]).sum(dim=1)  # inverse CDF: the first successor whose share covers u
            out[:, t] = successors[prev, j]
        return out

    def batches(self, batch_size: int, block_size: int, seed: int = 0, *,
                device: torch.device | str | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Endless ``(x, y)`` pairs of shape ``(batch_size, block_size)``: ``y[:, t]`` is the token after
        ``x[:, t]``. The same ``seed`` gives the same batches; the chain itself is fixed by ``self.seed``."""
        if batch_size < 1 or block_size < 1:
            raise ValueError(f"batch_size={batch_size} and block_size={block_size} must be at least 1.")
        g = torch.Generator().manual_seed(seed)
        while True:
            seq = self.sample(batch_size, block_size + 1, generator=g)
            x, y = seq[:, :-1], seq[:, 1:]
            yield (x, y) if device is None else (x.to(device), y.to(device))
