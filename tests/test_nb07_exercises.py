"""07_transformer's exercises (helpers.exercises.nb07): FLOPs per token on configurations no cell printed, and a
selective checkpointing policy judged by what it keeps and recomputes. On a CPU."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.exercises import nb07
from helpers.gpt.flops import flops_per_token
from helpers.gpt.model import GPTConfig, op_name

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "07_transformer.ipynb"


def _unwritten(*args, **kwargs):
    raise NotImplementedError


def _cell_ids() -> set[str]:
    return {c.get("id") for c in json.loads(NOTEBOOK.read_text())["cells"]}


# ---- 07.1: FLOPs per token ------------------------------------------------------------------------------------------

def _written_out(cfg, seq_len):
    """A learner's answer, written from the shape (no param_count): what the exercise asks for."""
    d, L, b = cfg.n_embd, cfg.n_layer, int(cfg.bias)
    per_layer = 12 * d * d + 2 * d * (1 + b) + 9 * d * b
    n = L * per_layer + d * (1 + b) + cfg.vocab_size * d
    return 6 * n + 12 * L * cfg.n_head * cfg.head_dim * seq_len


@pytest.mark.parametrize("blank", [None, ..., _unwritten])
def test_a_blank_answer_is_not_done_and_names_cells_that_exist(blank):
    res = nb07.check_flops_per_token(blank)
    assert res.status == "not done" and res.value is nb07.flops_per_token_solution
    named = re.findall(r"\[(\d\d-[\w-]+)\]", res.message)
    assert named and set(named) <= _cell_ids()


def test_the_count_written_out_passes_on_configurations_drawn_now():
    for seed in range(5):
        res = nb07.check_flops_per_token(_written_out, seed=seed)
        assert res.passed, res.message
        assert res.value is _written_out
    assert nb07.check_flops_per_token(lambda cfg, T: float(_written_out(cfg, T)), seed=0).passed  # a float is fine


def test_the_configurations_are_none_the_notebook_prints_and_vary():
    pairs = nb07.random_configs(200, seed=1)
    printed = {(GPTConfig.full().n_layer, GPTConfig.full().n_embd), (GPTConfig.smoke().n_layer,
                                                                       GPTConfig.smoke().n_embd)}
    assert not {(c.n_layer, c.n_embd) for c, _ in pairs} & printed
    assert {c.bias for c, _ in pairs} == {True, False}
    assert any(T < c.block_size for c, T in pairs) and any(T == c.block_size for c, T in pairs)
    assert nb07.random_configs(3, seed=4) == nb07.random_configs(3, seed=4)
    for cfg, T in pairs[:20]:
        assert nb07.flops_per_token_solution(cfg, T) == flops_per_token(cfg, seq_len=T)


def test_a_number_read_off_a_cell_does_not_pass():
    printed = flops_per_token(GPTConfig.full())  # what the notebook prints for its own model
    res = nb07.check_flops_per_token(lambda cfg, T: printed, seed=0)
    assert res.status == "failed" and res.value is nb07.flops_per_token_solution


def test_calling_the_course_s_own_count_does_not_pass():
    assert nb07.check_flops_per_token(flops_per_token).status == "failed"

    def wrapped(cfg, seq_len):
        return flops_per_token(cfg, seq_len=seq_len)

    res = nb07.check_flops_per_token(wrapped)
    assert res.status == "failed" and "course's own count" in res.message


MISTAKES = [
    (lambda c, T: 6 * c.param_count(), "leaves out attention's own matmuls"),
    (lambda c, T: 6 * c.param_count() + 6 * c.n_layer * c.n_embd * T, "halves attention's term"),
    (lambda c, T: 2 * c.param_count() + 4 * c.n_layer * c.n_embd * T, "forward pass only"),
    (lambda c, T: 6 * c.param_count(non_embedding=False) + 12 * c.n_layer * c.n_embd * T, "position table"),
    (lambda c, T: 6 * (c.param_count() + c.vocab_size * c.n_embd) + 12 * c.n_layer * c.n_embd * T, "twice"),
    (lambda c, T: 6 * (c.param_count() - c.vocab_size * c.n_embd) + 12 * c.n_layer * c.n_embd * T,
     "leaves out the token table"),
    (lambda c, T: 6 * c.param_count() + 12 * c.n_layer * c.n_embd * c.block_size, "uses block_size for T"),
    (lambda c, T: (6 * c.param_count() + 12 * c.n_layer * c.n_embd * T) * T, "a whole sequence"),
    (lambda c, T: 6 * c.param_count() + 12 * c.n_embd * T, "misses the layers"),
]


@pytest.mark.parametrize("answer, says", MISTAKES, ids=[s for _, s in MISTAKES])
def test_a_common_mistake_is_named(answer, says):
    # seed 3 draws a sequence shorter than its block first, so block_size and seq_len differ
    pairs = nb07.random_configs(6, seed=3)
    assert pairs[0][1] < pairs[0][0].block_size
    res = nb07.check_flops_per_token(answer, seed=3)
    assert res.status == "failed" and says in res.message, res.message
    assert "GPTConfig(" in res.message  # the configuration it failed on, so the learner can work it by hand


@pytest.mark.parametrize("answer, says", [
    (lambda c, T: "8e8", "you gave a string"),
    (lambda c, T: None, "you gave None"),
    (lambda c, T: float("nan"), "you gave NaN"),
    (lambda c, T: -5, "above 0"),
    (lambda c, T: np.float64(_written_out(c, T)) * 2, "it gave"),
    (lambda c: 1, "raised TypeError"),
    (lambda c, T: 1 / 0, "raised ZeroDivisionError"),
    (42, "should be a function"),
    (_written_out(GPTConfig.full(), 1024), "should be a function"),
])
def test_a_wrong_answer_fails_with_a_message_and_never_raises(answer, says):
    res = nb07.check_flops_per_token(answer, seed=0)
    assert res.status == "failed" and says in res.message, res.message
    assert "carries on with the reference" in res.message


def test_numpy_and_tensor_answers_are_numbers():
    assert nb07.check_flops_per_token(lambda c, T: np.int64(_written_out(c, T)), seed=2).passed
    assert nb07.check_flops_per_token(lambda c, T: torch.tensor(float(_written_out(c, T)), dtype=torch.float64),
                                      seed=2).passed


# ---- 07.2: which activations to keep --------------------------------------------------------------------------------

@pytest.mark.parametrize("blank", [None, ..., _unwritten])
def test_a_blank_policy_is_not_done_and_names_cells_that_exist(blank):
    res = nb07.check_selective_policy(blank, device="cpu")
    assert res.status == "not done" and res.value is nb07.saves_solution
    named = re.findall(r"\[(\d\d-[\w-]+)\]", res.message)
    assert named and set(named) <= _cell_ids()


def test_keeping_the_matmuls_outputs_passes():
    res = nb07.check_selective_policy(nb07.saves_solution, device="cpu")
    assert res.passed, res.message
    assert "recomputes no matrix product" in res.message
    by_name = lambda op: op_name(op) in {"mm", "_scaled_dot_product_flash_attention_for_cpu",  # noqa: E731
                                         "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention"}
    assert nb07.check_selective_policy(by_name, device="cpu").passed
    assert nb07.check_selective_policy(lambda op: np.bool_(nb07.saves_solution(op)), device="cpu").passed


def test_recomputing_a_matmul_or_attention_fails_and_names_it():
    res = nb07.check_selective_policy(lambda op: False, device="cpu")  # checkpointing the whole block
    assert res.status == "failed" and "33.3% of the block's training FLOPs" in res.message and "mm (" in res.message
    res = nb07.check_selective_policy(lambda op: op_name(op) == "mm", device="cpu")  # attention recomputed
    assert res.status == "failed" and "attention" in res.message and "mm (" not in res.message


def test_keeping_what_is_cheap_to_recompute_fails_and_names_it():
    res = nb07.check_selective_policy(lambda op: True, device="cpu")
    assert res.status == "failed" and "gelu" in res.message and "budget" in res.message
    res = nb07.check_selective_policy(lambda op: nb07.saves_solution(op) or op_name(op) == "gelu", device="cpu")
    assert res.status == "failed" and "gelu (1 call" in res.message


@pytest.mark.parametrize("policy, says", [
    (lambda op: 1, "should be True or False"),
    (lambda op: "mm" in str(op) and "yes", "should be True or False"),
    (lambda op: op.no_such_field, "raised AttributeError"),
    (lambda: True, "raised TypeError"),
    ("mm", "should be a function"),
])
def test_a_wrong_policy_fails_with_a_message_and_never_raises(policy, says):
    res = nb07.check_selective_policy(policy, device="cpu")
    assert res.status == "failed" and says in res.message, res.message


def test_every_check_has_its_notebook_s_number():
    assert nb07.check_flops_per_token(None).exercise.startswith("07.1 · ")
    assert nb07.check_selective_policy(None, device="cpu").exercise.startswith("07.2 · ")
