"""Where GPU memory goes and how to trade it for speed (04_memory).

    from helpers.memory import (accumulation, anatomy, fragmentation, precision, resilient, scratch, search, snapshot,
                                timeline)

``anatomy`` (weights, gradients, optimizer state, activations; peaks per phase) ← ``timeline`` (memory
over time) · ``precision`` (fp32/TF32/bf16/fp16 side by side, GradScaler) ← ``scratch`` (what
each layer holds only while it runs: the workspaces) · ``search`` (the largest
batch, surviving out-of-memory) ← ``resilient`` (a loop that backs off) · ``accumulation`` ·
``fragmentation`` (expandable segments, in a fresh process) · ``snapshot`` (the allocator's history of one step,
block by block, and PyTorch's own viewer).
"""

from . import accumulation, anatomy, fragmentation, precision, resilient, scratch, search, snapshot, timeline

__all__ = ["accumulation", "anatomy", "fragmentation", "precision", "resilient", "scratch", "search", "snapshot",
           "timeline"]
