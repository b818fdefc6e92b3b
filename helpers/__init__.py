"""gpu-perf-lab's helpers: what the notebooks import.

    from helpers import env, data, models, train, bench, profiling, results
    from helpers.monitor import Monitor, diagnose, format_findings
    from helpers.exercises import nb01 as checks

Layers, bottom to top; a module imports only from layers below its own, and never in a circle
(tests/test_import_layers.py holds the table and fails on an import that points up or round):

    figure_check                                     a figure that shows its data; how wide a label is
    notices · svg · tables                           say a thing once; draw a chart; a table to read
    nvml · models · data · ddp.protocol · syncs      NVML safely; the networks; the data sets; a DDP worker's lines;
                                                     the calls that make the host wait for the GPU
    machine_profiles                                 learner machines a large GPU stands in for (one table)
    env                                              where am I running, at what scale
    timebox                                          every search, sweep and measured window stops in time
    bench · augment · preflight · results · ncu_target · kernels.softmax_triton · kernels.relu_pool_triton ·
    kernels.cuda_ext · memory.anatomy · memory.accumulation · memory.fragmentation · memory.snapshot · ddp.launch ·
    challenge.accuracy · challenge.training_data · challenge.isolation
                                                     timing and ceilings; GPU augmentation; what is missing; results/;
                                                     what ncu measures; the Triton softmax; ReLU + max-pool fused,
                                                     forward and backward, in Triton; a CUDA extension; where a
                                                     step's memory goes; accumulation; expandable segments; the
                                                     allocator's snapshot of one step; torchrun from a notebook;
                                                     held-out accuracy; the training set handed to a learner's
                                                     function, counted; a judged process's time limit and the files
                                                     it must not change
    loaders · profiling · roofline · kernels.launches · kernels.graphs · kernels.softmax · kernels.attention ·
    memory.search · ddp.worker · ddp.overlap · ddp.cluster · leaderboard.entry
                                                     input pipelines; torch.profiler; the roofline; launches; CUDA
                                                     graphs replayed and timed; softmax variants; attention; the
                                                     largest batch; the DDP worker; one rank's trace and HTA's
                                                     overlap; torchrun on many nodes, Slurm; a leaderboard entry
    leaderboard/   entry ← seal ← store ← concurrency the final challenge's leaderboard: sealed entries, SQLite
    ddp.scaling ← ddp                                scaling and communication measured by launching the worker
    gpt/   model · data · text ← flops · memory · fp8 ← sharded · rungs · activations ← ladder
           · sharded_speed ← step_kernels            a small GPT and its tokens (a chain, or real text offline:
                                                     Python's documentation as bytes); FLOPs per token and bytes per
                                                     parameter, measured; FP8 through torchao where it runs; the
                                                     optimizer's state sharded over ranks, and its speed against
                                                     DDP, one rank per GPU; 07's rungs and what a
                                                     block keeps for backward; the ladder trained and judged; the
                                                     top rung's kernels on the roofline
    train · ncu · nsys_stats · memory.resilient · memory.timeline
                                                     the training loop; Nsight Compute's table; Nsight Systems'
                                                     tables read; backing off on OOM; memory over time
    challenge.function_check · memory.scratch        the same-function check; what each layer holds only
                                                     while it runs (workspaces), probed call by call
    kernels.compile_modes · memory.precision · challenge.recipes · large_batch
                                                     torch.compile's modes timed; fp32/TF32/bf16/fp16 side by side;
                                                     the classic loop and the answer key as training functions; a
                                                     batch eight times larger, judged on held-out accuracy
    kernels · memory                                 the two packages
    challenge.ladder ← nsys_target ← nsys            the steps Nsight Systems records (the course's step, the final
                                                     challenge's baseline and top rung); Nsight Systems where it is
                                                     installed, its tables read per step
    monitor/   telemetry ← record ← view · exporters · diagnosis ← sampling
    widgets · exercises/ (common ← nb00, nb01, nb02, nb03, nb04, nb05)

Each module has ``__all__`` and a docstring that shows its use.
"""

import os as _os

# Kineto (torch.profiler's engine) writes its own log lines to stderr: C++ errors such as "gpuGetDeviceCount
# failed" on CPU-only machines, and (PyTorch 2.14) "USDT: ... profiler_start/profiler_stop" around every profile at
# every level below 6. They are harmless, and in a notebook they show as red boxes that look like errors.
_os.environ.setdefault("KINETO_LOG_LEVEL", "6")

# Triton reads TRITON_INTERPRET when it is imported: on a machine with no CUDA GPU, set it first, so the course's
# Triton kernels run through Triton's interpreter (correct, slow) instead of failing to find a GPU.
import torch as _torch  # noqa: E402

# Inductor's on-disk cache does not tell kernels built for AVX-512 from those for AVX2: a process that limits
# PyTorch's CPU kernels (ATEN_CPU_CAPABILITY=avx2, as the course's slow-CPU runs do) reused the kernels of an
# unlimited run on the same machine and computed wrong numbers (3.5e34 where 0.1 was due). Each keeps its own cache.
_capability = _os.environ.get("ATEN_CPU_CAPABILITY", "").strip().lower()
if _capability and "TORCHINDUCTOR_CACHE_DIR" not in _os.environ:
    import getpass as _getpass
    import tempfile as _tempfile

    try:
        _user = _getpass.getuser()
    except (KeyError, OSError):  # a container's user with no name
        _user = str(_os.getuid())
    _os.environ["TORCHINDUCTOR_CACHE_DIR"] = _os.path.join(_tempfile.gettempdir(), f"torchinductor_{_user}_{_capability}")

if not _torch.cuda.is_available():
    _os.environ.setdefault("TRITON_INTERPRET", "1")
    # torch.compile imports cpp_extension, which warns on a CPU machine that it found no CUDA runtime: expected here.
    import logging as _logging

    _logging.getLogger("torch.utils.cpp_extension").setLevel(_logging.ERROR)

from . import notices, tables  # noqa: E402
from . import data, models, nvml  # noqa: E402
from . import env  # noqa: E402

env.apply_profile()  # a learner-machine profile (HELPERS_PROFILE) limits the cores before anything starts a worker
from . import timebox  # noqa: E402
from . import augment, bench, preflight, results  # noqa: E402
from . import loaders, profiling  # noqa: E402
from . import ddp  # noqa: E402
from . import train  # noqa: E402
from . import ncu, ncu_target, roofline  # noqa: E402
from . import kernels, memory  # noqa: E402
from . import monitor  # noqa: E402
from . import exercises, widgets  # noqa: E402

__version__ = "0.1.0"
__all__ = ["notices", "tables", "nvml", "models", "data", "env", "timebox", "bench", "augment", "preflight", "results", "loaders",
           "profiling", "ddp", "train", "ncu", "ncu_target", "roofline", "kernels", "memory", "monitor", "widgets", "exercises"]
