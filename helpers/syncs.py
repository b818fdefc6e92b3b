"""Find the places a training loop makes the host wait for the GPU, line by line, on any device.

    from helpers import syncs
    with syncs.SyncFinder(device=device) as found:   # device: the one the loop is handed
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
#: Copies to the host: a wait where the tensor is on a GPU (on a machine without one, where the same line would).
_TO_HOST = {torch.Tensor.cpu: ".cpu()", torch.Tensor.to: ".to('cpu')", torch.Tensor.copy_: "a copy into a host tensor",
            torch.Tensor.__setitem__: "a tensor stored into a host tensor", torch.as_tensor: "torch.as_tensor(.., 'cpu')"}
#: Ops whose output's size or truth depends on the values: the host must read them.
_DATA_DEPENDENT = {torch.nonzero: "nonzero", torch.Tensor.nonzero: "nonzero", torch.masked_select: "masked_select",
                   torch.Tensor.masked_select: "masked_select", torch.unique: "unique", torch.Tensor.unique: "unique",
                   torch.equal: "torch.equal", torch.Tensor.equal: "torch.equal", torch.is_nonzero: "is_nonzero",
                   torch.Tensor.is_nonzero: "is_nonzero", torch._assert: "torch._assert (an assert on a tensor)"}
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


_PLUMBING = ("overrides.py", "_tensor.py", "contextlib", str(Path(__file__).resolve()),
             "/warnings.py")  # a warning's own machinery, between PyTorch's sync warning and the line that caused it


#: torch's Python around a C call that waits, as (file's ending, function): ``torch.cuda.synchronize()`` is Python
#: in torch/cuda/__init__.py that calls ``torch._C._cuda_synchronize``, where the finder watches it. Its frame is
#: plumbing for that call only: the line that called ``torch.cuda.synchronize()`` is the caller's.
_SYNC_WRAPPERS = (("torch/cuda/__init__.py", "synchronize"),)


def _callers_line(through: tuple[tuple[str, str], ...] = ()) -> tuple[str, int, str] | None:
    """The line that made the call: the innermost frame outside the plumbing between it and this module (the
    override machinery, ``Tensor``'s Python methods, and ``through``'s frames of torch's). None when that frame is
    torch's own (Adam reading its step count, say): a library's internals are not the learner's loop."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if any(p in frame.filename for p in _PLUMBING) or frame.name == "__torch_function__":
            continue  # another mode's hook (a check watching the same calls) is plumbing too
        if any(frame.filename.replace("\\", "/").endswith(f) and frame.name == n for f, n in through):
            continue
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
        if what is None and func in _TO_HOST and self.found._to_host(func, args, kwargs):
            what = _TO_HOST[func]
        if what is None and func in (torch.where, torch.Tensor.__getitem__) and _data_dependent(func, args, kwargs):
            what = "torch.where(condition)" if func is torch.where else "indexing with a boolean tensor"
        if what is not None and not self.found._inside and (func in _TO_HOST or _waits(args)):
            self.found._note(what)
        self.found._inside += 1  # a method's own calls (repr calls item) are the same sync, counted once
        try:
            return func(*args, **kwargs)
        finally:
            self.found._inside -= 1


def _data_dependent(func, args, kwargs) -> bool:
    if func is torch.where:
        return len(args) + len(kwargs) == 1  # where(condition) alone: the indices, as many as the values say
    index = args[1] if len(args) > 1 else None
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in parts)


def _on_host(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "cpu"


def _waits(args) -> bool:
    """On a machine with a GPU, only a CUDA tensor's value makes the host wait; on one without, every call counts
    (nothing waits there, but the same line would on a GPU)."""
    if not torch.cuda.is_available():
        return True
    return any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)


def _target_device(args, kwargs, at: int = 1):
    target = kwargs.get("device", args[at] if len(args) > at else None)
    if isinstance(target, torch.Tensor):  # x.to(other): other's device
        return target.device
    try:
        return torch.device(target) if isinstance(target, (str, torch.device)) else None
    except (RuntimeError, TypeError):
        return None


class SyncFinder:
    """A context manager that records every call in its block that makes the host wait for the GPU (see the module's
    docstring), with the line of code that made it."""

    def __init__(self, *, ignore: tuple[torch.Tensor, ...] | list = (), device: torch.device | None = None) -> None:
        self.syncs: list[Sync] = []
        # the training device, as the loop is handed it: x.to(device) with this very object is the copy to the
        # device, never to the host (on a machine without a GPU, device is the CPU too, and only this tells them apart)
        self._device = device
        # tensors whose copies are the loop's input, not its output (a batch handed over on the host): on a machine
        # without a GPU, moving them "to the device" is a move to the CPU, and no wait anywhere
        self._ignored = {id(t) for t in ignore}
        self.cuda_warnings = 0  # what torch.cuda.set_sync_debug_mode("warn") reported, on a GPU
        # the same, line by line: each warning's line of code (torch's own lines apart, as for this finder's)
        self.cuda_syncs: list[Sync] = []
        self._inside = 0
        self._mode = _Mode(self)
        self._patched = None
        self._warn_ctx = None
        self._old_debug = None

    def _to_host(self, func, args, kwargs) -> bool:
        """A copy from a GPU (or, on a machine without one, from anything but an ignored input) to the host."""
        if func is torch.as_tensor:
            src, dst = (args[0] if args else kwargs.get("data")), _target_device(args, kwargs, at=2)
            moved = dst is not None and dst.type == "cpu"
        elif func is torch.Tensor.cpu:
            src, moved = (args[0] if args else None), True
        elif func is torch.Tensor.to:
            src, dst = (args[0] if args else None), _target_device(args, kwargs)
            raw = kwargs.get("device", args[1] if len(args) > 1 else None)
            moved = dst is not None and dst.type == "cpu" and not (self._device is not None and raw is self._device)
        else:  # copy_ and __setitem__: a host tensor receiving a value
            dst_t = args[0] if args else None
            src = args[1] if func is torch.Tensor.copy_ and len(args) > 1 else (args[2] if len(args) > 2 else None)
            moved = _on_host(dst_t)
        if not moved or not isinstance(src, torch.Tensor) or id(src) in self._ignored:
            return False
        return src.is_cuda if torch.cuda.is_available() else True

    def _note(self, what: str, through: tuple[tuple[str, str], ...] = ()) -> None:
        where = _callers_line(through)
        if where is not None:
            self.syncs.append(Sync(what, *where))

    @property
    def count(self) -> int:
        return len(self.syncs)

    def __enter__(self) -> "SyncFinder":
        if torch.cuda.is_available():  # the synchronize calls are no tensor calls: watched where they all end
            self._patches = []
            for owner, name, what in ((torch._C, "_cuda_synchronize", "torch.cuda.synchronize()"),
                                      (torch.cuda.Stream, "synchronize", "a stream's synchronize()"),
                                      (torch.cuda.Event, "synchronize", "an event's synchronize()")):
                original = getattr(owner, name)
                setattr(owner, name, self._watching(original, what))
                self._patches.append((owner, name, original))
            self._patched = True
            self._old_debug = torch.cuda.get_sync_debug_mode()
            self._warn_ctx = warnings.catch_warnings()
            self._warn_ctx.__enter__()
            warnings.simplefilter("always")
            self._shown = warnings.showwarning
            warnings.showwarning = self._on_warning  # called where the warning is raised: the loop's line is on the stack
            torch.cuda.set_sync_debug_mode("warn")
        self._mode.__enter__()
        return self

    def _watching(self, original, what: str):
        def synchronize(*args, **kwargs):
            self._note(what, _SYNC_WRAPPERS)
            return original(*args, **kwargs)
        return synchronize

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        if self._patched is not None:
            for owner, name, original in self._patches:
                setattr(owner, name, original)
            torch.cuda.set_sync_debug_mode(self._old_debug)
            self._warn_ctx.__exit__(*exc)

    def _on_warning(self, message, category, filename, lineno, file=None, line=None) -> None:
        """PyTorch's sync debug mode warns from inside the call that waits: the line of code that made it is on the
        stack now. Any other warning is shown as it would have been."""
        if "synchroniz" not in str(message).lower():
            self._shown(message, category, filename, lineno, file, line)
            return
        self.cuda_warnings += 1
        where = _callers_line()
        if where is not None:  # None: inside torch (the optimizer's own reads), not the loop's
            self.cuda_syncs.append(Sync("a synchronizing CUDA call", *where))

    def table(self):
        """The syncs found, one row per line of code: where it is, what it was and how many times it ran; on a GPU
        also how many times PyTorch's own finder (``set_sync_debug_mode("warn")``) warned on that line. The two
        count different things (a call this finder sees; each CUDA call inside it that waits), so a line may differ,
        and a line only PyTorch's finder saw is listed too."""
        import pandas as pd

        rows: dict[tuple[str, int], dict] = {}
        for s in self.syncs:
            row = rows.setdefault((s.file, s.line), {"where": _short(s.file, s.line), "code": s.code, "what": s.what,
                                                     "times": 0, "PyTorch's finder": 0})
            row["times"] += 1
        for s in self.cuda_syncs:
            row = rows.setdefault((s.file, s.line), {"where": _short(s.file, s.line), "code": s.code,
                                                     "what": "(PyTorch's finder only)", "times": 0,
                                                     "PyTorch's finder": 0})
            row["PyTorch's finder"] += 1
        columns = ["where", "code", "what", "times"] + (["PyTorch's finder"] if self._patched else [])
        return pd.DataFrame(list(rows.values()), columns=columns)

    def __repr__(self) -> str:
        """What was found, each count beside the lines it sums: this finder's waits, line by line; on a GPU, then
        the lines only PyTorch's finder warned on, and its warnings in all (some may come from PyTorch's own code,
        with no line of the loop on the stack: said, so the counts add up)."""
        table = self.table()
        ours, theirs = table[table["times"] > 0], table[table["times"] == 0]
        plural = lambda n, word: f"{n} {word}" + ("" if n == 1 else "s")  # noqa: E731
        if not len(ours) and not self.cuda_warnings:
            return "no syncs found"
        lines = [f"{plural(len(self.syncs), 'wait')} found on {plural(len(ours), 'line')}:" if len(ours)
                 else "no waits found by this finder"]
        lines += [f"  {r['what']} × {r['times']}, {r['where']}: {r['code']}" for _, r in ours.iterrows()]
        if self.cuda_warnings:
            placed = len(self.cuda_syncs)
            if len(theirs):
                lines.append(f"PyTorch's finder also warned on {plural(len(theirs), 'line')} this finder does not "
                             "count:")
                col = "PyTorch's finder"
                lines += [f"  × {r[col]}, {r['where']}: {r['code']}" for _, r in theirs.iterrows()]
            inside = self.cuda_warnings - placed
            lines.append(f"torch.cuda.set_sync_debug_mode('warn') warned {plural(self.cuda_warnings, 'time')}: "
                         f"{placed} on the loop's lines" + (f", {inside} inside PyTorch's own code (no line of the "
                                                             "loop on the stack)" if inside else "")
                         + "; it counts each CUDA call that waits, not lines of Python")
        return "\n".join(lines)

