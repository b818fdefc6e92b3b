"""A small decoder-only GPT (GPT-2's shape): tied embeddings, pre-LayerNorm blocks, causal attention, a 4× MLP.

    cfg = GPTConfig.smoke()                     # 2 layers, width 64, 4 heads, 64 tokens, vocab 256 (CPU)
    cfg = GPTConfig.full()                      # 12 layers, width 768, 12 heads, 1,024 tokens, vocab 50,304 (GPU)
    model = GPT(cfg, attention="sdpa", checkpoint="none")
    logits, loss = model(idx, targets)          # idx, targets: (batch, T) token ids; loss None without targets
    model.attention = "manual"                  # the written-out softmax(QKᵀ/√d + mask)V: keeps the T×T softmax
    model.checkpoint = "mlp"                    # recompute each block's MLP in backward instead of keeping it
    model.checkpoint, model.saves = "selective", saves_matmuls   # keep what saves(op) says, recompute the rest
    cfg.param_count(), cfg.param_count(non_embedding=False)   # counted from the shape, no model needed

The two switches change how the same weights are computed, never the weights: a ladder flips them on one
model and compares. The vocabulary of the full configuration is GPT-2's 50,257 padded to 50,304 (a multiple
of 64), which makes the output layer's matmul tile evenly on a GPU; the extra 47 rows are never a target.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint as _checkpoint

__all__ = ["ATTENTIONS", "CHECKPOINTS", "MATMUL_OPS", "GPTConfig", "GPT", "saves_matmuls", "op_name",
           "unique_params"]

#: ``"sdpa"``: ``F.scaled_dot_product_attention(is_causal=True)`` (a fused kernel where the device has one);
#: ``"manual"``: the scores written out, materialised and kept for backward (memory grows with T²).
ATTENTIONS = ("sdpa", "manual")
#: What each block recomputes in backward instead of keeping: nothing, its attention (with the LayerNorm before
#: it), its MLP (with its LayerNorm), the whole block (only the block's input is kept), or, ``"selective"``, each op
#: whose output ``GPT.saves(op)`` does not ask to keep (PyTorch's selective activation checkpointing: the block is
#: checkpointed whole, and the outputs of the ops the policy names are kept from the forward pass, not recomputed).
CHECKPOINTS = ("none", "attention", "mlp", "block", "selective")

#: The ops that do a step's matrix products, by their aten names: the linear layers' (``mm``, ``addmm``, ``bmm``, and
#: ``_scaled_mm`` for FP8), and fused attention's kernels on each device (flash, memory-efficient, cuDNN, the CPU's).
MATMUL_OPS = frozenset({
    "mm", "addmm", "bmm", "_scaled_mm",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_flash_attention_forward", "_efficient_attention_forward",
})


def op_name(op: Any) -> str:
    """An aten op's name without its namespace and overload: ``torch.ops.aten.mm.default`` → ``"mm"`` (a string
    such as ``"aten.mm.default"`` or ``"aten::mm"`` reads the same)."""
    name = getattr(op, "_opname", None)
    if isinstance(name, str):
        return name
    return str(op).split("::")[-1].removeprefix("aten.").split(".")[0]


def saves_matmuls(op: Any) -> bool:
    """The course's selective checkpointing policy: keep every matrix product's output (recomputing one costs as
    much as the forward did), recompute the rest (LayerNorms, GELU, casts, adds: cheap, and GELU's input and output
    are the largest activations of a block)."""
    return op_name(op) in MATMUL_OPS


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """The network's shape. ``bias=False`` leaves biases out of every Linear and LayerNorm (nanoGPT's default).

    >>> GPTConfig.smoke().head_dim
    16
    """

    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    block_size: int = 1024  # the longest sequence; the position table has this many rows
    vocab_size: int = 50304
    bias: bool = False
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GPTConfig.{name}={value!r}: give a whole number of at least 1.")
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig: n_embd={self.n_embd} is not divisible by n_head={self.n_head}; each head "
                             f"gets n_embd / n_head channels. Pick n_head among the divisors of {self.n_embd} "
                             f"(e.g. {_divisors_near(self.n_embd, self.n_head)}) or change n_embd.")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig.dropout={self.dropout!r}: give a probability in [0, 1).")

    @classmethod
    def full(cls) -> "GPTConfig":
        """GPT-2 small's shape (124M parameters with GPT-2's vocabulary) with the vocabulary padded to 50,304."""
        return cls()

    @classmethod
    def smoke(cls) -> "GPTConfig":
        """A tiny network that trains in seconds on a CPU: 2 layers, width 64, 4 heads, 64 tokens, vocab 256."""
        return cls(n_layer=2, n_head=4, n_embd=64, block_size=64, vocab_size=256)

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def param_count(self, *, non_embedding: bool = True) -> int:
        """Parameters of :class:`GPT` built from this shape, counted from the shape (the tied output layer once).

        ``non_embedding=True`` leaves out the position table only, as nanoGPT's ``get_num_params`` does: the
        token table is also the output layer's weight, whose matmul is real compute (see ``helpers.gpt.flops``).
        """
        d, b = self.n_embd, int(self.bias)
        per_layer = (12 * d * d  # q, k, v and output projections (4d²); the MLP's two 4× matrices (8d²)
                     + 2 * d + 2 * d * b  # two LayerNorms: weight, and bias when bias=True
                     + 9 * d * b)  # Linear biases: qkv 3d, attention output d, MLP up 4d, MLP down d
        total = self.n_layer * per_layer + (d + d * b) + self.vocab_size * d  # + final LayerNorm + token table
        return total if non_embedding else total + self.block_size * d


def _divisors_near(n: int, k: int) -> str:
    divs = sorted((i for i in range(1, n + 1) if n % i == 0), key=lambda i: abs(i - k))[:3]
    return ", ".join(str(i) for i in sorted(divs))


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head, self.dropout = cfg.n_head, cfg.dropout
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)  # q, k, v in one matmul
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, attention: str = "sdpa") -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, H, T, Q)
        if attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                               is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, H, T, T): the scores
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            # a token sees itself and the past. Backward keeps the softmax's output (float32 under autocast, which
            # also keeps the half-precision copy the matmul below reads) and the mask, not the scores
            att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
            y = self.attn_dropout(att) @ v
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LayerNorm: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``; the residual stream itself is never normalised."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def _attn(self, x: torch.Tensor, attention: str) -> torch.Tensor:
        return self.attn(self.ln_1(x), attention)

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.ln_2(x))

    def _both(self, x: torch.Tensor, attention: str) -> torch.Tensor:
        x = x + self._attn(x, attention)
        return x + self._mlp(x)

    def forward(self, x: torch.Tensor, attention: str = "sdpa", checkpoint: str = "none",
                saves: Callable[[Any], bool] | None = None) -> torch.Tensor:
        # Checkpointing only pays where a backward will run; under no_grad it would only add calls.
        # use_reentrant=False: the variant PyTorch recommends (works with inputs that need no grad, and with
        # torch.compile); the RNG state is restored in the recomputation, so dropout draws the same mask.
        ck = checkpoint if torch.is_grad_enabled() else "none"
        if ck == "block":
            return _checkpoint(self._both, x, attention, use_reentrant=False)
        if ck == "selective":
            return _checkpoint(self._both, x, attention, use_reentrant=False,
                               context_fn=_selective_context(saves or saves_matmuls))
        if ck == "attention":
            x = x + _checkpoint(self._attn, x, attention, use_reentrant=False)
        else:
            x = x + self._attn(x, attention)
        return x + (_checkpoint(self._mlp, x, use_reentrant=False) if ck == "mlp" else self._mlp(x))


def _selective_context(saves: Callable[[Any], bool]):
    """``checkpoint``'s ``context_fn`` for a policy ``saves(op) -> bool``: keep the outputs of the ops it names."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if saves(op) else CheckpointPolicy.PREFER_RECOMPUTE

    return functools.partial(create_selective_checkpoint_contexts, policy)


class GPT(nn.Module):
    """The decoder-only network; ``forward(idx, targets=None) -> (logits, loss)`` (see the module docstring)."""

    def __init__(self, cfg: GPTConfig, *, attention: str = "sdpa", checkpoint: str = "none",
                 saves: Callable[[Any], bool] | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.attention = attention
        self.checkpoint = checkpoint
        #: ``checkpoint="selective"``'s policy: ``saves(op)`` True keeps that aten op's output for backward (None:
        #: :func:`saves_matmuls`). A learner's function of the op, the way PyTorch's policies are written.
        self.saves = saves
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        # Tied: the output layer reads logits with the token table itself (GPT-2 does; it saves V·d parameters).
        self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # GPT-2: the residual branches' last layers scaled by 1/√(2L)
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    @property
    def attention(self) -> str:
        return self._attention

    @attention.setter
    def attention(self, value: str) -> None:
        if value not in ATTENTIONS:
            raise ValueError(f"attention={value!r}: use one of {', '.join(map(repr, ATTENTIONS))}.")
        self._attention = value

    @property
    def checkpoint(self) -> str:
        return self._checkpoint

    @checkpoint.setter
    def checkpoint(self, value: str) -> None:
        if value not in CHECKPOINTS:
            raise ValueError(f"checkpoint={value!r}: use one of {', '.join(map(repr, CHECKPOINTS))} (what each "
                             "block recomputes in backward).")
        self._checkpoint = value

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T = idx.shape
        if T > self.cfg.block_size:
            raise ValueError(f"a sequence of {T} tokens is longer than block_size={self.cfg.block_size}: cut the "
                             "batch to block_size tokens or build the model with a larger block_size.")
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x, self.attention, self.checkpoint, self.saves)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def unique_params(model: nn.Module) -> list[nn.Parameter]:
    """The model's parameters, each once (``parameters()`` already skips the tied output weight; said here so
    that code walking tensors for bytes does not count a shared tensor twice by another route)."""
    seen: set[int] = set()
    out = []
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return out
