"""Find the places a training loop makes the host wait for the GPU, line by line, on any device.

    from helpers import syncs
    with syncs.SyncFinder() as found:
        classic_loop(model, opt, batches, device)
    print(found.table())        # each sync: what it was (loss.item(), torch.cuda.synchronize(), ...) and the line
    found.count                 # how many

A GPU runs the work the host queued while the host goes on queuing more; anything that needs a value the GPU has
not produced yet makes the host wait until the queue drains: ``loss.item()``, ``float(loss)``, ``print(loss)``,
``.cpu()``, ``.tolist()``, ``.numpy()``, ``if loss > 0:`` (``bool`` of a tensor), ``torch.cuda.synchronize()``,
and ops whose output size depends on values (``nonzero``, ``masked_select``, ``unique``). PyTorch's own finder,
``torch.cuda.set_sync_debug_mode("warn")``, sees them only on a GPU; this one sees the calls themselves, so it finds
the same lines on a CPU, where nothing waits but the habit is the same. On a GPU it turns PyTorch's finder on too and
counts what that reports.

Only the calls made inside the block are counted, from code outside ``torch`` (Adam reading its step count on the
host is the optimizer's business, not a sync of the loop's): the line reported is the one that made the call.
"""

from __future__ import annotations

import dataclasses
import linecache
import traceback
import warnings
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["Sync", "SyncFinder", "SYNCING_METHODS"]

#: Tensor methods that hand a value to the host: each waits for the GPU to finish the work that produces it.
SYNCING_METHODS = {
    torch.Tensor.item: "item()", torch.Tensor.tolist: "tolist()", torch.Tensor.numpy: "numpy()",
    torch.Tensor.__float__: "float(tensor)", torch.Tensor.__int__: "int(tensor)", torch.Tensor.__bool__: "bool(tensor) (an if or a comparison)",
    torch.Tensor.__index__: "a tensor used as an index", torch.Tensor.__format__: "a tensor formatted into a string",
    torch.Tensor.__repr__: "print(tensor)",
}
#: Copies to the host: a wait only where the tensor is on a GPU (on a CPU they copy nothing anywhere).
_TO_HOST = {torch.Tensor.cpu: ".cpu()", torch.Tensor.to: ".to('cpu')"}
#: Ops whose output's size depends on the values: the host must read them to allocate it.
_DATA_DEPENDENT = {torch.nonzero: "nonzero", torch.Tensor.nonzero: "nonzero", torch.masked_select: "masked_select",
                   torch.Tensor.masked_select: "masked_select", torch.unique: "unique", torch.Tensor.unique: "unique"}
_TORCH = str(Path(torch.__file__).parent)


@dataclasses.dataclass(frozen=True)
class Sync:
    """One call that made (or would make, on a GPU) the host wait: what it was, and where."""

    what: str
    file: str
    line: int
    code: str

    @property
    def where(self) -> str:
        return f"line {self.line}" + (f": {self.code}" if self.code else "")


_PLUMBING = ("overrides.py", "_tensor.py", "contextlib", str(Path(__file__).resolve()))


def _callers_line() -> tuple[str, int, str] | None:
    """The line that made the call: the innermost frame outside the plumbing between it and this module (the
    override machinery, ``Tensor``'s Python methods). None when that frame is torch's own (Adam reading its step
    count, say): a library's internals are not the learner's loop."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if any(p in frame.filename for p in _PLUMBING) or frame.name == "__torch_function__":
            continue  # another mode's hook (a check watching the same calls) is plumbing too
        if frame.filename.startswith(_TORCH):
            return None
        code = frame.line or linecache.getline(frame.filename, frame.lineno).strip()
        return frame.filename, frame.lineno or 0, code
    return None


def _short(file: str, line: int) -> str:
    """``train.py:76`` for a module; ``a cell, line 4`` for code typed into a notebook (IPython names its cells'
    code after temporary files)."""
    if "ipykernel" in file or file.startswith("<"):
        return f"a cell, line {line}"
    return f"{Path(file).name}:{line}"


class _Mode(TorchFunctionMode):
    def __init__(self, found: "SyncFinder") -> None:
        super().__init__()
        self.found = found

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        what = SYNCING_METHODS.get(func) or _DATA_DEPENDENT.get(func)
        if what is None and func in _TO_HOST and args and isinstance(args[0], torch.Tensor) and args[0].is_cuda \
                and (func is torch.Tensor.cpu or _to_host(args, kwargs)):
            what = _TO_HOST[func]
        if what is not None and not self.found._inside and _waits(args):
            self.found._note(what)
        self.found._inside += 1  # a method's own calls (repr calls item) are the same sync, counted once
        try:
            return func(*args, **kwargs)
        finally:
            self.found._inside -= 1


def _waits(args) -> bool:
    """On a machine with a GPU, only a CUDA tensor's value makes the host wait; on one without, every call counts
    (nothing waits there, but the same line would on a GPU)."""
    if not torch.cuda.is_available():
        return True
    return any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)


def _to_host(args, kwargs) -> bool:
    target = kwargs.get("device", args[1] if len(args) > 1 else None)
    try:
        return isinstance(target, (str, torch.device)) and torch.device(target).type == "cpu"
    except (RuntimeError, TypeError):
        return False


class SyncFinder:
    """A context manager that records every call in its block that makes the host wait for the GPU (see the module's
    docstring), with the line of code that made it."""

    def __init__(self) -> None:
        self.syncs: list[Sync] = []
        self.cuda_warnings = 0  # what torch.cuda.set_sync_debug_mode("warn") reported, on a GPU
        self._inside = 0
        self._mode = _Mode(self)
        self._patched = None
        self._warn_ctx = None
        self._warned: list = []
        self._old_debug = None

    def _note(self, what: str) -> None:
        where = _callers_line()
        if where is not None:
            self.syncs.append(Sync(what, *where))

    @property
    def count(self) -> int:
        return len(self.syncs)

    def __enter__(self) -> "SyncFinder":
        if torch.cuda.is_available():  # torch.cuda.synchronize() is no tensor call: watched by name
            original = torch.cuda.synchronize

            def synchronize(*args, **kwargs):
                self._note("torch.cuda.synchronize()")
                return original(*args, **kwargs)

            self._patched = original
            torch.cuda.synchronize = synchronize
            self._old_debug = torch.cuda.get_sync_debug_mode()
            self._warn_ctx = warnings.catch_warnings(record=True)
            self._warned = self._warn_ctx.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        if self._patched is not None:
            torch.cuda.synchronize = self._patched
            torch.cuda.set_sync_debug_mode(self._old_debug)
            self.cuda_warnings = sum("synchroniz" in str(w.message).lower() for w in self._warned)
            self._warn_ctx.__exit__(*exc)

    def table(self):
        """The syncs found, one row per line of code: where it is, what it was and how many times it ran."""
        import pandas as pd

        rows: dict[tuple[str, int], dict] = {}
        for s in self.syncs:
            row = rows.setdefault((s.file, s.line), {"where": _short(s.file, s.line), "code": s.code, "what": s.what,
                                                     "times": 0})
            row["times"] += 1
        return pd.DataFrame(list(rows.values()), columns=["where", "code", "what", "times"])

    def __repr__(self) -> str:
        if not self.syncs:
            return "no syncs found"
        lines = [f"{len(self.syncs)} syncs found:"]
        for _, r in self.table().iterrows():
            lines.append(f"  {r['what']} × {r['times']}, {r['where']}: {r['code']}")
        return "\n".join(lines)

