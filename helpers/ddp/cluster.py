"""The same worker on many nodes: the exact ``torchrun`` command for each node, and a Slurm batch script.

    job = ClusterJob(nnodes=2, gpus_per_node=8, head="gpu-node-01")
    print("\\n".join(node_commands(job)))        # run line i on node i (any order; they meet at the head)
    write_slurm_script("runs/ddp.sbatch", job)   # then: sbatch runs/ddp.sbatch

Every node runs one ``torchrun``, which starts one process per GPU. They find each other through a
c10d rendezvous hosted at ``head:port`` (``--rdzv-backend c10d``): no node needs to be told its
rank, and the head is just the first node of the job (Slurm's first host name).
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

__all__ = ["ClusterJob", "node_commands", "slurm_script", "write_slurm_script"]


@dataclasses.dataclass(frozen=True)
class ClusterJob:
    """A data-parallel job over ``nnodes`` nodes of ``gpus_per_node`` GPUs each."""

    nnodes: int = 2
    gpus_per_node: int = 8
    head: str = "node-0"
    port: int = 29500
    job_id: str = "gpu-perf-lab-ddp"
    worker: tuple[str, ...] = ("-m", "helpers.ddp.worker", "--mode", "train", "--batch", "256")
    python: str = "python3"

    def __post_init__(self) -> None:
        if self.nnodes < 1 or self.gpus_per_node < 1:
            raise ValueError(f"nnodes={self.nnodes}, gpus_per_node={self.gpus_per_node}: both must be at least 1.")
        if not 1024 <= self.port <= 65535:
            raise ValueError(f"port={self.port}: pick an unprivileged port (1024–65535) that the head node has free.")

    @property
    def world_size(self) -> int:
        return self.nnodes * self.gpus_per_node


def _torchrun(job: ClusterJob, *, nnodes: str, endpoint: str, rdzv_id: str) -> str:
    return " ".join([shlex.quote(job.python), "-m", "torch.distributed.run", "--nnodes", nnodes,
                     "--nproc-per-node", str(job.gpus_per_node), "--rdzv-backend", "c10d",
                     "--rdzv-endpoint", endpoint, "--rdzv-id", rdzv_id, *map(shlex.quote, job.worker)])


def node_commands(job: ClusterJob) -> list[str]:
    """One command line per node: the same on every node, so any node may start first."""
    line = _torchrun(job, nnodes=str(job.nnodes), endpoint=f"{job.head}:{job.port}", rdzv_id=shlex.quote(job.job_id))
    return [f"# node {i} of {job.nnodes}\n{line}" for i in range(job.nnodes)]


def slurm_script(job: ClusterJob, *, time: str = "00:20:00", partition: str | None = None,
                 account: str | None = None, cpus_per_task: int | None = None) -> str:
    """A batch script: one task per node, each running ``torchrun`` with the job's first node as the head."""
    opt = [f"#SBATCH --partition={partition}"] if partition else []
    opt += [f"#SBATCH --account={account}"] if account else []
    opt += [f"#SBATCH --cpus-per-task={cpus_per_task}"] if cpus_per_task else []
    line = _torchrun(job, nnodes='"$SLURM_NNODES"', endpoint='"$head_node:$MASTER_PORT"', rdzv_id='"$SLURM_JOB_ID"')
    return "\n".join([
        "#!/bin/bash",
        "#SBATCH --job-name=gpu-perf-lab-ddp",
        f"#SBATCH --nodes={job.nnodes}",
        "#SBATCH --ntasks-per-node=1        # one torchrun per node; it starts one process per GPU",
        f"#SBATCH --gpus-per-node={job.gpus_per_node}",
        f"#SBATCH --time={time}",
        "#SBATCH --output=ddp-%j.out",
        *opt,
        "set -euo pipefail",
        'cd "$SLURM_SUBMIT_DIR"              # the repository: sbatch from its root',
        "export PYTHONPATH=\"$SLURM_SUBMIT_DIR${PYTHONPATH:+:$PYTHONPATH}\"",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f"export MASTER_PORT={job.port}",
        "export OMP_NUM_THREADS=1",
        "# export NCCL_DEBUG=INFO           # uncomment to see which network NCCL chose",
        "# export NCCL_SOCKET_IFNAME=ib0    # the interface between nodes, if NCCL picks the wrong one",
        f"srun --kill-on-bad-exit=1 {line}",
        "",
    ])


def write_slurm_script(path: str | Path, job: ClusterJob, **kw) -> Path:
    """Write :func:`slurm_script` to ``path`` (its folder is created); return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(slurm_script(job, **kw))
    return path
