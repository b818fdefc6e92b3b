"""The real-text token source: Python's documentation, offline, as byte tokens a ladder trains on."""

from __future__ import annotations

import math

import pytest
import torch

from helpers.gpt import ladder
from helpers.gpt.rungs import LadderSetup
from helpers.gpt.text import BYTE_VOCAB, TextSource


@pytest.fixture(scope="module")
def docs() -> TextSource:
    return TextSource.python_docs()


def test_the_python_docs_are_there_offline_as_bytes(docs):
    assert len(docs.data) > 100_000 and docs.vocab_size == BYTE_VOCAB == 256
    assert docs.tokens.dtype == torch.long and int(docs.tokens.max()) < 256
    assert "assert" in docs.decode(docs.tokens[:2000])  # real words, not a chain's ids
    assert "pydoc_data" in docs.describe() and f"{len(docs.data):,} bytes" in docs.describe()


def test_windows_are_drawn_from_their_part_and_repeat_with_the_seed(docs):
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    a, b = docs.sample(4, 65, generator=g1), docs.sample(4, 65, generator=g2)
    assert a.shape == (4, 65) and torch.equal(a, b)  # every rung sees the same windows
    train, tail = docs.data[: docs.split], docs.data[docs.split:]
    for row in a:
        assert bytes(row.tolist()) in train
    held = docs.held_out_sample(4, 65, generator=torch.Generator().manual_seed(3))
    for row in held:
        assert bytes(row.tolist()) in tail
    assert docs.split == int(len(docs.data) * 0.9)


def test_the_text_has_context_a_model_can_learn(docs):
    """The unigram floor is below uniform guessing, and a model that knows the byte before (counted bigrams,
    smoothed) scores below it on the held-out tail: there is more to learn than frequencies."""
    uni = docs.unigram_loss()
    assert 0 < uni < math.log(256)
    tr, te = docs.tokens[: docs.split], docs.tokens[docs.split:]
    ones = torch.ones(len(tr) - 1, dtype=torch.float64)
    pairs = torch.zeros(256, 256, dtype=torch.float64).index_put_((tr[:-1], tr[1:]), ones, accumulate=True) + 0.1
    p = pairs / pairs.sum(dim=1, keepdim=True)
    bigram = float(-p[te[:-1], te[1:]].log().mean())
    assert bigram < uni - 0.5


def test_bad_arguments_say_what_to_change():
    with pytest.raises(ValueError, match="held_out=0"):
        TextSource("x", b"hello world", held_out=0)
    with pytest.raises(ValueError, match="no text"):
        TextSource("x", b"a")
    small = TextSource("tiny", b"0123456789" * 3)
    with pytest.raises(ValueError, match="longer than the 27 tokens"):
        small.sample(1, 40, generator=torch.Generator())
    with pytest.raises(ValueError, match="at least 2 tokens"):
        small.sample(1, 1, generator=torch.Generator())
    assert TextSource("one byte", b"aaaa").unigram_loss() == 0


def test_a_ladder_trains_on_the_text_and_refuses_tokens_its_model_has_no_rows_for(docs):
    setup = LadderSetup.at_scale("smoke")  # vocab 256: the bytes fit exactly
    lad = ladder.Ladder(setup, device="cpu", data=docs)
    x, y = lad.batches[0]
    assert x.shape == (setup.global_batch, setup.seq_len) and torch.equal(x[:, 1:], y[:, :-1])
    assert int(x.max()) < 256
    big = type(docs)("wide", bytes(range(256)) * 4)
    narrow = LadderSetup(setup.cfg.__class__(n_layer=1, n_head=1, n_embd=8, block_size=8, vocab_size=128),
                         seq_len=8, global_batch=2, micro_batch=1, large_micro_batch=2, warmup_steps=1, steps=1,
                         lr=1e-3)
    with pytest.raises(ValueError, match="vocabulary \\(256\\) is larger than the model's \\(128\\)"):
        ladder.Ladder(narrow, device="cpu", data=big)


def test_a_loss_is_read_against_uniform_guessing_and_byte_frequencies(docs):
    refs = docs.reference_losses()
    assert [nats for _, nats in refs] == [math.log(256), docs.unigram_loss()]  # highest first
    between = ladder.against_references(4.49, refs, steps=9)
    assert between.startswith("The baseline's loss after 9 steps, 4.490, is below uniform guessing")
    assert f"still above byte frequencies alone ({docs.unigram_loss():.2f})" in between
    learnt = ladder.against_references(1.5, refs, steps=9)
    assert "still above" not in learnt and f"byte frequencies alone ({docs.unigram_loss():.2f})" in learnt
    assert "below uniform" not in ladder.against_references(6.0, refs, steps=1)
