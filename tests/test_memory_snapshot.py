"""memory.snapshot on a CPU: a snapshot dict built as torch's allocator builds one (torch/csrc/cuda/memory_snapshot.cpp:
segments of blocks, device_traces of events with frames and time_us, external_annotations from record_function),
read into kinds, phases, a peak and the largest blocks; drawn; saved as PyTorch's viewer; the error without CUDA."""

from __future__ import annotations

import base64
import contextlib
import json
import pickle
import re

import pytest
import torch

from helpers import figure_check, notices, tables
from helpers.memory import snapshot as S

MIB = 2**20
T0 = 1_700_000_000_000_000  # the allocator's clock: microseconds since the epoch
PARAMS, STATE, OLD_LOSS = 0x7F00_0000_0000, 0x7F00_0040_0000, 0x7F00_00C0_0000  # allocated before the recording
SEG = 0x7F10_0000_0000  # the segment the recorded step asks cudaMalloc for
BATCH, ACT1, ACT2, TMP, LOSS = SEG, SEG + 2 * MIB, SEG + 18 * MIB, SEG + 56 * MIB, SEG + 50 * MIB
GRAD_TMP, GRAD_W, GRAD_2 = SEG + 64 * MIB, SEG + 80 * MIB, SEG + 51 * MIB
OPT_TMP, NEW_STATE, CLIP = SEG + 84 * MIB, SEG + 55 * MIB, SEG + 88 * MIB


def _frame(filename, line, name):
    return {"filename": filename, "line": line, "name": name}


TORCH = "/opt/venv/lib/python3.11/site-packages/torch"
CELL = _frame("/tmp/ipykernel_4242/2807127171.py", 3, "step")
RECORD = _frame("/work/main/helpers/memory/snapshot.py", 120, "record_snapshot")


def _forward(line):  # innermost first, as the allocator's Python stacks are
    return [_frame(f"{TORCH}/nn/modules/conv.py", 548, "_conv_forward"), _frame(f"{TORCH}/nn/modules/conv.py", 553,
            "forward"), _frame(f"{TORCH}/nn/modules/module.py", 1786, "_call_impl"),
            _frame("/work/main/helpers/models.py", line, "forward"), _frame(f"{TORCH}/nn/modules/module.py", 1786,
            "_call_impl"), CELL, RECORD]


ADAM = [_frame(f"{TORCH}/optim/adam.py", 420, "_multi_tensor_adam"), _frame(f"{TORCH}/optim/optimizer.py", 510,
        "wrapper"), _frame("/tmp/ipykernel_4242/2807127171.py", 8, "step"), RECORD]


def _entry(action, t, addr, size, frames=()):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "compile_context": "N/A", "user_metadata": "",
            "frames": list(frames), "time_us": T0 + t, "pool_id": (0, 0)}


def _alloc(t, addr, size, frames=()):
    return [_entry("alloc", t, addr, size, frames)]


def _free(t, addr, size, frames=()):  # no other stream used the block: the free completes at once
    return [_entry("free_requested", t, addr, size, frames), _entry("free_completed", t, addr, size, frames)]


def _block(address, size, state="active_allocated", frames=()):
    return {"address": address, "size": size, "requested_size": size, "state": state, "frames": list(frames)}


def _mark(name, stage, t, device=0):
    return {"name": name, "stage": stage, "device": device, "time_us": T0 + t}


def make_snapshot(*, phases=True):
    """One Adam step of a small network, as the allocator records it (times in µs after T0):

    forward 100-300, backward 310-500, optimizer 510-600; the peak (78 MiB + 512 B) at 320, in the backward."""
    trace = [_entry("segment_alloc", 80, SEG, 128 * MIB, [CELL, RECORD])]
    trace += _free(85, OLD_LOSS, 512, [CELL, RECORD])  # the previous step's loss, dropped as the next is computed
    trace += _alloc(90, BATCH, 2 * MIB, [_frame("/tmp/ipykernel_4242/2807127171.py", 2, "step"), RECORD])
    trace += _alloc(120, ACT1, 16 * MIB, _forward(57))
    trace += _alloc(150, ACT2, 32 * MIB, _forward(60))
    trace += _alloc(160, TMP, 8 * MIB, _forward(61)) + _free(170, TMP, 8 * MIB, _forward(61))
    trace += _alloc(200, LOSS, 512, [CELL, RECORD])
    # the backward allocates on autograd's own thread: no Python frames
    trace += _alloc(320, GRAD_TMP, 16 * MIB) + _free(330, GRAD_TMP, 16 * MIB)
    trace += _alloc(350, GRAD_W, 4 * MIB) + _alloc(360, GRAD_2, 4 * MIB)
    trace += _free(400, ACT1, 16 * MIB) + _free(420, ACT2, 32 * MIB)
    clip = [_frame(f"{TORCH}/nn/utils/clip_grad.py", 90, "clip_grad_norm_"), _frame(CELL["filename"], 6, "step")]
    trace += _alloc(505, CLIP, 512, clip) + _free(507, CLIP, 512, clip)  # between the phases: the gradients' norm
    trace += _alloc(520, OPT_TMP, 4 * MIB, ADAM) + _free(530, OPT_TMP, 4 * MIB, ADAM)
    trace += _alloc(540, NEW_STATE, 1 * MIB, ADAM) + _free(590, GRAD_W, 4 * MIB, ADAM)  # zero_grad(set_to_none)
    trace += [_entry("snapshot", 600, 0, 19 * MIB + 512)]
    segments = [
        {"device": 0, "address": PARAMS, "total_size": 20 * MIB, "allocated_size": 12 * MIB, "active_size": 12 * MIB,
         "requested_size": 12 * MIB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
         "is_expandable": False, "frames": [],
         "blocks": [_block(PARAMS, 4 * MIB), _block(STATE, 8 * MIB), _block(OLD_LOSS, 8 * MIB, "inactive")]},
        {"device": 0, "address": SEG, "total_size": 128 * MIB, "allocated_size": 7 * MIB + 512,
         "active_size": 7 * MIB + 512, "requested_size": 7 * MIB + 512, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [CELL, RECORD],
         "blocks": [_block(BATCH, 2 * MIB), _block(SEG + 2 * MIB, 48 * MIB, "inactive"), _block(LOSS, 512),
                    _block(LOSS + 512, MIB - 512, "inactive"), _block(GRAD_2, 4 * MIB),
                    _block(NEW_STATE, MIB, "active_allocated", ADAM), _block(SEG + 56 * MIB, 72 * MIB, "inactive")]},
    ]
    marks = [_mark("forward", "START", 100), _mark("attention", "START", 150), _mark("attention", "END", 180),
             _mark("forward", "END", 300), _mark("backward", "START", 310), _mark("backward", "END", 500),
             _mark("optimizer", "START", 510), _mark("optimizer", "END", 600),
             _mark("forward", "START", 700, device=1), _mark("forward", "END", 800, device=1)]  # another GPU's
    return {"segments": segments, "device_traces": [trace], "allocator_settings": {"expandable_segments": False},
            "external_annotations": marks if phases else [], "host_segments": [], "host_traces": []}


def _by_address(tl):
    return {b.address: b for b in tl.blocks}


def test_each_block_gets_the_kind_its_life_says():
    tl = S.timeline(make_snapshot())
    kind = {a: b.kind for a, b in _by_address(tl).items()}
    assert kind[ACT1] == kind[ACT2] == "activations"  # allocated in the forward, freed in the backward
    assert kind[TMP] == kind[GRAD_TMP] == kind[OPT_TMP] == "temporaries"  # freed in the phase that made them
    assert kind[GRAD_W] == kind[GRAD_2] == "gradients"  # made by the backward, alive after it
    assert kind[NEW_STATE] == "optimizer state"
    assert kind[PARAMS] == kind[STATE] == kind[OLD_LOSS] == "allocated before the step"  # no stack: before recording
    assert kind[BATCH] == kind[LOSS] == "other"
    assert tl.kinds == ("optimizer state", "allocated before the step", "gradients", "activations", "temporaries",
                        "other")
    # the model's and optimizer's own addresses name the weights and the state; a freed block keeps its rule
    named = S.timeline(make_snapshot(), kinds={PARAMS: "parameters", STATE: "optimizer state", ACT1: "parameters"})
    kind = {a: b.kind for a, b in _by_address(named).items()}
    assert (kind[PARAMS], kind[STATE], kind[ACT1], kind[OLD_LOSS]) == (
        "parameters", "optimizer state", "activations", "allocated before the step")
    at_peak = named.at_peak()  # Adam's new megabyte of state came after the peak
    assert at_peak["parameters"] == 4 * MIB and at_peak["optimizer state"] == 8 * MIB


def test_phases_come_from_the_record_function_annotations():
    tl = S.timeline(make_snapshot())
    # ms from the first event (80 µs); "attention" is no phase, and another GPU's ranges are not this one's
    assert tl.phases == (("forward", 0.02, 0.22), ("backward", 0.23, 0.42), ("optimizer", 0.43, 0.52))
    blocks = _by_address(tl)
    assert (blocks[ACT2].allocated_in, blocks[ACT2].freed_in) == ("forward", "backward")
    assert (blocks[BATCH].allocated_in, blocks[BATCH].freed_in) == ("between phases", None)
    assert (blocks[CLIP].allocated_in, blocks[CLIP].freed_in, blocks[CLIP].kind) == (
        "between phases", "between phases", "temporaries")  # after the backward's end, before the optimizer's start
    assert blocks[CLIP].source == "2807127171.py:6 step"  # torch's own frames skipped
    assert (blocks[PARAMS].allocated_in, blocks[PARAMS].alive_from_ms, blocks[PARAMS].alive_to_ms) == (
        "before the step", None, None)
    assert blocks[GRAD_W].freed_in == "optimizer" and blocks[GRAD_W].alive_to_ms == pytest.approx(0.51)
    assert tl.notes == ()
    bare = S.timeline(make_snapshot(phases=False))  # no ranges: no phases to tell activations from temporaries
    assert bare.phases == () and "profiling.nvtx_range" in bare.notes[0]
    kind = {a: b.kind for a, b in _by_address(bare).items()}
    assert kind[ACT1] == "temporaries" and kind[NEW_STATE] == "optimizer state"  # torch/optim in its stack


def test_the_peak_its_time_and_what_was_alive():
    tl = S.timeline(make_snapshot())
    assert tl.peak == 78 * MIB + 512 and tl.peak_ms == pytest.approx(0.24) and tl.peak_phase == "backward"
    at = tl.at_peak()
    assert at["activations"] == 48 * MIB and at["temporaries"] == 16 * MIB and sum(at.values()) == tl.peak
    # the series start with what was alive before the first event and end with the blocks still allocated
    assert tl.total[0] == 12 * MIB + 512 and tl.t_ms[0] == 0.0
    assert tl.total[-1] == 19 * MIB + 512 == sum(b["size"] for s in make_snapshot()["segments"] for b in s["blocks"]
                                                 if b["state"] == "active_allocated")
    assert (tl.reserved[0], tl.reserved[-1]) == (20 * MIB, 148 * MIB)  # the step's cudaMalloc of 128 MiB
    assert len(tl.t_ms) == len(tl.reserved) == len(tl.allocated[0]) == 1 + 20  # the start, then each memory event


def test_the_largest_block_and_the_line_that_allocated_it():
    tl = S.timeline(make_snapshot())
    big = tl.largest(1)[0]
    assert (big.size, big.kind, big.source) == (32 * MIB, "activations", "models.py:60 forward")
    assert (big.alive_from_ms, big.alive_to_ms) == (pytest.approx(0.07), pytest.approx(0.34))
    assert [b.size for b in tl.largest(3)] == [32 * MIB, 16 * MIB, 16 * MIB]
    assert tl.largest(3)[1].source == "models.py:57 forward" and tl.largest(3)[2].source is None  # the backward's
    table = S.largest_blocks_table(tl, n=4)
    assert isinstance(table, tables.Table) and list(table.data.index) == [1, 2, 3, 4]
    assert table.shown.iloc[0].tolist() == ["32.0", "activations", "models.py:60 forward", "forward", "backward",
                                            "0.0700", "0.340"]
    assert list(table.shown.columns) == ["size MiB", "kind", "allocated at", "allocated in", "freed in",
                                         "alive from ms", "alive to ms"]
    assert any("no Python stack" in n for n in table.notes) and tables.unreadable_cells(table._repr_html_()) == []
    assert "0x7f" not in repr(tl) and "0x7f" not in repr(big)


def test_the_figure_stacks_the_kinds_and_shades_the_phases():
    tl = S.timeline(make_snapshot(), label="NVIDIA H100 80GB HBM3")
    fig = S.timeline_figure(tl)
    names = [t.name for t in fig.data]
    assert names == [*tl.kinds, "reserved (allocator's pool)", "peak"]
    stacked = [t for t in fig.data if t.stackgroup]
    assert [t.name for t in stacked] == list(tl.kinds)
    activations = stacked[tl.kinds.index("activations")]
    assert max(activations.y) == pytest.approx(48 / 1024) and list(activations.x) == list(tl.t_ms)
    assert (fig.data[-1].x[0], fig.data[-1].y[0]) == (pytest.approx(0.24), pytest.approx(tl.peak / 2**30))
    assert fig.layout.xaxis.title.text == "ms since the recorded step began, host clock"
    assert fig.layout.yaxis.title.text == "allocated GiB"
    assert "peak 0.08 GiB in the backward" in fig.layout.title.text and "H100" in fig.layout.title.text
    assert [a.text for a in fig.layout.annotations] == ["forward", "backward", "optimizer"]
    assert [(s.x0, s.x1) for s in fig.layout.shapes] == [(0.02, 0.22), (0.23, 0.42), (0.43, 0.52)]
    assert figure_check.problems(fig) == []


def _payload(page):
    files = json.loads(re.search(r"const local_files = (\[.*?\])\n", page).group(1))
    return pickle.loads(base64.b64decode(files[0]["base64"]).rstrip(b"\x00"))


def test_the_viewer_is_offline_when_the_viewer_script_ships(tmp_path, monkeypatch, capsys):
    js = tmp_path / "MemoryViz.js"
    js.write_text("'use strict';\nexport function add_local_files(files, kind) {\n"
                  "  document.body.innerHTML = '<b>' + kind + '</b><script></script>';\n}\n")
    monkeypatch.setattr(S, "_shipped_memory_viz_js", lambda: js)
    notices.forget("memory-viz")
    snap = make_snapshot()
    out = S.save_viewer(snap, tmp_path / "out" / "step.html")
    page = out.read_text()
    assert not re.search(r"""(src\s*=\s*|from\s*|import\s*\(?\s*)["']https?://""", page)  # nothing loaded remotely
    assert S.remote_scripts(page) == [] and "MemoryViz.js" not in page
    assert "export function add_local_files" in page and "<\\/script>" in page  # inlined, not ending the page's script
    assert _payload(page) == snap and capsys.readouterr().out == ""


def test_the_viewer_says_it_needs_the_internet_when_no_script_ships(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(S, "_shipped_memory_viz_js", lambda: None)
    notices.forget("memory-viz")
    out = S.save_viewer(make_snapshot(), tmp_path / "step.html")
    page = out.read_text()
    assert out.is_file() and _payload(page) == make_snapshot()
    assert S.remote_scripts(page) == ["https://cdn.jsdelivr.net/gh/pytorch/pytorch@main/torch/utils/viz/MemoryViz.js"]
    said = capsys.readouterr().out
    assert "cdn.jsdelivr.net" in said and "ships no MemoryViz.js" in said and "timeline_figure" in said
    # a copy that still loads d3 from a CDN is inlined, and the page is still online: said so
    js = tmp_path / "MemoryViz.js"
    js.write_text('import * as d3 from "https://cdn.skypack.dev/d3@5";\nexport function add_local_files(f, k) {}\n')
    notices.forget("memory-viz")
    page = S.save_viewer(make_snapshot(), tmp_path / "d3.html", memory_viz_js=js).read_text()
    assert S.remote_scripts(page) == ["https://cdn.skypack.dev/d3@5"]
    assert "cdn.skypack.dev" in capsys.readouterr().out


def test_the_pickle_round_trips(tmp_path):
    snap = make_snapshot()
    with S.save_pickle(snap, tmp_path / "a" / "step.pickle").open("rb") as f:
        assert pickle.load(f) == snap


def test_without_cuda_the_error_says_what_to_change(monkeypatch):
    calls = []
    with pytest.raises(ValueError, match="not a CUDA device: pass device='cuda'"):
        S.record_snapshot(lambda: calls.append(1), device="cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        S.record_snapshot(lambda: calls.append(1), device="cuda")
    assert calls == []  # nothing ran
    with pytest.raises(ValueError, match="no allocator events for cuda:0"):
        S.timeline({"segments": [], "device_traces": [[]]})


def test_record_snapshot_records_one_step_after_the_warm_up(monkeypatch):
    """The order on a GPU, checked with torch.cuda's calls stood in for: warm-up, history on, one step, the snapshot
    taken before the history goes off (going off clears the phases), off again even when the step fails."""
    log = []

    def record(enabled="all", context="all", stacks="all", max_entries=2**63 - 1, device=None, clear_history=False):
        log.append(("history", enabled, context, stacks, max_entries, clear_history))

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: log.append("sync"))
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", record)
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda: log.append("snapshot") or {"device_traces": [[]]})
    snap = S.record_snapshot(lambda: log.append("step"), device="cuda", warmup=2, max_entries=500)
    assert snap == {"device_traces": [[]]}
    assert log == ["step", "step", "sync", ("history", "all", "all", "python", 500, True), "step", "sync", "snapshot",
                   ("history", None, "all", "all", 2**63 - 1, False)]
    log.clear()

    def boom():
        log.append("step")
        if len(log) > 2:
            raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        S.record_snapshot(boom, device=0)
    assert log[-1][:2] == ("history", None)  # the history is off again


def test_tensor_kinds_names_weights_gradients_and_adam_state():
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    adam = torch.optim.Adam(net.parameters())
    net(torch.randn(3, 4)).sum().backward()
    adam.step()
    kinds = S.tensor_kinds(net, adam)
    params = list(net.parameters())
    assert {kinds[p.untyped_storage().data_ptr()] for p in params} == {"parameters"}
    assert {kinds[p.grad.untyped_storage().data_ptr()] for p in params} == {"gradients"}
    moments = [adam.state[p][k] for p in params for k in ("exp_avg", "exp_avg_sq")]
    assert {kinds[m.untyped_storage().data_ptr()] for m in moments} == {"optimizer state"}
    assert S.tensor_kinds() == {}


def test_a_kind_too_thin_to_see_says_so_in_the_legend():
    """04's snapshot chart listed "other" in its legend with no area anywhere (0.00 GiB)."""
    from helpers import figure_check
    from helpers.memory.snapshot import THIN_SHARE, SnapshotTimeline, timeline_figure

    gib = 2**30
    tl = SnapshotTimeline(device="test", kinds=("activations", "other"), phases=(("forward", 0.0, 2.0),), notes=(),
                          t_ms=(0.0, 1.0, 2.0), allocated=((0, 4 * gib, 2 * gib), (0, 1024, 0)),
                          reserved=(0, 5 * gib, 5 * gib), blocks=())
    fig = timeline_figure(tl)
    names = [t.name for t in fig.data]
    assert names[0] == "activations" and names[1] == f"other (under {THIN_SHARE:.0%} of the peak: too thin to see)"
    assert figure_check.problems(fig) == []
