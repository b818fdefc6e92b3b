#!/usr/bin/env python3
"""The README's table of measured figures: the figures that matter per notebook, one column per GPU measured at
full scale (every ``results/<gpu>.json``: H100 and H200 side by side, and a learner's own GPU once their full-scale
run has recorded its file), written from results/, never by hand.

    python3 scripts/readme_figures.py            # rewrite the table between its markers in README.md
    python3 scripts/readme_figures.py --check    # exit 1 if the table differs from results/

Smoke runs write to ``results/local/`` or ``results/smoke*.json``: they never add a column. ``scripts/notebook_times.py``
rewrites this table too whenever it records a run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- figures: written by scripts/readme_figures.py from results/; do not edit by hand -->"
END = "<!-- /figures -->"

#: Three significant figures, trailing zeros kept, as the notebooks print them (tables.sig): "{:.3g}" had printed
#: the reference solution's 1.60 s as "1.6".
SIG = "sig"

#: (notebook, figure in results/, what it is, how to print it): the figures each notebook asserts or teaches by.
KEY_FIGURES: list[tuple[str, str, str, str]] = [
    ("00_setup", "ceiling_bf16_tflops", "bf16 matmul ceiling, TFLOP/s", "{:,.0f}"),
    ("00_setup", "ceiling_copy_gb_per_s", "copy ceiling, GB/s", "{:,.0f}"),
    ("01_baseline", "baseline_img_per_s", "classic loop, img/s", "{:,.0f}"),
    ("01_baseline", "baseline_nvml_util_pct", "classic loop, NVML utilisation %", "{:.0f}"),
    ("01_baseline", "baseline_data_wait_share", "classic loop, share of time waiting for data", "{:.0%}"),
    ("02_dataloader", "loader_tuned_share_of_ceiling", "tuned loader, share of the step-alone ceiling", "{:.0%}"),
    ("02_dataloader", "gpu_pipeline_share_of_ceiling", "GPU pipeline, share of the step-alone ceiling", "{:.0%}"),
    ("03_kernels", "cuda_graph_speedup", "CUDA graph over eager (small MLP), ×", "{:.1f}"),
    ("03_kernels", "compile_speedup", "torch.compile over eager (reference step), ×", "{:.2f}"),
    ("03_kernels", "triton_fused_speedup", "Triton softmax over the unfused ops, ×", "{:.1f}"),
    ("03_kernels", "triton_bias_relu_pool_speedup", "Triton bias + ReLU + max-pool over the unfused ops, ×", "{:.1f}"),
    ("03_kernels", "fast_step_speedup", "your step (channels_last, compiled, CUDA graphs) over eager, ×", "{:.2f}"),
    ("03_kernels", "sdpa_speedup", "fused attention over attention written out, ×", "{:.1f}"),
    ("04_memory", "amp_bf16_speedup", "bf16 over fp32 (TF32), step, ×", "{:.2f}"),
    ("04_memory", "amp_bf16_mem_saving_pct", "bf16's memory saving %", "{:.0f}"),
    ("04_memory", "checkpointing_mem_saving_pct", "checkpointing's memory saving (deep net) %", "{:.0f}"),
    ("05_ddp", "ddp2_efficiency_pct_bs256", "two GPUs' efficiency at 256 per GPU %", "{:.0f}"),
    ("05_ddp", "ddp2_efficiency_pct_bs32", "two GPUs' efficiency at 32 per GPU %", "{:.0f}"),
    ("05_ddp", "ddp_comm_overlap_pct", "NCCL kernel time beside computation (HTA's overlap) %", "{:.0f}"),
    ("06_final_challenge", "reference_time_to_target_s", "your training's target: the reference solution's time to it, s",
     SIG),
    ("06_final_challenge", "final_mfu_pct", "the reference solution's training to the target, MFU over its whole run %",
     "{:.1f}"),
    ("06_final_challenge", "final_mfu_pct_min", "the least of its reruns (other seeds), MFU %", "{:.1f}"),
    ("06_final_challenge", "baseline_time_to_target_s", "the classic loop's time to the target, s", SIG),
    ("06_final_challenge", "to_target_false_refusals", "reference solution's reruns (other seeds) that missed the target",
     "{:.0f}"),
    ("06_final_challenge", "to_target_reruns", "reruns", "{:.0f}"),
    ("06_final_challenge", "task_quarter_images_gap_pts", "a quarter of its images: points below the target", "{:.1f}"),
    ("06_final_challenge", "ladder_top_mfu_pct", "the ladder's top rung, MFU %", "{:.1f}"),
    ("06_final_challenge", "ladder_top_img_per_s", "the ladder's top rung, img/s", "{:,.0f}"),
    ("06_final_challenge", "ladder_top_speedup", "over the same session's baseline, ×", "{:.1f}"),
    ("06_final_challenge", "ladder_top_accuracy_mean_over_baseline_pts",
     "the ladder's top rung's reruns (other seeds), held-out accuracy over the baseline's mean, points", "{:+.2f}"),
    ("06_final_challenge", "accuracy_false_refusals", "of those reruns, refused by the accuracy rule", "{:.0f}"),
    ("06_final_challenge", "accuracy_reruns", "reruns", "{:.0f}"),
    ("06_final_challenge", "inference_p99_ms_bs1", "serving, p99 at batch 1, ms", SIG),
    ("06_final_challenge", "inference_img_per_s", "serving, best img/s", "{:,.0f}"),
    ("07_transformer", "gpt_mfu_pct", "a 124M GPT's top rung without FP8, MFU of the data sheet's dense bf16 peak %",
     "{:.1f}"),
    ("07_transformer", "gpt_eager_fp32_tok_per_s", "its eager fp32 baseline, tok/s", "{:,.0f}"),
    ("07_transformer", "gpt_fp8_speedup_x", "FP8 matmuls (torchao) over the bf16 top rung, ×", "{:.2f}"),
    ("07_transformer", "gpt_adam_bytes_per_param", "AdamW in mixed precision, bytes per parameter", "{:.1f}"),
    ("07_transformer", "gpt_zero_bytes_per_rank", "ZeRO over 2 gloo ranks (smoke GPT), bytes on the fullest rank",
     "{:,.0f}"),
    ("07_transformer", "gpt_fsdp2_bytes_per_rank", "FSDP2 over 2 gloo ranks (smoke GPT), bytes on the fullest rank",
     "{:,.0f}"),
    ("07_transformer", "gpt_shard_ddp_tok_per_s", "GPT-2 small on two GPUs (NCCL, bf16), DDP, tok/s", "{:,.0f}"),
    ("07_transformer", "gpt_shard_zero_vs_ddp_x", "ZeRO-1 over DDP on two GPUs, ×", "{:.2f}"),
    ("07_transformer", "gpt_shard_fsdp2_vs_ddp_x", "FSDP2 over DDP on two GPUs, ×", "{:.2f}"),
    ("07_transformer", "gpt_shard_fsdp2_peak_gib", "FSDP2's fullest rank's peak on two GPUs, GiB", "{:.1f}"),
]


def gpu_results(results_dir: Path) -> list[tuple[str, dict]]:
    """``[(file name, content)]`` of every full-scale GPU results file in ``results_dir``, by device name."""
    out = []
    for path in sorted(results_dir.glob("*.json")):
        if path.name.startswith(("smoke", "monitor_overhead")):
            continue
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or "figures" not in data or str(data.get("device", "cpu")).startswith("cpu"):
            continue
        if data.get("profile"):  # a stand-in for a smaller machine, never a column of real hardware
            continue
        out.append((path.name, data))
    return sorted(out, key=lambda item: str(item[1].get("device")))


def day_of(data: dict, figure: str) -> str:
    """The day ``figure`` of a results file was measured (helpers.results.measured_on, read here without torch)."""
    return (data.get("measured_on") or {}).get(figure) or data.get("date", "-")


def days_of(data: dict, figures) -> str:
    """The day, or the span of days, on which ``figures`` of a results file were measured (those it holds)."""
    days = sorted({day_of(data, f) for f in figures if f in data.get("figures", {})})
    return (days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}") if days else data.get("date", "-")


def _sig(v: float) -> str:
    from helpers import tables  # the notebooks' own rounding

    return tables.sig(v)


def figures_block(results_dir: Path = ROOT / "results") -> str:
    """The table between the markers: one row per key figure, one column per GPU results file."""
    files = gpu_results(results_dir)
    keys = [key for _nb, key, _label, _fmt in KEY_FIGURES]
    head = "| notebook | figure | " + " | ".join(f"{d.get('device', n)} ({days_of(d, keys)})" for n, d in files) + " |"
    rule = "| --- | --- |" + " --- |" * len(files)
    rows = []
    for nb, key, label, fmt in KEY_FIGURES:
        cells = []
        for _name, data in files:
            v = data["figures"].get(key)
            cells.append("—" if v is None else _sig(v) if fmt == SIG else fmt.format(v))
        rows.append(f"| `{nb}` | {label} (`{key}`) | " + " | ".join(cells) + " |")
    sources = ", ".join(f"`results/{n}`" for n, _ in files) or "none yet"
    note = (f"From {sources}; each column is one GPU's latest full-scale run of each notebook (the dates are "
            "those of the figures shown). \"—\": not measured on that GPU (05's scaling needs two GPUs of one node).")
    return "\n".join([BEGIN, head, rule, *rows, "", note, END])


PROFILES_BEGIN = "<!-- profiles: written by scripts/readme_figures.py from helpers/machine_profiles.py and results/; do not edit by hand -->"
PROFILES_END = "<!-- /profiles -->"


def profile_results(results_dir: Path) -> list[tuple[str, dict]]:
    """``[(file name, content)]`` of every learner-machine profile's results file (``<gpu-slug>.<profile>.json``)."""
    out = []
    for path in sorted(results_dir.glob("*.*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.get("profile") and "figures" in data:
            out.append((path.name, data))
    return out


def _times(data: dict, nb: str, budget_s: float, cell_budget_s: float) -> str:
    f, runs = data["figures"], data.get("profile_notebooks", {})
    if f"run_s_{nb}" in f:
        run, cell = f[f"run_s_{nb}"], f.get(f"max_cell_s_{nb}", 0.0)
        over = " **over budget**" if run > budget_s or cell > cell_budget_s else ""
        return f"{run:.0f} s ({cell:.0f} s){over}"
    if nb in runs and not runs[nb]["passed"]:
        return f"failed ({runs[nb]['date']})"
    return "not run yet"


def _full_budget():
    """The full-scale time budget, as scripts/notebook_times.py holds it (loaded here when needed: it loads this
    file when it starts)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("notebook_times", Path(__file__).with_name("notebook_times.py"))
    times = sys.modules.setdefault("notebook_times", importlib.util.module_from_spec(spec))
    if not hasattr(times, "BUDGETS"):
        spec.loader.exec_module(times)
    return times.BUDGETS["full"]


def profiles_block(results_dir: Path = ROOT / "results", notebooks: list[str] | None = None) -> str:
    """The learner-machine profiles (from the one table in helpers/machine_profiles.py) and what each measured run
    under one: its ceilings beside the published ones of the GPU it stands for, and each notebook's time."""
    sys.path.insert(0, str(ROOT))
    from helpers.machine_profiles import PROFILES

    if notebooks is None:
        notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    lines = [PROFILES_BEGIN, "| profile | stands for | limits |", "| --- | --- | --- |"]
    lines += [f"| `{p.name}` | {p.stands_for.name if p.stands_for else p.description} | {'; '.join(p.limits())} |"
              for p in PROFILES.values()]
    files = profile_results(results_dir)
    budget = _full_budget()
    if not files:
        return "\n".join([*lines, "", "No run under a profile is recorded yet.", PROFILES_END])
    lines += ["", "| run | matmul ceiling, measured (published) | copy ceiling, GB/s, measured (published) | "
                  "notebooks passed | " + " | ".join(f"`{nb}`" for nb in notebooks) + " |",
              "| --- | --- | --- | --- |" + " --- |" * len(notebooks)]
    for name, data in files:
        f, pub = data["figures"], data.get("published", {})
        mm = next(((k, v) for k, v in f.items() if k.startswith("ceiling_") and k.endswith("_tflops")), None)
        if mm:
            dtype = mm[0].removeprefix("ceiling_").removesuffix("_tflops")
            published = pub.get(f"published_{dtype}_tflops")
            matmul = f"{mm[1]:,.0f} TFLOP/s {dtype}" + (f" ({published:,.0f})" if published else "")
        else:
            matmul = "not measured yet"
        copy = f.get("ceiling_copy_gb_per_s")
        copy = "not measured yet" if copy is None else f"{copy:,.0f}" + (
            f" ({pub['published_copy_gb_per_s']:,.0f})" if "published_copy_gb_per_s" in pub else "")
        passed = (f"{f.get('profile_notebooks_passed', 0):.0f} of {f.get('profile_notebooks_run', 0):.0f} run "
                  f"(the course has {len(notebooks)})")
        times = " | ".join(_times(data, nb, budget.notebook_s, budget.cell_s) for nb in notebooks)
        lines.append(f"| {data['device']}, {data.get('date', '-')} (`results/{name}`) | {matmul} | {copy} | "
                     f"{passed} | {times} |")
    lines += ["", "Each notebook's time at full scale under the profile, its slowest cell in brackets (budget: "
              f"{budget.notebook_s:.0f} s, {budget.cell_s:.0f} s). In brackets beside a ceiling: the data sheet's figure for the GPU the profile stands for (none where "
              "it stands for this GPU itself)."]
    return "\n".join([*lines, PROFILES_END])


def rewrite_between(path: Path, begin: str, end: str, block: str, *, check: bool, what: str) -> bool:
    """Replace the text from ``begin`` to ``end`` in ``path`` by ``block`` (which carries the markers); with
    ``check``, only say whether it is already that. Raises ``ValueError`` naming ``what`` when the markers are missing."""
    text = path.read_text()
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path} has no {what} markers ({begin} … {end}).")
    new = pattern.sub(lambda _m: block, text)
    if check:
        return new == text
    path.write_text(new)
    return True


def update_readme(readme: Path = ROOT / "README.md", *, results_dir: Path = ROOT / "results",
                  check: bool = False) -> bool:
    """Rewrite the table between its markers (and the profiles' table, in the README and the presenter's guide,
    where they have its markers); with ``check``, only say whether they are up to date."""
    ok = rewrite_between(readme, BEGIN, END, figures_block(results_dir), check=check, what="figures table")
    block = profiles_block(results_dir)
    for doc in (readme, readme.with_name("PRESENTING.md")):
        if doc.exists() and PROFILES_BEGIN in doc.read_text():
            ok = rewrite_between(doc, PROFILES_BEGIN, PROFILES_END, block, check=check, what="profiles table") and ok
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only check that the table is up to date")
    args = ap.parse_args(argv)
    if args.check:
        ok = update_readme(check=True)
        print("README's figures table is up to date" if ok else
              "README's figures table differs from results/: run python3 scripts/readme_figures.py")
        return 0 if ok else 1
    update_readme()
    return 0


if __name__ == "__main__":
    sys.exit(main())
