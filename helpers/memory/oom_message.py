"""What PyTorch's CUDA out-of-memory message says, in GiB: the block asked for, what was free, live and cached.

    allocator_report(str(err))  # {"asked_gib": 7.66, "free_gib": 2.44, "live_gib": 125.91, "cached_gib": 10.69}

Read by the batch search and the back-off loop (04) and by the attention sweep (03), which places an
out-of-memory mark at least at what the failing call held and asked for.
"""

from __future__ import annotations

import re

__all__ = ["allocator_report"]

_GIB = 2**30
_UNITS = {"B": 1, "bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_REPORT = {"asked_gib": r"Tried to allocate ([\d.]+) (\w+)", "free_gib": r"of which ([\d.]+) (\w+) is free",
           "live_gib": r"([\d.]+) (\w+) is allocated by PyTorch",
           "cached_gib": r"([\d.]+) (\w+) is reserved by PyTorch but unallocated"}


def allocator_report(message: str) -> dict[str, float]:
    """The sizes (GiB) in PyTorch's out-of-memory message, under the batch search's ``Trial`` field names; those it
    lacks left out::

        allocator_report("CUDA out of memory. Tried to allocate 18.38 GiB. GPU 0 has a total capacity of 79.18 GiB "
                         "of which 17.80 GiB is free. ...")  == {"asked_gib": 18.38, "free_gib": 17.8}
    """
    out = {}
    for field, pattern in _REPORT.items():
        m = re.search(pattern, message)
        if m and m.group(2) in _UNITS:
            out[field] = float(m.group(1)) * _UNITS[m.group(2)] / _GIB
    return out
