"""04's exercise on the largest block of a training step: judged at sizes the notebook never shows, so a number
copied from the snapshot's table cannot pass, and both regimes (an activation, then a weight) must be right."""

from __future__ import annotations

import pytest
import torch

from helpers.exercises import nb04


def test_the_reference_passes_and_the_cases_cover_both_regimes():
    check = nb04.check_largest_block(nb04.largest_block_bytes, dtype=torch.bfloat16, device="cpu")
    assert check.passed, check.message
    for itemsize in (2, 4):  # bf16 and fp32: in each, one case an activation wins and one a weight, never a tie
        winners = set()
        for batch, size in nb04.LARGEST_BLOCK_CASES:
            activation = batch * 64 * size * size * itemsize
            weight = 256 * (size // 8) ** 2 * 512 * 4
            assert abs(activation - weight) > 0.05 * weight
            winners.add("activation" if activation > weight else "weight")
        assert winners == {"activation", "weight"}  # an answer that knows only one kind of tensor fails one case


@pytest.mark.parametrize("answer, why", [
    (lambda b, s, d: b * 64 * s * s * d.itemsize, "too small"),              # the activation alone
    (lambda b, s, d: 256 * (s // 8) ** 2 * 512 * 4, "too small"),            # the weight alone
    (lambda b, s, d: max(b * 64 * s * s * 4, 256 * (s // 8) ** 2 * 512 * 4), "too large"),  # fp32 in a bf16 step
    (lambda b, s, d: 113_246_208, "At batch"),                              # one case's number, copied
])
def test_half_answers_and_a_copied_number_are_refused_with_the_case_that_caught_them(answer, why):
    check = nb04.check_largest_block(answer, dtype=torch.bfloat16, device="cpu")
    assert check.status == "failed" and why in check.message, check.message
    assert check.value is nb04.largest_block_bytes  # the notebook carries on with the reference


def test_fp32_counts_four_bytes_a_value():
    assert nb04.check_largest_block(nb04.largest_block_bytes, dtype=torch.float32, device="cpu").passed
    assert nb04.largest_block_bytes(96, 96, torch.float32) == 2 * nb04.largest_block_bytes(96, 96, torch.bfloat16)


def test_a_blank_answer_is_not_done_and_wrong_forms_say_what_to_give():
    def blank(batch, image_size, dtype):
        raise NotImplementedError

    assert nb04.check_largest_block(blank, device="cpu").status == "not done"
    assert nb04.check_largest_block(None, device="cpu").status == "not done"
    number = nb04.check_largest_block(123, device="cpu")
    assert number.status == "failed" and "a function" in number.message
    text = nb04.check_largest_block(lambda b, s, d: "big", device="cpu")
    assert text.status == "failed" and "a number of bytes" in text.message
    raises = nb04.check_largest_block(lambda b, s, d: 1 / 0, device="cpu")
    assert raises.status == "failed" and "ZeroDivisionError" in raises.message
