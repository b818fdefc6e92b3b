"""gpu-perf-lab's helpers: what the notebooks import.

    from helpers import env, data, models, train, bench, profiling, results
    from helpers.monitor import Monitor, diagnose, format_findings
    from helpers.exercises import nb01 as checks

Layers, bottom to top; a module imports only from layers below its own, and never in a circle
(tests/test_import_layers.py holds the table and fails on an import that points up or round):

    notices                                          say a thing once
    nvml · models · data                             NVML safely; the networks; the data sets
    env                                              where am I running, at what scale
    bench · augment · preflight · results            timing and ceilings; GPU augmentation; what is missing; results/
    loaders · profiling                              input-pipeline measurements; torch.profiler
    train                                            the training loop
    monitor/   telemetry ← record ← view · exporters · diagnosis ← sampling
    widgets · exercises/ (common ← nb00, nb01, nb02)

Each module has ``__all__`` and a docstring that shows its use.
"""

import os as _os

# Kineto (torch.profiler's engine) logs C++ errors such as "gpuGetDeviceCount failed"
# to stderr on CPU-only machines; they are harmless and confuse learners.
_os.environ.setdefault("KINETO_LOG_LEVEL", "5")

from . import notices  # noqa: E402
from . import data, models, nvml  # noqa: E402
from . import env  # noqa: E402
from . import augment, bench, preflight, results  # noqa: E402
from . import loaders, profiling  # noqa: E402
from . import train  # noqa: E402
from . import monitor  # noqa: E402
from . import exercises, widgets  # noqa: E402

__version__ = "0.1.0"
__all__ = ["notices", "nvml", "models", "data", "env", "bench", "augment", "preflight", "results", "loaders",
           "profiling", "train", "monitor", "widgets", "exercises"]
