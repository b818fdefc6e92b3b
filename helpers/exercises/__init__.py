"""Exercises, one module per notebook: its checks beside its reference solutions (one source of truth).

    from helpers.exercises import nb02 as checks        # in 02_dataloader
    check = checks.check_gpu_augment(gpu_augment, device=DEVICE)
    augment_fn = check.value                            # yours once it passes, else the reference

    from helpers.exercises import Target, check_targets # a notebook's full-scale promises

The checks, the notebooks' fallbacks and CI all use the same reference solutions. Try each exercise
before reading them.
"""

from . import nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb07
from .common import CheckResult, Target, check_targets

__all__ = ["CheckResult", "Target", "check_targets", "nb00", "nb01", "nb02", "nb03", "nb04", "nb05", "nb06", "nb07"]
