"""What was measured, where and when: ``results/<gpu-slug>.json``.

Every figure the course states is read from these files, written by the code
that measured it. One file per device::

    {"device": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "torch": "2.11.0+cu130",
     "cuda": "13.0", "date": "2026-11-22", "figures": {"baseline_img_per_s": 512.3, ...},
     "comparison": {"baseline": {"img_per_s": 512.3, ...}}}

    results.record({"ceiling_bf16_tflops": 790.1})
    results.add_comparison_row("baseline", result.as_row())
    results.comparison_table()           # DataFrame, one row per variant, with speed-ups

At smoke scale (a CPU) the file goes to ``results/local/`` (ignored by git),
so CI and laptops never overwrite the measured figures.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Iterable

from . import env

__all__ = [
    "results_dir",
    "device_header",
    "results_path",
    "scaled_dir",
    "load",
    "record",
    "add_comparison_row",
    "comparison_table",
    "figures_table",
    "figure_unit",
    "shown",
    "SAME_QUANTITY",
    "disagreeing",
    "recorded_elsewhere",
    "measured_on",
]

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def results_dir() -> Path:
    """``$HELPERS_RESULTS``, else the repository's ``results/`` (found beside ``helpers/``), else ``./results``."""
    override = os.environ.get("HELPERS_RESULTS")
    if override:
        return Path(override)
    if (_PACKAGE_ROOT / "notebooks").is_dir():
        return _PACKAGE_ROOT / "results"
    return Path.cwd() / "results"


def shown(path: Path | str) -> str:
    """``path`` as a notebook prints it: relative to the repository (``results/nvidia-h100-80gb-hbm3.json``),
    else under ``~``, else as given. What is printed ends up in exports and executed notebooks that others read:
    they should not carry the name of the machine, the user or the folder a run happened in."""
    p = Path(path).expanduser()
    resolved = p.resolve()
    for base, prefix in ((_PACKAGE_ROOT, ""), (Path.home().resolve(), "~/")):
        if resolved.is_relative_to(base):
            return prefix + resolved.relative_to(base).as_posix()
    return str(p)


def device_header() -> dict[str, Any]:
    """Device (as NVML names it, else as CUDA does), driver, torch, CUDA and today's date."""
    import torch

    from . import nvml

    name = None
    if torch.cuda.is_available():
        handle = nvml.handle_for_cuda_device(torch.cuda.current_device())
        nv = nvml.load(quiet=True)
        if nv is not None and handle is not None:
            try:
                raw = nv.nvmlDeviceGetName(handle)
                name = raw.decode() if isinstance(raw, bytes) else str(raw)
            except Exception:
                name = None
        name = name or torch.cuda.get_device_name()
    info = nvml.driver_info()
    header = {
        "device": env.device_label(name or "cpu"),  # 'NVIDIA H100 80GB HBM3 as t4' under a learner-machine profile
        "driver": info.driver if info else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": env.today(),
        # The baseline's speed depends on the host CPU as much as on the GPU: keep both.
        "host_cpu": f"{env.cpu_model()} ({env.usable_cpus()} usable cores)",
    }
    profile = env.profile()
    if profile is not None:  # a stand-in run names what it stood for and how
        header["profile"] = profile.name
        header["stands_for"] = profile.stands_for.name if profile.stands_for else profile.description
        header["limits"] = profile.limits()
        if profile.stands_for is not None:  # the data sheet's figures, beside which the measured ceilings are read
            header["published"] = profile.published_figures()
    return header


def results_path(header: dict[str, Any] | None = None, *, scale: env.Scale | None = None) -> Path:
    """The JSON file for this device at this scale: ``results/<gpu-slug>.json``, and under a learner-machine
    profile ``results/<gpu-slug>.<profile>.json`` (never the real GPU's file)."""
    header = header or device_header()
    profile = header.get("profile")
    device = str(header["device"]).removesuffix(f" as {profile}") if profile else str(header["device"])
    slug = env.gpu_slug(None if device == "cpu" else device) + (f".{profile}" if profile else "")
    if (scale or env.scale()) == "full":
        return results_dir() / f"{slug}.json"
    return results_dir() / "local" / f"{slug}-smoke.json"


def scaled_dir(name: str, *, scale: env.Scale | None = None) -> Path:
    """``results/<name>/`` at full scale, ``results/local/<name>/`` (ignored by git) at smoke scale."""
    if (scale or env.scale()) == "full":
        return results_dir() / name
    return results_dir() / "local" / name


def load(path: Path | str | None = None) -> dict[str, Any]:
    """The results file's content, or an empty record if there is none yet."""
    path = Path(path) if path is not None else results_path()
    if not path.exists():
        return {"figures": {}, "comparison": {}}
    data = json.loads(path.read_text())
    data.setdefault("figures", {})
    data.setdefault("comparison", {})
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    # Write to a temporary file and rename: an interrupted kernel never leaves half a file.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def _update(mutate, path: Path | str | None, header: dict[str, Any] | None = None) -> Path:
    header = {**device_header(), **(header or {})}
    path = Path(path) if path is not None else results_path(header)
    data = load(path)
    data.update(header)  # the latest run's versions and date
    mutate(data)
    first = ("device", "profile", "stands_for", "limits", "published", "driver", "torch", "cuda", "date", "host_cpu")
    ordered = {k: data[k] for k in first if k in data}
    ordered.update({k: v for k, v in data.items() if k not in ordered})
    _write(path, ordered)
    return path


def record(figures: dict[str, float], *, path: Path | str | None = None,
           header: dict[str, Any] | None = None) -> Path:
    """Merge measured ``figures`` (name → number) into this device's results file; return its path.

    ``header`` overrides fields of :func:`device_header` (a smoke run on an AVX2-only CPU names itself so).
    """
    for name, value in figures.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"figure {name!r}={value!r}: figures are numbers (measured, never typed in).")
    def mutate(d: dict) -> None:
        d["figures"].update({k: float(v) for k, v in figures.items()})
        # each figure's own day: a file that several runs add to has one "date" (its latest run's), and a sentence
        # about one figure ("05 ran on 2 GPUs on …") must name the day that figure was measured
        d.setdefault("measured_on", {}).update({k: d["date"] for k in figures})

    return _update(mutate, path, header)


def measured_on(data: dict, name: str) -> str:
    """The day figure ``name`` of a loaded results file was measured: its own record where the file keeps one
    (:func:`record` does), else the file's date (files written before figures had their own)."""
    return (data.get("measured_on") or {}).get(name) or data.get("date", "-")


def add_comparison_row(name: str, row: dict[str, Any], *, path: Path | str | None = None,
                       measured_as: str | None = None, notebook: str | None = None) -> Path:
    """Add (or replace) one variant's row in the course's comparison table.

    ``measured_as``: how this row was measured when it is not a training run with its loader (it says, under
    the table, why the row's other columns are empty): ``"the training step alone, on data already on the GPU"``.
    ``notebook``: the notebook that measured it (``"02_dataloader"``), so an earlier notebook's table leaves it out.
    """
    row = (dict(row) | ({"measured_as": measured_as} if measured_as else {})
           | ({"notebook": notebook} if notebook else {}))
    return _update(lambda d: d["comparison"].update({name: row}), path)


#: Why a comparison column is empty for a training run on a CPU.
_EMPTY_ON_CPU = {"peak_allocated_gib": "no GPU allocator on a CPU", "util_pct": "no NVIDIA driver on a CPU"}


def comparison_table(path: Path | str | None = None, *, baseline: str = "baseline",
                     upto: str | None = None) -> "pandas.DataFrame":  # noqa: F821
    """The comparison rows as a DataFrame, with ``speedup_x`` against ``baseline`` when it is there.

    ``upto``: only the rows measured by this notebook and the ones before it (``"01_baseline"``): a file kept from
    an earlier full run holds the later notebooks' rows too, and a notebook's table shows what was measured so far.
    Full precision; ``tables.readable(df)`` shows it to read, with a note under the table for each empty
    column saying which rows lack it and why.
    """
    import pandas as pd

    data = load(path)
    rows = {k: v for k, v in data["comparison"].items()
            if upto is None or not isinstance(v.get("notebook"), str) or v["notebook"] <= upto}
    # in course order, the baseline first: a row measured again moves to the end of the file, and 02's table once
    # listed 01's baseline under 02's own rows
    order = {k: i for i, k in enumerate(rows)}
    rows = dict(sorted(rows.items(), key=lambda kv: (kv[0] != baseline, str(kv[1].get("notebook") or ""),
                                                      order[kv[0]])))
    df = pd.DataFrame.from_dict(rows, orient="index")
    df = df.drop(columns=["notebook"], errors="ignore")
    if not df.empty and baseline in rows and "img_per_s" in df:
        df["speedup_x"] = df["img_per_s"] / rows[baseline]["img_per_s"]
        df.attrs["ratio_of"] = {"speedup_x": ("img_per_s", baseline, "row/base")}
    df.index.name = "variant"
    how = df.pop("measured_as") if "measured_as" in df else pd.Series(None, index=df.index, dtype=object)
    on_cpu = data.get("device") == "cpu"
    missing = {}
    for col in df.columns:
        lacking = df.index[df[col].isna()]
        reasons = {}
        for name in lacking:
            why = how.get(name) if isinstance(how.get(name), str) else None
            why = (f"measured as {why}" if why else
                   _EMPTY_ON_CPU.get(col) if on_cpu else None) or "not recorded by the notebook that measured it"
            reasons.setdefault(why, []).append(name)
        if reasons:
            missing[col] = "; ".join(f"{', '.join(names)}: {why}" for why, names in reasons.items())
    df.attrs["missing"] = missing
    return df


#: (pattern in a figure's name, unit, how it reads): the first match wins (see :func:`figure_unit`).
_FIGURE_UNITS: list[tuple[str, str, str]] = [
    (r"img_per_s", "img/s", "whole"),
    (r"tok_per_s", "tok/s", "whole"),
    (r"gb_per_s|gb_s$", "GB/s", "sig"),
    (r"tflops", "TFLOP/s", "sig"),
    # four figures: the ceiling in img/s beside it is the ceiling's TFLOP/s over it, as 00's sentence prints it
    (r"gflop_per_image", "GFLOP/image", "sig4"),
    (r"ms_per_image", "ms/image", "sig"),
    (r"j_per_image", "J/image", "sig"),
    (r"_pts$", "points", "sig"),
    (r"(^|_)pct(_|$)", "%", "percent"),
    (r"(^|_)(share|frac)(_|$)|accuracy$|(^|_)mfu$", "%", "fraction"),
    (r"speedup|(^|_)x(_|$)", "×", "sig"),
    (r"(^|_)ms(_|$)", "ms", "sig"),
    (r"(^|_)us(_|$)", "µs", "sig"),
    (r"(^|_)s(_|$)", "s", "sig"),
    (r"gib", "GiB", "sig"),
    (r"gpus|max_batch|workers|per_step|backoffs|lost|compared", "", "whole"),
]


def figure_unit(name: str) -> tuple[str, str]:
    """The unit a figure's name gives it, and how it reads (a kind of ``tables.KINDS``).

    >>> figure_unit("baseline_img_per_s"), figure_unit("baseline_data_wait_share"), figure_unit("sdpa_speedup")
    (('img/s', 'whole'), ('%', 'fraction'), ('×', 'sig'))
    >>> figure_unit("energy_j_per_image_final"), figure_unit("gpt_compile_tok_per_s")
    (('J/image', 'sig'), ('tok/s', 'whole'))
    """
    for pattern, unit, kind in _FIGURE_UNITS:
        if re.search(pattern, name):
            return unit, kind
    return "", "sig"


def recorded_elsewhere(names: Iterable[str], *, where: str = "ddp_gpus", at_least: float = 2.0,
                       folder: Path | str | None = None) -> "pandas.DataFrame":  # noqa: F821
    """The figures ``names`` as recorded by the machines whose ``where`` figure reached ``at_least`` (05's two-GPU
    figures, say, shown on a node of one GPU): one row per figure and machine, with the machine's device and the
    date of its results file. Empty where no results file has them.

        recorded_elsewhere(["ddp2_efficiency_pct_bs256", "ddp2_efficiency_pct_bs32"])   # from results/*.json
    """
    import pandas as pd

    rows = []
    for path in sorted(Path(folder or results_dir()).glob("*.json")):
        try:
            data = load(path)
        except (OSError, ValueError):
            continue  # a file being written, or not a results file: nothing to show from it
        figs = data.get("figures", {})
        if not isinstance(figs, dict) or float(figs.get(where, 0) or 0) < at_least:
            continue
        for name in names:
            if name in figs:
                rows.append({"figure": name, "value": figs[name], "unit": figure_unit(name)[0],
                             "device": f"{int(figs[where])} × {data.get('device', '?')}", "date": measured_on(data, name),
                             "file": f"results/{path.name}"})
    df = pd.DataFrame(rows, columns=["figure", "value", "unit", "device", "date", "file"])
    df.attrs["formats"] = {"value": lambda row: figure_unit(row["figure"])[1], "device": "text", "date": "text",
                           "file": "text"}
    return df


def figures_table(path: Path | str | None = None, *,
                  only: Iterable[str] | None = None) -> "pandas.DataFrame":  # noqa: F821
    """The figures of one results file: figure, value (full precision) and the unit its name gives it.

    ``only``: just these figures (a notebook shows its own; the file also holds every other notebook's).
    ``tables.readable(df)`` shows each value as its unit reads (img/s whole, shares in %).
    """
    import pandas as pd

    data = load(path)
    keep = None if only is None else set(only)
    df = pd.DataFrame([(k, v, figure_unit(k)[0]) for k, v in sorted(data["figures"].items())
                       if keep is None or k in keep],
                      columns=["figure", "value", "unit"])
    df.attrs["formats"] = {"value": lambda row: figure_unit(row["figure"])[1]}
    df.attrs["missing"] = {"value": "not measured on this machine (the notebook that records it said why when it ran)"}
    return df


#: Figures two notebooks record of one quantity: within one session on one machine they must be the same number
#: (each notebook reads the session's ceilings, bench.session_ceilings). Measured again in each notebook, the bf16
#: ceiling once read three ways in one run.
SAME_QUANTITY: tuple[tuple[str, str], ...] = (
    ("ceiling_bf16_tflops", "final_ceiling_tflops"),
    ("ceiling_fp16_tflops", "final_ceiling_tflops"),
    ("ceiling_cpu_fp32_tflops", "final_ceiling_tflops"),
)


def disagreeing(figures: dict[str, float], recorded_now: set[str] | None = None, *, rel_tol: float = 1e-9) -> list[str]:
    """Pairs of :data:`SAME_QUANTITY` that disagree in ``figures``, as sentences; only pairs whose two figures were
    both recorded in the session being checked (``recorded_now``; every figure when None), for two sessions may
    measure two ceilings. ``scripts/gpu_test.py`` fails a run that leaves one::

        disagreeing({"ceiling_bf16_tflops": 784.0, "final_ceiling_tflops": 807.0})
        # ['ceiling_bf16_tflops is 784 but final_ceiling_tflops is 807: one quantity, two figures in one session']
    """
    out = []
    for a, b in SAME_QUANTITY:
        if a not in figures or b not in figures or (recorded_now is not None and not {a, b} <= recorded_now):
            continue
        x, y = float(figures[a]), float(figures[b])
        if not math.isclose(x, y, rel_tol=rel_tol):
            out.append(f"{a} is {x:,.4g} but {b} is {y:,.4g}: one quantity, two figures in one session")
    return out
