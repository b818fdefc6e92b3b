"""One training step as PyTorch's CUDA allocator saw it: every block, when it lived, and what kind of tensor it held.

    snap = record_snapshot(step, device=DEVICE)              # the allocator's history of ONE step, after a warm-up
    tl = timeline(snap, kinds=tensor_kinds(net, adam))       # bytes by kind after each event; phases; the peak
    timeline_figure(tl).show()                               # stacked by kind against time, the phases shaded
    largest_blocks_table(tl)                                 # the largest blocks: size, kind, the line that made them
    save_viewer(snap, "step.html"); save_pickle(snap, "step.pickle")   # PyTorch's own interactive viewer

**Phases.** The step marks them as the course's steps do, ``with profiling.nvtx_range("forward"):`` (or
``torch.profiler.record_function``). While history is recorded, the allocator keeps each such range's start and
end in the snapshot's ``external_annotations`` (``{"name", "stage": "START" | "END", "device", "time_us"}``), on
the clock of its events' ``time_us``: the phases are read from there. (``torch.cuda.memory._set_memory_metadata``
marks events per thread, and the backward allocates on autograd's own thread: it would miss the backward.) An
event in the very microsecond of a phase boundary goes to the later phase.

**Kinds.** What the snapshot's Python stacks hold: the forward's allocations the user's lines and ``torch/nn``'s;
the backward's none (autograd allocates on its own thread, where no Python runs); the optimizer's ``torch/optim``;
blocks allocated before the recording none. So a block's kind comes from when it lived, in this order:

1. ``kinds[address]`` for a block still allocated at the end (:func:`tensor_kinds`: parameters, gradients,
   optimizer state, read from the model and optimizer after the step);
2. allocated before the recording began: "allocated before the step" (without ``kinds``: the weights, the
   optimizer's state, what the previous step left);
3. allocated in the forward phase and freed in the backward: "activations" (what autograd kept for backward);
4. allocated in the backward phase and alive after it: "gradients";
5. allocated in the optimizer phase (or from ``torch/optim``) and alive after it: "optimizer state";
6. freed in the phase (or the gap between phases) it was allocated in: "temporaries";
7. anything else: "other" (the batch moved to the GPU before the forward, a loss kept after the step).

**Viewer.** :func:`save_viewer` writes ``torch.cuda._memory_viz.trace_plot``'s page, which loads PyTorch's viewer
script (MemoryViz.js) from a CDN, and that script loads d3 from another. The wheel ships no MemoryViz.js (2.14 has
none under ``torch/utils/viz``), so the page needs the internet when opened, and says so; a copy at hand
(``memory_viz_js=``) is inlined. :func:`timeline_figure` needs no network at all.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import inspect
import itertools
import pickle
import re
from pathlib import Path
from typing import Callable, Iterable, Mapping

import torch

from .. import figure_check, notices, tables

__all__ = ["PHASES", "KINDS", "Block", "SnapshotTimeline", "record_snapshot", "tensor_kinds", "timeline",
           "timeline_figure", "largest_blocks_table", "save_viewer", "save_pickle", "remote_scripts"]

PHASES = ("forward", "backward", "optimizer")
#: Every kind a block can have, in the order they are stacked (bottom first: what lives longest).
KINDS = ("parameters", "optimizer state", "allocated before the step", "gradients", "activations", "temporaries",
         "other")
BEFORE, BETWEEN = "before the step", "between phases"
GIB, MIB = 2**30, 2**20
_MEMORY_ACTIONS = {"alloc", "free_requested", "segment_alloc", "segment_free", "segment_map", "segment_unmap"}


@dataclasses.dataclass(frozen=True)
class Block:
    """One allocation of the step: its size, kind, the line that allocated it and when it lived."""

    address: int = dataclasses.field(repr=False)
    size: int  # bytes, as the allocator rounded them
    kind: str  # one of KINDS
    source: str | None  # "models.py:57 forward": the innermost frame outside torch and Python; None: no stack kept
    allocated_in: str  # a phase, "between phases", or "before the step"
    freed_in: str | None  # a phase or "between phases"; None: still allocated when the snapshot was taken
    alive_from_ms: float | None  # None: allocated before the recording began
    alive_to_ms: float | None  # None: still allocated at the end


@dataclasses.dataclass(frozen=True)
class SnapshotTimeline:
    """Allocated bytes by kind after each allocator event of one step, its phases and its blocks (largest first)."""

    device: str
    kinds: tuple[str, ...]  # the kinds present, stacking order
    phases: tuple[tuple[str, float, float], ...]  # (name, start ms, end ms), as memory.timeline gives them
    notes: tuple[str, ...]
    # ms since the recorded step began (its first event or phase); index 0 holds the state before the first event
    t_ms: tuple[float, ...] = dataclasses.field(repr=False)
    allocated: tuple[tuple[int, ...], ...] = dataclasses.field(repr=False)  # one series per kind, along t_ms
    reserved: tuple[int, ...] = dataclasses.field(repr=False)  # the allocator's segments, along t_ms
    blocks: tuple[Block, ...] = dataclasses.field(repr=False)

    @functools.cached_property
    def total(self) -> tuple[int, ...]:
        """All kinds together after each event."""
        return tuple(map(sum, zip(*self.allocated))) if self.allocated else tuple(0 for _ in self.t_ms)

    @functools.cached_property
    def peak_index(self) -> int:
        return self.total.index(max(self.total)) if self.total else 0

    @property
    def peak(self) -> int:
        return self.total[self.peak_index] if self.total else 0

    @property
    def peak_ms(self) -> float:
        return self.t_ms[self.peak_index] if self.t_ms else 0.0

    @property
    def peak_phase(self) -> str | None:
        return next((n for n, s, e in self.phases if s <= self.peak_ms <= e), None)

    def at_peak(self) -> dict[str, int]:
        """Bytes of each kind alive at the peak: ``{"activations": ..., "parameters": ...}``."""
        return {k: series[self.peak_index] for k, series in zip(self.kinds, self.allocated)}

    def largest(self, n: int = 10) -> tuple[Block, ...]:
        return self.blocks[:n]


def record_snapshot(step: Callable[[], object], *, device: torch.device | str | int, warmup: int = 1,
                    max_entries: int = 100_000) -> dict:
    """Run ``step`` ``warmup`` times, then once with the CUDA allocator's history on; return ``_snapshot()``'s dict.

        snap = record_snapshot(step, device="cuda")     # step() marks its phases with profiling.nvtx_range

    The warm-up steps make the optimizer's state and fill the allocator's cache, so the recorded step is a
    steady one. ``max_entries`` bounds the events kept (a ring buffer: a longer step loses its first events).
    """
    dev = _cuda_device(device)
    for _ in range(warmup):
        step()
    # garbage from before (an earlier cell's, an earlier test's) collected now, not by a collection that the step's
    # own allocations trigger halfway: its blocks would be freed inside the step and read as the step's (a unit test
    # run after others read a 146 MiB block from before the step as the largest the step kept, one H200, 2026-11-29)
    gc.collect()
    torch.cuda.synchronize(dev)  # a sync point: the warm-up's frees land before the recording starts
    memory = torch.cuda.memory
    wanted = dict(enabled="all", context="all", stacks="python", max_entries=max_entries, clear_history=True)
    accepted = inspect.signature(memory._record_memory_history).parameters
    with torch.cuda.device(dev):
        memory._record_memory_history(**{k: v for k, v in wanted.items() if k in accepted})
        try:
            step()
            torch.cuda.synchronize(dev)  # a sync point: the step's frees are in the history
            # taken before recording stops: stopping the history clears the phases' annotations
            return memory._snapshot()
        finally:
            memory._record_memory_history(enabled=None)


def _cuda_device(device) -> torch.device:
    dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"record_snapshot records PyTorch's CUDA allocator, and device={str(dev)!r} is not a CUDA "
                         "device: pass device='cuda' on a machine with an NVIDIA GPU (on a CPU, "
                         "memory.timeline draws memory over time from torch.profiler instead).")
    if not torch.cuda.is_available():
        raise RuntimeError("record_snapshot needs a CUDA GPU and this machine has none that PyTorch can see: run it "
                           "on a GPU node (on a CPU, memory.timeline draws memory over time from torch.profiler).")
    return dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device())


def tensor_kinds(model: torch.nn.Module | None = None,
                 optimizer: torch.optim.Optimizer | None = None) -> dict[int, str]:
    """``{allocation address: kind}`` for the model's parameters, their gradients and the optimizer's state, read
    now (after the recorded step): what :func:`timeline` needs to tell the weights from Adam's moments."""
    params = list(model.parameters()) if model is not None else []
    if optimizer is not None:
        params += [p for group in optimizer.param_groups for p in group["params"]]
    if not params:
        return {}
    where = params[0].device  # Adam's step counters live on the CPU: not in the GPU's allocator
    kinds: dict[int, str] = {}
    tensors = [("parameters", p) for p in params] + [("gradients", p.grad) for p in params if p.grad is not None]
    if optimizer is not None:
        tensors += [("optimizer state", v) for state in optimizer.state.values() for v in state.values()
                    if torch.is_tensor(v)]
    for kind, t in tensors:
        if t.device == where and t.numel():
            kinds.setdefault(t.untyped_storage().data_ptr(), kind)  # the allocation's base, as the allocator knows it
    return kinds


@dataclasses.dataclass
class _Life:
    address: int
    size: int
    frames: list
    start: int | None  # index of the allocating event; None: before the recording
    end: int | None = None  # index of the freeing event; None: alive at the end


def timeline(snapshot: dict, *, kinds: Mapping[int, str] | None = None, device: int | None = None,
             label: str | None = None, phases: Iterable[str] = PHASES) -> SnapshotTimeline:
    """The step's allocated bytes by kind after each event, its phases and its blocks, from ``snapshot`` alone.

        tl = timeline(snap)                          # kinds by when each block lived (the module's rules)
        tl = timeline(snap, kinds=tensor_kinds(net, adam), label=env.device_label())

    ``device``: which GPU's trace (default: the one with most events); ``label``: the name in titles.
    """
    traces = snapshot.get("device_traces") or []
    if device is None:
        device = max(range(len(traces)), key=lambda i: len(traces[i]), default=0)
    events = [e for e in (traces[device] if device < len(traces) else []) if e.get("action") in _MEMORY_ACTIONS]
    if not events:
        raise ValueError(f"the snapshot holds no allocator events for cuda:{device}: record it with record_snapshot "
                         "(its history on, 'all'), around a step that allocates on that GPU.")
    spans = _phase_spans(snapshot.get("external_annotations") or [], device, set(phases))
    notes = () if spans else ("the step marked no phases: wrap its forward, backward and optimizer in "
                              "profiling.nvtx_range so activations and gradients can be told apart",)
    t0 = min([events[0]["time_us"]] + [s for _n, s, _e in spans])
    times = [(e["time_us"] - t0) / 1e3 for e in events]
    spans_ms = tuple((n, (s - t0) / 1e3, (e - t0) / 1e3) for n, s, e in spans)
    slots = [_slot(t, spans_ms) for t in times]
    names = [spans_ms[k // 2][0] if k % 2 else BETWEEN for k in range(2 * len(spans_ms) + 1)]
    lives = _lives(events, snapshot, device)
    kinds = dict(kinds or {})
    blocks, deltas = [], {}  # kind -> bytes it gains at each event (index 0: alive before the first)
    for life in lives:
        kind = _kind_of(life, slots, names, kinds)
        if kind not in deltas:
            deltas[kind] = [0] * (len(events) + 1)
        change = deltas[kind]
        change[0 if life.start is None else life.start + 1] += life.size
        if life.end is not None:
            change[life.end + 1] -= life.size
        blocks.append(Block(life.address, life.size, kind, _source(life.frames),
                            BEFORE if life.start is None else names[slots[life.start]],
                            None if life.end is None else names[slots[life.end]],
                            None if life.start is None else times[life.start],
                            None if life.end is None else times[life.end]))
    order = tuple(k for k in KINDS if k in deltas) + tuple(sorted(set(deltas) - set(KINDS)))
    grown = list(itertools.accumulate([0] + [e["size"] if e["action"] in ("segment_alloc", "segment_map") else
                                             -e["size"] if e["action"].startswith("segment") else 0 for e in events]))
    end = sum(s["total_size"] for s in snapshot.get("segments", []) if s.get("device", device) == device)
    blocks.sort(key=lambda b: (-b.size, b.alive_from_ms if b.alive_from_ms is not None else -1.0))
    return SnapshotTimeline(label or f"cuda:{device}", order, spans_ms, notes, (0.0, *times),
                            tuple(tuple(itertools.accumulate(deltas[k])) for k in order),
                            tuple(end - grown[-1] + g for g in grown), tuple(blocks))


def _kind_of(life: _Life, slots: list[int], names: list[str], kinds: dict[int, str]) -> str:
    """The module's rules, in their order."""
    if life.end is None and life.address in kinds:
        return kinds[life.address]
    if life.start is None:
        return "allocated before the step"
    born = slots[life.start]
    died = slots[life.end] if life.end is not None else None
    outlives = died is None or died > born  # still allocated after the phase that made it
    if names[born] == "forward" and died is not None and names[died] == "backward":
        return "activations"
    if names[born] == "backward" and outlives:
        return "gradients"
    if (names[born] == "optimizer" or _from_optim(life.frames)) and outlives:
        return "optimizer state"
    return "temporaries" if died == born else "other"


def _phase_spans(annotations: list, device: int, names: set[str]) -> list[tuple[str, int, int]]:
    """(name, start µs, end µs) of each user range named in ``names``; one left open ends at the last annotation."""
    marks = sorted((a for a in annotations if a.get("name") in names and a.get("device", device) == device),
                   key=lambda a: a["time_us"])
    spans, open_ = [], {}
    for a in marks:
        if a.get("stage") == "START":
            open_[a["name"]] = a["time_us"]
        elif a.get("stage") == "END" and a["name"] in open_:
            spans.append((a["name"], open_.pop(a["name"]), a["time_us"]))
    last = max((a["time_us"] for a in annotations), default=0)
    return sorted(spans + [(name, start, last) for name, start in open_.items()], key=lambda s: s[1])


def _slot(t: float, spans: tuple[tuple[str, float, float], ...]) -> int:
    """2i+1 inside phase i, 2i in the gap before it (2n after the last): two events share a slot when no phase
    boundary lies between them. At a boundary shared by two phases, the later one."""
    for i in range(len(spans) - 1, -1, -1):
        if spans[i][1] <= t:
            return 2 * i + 1 if t <= spans[i][2] else 2 * i + 2
    return 0


def _lives(events: list, snapshot: dict, device: int) -> list[_Life]:
    """Each allocation's life, from the trace's alloc and free events and the blocks still allocated at the end."""
    live: dict[int, _Life] = {}
    lives: list[_Life] = []
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            if e["addr"] in live:  # its free fell out of the ring buffer: it ended here at the latest
                live.pop(e["addr"]).end = i
            live[e["addr"]] = _Life(e["addr"], e["size"], e.get("frames") or [], i)
            lives.append(live[e["addr"]])
        elif e["action"] == "free_requested":  # the tensor let go: the allocated bytes drop here
            life = live.pop(e["addr"], None)
            if life is None:  # allocated before the recording began
                life = _Life(e["addr"], e["size"], [], None)
                lives.append(life)
            life.end = i
    for seg in snapshot.get("segments", []):
        if seg.get("device", device) != device:
            continue
        address = seg["address"]
        for b in seg["blocks"]:
            address = b.get("address", address)  # older snapshots leave it to the walk along the segment
            if b["state"] == "active_allocated" and address not in live:
                lives.append(_Life(address, b["size"], b.get("frames") or [], None))
            address += b["size"]
    return lives


_LIBRARY = ("/torch/", "/site-packages/", "/dist-packages/", "/lib/python3")


def _source(frames: list) -> str | None:
    """``file:line function`` of the innermost frame that is the user's (not torch's, not Python's own)."""
    for f in frames:
        name = str(f.get("filename", "")).replace("\\", "/")
        if name and not name.startswith("<") and not any(part in name for part in _LIBRARY):
            return f"{name.rsplit('/', 1)[-1]}:{f.get('line')} {f.get('name')}"
    return None


def _from_optim(frames: list) -> bool:
    return any("/torch/optim/" in str(f.get("filename", "")).replace("\\", "/") for f in frames)


_COLORS = {"parameters": "rgba(31,119,180,0.75)", "optimizer state": "rgba(44,160,44,0.75)",
           "allocated before the step": "rgba(127,127,127,0.6)", "gradients": "rgba(255,127,14,0.75)",
           "activations": "rgba(214,39,40,0.7)", "temporaries": "rgba(148,103,189,0.7)",
           "other": "rgba(140,86,75,0.6)"}
_BANDS = {"forward": "rgba(31,119,180,0.10)", "backward": "rgba(255,127,14,0.10)",
          "optimizer": "rgba(44,160,44,0.12)"}


#: A kind whose largest allocation stays below this share of the step's peak draws no visible band.
THIN_SHARE = 0.01


def timeline_figure(tl: SnapshotTimeline, *, title: str | None = None):
    """Allocated GiB stacked by kind against time, the reserved pool dotted, the peak marked, the phases shaded."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for kind, series in zip(tl.kinds, tl.allocated):
        # a kind too small to see keeps its legend entry, saying so: 04's "other" was listed with no area to find
        thin = tl.peak > 0 and max(series, default=0) < THIN_SHARE * tl.peak
        name = f"{kind} (under {THIN_SHARE:.0%} of the peak: too thin to see)" if thin else kind
        fig.add_trace(go.Scatter(x=tl.t_ms, y=[b / GIB for b in series], name=name, mode="lines", line_shape="hv",
                                 stackgroup="allocated", line=dict(width=0.5, color=_COLORS.get(kind)),
                                 fillcolor=_COLORS.get(kind)))
    if any(tl.reserved):
        fig.add_trace(go.Scatter(x=tl.t_ms, y=[b / GIB for b in tl.reserved], name="reserved (allocator's pool)",
                                 mode="lines", line_shape="hv", line=dict(dash="dot", color="black", width=1)))
    fig.add_trace(go.Scatter(x=[tl.peak_ms], y=[tl.peak / GIB], name="peak", mode="markers",
                             marker=dict(symbol="x", size=10, color="black")))
    # the phases named at their bands' top left, as memory.timeline places them, in a band above the curves
    height = 420
    span, band = figure_check.shade_phases(fig, tl.phases, tl.t_ms, colors=_BANDS, height=height,
                                           legend_w=figure_check.legend_width([t.name for t in fig.data]))
    top = max([b / GIB for b in (*tl.total, *tl.reserved)] + [1e-9]) * 1.02
    where = f" in the {tl.peak_phase}" if tl.peak_phase else ""
    fig.update_layout(title=title or f"One step by kind: peak {tl.peak / GIB:.2f} GiB{where}<br><sup>{tl.device}</sup>",
                      xaxis_title="ms since the recorded step began, host clock", yaxis_title="allocated GiB", height=height)
    fig.update_xaxes(range=[0, span])
    fig.update_yaxes(range=[0, top / (1 - min(band, 0.6))])
    return fig


def largest_blocks_table(tl: SnapshotTimeline, n: int = 10) -> tables.Table:
    """The ``n`` largest blocks of the step, one row each: size, kind, the line that allocated it, when it lived."""
    import pandas as pd

    rows = [{"size_mib": b.size / MIB, "kind": b.kind, "allocated at": b.source, "allocated in": b.allocated_in,
             "freed in": b.freed_in, "alive_from_ms": b.alive_from_ms, "alive_to_ms": b.alive_to_ms}
            for b in tl.largest(n)]
    df = pd.DataFrame(rows, index=pd.RangeIndex(1, len(rows) + 1, name="rank"))
    alive = "still allocated when the snapshot was taken"
    return tables.readable(df, formats={"size_mib": "sig"}, missing={
        "allocated at": "the allocator kept no Python stack: autograd's backward thread runs no Python, and a block "
                        "allocated before the recording has none",
        "alive_from_ms": "allocated before the recording began", "freed in": alive, "alive_to_ms": alive})


_IMPORT_VIEWER = re.compile(r"^\s*import\s*\{\s*add_local_files\s*\}\s*from\s*[\"'][^\"']*MemoryViz\.js[\"'];?\s*$",
                            re.M)
_REMOTE = re.compile(r"(?:\bsrc\s*=\s*|\bfrom\s*|\bimport\s*\(?\s*)[\"'](https?://[^\"']+)[\"']", re.I)


def remote_scripts(html: str) -> list[str]:
    """The http(s) addresses a page loads scripts from (``<script src=...>``, ``import ... from "..."``)."""
    return list(dict.fromkeys(_REMOTE.findall(html)))


def _shipped_memory_viz_js() -> Path | None:
    """The wheel's own MemoryViz.js, where this torch ships one (2.14 does not)."""
    path = Path(torch.__file__).parent / "utils" / "viz" / "MemoryViz.js"
    return path if path.is_file() else None


def save_viewer(snapshot: dict, path: str | Path, *, memory_viz_js: str | Path | None = None) -> Path:
    """Write PyTorch's interactive memory viewer for ``snapshot`` as one HTML file; return its path.

        save_viewer(snap, "step.html")      # open in a browser: events, blocks and their stacks, zoomable

    MemoryViz.js (``memory_viz_js``, else the wheel's own where it ships one) is inlined in the page; where none is
    at hand, or the script itself loads d3 from a CDN, the page needs the internet when opened, and this says so.
    """
    from torch.cuda import _memory_viz

    page = _memory_viz.trace_plot(snapshot)
    script = Path(memory_viz_js) if memory_viz_js is not None else _shipped_memory_viz_js()
    if script is not None:
        code = script.read_text().replace("</script", "<\\/script")  # the page's own script must not end early
        page, inlined = _IMPORT_VIEWER.subn(lambda _m: code, page, count=1)
        if not inlined:
            raise ValueError("torch's viewer page no longer imports MemoryViz.js as this expects: save_pickle "
                             "the snapshot and open it in PyTorch's viewer instead.")
    remote = remote_scripts(page)
    if remote:
        shipped = "a copy of MemoryViz.js was inlined" if script is not None else (
            f"torch {torch.__version__} ships no MemoryViz.js to inline")
        hosts = ", ".join(sorted({u.split("/")[2] for u in remote}))
        notices.say_once(f"memory-viz-online:{hosts}", f"The memory viewer page loads its scripts from the internet "
                         f"({hosts}): {shipped}, so open it where the browser can reach them. Offline, draw "
                         "timeline_figure (plotly, no network), or open the saved pickle in PyTorch's viewer once "
                         "online.")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return out


def save_pickle(snapshot: dict, path: str | Path) -> Path:
    """Write ``snapshot`` as the pickle PyTorch's viewer opens (drag it onto https://pytorch.org/memory_viz)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as f:
        pickle.dump(snapshot, f)
    return out
