"""02's exercise "your own loop": the reference loop passes both checks; each known-wrong loop is refused by the check
it breaks, with the line or the call that breaks it; SyncFinder finds the waits of a loop line by line on a CPU."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from helpers import data, syncs
from helpers.exercises import nb02


def _step(model, opt, x, y, losses):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def prints_each_loss(model, opt, batches, device):
    losses = []
    for xb, yb in batches:
        loss = _step(model, opt, data.normalize_u8(xb.to(device, non_blocking=True)), yb.to(device, non_blocking=True),
                     losses)
        print(f"loss {loss:.3f}")
        losses.append(loss.detach())
    return torch.stack(losses)


def stops_on_a_bad_loss(model, opt, batches, device):
    losses = []
    for xb, yb in batches:
        loss = _step(model, opt, data.normalize_u8(xb.to(device, non_blocking=True)), yb.to(device, non_blocking=True),
                     losses)
        if torch.isnan(loss):  # bool of a tensor: the host must read it
            break
        losses.append(loss.detach())
    return torch.stack(losses)


def returns_floats(model, opt, batches, device):
    losses = []
    for xb, yb in batches:
        loss = _step(model, opt, data.normalize_u8(xb.to(device, non_blocking=True)), yb.to(device, non_blocking=True),
                     losses)
        losses.append(float(loss))
    return torch.tensor(losses)


def forgets_zero_grad(model, opt, batches, device):
    losses = []
    for xb, yb in batches:
        loss = F.cross_entropy(model(data.normalize_u8(xb.to(device, non_blocking=True))), yb.to(device, non_blocking=True))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def _no_wait_loop(move_images, move_labels=lambda y, d: y.to(d, non_blocking=True)):
    def loop(model, opt, batches, device):
        losses = []
        for xb, yb in batches:
            losses.append(_step(model, opt, move_images(xb, device), move_labels(yb, device), losses).detach())
        return torch.stack(losses)
    return loop


float_first = _no_wait_loop(lambda x, d: ((x.float() / 255 - 0.5) / 0.5).to(d, non_blocking=True))
float_in_the_copy = _no_wait_loop(lambda x, d: (x.to(d, torch.float32, non_blocking=True) / 255 - 0.5) / 0.5)
blocking_copy = _no_wait_loop(lambda x, d: data.normalize_u8(x.to(d)))
labels_copied_twice = _no_wait_loop(lambda x, d: data.normalize_u8(x.to(d, non_blocking=True)),
                                    lambda y, d: (y.to(d, non_blocking=True), y.to(d))[1])  # the first one thrown away
cloned_first = _no_wait_loop(lambda x, d: data.normalize_u8(x.contiguous().to(d, non_blocking=True)))
blocking_labels = _no_wait_loop(lambda x, d: data.normalize_u8(x.to(d, non_blocking=True)), lambda y, d: y.to(d))


def test_the_reference_loop_passes_both_checks_on_fresh_batches():
    for seed in (0, 1):
        assert nb02.check_loop_without_syncs(nb02.train_loop, device="cpu", seed=seed).passed
        assert nb02.check_loop_from_bytes(nb02.train_loop, device="cpu", seed=seed).passed


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")  # float(loss): the learner's habit
def test_a_loop_that_waits_is_refused_with_the_line_that_waits():
    for loop, says in ((nb02.classic_loop, "item() × 4"), (prints_each_loss, 'print(f"loss {loss:.3f}")'),
                       (stops_on_a_bad_loss, "if torch.isnan(loss)"), (returns_floats, "float(tensor) × 4"),
                       (nb02.bytes_loop_with_syncs, "item() × 4")):
        res = nb02.check_loop_without_syncs(loop, device="cpu", seed=2)
        assert res.status == "failed" and says in res.message and "wait" in res.message, (loop.__name__, res.message)
        assert res.value is nb02.train_loop


def test_a_loop_that_trains_differently_is_refused_by_both_checks():
    for check in (nb02.check_loop_without_syncs, nb02.check_loop_from_bytes):
        res = check(forgets_zero_grad, device="cpu", seed=3)
        assert res.status == "failed" and "differ from the reference loop's" in res.message, res.message


def test_batches_moved_the_wrong_way_are_refused_with_what_to_change():
    for loop, says in ((nb02.classic_loop, "calls .float(...)"), (float_first, "calls .float(...)"),
                       (float_in_the_copy, "copies the images and converts them in one call"),
                       (blocking_copy, "images without non_blocking=True"),
                       (blocking_labels, "labels without non_blocking=True"),
                       (labels_copied_twice, "labels without non_blocking=True"),
                       (cloned_first, None)):
        res = nb02.check_loop_from_bytes(loop, device="cpu", seed=4)
        if says is None:  # a copy of the uint8 batch before the copy to the device is no conversion: an honest loop
            assert res.passed, res.message
            continue
        assert res.status == "failed" and says in res.message, (says, res.message)


def test_blank_unwritten_and_crashing_loops():
    def unwritten(model, opt, batches, device):
        for _ in batches:
            raise NotImplementedError
        return None

    def crashes(model, opt, batches, device):
        raise KeyError("images")

    for check in (nb02.check_loop_without_syncs, nb02.check_loop_from_bytes):
        for blank in (None, ..., unwritten):
            res = check(blank, device="cpu")
            assert res.status == "not done" and "[02-loop-4]" in res.message, res.message
        res = check(crashes, device="cpu")
        assert res.status == "failed" and "raised KeyError" in res.message
        res = check(lambda m, o, b, d: [], device="cpu")
        assert res.status == "failed" and "torch.stack(losses)" in res.message


def test_sync_finder_names_each_waiting_line_once_per_call_and_ignores_the_optimizers_own_reads():
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters(), foreach=False)  # reads its step count with .item() inside torch
    with syncs.SyncFinder() as found:
        for _ in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            opt.step()
            shown = f"{loss:.2f}"  # format calls item() inside: one wait, counted once
    assert found.count == 3 and shown
    table = found.table()
    assert list(table["times"]) == [3] and "formatted" in table["what"].iloc[0]
    assert table["where"].iloc[0].startswith("test_loop_exercise.py:") and 'f"{loss:.2f}"' in table["code"].iloc[0]
    device = torch.device("cpu")
    with syncs.SyncFinder(device=device) as clean:  # the loop copies to the device it is handed: no wait
        nb02.train_loop(model := torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 10)),
                        torch.optim.SGD(model.parameters(), lr=0.1), nb02.loop_batches(2, batch=4, size=4, device="cpu"),
                        device)
    assert clean.count == 0 and repr(clean) == "no syncs found"


def _cuda_call_that_waits():
    """What PyTorch does under set_sync_debug_mode("warn") inside a call that waits (here without a GPU)."""
    warnings.warn("called a synchronizing CUDA operation", UserWarning)


def test_pytorchs_own_sync_warnings_are_put_on_the_line_that_made_the_call_and_other_warnings_still_show(monkeypatch):
    modes = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the finder's GPU path, with PyTorch's warnings
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    with pytest.warns(UserWarning, match="an unrelated warning"):
        with syncs.SyncFinder() as found:
            for _ in range(2):
                _cuda_call_that_waits()
            warnings.warn("an unrelated warning", UserWarning)  # not a sync: shown as it would have been
    assert modes == ["warn", 0] and found.cuda_warnings == 2
    assert {(s.line, s.code) for s in found.cuda_syncs} == {
        (_cuda_call_that_waits.__code__.co_firstlineno + 2, 'warnings.warn("called a synchronizing CUDA operation", '
                                                           'UserWarning)')}
    table = found.table()
    assert list(table["PyTorch's finder"]) == [2] and list(table["times"]) == [0]
    assert list(table["what"]) == ["(PyTorch's finder only)"]
    shown = repr(found).splitlines()  # every count printed beside the lines it sums
    assert shown[0] == "no waits found by this finder"
    assert shown[1] == "PyTorch's finder also warned on 1 line this finder does not count:"
    assert shown[2].startswith("  × 2, test_loop_exercise.py:")
    assert shown[3].startswith("torch.cuda.set_sync_debug_mode('warn') warned 2 times: 2 on the loop's lines;")


def test_sync_finder_finds_copies_to_the_host_and_data_dependent_ops_but_not_the_copy_to_the_device():
    """On a machine without a GPU the training device is the CPU too: x.to(device), with the device the loop was
    handed, is the copy to the device; every other way a value reaches a host tensor is what waits on a GPU."""
    device = torch.device("cpu")
    batch = torch.ones(4)
    loss = torch.tensor(2.0, requires_grad=True) * 3
    host = torch.zeros(3)
    with syncs.SyncFinder(ignore=[batch], device=device) as found:
        batch.to(device, non_blocking=True)  # the input, to the device: no wait
        loss.detach().to(device)             # the device the loop was handed: the copy to it, no wait
        host[0] = loss.detach()
        host[1:2].copy_(loss.detach())
        torch.as_tensor(loss.detach(), device="cpu")
        loss.detach().to("cpu")
        loss.detach().cpu()
        torch.equal(loss, loss)
        v = torch.arange(4.0)
        v[v > 1]
        torch.where(v > 1)
    assert [s.what for s in found.syncs] == [
        "a tensor stored into a host tensor", "a copy into a host tensor", "torch.as_tensor(.., 'cpu')", ".to('cpu')",
        ".cpu()", "torch.equal", "indexing with a boolean tensor", "torch.where(condition)"]


@pytest.mark.parametrize("hidden", ["host[i] = loss.detach()", "torch.as_tensor(loss, device='cpu')",
                                    "loss.detach().to('cpu')", "torch.equal(loss, loss)"])
def test_a_loop_that_hides_its_wait_in_a_host_tensor_or_a_comparison_is_refused(hidden):
    def loop(model, opt, batches, device):
        losses, host = [], torch.zeros(len(batches))
        for i, (xb, yb) in enumerate(batches):
            loss = _step(model, opt, data.normalize_u8(xb.to(device, non_blocking=True)),
                         yb.to(device, non_blocking=True), losses)
            exec(hidden, {"torch": torch}, {"host": host, "i": i, "loss": loss})
            losses.append(loss.detach())
        return torch.stack(losses)

    res = nb02.check_loop_without_syncs(loop, device="cpu", seed=7)
    assert res.status == "failed" and "wait for the GPU 4 times" in res.message, res.message


def test_torch_cuda_synchronize_is_put_on_the_line_that_called_it_not_inside_torch():
    """torch.cuda.synchronize() is Python in torch/cuda/__init__.py around the C call the finder watches: its frame is
    torch's, so without passing through it the call was put nowhere (on a GPU the bytes loop's two waits a step went
    unseen). Emulated here with a function compiled as torch's file, calling a watched stand-in for the C call."""
    from pathlib import Path

    import torch

    from helpers import syncs

    finder = syncs.SyncFinder()
    watched = finder._watching(lambda: None, "torch.cuda.synchronize()")
    wrapper_file = str(Path(torch.__file__).parent / "cuda" / "__init__.py")
    space = {"_c_synchronize": watched}
    exec(compile("def synchronize():\n    return _c_synchronize()\n", wrapper_file, "exec"), space)
    other = {"_c_synchronize": watched}  # torch's own code elsewhere calling the same C function: not the loop's
    exec(compile("def step():\n    return _c_synchronize()\n", str(Path(torch.__file__).parent / "optim" / "adam.py"),
                 "exec"), other)
    space["synchronize"]()  # the learner's line
    other["step"]()
    assert [(s.what, s.line) for s in finder.syncs] == [("torch.cuda.synchronize()", _lineno_of("space[\"synchronize\"]()"))]


def _lineno_of(text: str) -> int:
    import inspect

    source, start = inspect.getsourcelines(test_torch_cuda_synchronize_is_put_on_the_line_that_called_it_not_inside_torch)
    return start + next(i for i, line in enumerate(source) if text in line)


def test_the_loop_tables_img_per_s_is_the_images_over_the_time_as_shown():
    # 02 read 2,664 img/s beside 960 images and 360 ms, which give 2,667
    import time

    from helpers import tables

    def slow(model, opt, batches, device):
        time.sleep(0.03)

    def quick(model, opt, batches, device):
        time.sleep(0.01)

    batches = nb02.loop_batches(3, batch=4, size=16, device="cpu")
    df = nb02.time_loops({"slow": slow, "quick": quick}, batches=batches, size=16, device="cpu", repeats=2)
    for _, row in tables.readable(df).shown.iterrows():
        images, ms = tables.as_shown(row["images"]), tables.as_shown(row["ms"])
        assert images == 12 and row["img/s"] == f"{images / (ms * 1e-3):,.0f}"  # a few hundred: shown whole
