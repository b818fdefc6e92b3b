"""Data-parallel training across GPUs and nodes with PyTorch's own engine (05_ddp).

    from helpers.ddp import launch, scaling, overlap, cluster
    launch.launch(launch.LaunchSpec(nproc_per_node=2))   # torchrun from a notebook cell: streaming, time limit, no orphans
    scaling.measure_scaling([1, 2], [256, 32])           # img/s, speed-up and efficiency per GPU count and batch
    overlap.hta_overlap("runs/05_ddp/trace")             # how much of the all-reduce hides behind backward
    cluster.node_commands(cluster.ClusterJob(nnodes=2))  # the same worker on many nodes; a Slurm script

    # the ranks run: python -m helpers.ddp.worker (helpers/ddp/worker.py); a worker script reports with:
    from helpers.ddp import report, shutdown             # one RESULT line per rank, collected by launch(); the end
"""

from . import cluster, launch, overlap, protocol, scaling
from .protocol import Variant, report, shutdown

# the worker module is not imported here: torchrun runs it as __main__ (python -m helpers.ddp.worker)
__all__ = ["launch", "scaling", "overlap", "cluster", "protocol", "Variant", "report", "shutdown"]
