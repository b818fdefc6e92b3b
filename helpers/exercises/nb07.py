"""07_transformer's exercises: the FLOPs a training token costs, counted by hand; and which activations to keep.

    from helpers.exercises import nb07 as checks
    check = checks.check_flops_per_token(my_flops_per_token)   # on configurations the notebook never printed
    flops_fn = check.value                                      # yours once it passes, else the reference
    check = checks.check_selective_policy(my_saves, device=DEVICE)   # keeps little, recomputes no matrix product
    saves = check.value

Try the exercises before reading the reference solutions below.
"""

from __future__ import annotations

import inspect
import random
import re
from typing import Any, Callable

import torch

from .. import env
from ..gpt.activations import BlockRecord, PolicyCost, block_ops, policy_cost
from ..gpt.flops import flops_per_token
from ..gpt.model import GPT, GPTConfig, op_name, saves_matmuls, unique_params
from .common import CheckResult, WrongForm, as_flag, as_function, as_number, describe, failed, not_done

__all__ = ["flops_per_token_solution", "check_flops_per_token", "random_configs", "saves_solution",
           "check_selective_policy", "RECOMPUTE_BUDGET", "KEEP_SLACK"]


# -- exercise 07.1: FLOPs per token ------------------------------------------------------------------------------

def flops_per_token_solution(cfg: GPTConfig, seq_len: int) -> int:
    """The reference: ``6N + 12·L·H·Q·T``. N is every parameter but the position table (the tied token table once:
    it is the output layer's weight, and that matmul is real work); each weight does one multiply-add per token
    forward (2 FLOPs) and two backward (4); attention's ``QKᵀ`` and scores × ``V`` do ``2·T·Q`` FLOPs each per
    token, per head and layer, forward, and twice that backward."""
    n = cfg.param_count(non_embedding=True)
    return 6 * n + 12 * cfg.n_layer * cfg.n_head * cfg.head_dim * seq_len


_HEADS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32)
_HEAD_DIMS = (8, 16, 24, 32, 40, 48, 64, 80, 96, 128)
_BLOCKS = (16, 100, 256, 640, 1000, 2048, 3000, 4096, 8192)
_PRINTED = {(GPTConfig.full().n_layer, GPTConfig.full().n_embd), (GPTConfig.smoke().n_layer, GPTConfig.smoke().n_embd)}


def random_configs(n: int, *, seed: int | None = None) -> list[tuple[GPTConfig, int]]:
    """``n`` (configuration, sequence length) pairs drawn at random, none of the shapes the notebook prints: what
    :func:`check_flops_per_token` asks about (half with biases, some sequences shorter than the block)."""
    rng = random.Random(seed if seed is not None else random.randrange(2**31))
    out = []
    while len(out) < n:
        heads, head_dim = rng.choice(_HEADS), rng.choice(_HEAD_DIMS)
        cfg = GPTConfig(n_layer=rng.randint(1, 48), n_head=heads, n_embd=heads * head_dim,
                        block_size=rng.choice(_BLOCKS), vocab_size=rng.randint(50, 120_000), bias=rng.random() < 0.5)
        if (cfg.n_layer, cfg.n_embd) in _PRINTED:
            continue
        seq = cfg.block_size if rng.random() < 0.4 else rng.randint(1, cfg.block_size)
        out.append((cfg, seq))
    return out


def _shape(cfg: GPTConfig, seq_len: int) -> str:
    return (f"GPTConfig(n_layer={cfg.n_layer}, n_head={cfg.n_head}, n_embd={cfg.n_embd}, block_size="
            f"{cfg.block_size}, vocab_size={cfg.vocab_size}, bias={cfg.bias}) at seq_len={seq_len}")


def _mistakes(cfg: GPTConfig, T: int) -> list[tuple[float, str]]:
    """Counts a learner may have written instead, each with what to change (the first that matches is said)."""
    n, n_all = cfg.param_count(non_embedding=True), cfg.param_count(non_embedding=False)
    L, H, Q, d, V = cfg.n_layer, cfg.n_head, cfg.head_dim, cfg.n_embd, cfg.vocab_size
    att = 12 * L * H * Q * T
    ln = (2 * L + 1) * d * (1 + int(cfg.bias))  # LayerNorm weights (and biases)
    biases = 9 * L * d * int(cfg.bias)
    return [
        (6 * n, "It leaves out attention's own matmuls, QKᵀ and the scores times V, which have no weights: add "
                "12·L·H·Q·T (2·T·Q FLOPs each per token, per head and layer, forward; backward twice that)."),
        (6 * n + att / 2, "It halves attention's term: a causal kernel skips the upper triangle, but the convention "
                          "(PaLM's, nanoGPT's) counts the whole T×T square: 12·L·H·Q·T."),
        (2 * n + att / 3, "It counts the forward pass only: the backward pass does two matmuls for each forward one "
                          "(the gradient of the input and of the weight), so training is 3× the forward."),
        (2 * n, "It counts the forward pass of the weights only: training is 3× the forward (6N), plus attention's "
                "12·L·H·Q·T."),
        (6 * n_all + att, "It counts the position table in N: positions are only looked up, no matmul uses that table. "
                          "N is every parameter but the position table."),
        (6 * (n - V * d) + att, "It leaves out the token table: it is tied to the output layer, whose matmul "
                                "(width × vocabulary per token) is the largest of the network. Count it once."),
        (6 * (n + V * d) + att, "It counts the token table twice: the output layer's weight is the token table "
                                "itself (tied), one tensor, counted once."),
        (6 * n + 12 * L * H * Q * cfg.block_size, "It uses block_size for T: T is the sequence length trained, "
                                                  "seq_len, which can be shorter than the block."),
        ((6 * n + att) * T, "It gives the FLOPs of a whole sequence: divide by seq_len for one token."),
        (6 * n + 12 * H * Q * T, "Its attention term misses the layers: every layer has its own attention, "
                                 "12·L·H·Q·T."),
        (6 * (n - ln) + att, "It leaves out the LayerNorms' parameters: the convention counts every parameter but the "
                             "position table in N (they do no matmul; they are a few thousandths of N)."),
        (6 * (n - biases) + att, "It leaves out the linear layers' biases (this configuration has bias=True): N is "
                                 "every parameter but the position table."),
    ]


def _uses_reference(fn: Callable) -> bool:
    if fn in (flops_per_token, flops_per_token_solution):
        return True
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    # the course's own functions called by name (not check_flops_per_token, nor a learner's my_flops_per_token)
    return re.search(r"(?<![\w.])(?:\w+\.)*(flops_per_token|flops_breakdown|counted_flops_per_token|"
                     r"flops_per_token_solution)\s*\(", src) is not None


def check_flops_per_token(fn: Callable | None, *, n: int = 6, seed: int | None = None) -> CheckResult:
    """``fn(cfg, seq_len)`` must give ``6N + 12·L·H·Q·T`` on ``n`` configurations drawn now, none of them printed in
    the notebook, so no number read off a cell passes. The value is ``fn`` once it passes, else the reference."""
    name = "07.1 · FLOPs per token"
    ref = flops_per_token_solution
    hint = ("Write my_flops_per_token(cfg, seq_len) and run this cell again ([07-idea] says what the convention "
            "counts; cfg's fields are in [07-flops]).")
    if fn is None or fn is ...:
        return not_done(name, ref, hint)
    try:
        fn = as_function(fn, what="my_flops_per_token", form="a function of (cfg, seq_len) that returns a number "
                                                              "(the function itself, no brackets)")
    except WrongForm as e:
        return failed(name, ref, str(e))
    if _uses_reference(fn):
        return failed(name, ref, "It calls the course's own count (helpers.gpt.flops): write the count from cfg's "
                                 "fields (n_layer, n_head, n_embd, head_dim, vocab_size, block_size, bias, and "
                                 "param_count if you like) and seq_len.")
    pairs = random_configs(n, seed=seed)
    for cfg, T in pairs:
        try:
            got = fn(cfg, T)
        except NotImplementedError:
            return not_done(name, ref, hint)
        except Exception as e:  # the learner's code: say what it raised, and on what
            return failed(name, ref, f"On {_shape(cfg, T)} it raised {type(e).__name__}: {str(e)[:200]}")
        try:
            got = as_number(got, what=f"my_flops_per_token on {_shape(cfg, T)}", above=0,
                            form="a number of FLOPs above 0, such as 8.5e8")
        except WrongForm as e:
            return failed(name, ref, str(e))
        want = ref(cfg, T)
        if abs(got - want) <= 1e-6 * want:
            continue
        why = next((text for value, text in _mistakes(cfg, T) if abs(got - value) <= 1e-6 * abs(value)), None)
        off = f"{got:.4g} where 6N + 12·L·H·Q·T gives {want:.4g} ({(got - want) / want:+.2%})"
        return failed(name, ref, f"On {_shape(cfg, T)} it gave {off}. " + (why or (
            "Count N from the shape (every parameter but the position table; the tied token table once), then "
            "6N + 12·L·H·Q·T with T = seq_len.")))
    layers = sorted(c.n_layer for c, _ in pairs)
    return CheckResult(name, "passed", f"It gives 6N + 12·L·H·Q·T on {len(pairs)} configurations drawn now, none "
                                       f"printed above ({layers[0]} to {layers[-1]} layers, with and without biases, "
                                       "sequences shorter than the block among them).", fn)


# -- exercise 07.2: which activations to keep --------------------------------------------------------------------

#: The most a policy may recompute, as a share of the block's training FLOPs: no matrix product or attention.
RECOMPUTE_BUDGET = 0.01
#: How far above what keeping every matmul's output keeps (as a share of no checkpointing's) a policy may keep.
KEEP_SLACK = 0.02


def saves_solution(op: Any) -> bool:
    """The reference: keep the outputs of the matrix products and of attention, recompute everything else."""
    return saves_matmuls(op)


_CHECK_CFG = GPTConfig.smoke()  # one block of it is recorded; the whole model trains for the gradients


def _record(device: torch.device, dtype: torch.dtype | None) -> BlockRecord:
    return block_ops(_CHECK_CFG, device=device, dtype=dtype, batch=4, seq_len=_CHECK_CFG.block_size)


def _listed(cost: PolicyCost, pick: Callable[[Any, bool], bool], what: Callable[[Any], str]) -> str:
    seen: dict[str, list] = {}
    for op, keep in zip(cost.ops, cost.kept):
        if pick(op, keep):
            seen.setdefault(op.name, []).append(op)
    return ", ".join(f"{name} ({len(ops)} call{'s' if len(ops) > 1 else ''}, {what(ops)})"
                     for name, ops in sorted(seen.items(), key=lambda kv: -sum(o.new_bytes + o.flops for o in kv[1])))


def _same_gradients(saves: Callable, device: torch.device, dtype: torch.dtype | None) -> float:
    """The largest difference between the gradients with ``saves`` as the policy and without checkpointing, over
    the largest gradient (0 where the recomputation gives the same numbers)."""
    torch.manual_seed(0)
    model = GPT(_CHECK_CFG, attention="sdpa").to(device)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, _CHECK_CFG.vocab_size, (4, _CHECK_CFG.block_size), generator=g).to(device)
    y = torch.randint(0, _CHECK_CFG.vocab_size, (4, _CHECK_CFG.block_size), generator=g).to(device)
    grads = []
    for ck, policy in (("none", None), ("selective", saves)):
        model.checkpoint, model.saves = ck, policy
        model.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            _, loss = model(x, y)
        loss.backward()
        grads.append([p.grad.detach().float().clone() for p in unique_params(model)])
    top = max(float(a.abs().max()) for a in grads[0]) or 1.0
    return max(float((a - b).abs().max()) for a, b in zip(*grads)) / top


def check_selective_policy(saves: Callable | None, *, device=None, dtype: torch.dtype | None = None) -> CheckResult:
    """``saves(op) -> bool`` as the policy of selective checkpointing: it must recompute at most
    :data:`RECOMPUTE_BUDGET` of a block's training FLOPs (no matrix product, no attention) and keep at most what
    keeping the matrix products' outputs keeps, plus :data:`KEEP_SLACK` (as shares of what no checkpointing keeps),
    measured on one block of the smoke model on ``device`` in the precision the ladder trains in; and training with
    it must give no checkpointing's gradients. The value is ``saves`` once it passes, else the reference."""
    name = "07.2 · selective checkpointing: which activations to keep"
    ref = saves_solution
    hint = ("Write my_saves(op) and run this cell again ([07-ops] lists every op of a block with the bytes its output "
            "takes and its FLOPs; [07-policy] says what a policy decides).")
    if saves is None or saves is ...:
        return not_done(name, ref, hint)
    try:
        saves = as_function(saves, what="my_saves", form="a function of one aten op that returns True (keep its "
                                                         "output) or False (recompute it)")
    except WrongForm as e:
        return failed(name, ref, str(e))
    dev = torch.device(device) if device is not None else env.device()
    if dtype is None and dev.type == "cuda":
        dtype = env.autocast_dtype(torch.bfloat16, dev)
    record = _record(dev, dtype)
    answers = {}
    for op in record.ops:
        if op.name in answers:
            continue
        try:
            answers[op.name] = as_flag(saves(op.op), what=f"my_saves(aten.{op.name})")
        except NotImplementedError:
            return not_done(name, ref, hint)
        except WrongForm as e:
            return failed(name, ref, str(e))
        except Exception as e:  # the learner's code
            return failed(name, ref, f"my_saves(aten.{op.name}) raised {type(e).__name__}: {str(e)[:200]}")
    cost = policy_cost(lambda op: answers[op_name(op)], record=record)  # each op asked once, its answer read
    best = policy_cost(ref, record=record)
    keep_budget = best.kept_share + KEEP_SLACK
    if cost.recompute_share > RECOMPUTE_BUDGET:
        ops = _listed(cost, lambda op, keep: not keep and op.flops > 0,
                      lambda ops: f"{sum(o.flops for o in ops) / 1e6:,.3g} MFLOP")
        return failed(name, ref, f"It recomputes {cost.recompute_share:.1%} of the block's training FLOPs, over the "
                                 f"{RECOMPUTE_BUDGET:.0%} budget: {ops}. Recomputing a matrix product or attention "
                                 "costs what its forward cost: keep their outputs.")
    if cost.kept_share > keep_budget:
        ops = _listed(cost, lambda op, keep: keep and op.flops == 0 and op.new_bytes > 0,
                      lambda ops: f"{sum(o.new_bytes for o in ops) / 2**20:.3g} MiB")
        return failed(name, ref, f"It keeps {cost.kept_share:.0%} of what the block keeps without checkpointing, over "
                                 f"the {keep_budget:.0%} budget. It keeps the outputs of ops that cost no matrix "
                                 f"product to recompute: {ops or 'none; it keeps views of what others made'}. "
                                 "Recompute them in the backward pass.")
    try:
        diff = _same_gradients(saves, dev, dtype)
    except Exception as e:  # the learner's code, under torch.utils.checkpoint
        return failed(name, ref, f"Training with it as the policy raised {type(e).__name__}: {str(e)[:200]}")
    tolerance = 1e-5 if dtype is None else 2e-2
    if diff > tolerance:
        return failed(name, ref, f"With it as the policy the gradients differ from no checkpointing's by {diff:.2g} "
                                 "of the largest: a policy chooses what is kept, never what is computed.")
    return CheckResult(name, "passed", f"{cost.sentence()} Budget: at most {RECOMPUTE_BUDGET:.0%} of the FLOPs and "
                                       f"{keep_budget:.0%} of the bytes; the gradients are no checkpointing's.", saves)
