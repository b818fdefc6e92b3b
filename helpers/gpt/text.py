"""Real English text that needs no download: Python's own documentation, byte by byte.

    src = TextSource.python_docs()                 # ~460 KB of prose and code that every CPython ships
    src.sample(8, 1025, generator=g)               # (8, 1025) int64 byte values, windows of the training part
    src.held_out_sample(8, 1025, generator=g)      # the same from the last tenth, never trained on
    src.unigram_loss()                             # the floor of a model that knows only how often each byte comes

The text is ``pydoc_data.topics``: the pages ``help("assert")``, ``help("FORMATTING")`` and the rest print, part of
the standard library of every CPython, so it is there offline, on a learner's laptop and on a GPU node alike. It is
tokenised as UTF-8 bytes (a vocabulary of 256, which fits inside any larger one: a GPT built for GPT-2's 50,304
tokens trains on it unchanged, only its first 256 rows of embedding ever used). A byte-level model has a harder
task per token than a BPE one (a token carries less), but the loss it reaches says something about language:
unlike :class:`helpers.gpt.data.MarkovSource`, whose floor is known, real text has no known floor, so the figure
beside a loss is :meth:`unigram_loss` (what byte frequencies alone score) and :func:`uniform_loss` of 256.

The same windows come from the same generator: a rung that trains on ``sample(..., generator=g)`` with one seed
sees what every other rung sees, as with the Markov chain.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import torch

__all__ = ["TextSource", "BYTE_VOCAB"]

#: The vocabulary of a byte-level tokeniser: every byte value.
BYTE_VOCAB = 256


@dataclasses.dataclass(frozen=True)
class TextSource:
    """Bytes of one text as tokens, split once into a training part and a held-out tail (module docstring).

    ``name`` says where the text came from; ``held_out`` is the share at its end that :meth:`sample` never draws.
    """

    name: str
    data: bytes = dataclasses.field(repr=False)
    held_out: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 < self.held_out < 1.0:
            raise ValueError(f"held_out={self.held_out}: give the share of the text kept out of training, between "
                             "0 and 1 (0.1 keeps the last tenth).")
        if len(self.data) < 2:
            raise ValueError(f"{self.name}: {len(self.data)} bytes is no text to train on.")

    @classmethod
    def python_docs(cls, held_out: float = 0.1) -> "TextSource":
        """CPython's documentation topics (``pydoc_data.topics``), in a fixed order (sorted by topic)."""
        try:
            from pydoc_data.topics import topics
        except ImportError as e:  # a stripped Python (some distributions split pydoc out): say what to install
            raise RuntimeError("this Python has no pydoc_data (its documentation topics): install the full standard "
                               "library (on Debian, the python3 package rather than python3-minimal), or use "
                               "helpers.gpt.data.MarkovSource, which needs nothing.") from e
        text = "\n\n".join(topics[k] for k in sorted(topics))
        return cls(f"Python's documentation topics (pydoc_data, {len(topics)} pages)", text.encode("utf-8"),
                   held_out)

    @property
    def vocab_size(self) -> int:
        return BYTE_VOCAB

    @functools.cached_property
    def tokens(self) -> torch.Tensor:
        """Every byte as an int64 token id (0 to 255)."""
        return torch.frombuffer(bytearray(self.data), dtype=torch.uint8).long()

    @property
    def split(self) -> int:
        """The first held-out token's index: training windows end before it."""
        return int(len(self.data) * (1 - self.held_out))

    def _windows(self, part: torch.Tensor, n_seq: int, length: int, generator: torch.Generator) -> torch.Tensor:
        if n_seq < 1 or length < 2:
            raise ValueError(f"n_seq={n_seq}, length={length}: give at least one sequence of at least 2 tokens (the "
                             "inputs and the targets shifted by one).")
        if length > len(part):
            raise ValueError(f"length={length} is longer than the {len(part):,} tokens of this part of {self.name}: "
                             "use shorter sequences, or a longer text.")
        starts = torch.randint(0, len(part) - length + 1, (n_seq,), generator=generator)
        return part[starts[:, None] + torch.arange(length)]

    def sample(self, n_seq: int, length: int, *, generator: torch.Generator) -> torch.Tensor:
        """``(n_seq, length)`` token ids: windows starting at random places of the training part (the interface of
        :meth:`helpers.gpt.data.MarkovSource.sample`, so a ladder takes either)."""
        return self._windows(self.tokens[: self.split], n_seq, length, generator)

    def held_out_sample(self, n_seq: int, length: int, *, generator: torch.Generator) -> torch.Tensor:
        """The same from the held-out tail: text no training step saw."""
        return self._windows(self.tokens[self.split:], n_seq, length, generator)

    def unigram_loss(self) -> float:
        """The cross-entropy (nats per token) of predicting each byte by its frequency in the training part: what a
        model that learnt only which bytes are common scores. Below it, a model has learnt something of context."""
        counts = torch.bincount(self.tokens[: self.split], minlength=BYTE_VOCAB).double()
        p = counts[counts > 0] / counts.sum()
        return float(-(p * p.log()).sum())

    def decode(self, tokens: torch.Tensor) -> str:
        """Token ids back to text (bytes that do not form UTF-8 shown as �): what a model wrote, to read."""
        return bytes(int(t) for t in tokens.reshape(-1).tolist()).decode("utf-8", errors="replace")

    def reference_losses(self) -> list[tuple[str, float]]:
        """What to read a training loss against, highest first, as ``(what scores it, nats per token)``: uniform
        guessing among the byte values, then byte frequencies alone. Below the second, a model has learnt something
        of context; real text has no known floor."""
        # short: each also labels a line on the loss chart, where a longer one ran into the curves
        return [(f"uniform guessing over {BYTE_VOCAB} bytes", math.log(BYTE_VOCAB)),
                ("byte frequencies alone", self.unigram_loss())]

    def describe(self) -> str:
        return (f"{self.name}: {len(self.data):,} bytes as byte tokens (vocabulary {BYTE_VOCAB}), the last "
                f"{self.held_out:.0%} held out; byte frequencies alone score {self.unigram_loss():.2f} nats per token, "
                f"uniform guessing {math.log(BYTE_VOCAB):.2f}")
