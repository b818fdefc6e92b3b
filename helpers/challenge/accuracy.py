"""Held-out accuracy: how well a trained network does on images of the same classes it never trained on.

    acc = heldout_accuracy(trainer.model, image_size=224, precision="bf16")   # a share, 0..1

The images come from :func:`helpers.data.heldout_images` (the training set's classes, another draw), resized
and normalised on the device as the GPU pipeline does; the model runs in eval mode without gradients, under the
precision it trained in. The same ``n`` and ``seed`` give the same images: every run is judged on one test set.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import secrets
import statistics
from pathlib import Path

import torch
from torch import nn

from .. import data as _data
from .. import env

__all__ = ["HELDOUT_IMAGES", "heldout_accuracy", "copy_mapped", "fresh_stream", "time_target", "accuracy_margin",
           "runs_channels_last", "AccuracyTarget", "accuracy_target", "write_targets", "TARGETS_FILE", "accuracy_check",
           "trained_reference"]

#: Images in the held-out set at each scale (its accuracy's standard error is about 0.5 points at full scale).
HELDOUT_IMAGES = {"smoke": 512, "full": 4096}


def _heldout(n: int, seed: int, task: _data.Task = _data.COURSE_TASK, stream: int = _data.HELDOUT_STREAM):
    if stream != _data.HELDOUT_STREAM:  # a draw of its own (fresh_stream): used once, never cached
        return _data.heldout_images(n, seed=seed, task=task, stream=stream)
    return _heldout_cached(n, seed, task)


@functools.lru_cache(maxsize=4)
def _heldout_cached(n: int, seed: int, task: _data.Task):
    images, labels = _data.heldout_images(n, seed=seed, task=task, stream=_data.HELDOUT_STREAM)
    images.setflags(write=False)  # cached for every run judged after it: no run may change what the next is judged on
    labels.setflags(write=False)
    return images, labels


def runs_channels_last(model: nn.Module) -> bool:
    """Was ``model`` converted to channels_last (its first weight a 4-D NHWC tensor)? Its inputs should be too.
    A network without parameters was not."""
    w = next(iter(model.parameters()), None)
    return w is not None and w.dim() == 4 and w.is_contiguous(memory_format=torch.channels_last)


def trained_reference(model: nn.Module, mapping, image_size: int) -> nn.Module:
    """A fresh reference network holding ``model``'s weights of now (fp32 copies, read through ``mapping``, the
    (reference name, submission name, slice) triples :func:`.function_check.map_parameters` found), on ``model``'s
    device: what the harness judges with, whatever ``model``'s own forward does."""
    from ..models import ReferenceCNN

    params = dict(nn.Module.named_parameters(model))  # not an override of the submission's
    first = next(iter(params.values()))
    return copy_mapped(ReferenceCNN(image_size).to(first.device), params, mapping)


def copy_mapped(reference: nn.Module, params: dict[str, torch.Tensor], mapping) -> nn.Module:
    """``reference`` holding the weights in ``params`` (a submission's parameters by name), read through ``mapping``
    as fp32 copies; returns it. Only tensor operations of plain tensors are used: nothing of the submission's."""
    with torch.no_grad():
        for ref_name, sub_name, sl in mapping:
            reference.get_parameter(ref_name).copy_(torch.Tensor.detach(params[sub_name])[sl].float())
    return reference


def heldout_accuracy(model: nn.Module, *, image_size: int, precision: str = "fp32", n: int | None = None,
                     seed: int = 0, batch: int = 256, device: torch.device | str | None = None,
                     task: _data.Task = _data.COURSE_TASK, stream: int = _data.HELDOUT_STREAM) -> float:
    """Share of ``n`` held-out images (default: :data:`HELDOUT_IMAGES` at this scale) of ``task`` that ``model``
    labels right. ``stream``: another draw of held-out images of the same classes (the class judge draws one no
    submission can know)."""
    n = n or HELDOUT_IMAGES[env.scale()]
    if device is None:
        first = next(iter(model.parameters()), None)
        device = first.device if first is not None else env.device()
    device = torch.device(device)
    images, labels = _heldout(n, seed, task, stream)
    x_all = torch.from_numpy(images.copy()).permute(0, 3, 1, 2)  # the cache's arrays are read-only
    y_all = torch.as_tensor(labels.copy())
    amp = env.autocast_dtype(precision, device)
    channels_last = runs_channels_last(model)
    was_training = model.training
    model.eval()
    correct = 0
    try:
        with torch.no_grad(), torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            for start in range(0, n, batch):
                x = _data.gpu_resize_normalize(x_all[start:start + batch].to(device), image_size)
                if channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                correct += int((model(x).argmax(1).cpu() == y_all[start:start + batch]).sum())
    finally:
        model.train(was_training)
    return correct / n


def fresh_stream() -> int:
    """A held-out draw nobody can know before it is made (the operating system's randomness): not the training
    set's stream (0), nor the public held-out one (:data:`helpers.data.HELDOUT_STREAM`), which any code can
    regenerate and learn."""
    return secrets.randbelow(2**62) + 2


def accuracy_margin(baseline: float, n: int) -> float:
    """How far below ``baseline`` an accuracy on ``n`` held-out images may land by chance alone: two standard
    errors of the difference of two such accuracies (each binomial), as a share."""
    p = min(max(baseline, 0.01), 0.99)
    return 2 * math.sqrt(2 * p * (1 - p) / n)


#: The baseline recipe's measured held-out accuracies per challenge size (scripts/probes/accuracy_variation.py
#: --write-targets writes it from a probe's output; nothing in it is typed by hand).
TARGETS_FILE = Path(__file__).with_name("accuracy_targets.json")

# One-sided 99% quantiles of Student's t by degrees of freedom (a table's constants, not measurements): with a few
# seeds the spread itself is uncertain, and the prediction interval widens with it.
_T99 = {1: 31.821, 2: 6.965, 3: 4.541, 4: 3.747, 5: 3.365, 6: 3.143, 7: 2.998, 8: 2.896, 9: 2.821, 10: 2.764,
        11: 2.718, 12: 2.681, 13: 2.650, 14: 2.624, 15: 2.602, 16: 2.583, 17: 2.567, 18: 2.552, 19: 2.539, 20: 2.528,
        25: 2.485, 30: 2.457}


def _t99(df: int) -> float:
    if df in _T99:
        return _T99[df]
    below = [d for d in _T99 if d <= df]
    return _T99[max(below)] if df <= 30 else 2.326


@dataclasses.dataclass(frozen=True)
class AccuracyTarget:
    """What held-out accuracy an honest run reaches at one challenge size, measured: the baseline's recipe trained
    from several seeds (other initial weights and batch order, the same data), each judged on the same held-out
    images. A run is refused below :attr:`threshold`: the lower end of a one-sided 99% prediction interval for one
    more such run (mean − t₀.₉₉ · sd · √(1 + 1/k)). An honest run that learns as much as the baseline is refused
    about once in a hundred; a run that learns less is refused the more often the further it falls.

        t = accuracy_target("gpu")
        t.threshold, t.describe()
    """

    size: str
    accuracies: tuple[float, ...]
    device: str
    date: str
    torch: str = ""
    source: str = ""  # the probe output it was written from
    images: int | None = None  # each rerun trained on this many images (where the probe said)

    def __post_init__(self) -> None:
        if len(self.accuracies) < 2:
            raise ValueError(f"an accuracy target needs at least two seeds' accuracies, got {len(self.accuracies)}")

    @property
    def mean(self) -> float:
        return statistics.mean(self.accuracies)

    @property
    def sd(self) -> float:
        return statistics.stdev(self.accuracies)

    @property
    def margin(self) -> float:
        k = len(self.accuracies)
        return _t99(k - 1) * self.sd * math.sqrt(1 + 1 / k)

    @property
    def threshold(self) -> float:
        return self.mean - self.margin

    def describe(self) -> str:
        """One sentence: where the bar is, and where it comes from."""
        return (f"The baseline's recipe reaches {self.mean:.1%} held-out accuracy on average over {len(self.accuracies)}"
                f" seeds (sd {self.sd:.2%}; {self.device}, {self.date}); a run below {self.threshold:.1%} learned less"
                " than 99% of its reruns would.")


@functools.lru_cache(maxsize=1)
def _targets(path: str) -> dict[str, AccuracyTarget]:
    p = Path(path)
    if not p.exists():
        return {}
    raw = json.loads(p.read_text())
    return {size: AccuracyTarget(size=size, accuracies=tuple(e["accuracies"]), device=e["device"], date=e["date"],
                                 torch=e.get("torch", ""), source=e.get("source", ""),
                                 images=e.get("images"))
            for size, e in raw.items()}


def accuracy_target(size: str) -> AccuracyTarget | None:
    """The measured target for a challenge size (``rules.size``), or None where none was measured."""
    return _targets(str(TARGETS_FILE)).get(size)


def time_target(rules) -> AccuracyTarget | None:
    """The accuracy a learner's training must reach on ``rules``' challenge (``rules.target_key`` in the targets
    file): the classic loop's recipe trained on about one epoch of the challenge's images, from several seeds. None
    where none was measured."""
    return accuracy_target(rules.target_key)


def write_targets(probe: dict | list[dict], *, source: str = "", path: Path | None = None,
                  key: str | None = None) -> list[str]:
    """Write the baseline accuracies of one or more outputs of scripts/probes/accuracy_variation.py into the
    targets file (one entry per size; a size measured again replaces its entry). Returns the sizes written."""
    path = path or TARGETS_FILE
    existing = json.loads(path.read_text()) if path.exists() else {}
    written = []
    for p in probe if isinstance(probe, list) else [probe]:
        accs = [r["accuracy"] for r in p["baseline"]]
        name = key or p["size"]
        existing[name] = {"accuracies": accs, "device": p.get("device_label") or p.get("device", ""),
                          "date": p["date"], "torch": p.get("torch", ""), "source": Path(source).name,
                          "images": p.get("images") or p.get("rules", {}).get("images")}
        written.append(name)
    path.write_text(json.dumps(existing, indent=1, sort_keys=True) + "\n")
    _targets.cache_clear()
    return written


def accuracy_check(accuracy: float, rules, baseline=None) -> tuple[bool, str]:
    """The accuracy rule for a run of ``rules`` that reached ``accuracy``: ``(passed, why)``.

    Where the rules' size has a measured :class:`AccuracyTarget`, the run must reach its threshold (the baseline's
    own run in the session included: it is judged like any run). Rules made by hand (another size) have none: there
    the run is compared with ``baseline`` (the session's baseline verdict; None: this run is the baseline) within
    two standard errors of two independent accuracies on the held-out images (:func:`accuracy_margin`), and the
    reason says that no measured target exists for them."""
    target = accuracy_target(rules.size)
    if target is not None:
        ok = accuracy >= target.threshold
        return ok, (f"held-out accuracy {accuracy:.1%}; the baseline's recipe reaches {target.mean:.1%} over "
                    f"{len(target.accuracies)} seeds (sd {target.sd:.2%}), and a run below {target.threshold:.1%} "
                    f"learned less than 99% of its reruns would")
    if baseline is None:
        return True, f"this is the baseline ({accuracy:.1%}; no measured target for these rules)"
    margin = accuracy_margin(baseline.accuracy, rules.heldout)
    return accuracy >= baseline.accuracy - margin, (
        f"held-out accuracy {accuracy:.1%} against the baseline's {baseline.accuracy:.1%} (no measured target for "
        f"these rules: chance on {rules.heldout:,} images moves it by up to {margin:.1%})")
