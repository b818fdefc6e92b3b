"""What a training function can leave behind in the judge's own process, through PyTorch's public API, that would act
on the judge's own work after the function returned: global module hooks (they run in every module's forward or
backward, the judge's fresh reference network's included) and torch function or dispatch modes left on the stack
(they see every tensor operation the judge makes, its accuracy's comparisons included). Threads and processes left
running are :func:`.to_target._left_running`'s.

    before = leftovers.snapshot()
    returned = train(model, data, device)
    found = leftovers.take_away(before)     # e.g. ["a global forward hook"]: each taken away; the run is refused
"""

from __future__ import annotations

import dataclasses

import torch
from torch.nn.modules import module as _module

__all__ = ["Snapshot", "snapshot", "take_away"]

#: nn.Module's global hook tables (register_module_forward_hook and its kin): each a dict of hook id → hook
_HOOK_TABLES = tuple(n for n in dir(_module) if n.startswith("_global_") and isinstance(getattr(_module, n), dict))


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The hook ids in each global table, and the depth of the function and dispatch mode stacks."""

    hooks: dict[str, frozenset]
    function_modes: int
    dispatch_modes: int


def snapshot() -> Snapshot:
    return Snapshot({n: frozenset(getattr(_module, n)) for n in _HOOK_TABLES}, torch._C._len_torch_function_stack(),
                    torch._C._len_torch_dispatch_stack())


def take_away(before: Snapshot) -> list[str]:
    """Remove what was added since ``before`` (hooks registered, modes entered and never exited), and say what it
    was, one item each; empty when nothing was."""
    found = []
    for name in _HOOK_TABLES:
        table = getattr(_module, name)
        new = [k for k in list(table) if k not in before.hooks.get(name, frozenset())]
        for k in new:
            table.pop(k, None)
        if new and not name.endswith(("_always_called", "_with_kwargs")):  # flags beside a forward hook
            what = name.removeprefix("_global_").removesuffix("s").replace("_", " ")
            found.append(f"a global {what} ({len(new)})" if len(new) > 1 else f"a global {what}")
    while torch._C._len_torch_function_stack() > before.function_modes:
        mode = torch._C._pop_torch_function_stack()
        found.append(f"a torch function mode left on ({type(mode).__name__})")
    while torch._C._len_torch_dispatch_stack() > before.dispatch_modes:
        mode = torch._C._pop_torch_dispatch_stack()
        found.append(f"a dispatch mode left on ({type(mode).__name__})")
    return found
