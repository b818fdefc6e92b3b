"""Data-parallel training across GPUs and nodes with PyTorch's own engine (05_ddp).

    from helpers.ddp import launch          # torchrun from a notebook cell: streaming, time limit, no orphans
    # the worker ranks run: python -m helpers.ddp.worker (helpers/ddp/worker.py)
"""

from . import launch

__all__ = ["launch"]
