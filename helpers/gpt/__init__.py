"""A small GPT to train and measure (07_transformer): the network, its FLOPs, its data, its memory, sharded.

    from helpers.gpt.model import GPT, GPTConfig          # GPT(GPTConfig.smoke(), attention="sdpa", checkpoint="none")
    from helpers.gpt.flops import flops_per_token, mfu    # 6N + 12·L·H·Q·T, PaLM's and nanoGPT's count
    from helpers.gpt.data import MarkovSource, uniform_loss   # offline tokens with a known best loss
    from helpers.gpt.text import TextSource                   # real text offline: Python's docs, byte by byte
    from helpers.gpt.memory import measure_training_bytes     # bytes per parameter, walked tensor by tensor
    from helpers.gpt.sharded import measure_sharding          # DDP, ZeRO, FSDP2 on gloo ranks: state per rank
    from helpers.gpt.fp8 import fp8_unavailable, to_float8     # FP8 matmuls through torchao, or why not here
    from helpers.gpt.activations import block_ops, policy_cost # what selective checkpointing keeps and recomputes
    from helpers.gpt.ladder import Ladder, LadderSetup, ladder_rungs   # eager fp32 → … → FP8, each rung judged
    from helpers.gpt.step_kernels import step_roofline        # the profiled step's kernels on the roofline

``model``, ``data`` and ``text`` ← ``flops`` · ``memory`` · ``fp8`` ← ``sharded`` · ``activations`` · ``rungs`` ← ``ladder``
← ``step_kernels`` (``sharded``'s worker is what ``torchrun`` runs as ``python -m helpers.gpt.sharded``). Nothing
is imported here: this package's modules import torch, and a ``python -m`` worker must not import its own module
twice (once through the package, once as ``__main__``).
"""
