"""gpu-perf-lab's helpers: what the notebooks import.

    from helpers import env, data, models, train, bench, profiling, monitor, checks, results

Modules import one another only downward: env/nvml ← data/models ← train/bench
← profiling/monitor ← checks/results. Each has ``__all__`` and a docstring that
shows its use.
"""

import os as _os

# Kineto (torch.profiler's engine) logs C++ errors such as "gpuGetDeviceCount failed"
# to stderr on CPU-only machines; they are harmless and confuse learners.
_os.environ.setdefault("KINETO_LOG_LEVEL", "5")

from . import env, nvml  # noqa: E402
from . import preflight  # noqa: E402
from . import data, models  # noqa: E402
from . import augment, loaders  # noqa: E402
from . import bench, train  # noqa: E402
from . import telemetry  # noqa: E402
from . import monitor, profiling  # noqa: E402
from . import diagnose, exporters, monitor_view  # noqa: E402
from . import checks, results, solutions, widgets  # noqa: E402

__version__ = "0.1.0"
__all__ = ["env", "nvml", "preflight", "data", "models", "augment", "loaders", "train", "bench", "profiling", "telemetry", "monitor", "monitor_view", "diagnose", "exporters", "checks", "results", "solutions", "widgets"]
