"""The report a learner hands in: one HTML file, written by one call, that opens offline (static SVG, no script).

    path = write_report(session, verdicts, kernels=kernels, serving=sweep, p99_target_ms=2.0,
                        author="Ada", submission=mine, reference=top_rung(), own_words=MY_REFLECTION)
    print(path)     # results/reports/final-challenge-<gpu>.html on a GPU; results/local/reports/... on a CPU

A hand-in: the learner's name at the top, what their run changed from the reference solution in words
(:func:`changes_from`), and their own reflection beside the generated starting points; a report without a name or
without the learner's words says so where an instructor looks first.

It holds, from this session's own runs: the device, versions and date; the baseline analysis (where its step's
time went, how far it stood from the ceiling); the comparison table and MFU per rung; the monitor's records of the
baseline and the ladder's top rung overlaid; both profiler timelines; the top rung's kernels on the roofline; serving
latency against batch size; and starting points for three of the reflection's prompts (the biggest bottleneck, the
change that paid most, what to try next) written from these numbers, for the learner to argue with.
:func:`reflection` gives the same answers as text.
"""

from __future__ import annotations

import dataclasses
import html
import math
import os
import tempfile
from pathlib import Path

from .. import bench, env, results, svg, tables
from ..inference import ServingSweep
from ..monitor import MonitorRecord, rolling_img_per_s, whole_run_window_s
from ..monitor.view import COLORS as monitor_colors
from ..profiling import TIMELINE_COLORS
from ..roofline import attainable_tflops, kind_colors, ridge_intensity
from .harness import Session, Submission, Verdict, readable_table, speedup_as_shown
from .step_roofline import StepKernels

__all__ = ["Reflection", "reflection", "changes_from", "write_report", "report_path", "NEXT_HELD_BACK"]


@dataclasses.dataclass(frozen=True)
class Reflection:
    """The reflection's prompts answered from the measured runs, one sentence each."""

    biggest_bottleneck: str
    paid_most: str
    try_next: str


def _passed(verdicts: list[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if not v.refused]


def reflection(verdicts: list[Verdict], kernels: StepKernels | None, session: Session) -> Reflection:
    """Answer the three prompts from ``verdicts`` (the baseline first, the final run last) and the final step's
    kernels (:func:`~helpers.challenge.step_roofline.step_roofline`)."""
    if len(verdicts) < 2:
        raise ValueError("the reflection compares runs: give the baseline first and at least one run after it.")
    base, final = verdicts[0], verdicts[-1]
    ok = _passed(verdicts)
    # a refused final run is not read as a result: the numbers are the last run that passed, and the refusal is said
    refused = (f" {final.name} was refused ({final.reasons[0]}): its numbers are not counted."
               if final.refused and final.reasons else "")
    last = ok[-1] if ok else final
    # each change by factor (× the img/s of the run before it) and by amount (img/s added, and the MFU points that
    # come with them): in one session MFU is img/s over one ceiling, so the two measures agree on img/s and MFU, but
    # the largest factor and the largest amount can be different changes (a large factor on a small number adds little)
    # the factor and the amount from the img/s as each verdict's line prints them (whole): a reader's arithmetic on
    # those lines gives them (harness.speedup_as_shown; 06's channels_last had read 7.76× beside 5,591 and 721)
    # and the MFU points from the MFUs as the comparison table prints them ("+9.5 MFU points" had stood beside 14.0
    # and 23.4)
    gains = [(speedup_as_shown(b.img_per_s, a.img_per_s), _whole(b.img_per_s) - _whole(a.img_per_s),
              _pct_shown(b.mfu_pct) - _pct_shown(a.mfu_pct), b.name) for a, b in zip(ok, ok[1:])]
    if gains:
        ratio, _, _, name = max(gains)
        _, added, pts, name_added = max(gains, key=lambda g: g[1])
        points = f", {pts:+.1f} MFU points" if final.bounded else ""
        if name == name_added:
            said = (f"{name.strip('+ ')} paid the most, by factor and by amount: {ratio:.1f}× the img/s of the run "
                    f"before it, {added:+,.0f} img/s{points}")
        else:
            said = (f"by factor, {name.strip('+ ')} paid the most ({ratio:.1f}× the img/s of the run before it); by "
                    f"amount, {name_added.strip('+ ')} ({added:+,.0f} img/s{points}): a large factor on a small "
                    "number adds little")
            said = said[0].upper() + said[1:]
        upto = "" if last is final else f" up to {last.name}"
        mfu = f", MFU {tables.percent(base.mfu_pct)}% → {tables.percent(last.mfu_pct)}%" if final.bounded else ""
        # the ladder's own figure for it, from the img/s as printed (harness.speedup_as_shown)
        paid = (f"{said}. All together{upto}: {tables.times(speedup_as_shown(last.img_per_s, base.img_per_s))} the "
                f"baseline{mfu}.{refused}")
    else:
        paid = "No two runs that passed the rules to compare." + refused
    ceil = session.ceilings
    if final.stopped:  # it did not go through: there is no step to read
        bottleneck = (f"{final.name} was refused {final.stopped} ({'; '.join(final.reasons)}), so there is no step "
                      "of it to read: fix it and judge it again.")
        return Reflection(bottleneck, paid, "Make the run pass the rules first; then profile it.")
    if kernels is not None and kernels.points and not final.bounded:  # no roof to measure the kernels against
        shares = {**kernels.shares, **kernels.unplaced}
        top, share = max(shares.items(), key=lambda kv: kv[1])
        bottleneck = (f"{top} take {tables.sig(share / 100 * kernels.step_kernel_ms)} ms per step, "
                      f"{tables.percent(share)}% of the top rung's step time ({tables.sig(kernels.step_kernel_ms)} ms; "
                      "on a CPU the profile times PyTorch's ops).")
        try_next = (f"Run it on a GPU: how far each kind of work is from its roof is {bench.NOT_A_BOUND}.")
    elif kernels is not None and kernels.points:
        shares = {**kernels.shares, **kernels.unplaced}
        top, share = max(shares.items(), key=lambda kv: kv[1])
        where = ""
        if top in kernels.shares:
            p = next(p for p in kernels.points if p.name == top)
            # the share as the report's copy of 06's table shows it (its cells as shown: StepKernels.table)
            pct = float(kernels.table(ceil).set_index("kernels")["% of roof"][top])
            where = f", at {tables.percent(pct)}% of the roof there ({p.bound(ceil)}-bound)"
        # the group's own time per step, as the table beside it gives it, and its share of all kernel time
        bottleneck = (f"{top} take {tables.sig(share / 100 * kernels.step_kernel_ms)} ms per step, "
                      f"{tables.percent(share)}% of the top rung's kernel time "
                      f"({tables.sig(kernels.step_kernel_ms)} ms){where}.")
        # What each group would save at its roof: its time now minus the least time its FLOPs and bytes allow
        step = final.step_ms
        saving = kernels.largest_saving(ceil, step_ms=step, mfu_pct=final.mfu_pct)
        unplaced = ", ".join(f"{k} {tables.percent(v)}%" for k, v in kernels.unplaced.items() if v >= 1)
        try_next = (f"{saving.group}: at their roof they would take {saving.save_ms:.3g} ms less of a "
                    f"{tables.sig(step)} ms step, which would lift MFU to at most "
                    f"{tables.percent(saving.mfu_pct_then)}%."
                    + (f" Off the roofline, the kernels whose bytes depend on what the compiler fused: {unplaced}."
                       if unplaced else ""))
    else:
        prof = final.profile
        if prof is not None:
            shares = prof.kind_shares()
            top = next(iter(shares))
            bottleneck = f"{top} work takes {shares[top]:.0f}% of the top rung's step time (by the profile)."
        else:
            bottleneck = f"{final.name} was not profiled: judge it with profile=True to see where its time goes."
        try_next = "Profile it and place its kernels on the roofline to see which is furthest from its roof."
    return Reflection(bottleneck, paid, try_next)


def _function_words(fn) -> str:
    if fn is None:
        return "none (the reference network as it is)"
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    doc = (getattr(fn, "__doc__", None) or "").strip().splitlines()
    return f"{name}" + (f" ({doc[0].rstrip('.')})" if doc else "")


def changes_from(submission: Submission, reference: Submission) -> list[str]:
    """What ``submission`` changes from ``reference``, in words, one line per change: each training setting that
    differs (``batch_size 256, the reference 512``), and the ``build_model`` when it is not the reference's (its
    name and its docstring's first line). An empty list: the reference solution, unchanged."""
    out = []
    mine, ref = dataclasses.asdict(submission.config), dataclasses.asdict(reference.config)
    for key in mine:
        if mine[key] != ref.get(key):
            out.append(f"{key} {mine[key]!r}, the reference {ref.get(key)!r}")
    if submission.build_model is not reference.build_model:
        out.append(f"build_model {_function_words(submission.build_model)}, the reference "
                   f"{_function_words(reference.build_model)}")
    if submission.fit != reference.fit:
        out.append(f"fit {submission.fit} (the harness {'sets' if submission.fit else 'does not set'} the steps)")
    return out


def _hand_in(author: str, submission: Submission | None, reference: Submission | None) -> list[str]:
    """Who handed it in and what their run changed (an instructor's first questions)."""
    who = (f"<p><b>Handed in by:</b> {_h(author)}</p>" if author.strip() else
           "<p class='missing'><b>No name given</b>: set MY_NAME in the notebook's report cell and run it again.</p>")
    if submission is None or reference is None:
        return [who]
    changed = changes_from(submission, reference)
    what = (f"<p><b>{_h(submission.name)}</b> against the reference solution:</p><ul>"
            + "".join(f"<li>{_h(c)}</li>" for c in changed) + "</ul>" if changed else
            f"<p class='missing'><b>{_h(submission.name)}</b> is the reference solution, unchanged: nothing in "
            "this report is the learner's own run yet.</p>")
    return [who, "<h2>What this run changed</h2>", what]


#: What the report and the notebook say in place of "the biggest bottleneck" and "what to try next" until the
#: learner's own answer to 06.2 passes.
NEXT_HELD_BACK = ("held back until your own answer to exercise 06.2 passes its check: it answers that exercise. "
                  "Pass it, then run the report cell again.")


def _own_training(table: tables.Table | None, code: str) -> list[str]:
    """The learner's training, judged to the target, and the function they wrote."""
    if table is None:
        return []
    parts = ["<h2>My training, judged to the target</h2>", _table(table)]
    if code.strip():
        parts += ["<h3>My training function</h3>", f"<pre>{_h(code.rstrip())}</pre>"]
    return parts


def _own_words(text: str) -> str:
    if text.strip():
        paragraphs = [p.strip() for p in text.strip().split("\n\n") if p.strip()]
        return "<h3>In my own words</h3>" + "".join(f"<p class='own'>{_h(p)}</p>" for p in paragraphs)
    return ("<h3>In my own words</h3><p class='missing'>Not written yet: answer the reflection's prompts in "
            "MY_REFLECTION in the notebook's report cell and run it again.</p>")


def report_path(device_name: str | None = None) -> Path:
    """Where :func:`write_report` writes by default: ``results/reports/`` at full scale, ``results/local/`` else."""
    slug = env.gpu_slug(device_name if device_name is not None else (env.collect().device_name or None))
    return results.scaled_dir("reports") / f"final-challenge-{slug}.html"


def _h(text: object) -> str:
    return html.escape(str(text))


def _monitor_series(rec: MonitorRecord, label: str, dashed: bool,
                    window_s: float | None = None) -> tuple[list[svg.Series], list[svg.Series]]:
    """The utilisation lines and the img/s line (over ``window_s``; None: :func:`whole_run_window_s` of the run)."""
    key = "util_pct" if rec.source == "nvml" else "cpu_pct"
    dev = rec.devices[0] if rec.devices else None
    util = [(s["t_s"], s[key]) for s in rec.samples if s.get(key) is not None and s.get("gpu") == dev]
    sm = [(s["t_s"], s["sm_active_pct"]) for s in rec.samples if s.get("sm_active_pct") is not None
          and s.get("gpu") == dev]
    ts, ips = rolling_img_per_s(rec.steps, window_s)  # not one step's images over its host time: that spikes
    what = "GPU utilisation (NVML)" if rec.source == "nvml" else "CPU utilisation"
    # the colours of the notebooks' monitor (helpers.monitor.view): utilisation blue, SM activity red
    lines = [svg.Series(f"{label}: {what}", [t for t, _ in util], [v for _, v in util], dashed=dashed,
                        color=monitor_colors[0])]
    if sm:
        lines.append(svg.Series(f"{label}: SM activity (GPM)", [t for t, _ in sm], [v for _, v in sm], dashed=dashed,
                                color=monitor_colors[1]))
    return lines, [svg.Series(f"{label}: img/s", ts, ips, dashed=dashed)]


def _baseline_analysis(base: Verdict, session: Session) -> str:
    tr = base.train
    if tr is None:
        return f"<p class='missing'>The baseline was refused {_h(base.stopped)}: {_h('; '.join(base.reasons))}</p>"
    phases = ", ".join(f"{k} {v:.3g} ms" for k, v in tr.phase_ms.items())
    busy = ""
    if base.profile is not None and base.profile.kernel_stats().kernels_per_step:
        busy = f" The profiler saw the GPU busy {base.profile.kernel_stats().gpu_busy_share:.0%} of its steps."
    util = "" if base.nvml_util_pct is None else f" NVML reported {base.nvml_util_pct:.0f}% utilisation."
    # img/s is every image over the whole timed run, a mean; the step and its phases are medians: a loader that
    # stalls now and then puts the two apart (686 img/s beside a 38.4 ms median step at batch 32, one H200)
    mean_ms = 1e3 * tr.wall_s / tr.steps if tr.steps else float("nan")
    return (f"<p>The baseline trained {base.img_per_s:,.0f} img/s at batch {base.config.batch_size}, every image over "
            f"the whole timed run: a mean step of {tables.sig(mean_ms)} ms. Its median step took "
            f"{tables.sig(tr.step_ms_median)} ms ({phases}, each a median over the steps); the host waited for data "
            f"{tr.data_wait_share:.0%} of the run's wall time."
            f"{util}{busy} " + (f"Its MFU was {tables.percent(base.mfu_pct)}%: the compute ceiling here is "
            f"{session.ceiling_img_per_s:,.0f} img/s, {tables.times(base.speedup_bound)} the baseline, the most any run "
            f"could gain on this machine.</p>" if base.bounded else f"Its MFU and the most a run could gain are "
            f"{_h(bench.NOT_A_BOUND)}.</p>"))


def _pct_shown(pct: float) -> float:
    """A percentage as the tables print it (``tables.percent``), read back: what a reader subtracts."""
    return tables.as_shown(tables.percent(pct)) if math.isfinite(pct) else pct


def _whole(img_per_s: float) -> float:
    """img/s as a verdict's line prints it (whole), read back: what a reader adds and divides."""
    return tables.as_shown(tables.whole(img_per_s)) if math.isfinite(img_per_s) else img_per_s


def _energy(base: Verdict, final: Verdict) -> str:
    """The board's energy per image of the baseline and the final run (NVML's energy counter), or why not.

    The power printed beside it is the same counter over the same timed steps: energy per image × images per
    second, so the three figures multiply out. Not the mean of NVML's power readings: on Ampere and newer the driver
    averages each over the last second, so over a run of about a second (06's top rung on one H200: 1.1 s, 11
    samples) they still hold the warm-up before it and read low (524 W beside the counter's 643 W)."""
    b, f = base.j_per_image, final.j_per_image
    if b is None or f is None:
        why = "; ".join(dict.fromkeys(v.energy_missing for v in (base, final) if v.energy_missing)) or "not measured"
        return f"<p class='note'>Energy per image: {_h(why)}.</p>"
    mj_b, mj_f = tables.sig(1e3 * b), tables.sig(1e3 * f)  # the ratio from the mJ as printed beside it
    ratio = f"{tables.times_as_shown(mj_b, mj_f)} less" if f < b else f"{tables.times_as_shown(mj_f, mj_b)} more"
    text = (f"Energy, from the board's own counter over the timed steps: the baseline took {mj_b} mJ "
            f"per image, {_h(final.name)} {mj_f} mJ, {ratio}.")
    pb, pf = b * base.img_per_s, f * final.img_per_s  # J/image × image/s: the counter's mean power over the steps
    if pb > 0 and pf > 0:  # the sentence follows the two measurements, whichever way they went
        how = "more" if pf > pb else "less"
        shown_f, shown_b = f"{pf:.0f}", f"{pb:.0f}"  # the power ratio from the watts as printed beside it
        power_x = tables.as_shown(shown_f) / max(tables.as_shown(shown_b), 1.0)
        text += (f" It drew {how} power while it ran ({shown_f} W against the baseline's {shown_b} W, each its energy "
                 f"per image times its images per second): "
                 f"{tables.times(speedup_as_shown(final.img_per_s, base.img_per_s))} the "
                 f"images per second at {tables.times(power_x)} the power is {ratio} energy per image.")
    return f"<p>{text}</p>"


def _table(t: tables.Table) -> str:
    """A readable table, and its notes (why a cell shows "—") under it."""
    df = t.shown
    if df.index.name is not None:
        df = df.reset_index()
    return (df.to_html(border=0, classes="t", escape=True, index=False)
            + "".join(f"<p class='note'>{_h(n)}</p>" for n in t.notes))


_STYLE = """body{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222;line-height:1.4}
table.t{border-collapse:collapse;font-size:13px;margin:0.5em 0}table.t td,table.t th{border-bottom:1px solid #ddd;
padding:3px 8px;text-align:right}table.t th{background:#f4f4f4}h2{border-bottom:2px solid #eee;margin-top:1.6em}
.meta{color:#555;font-size:13px;white-space:pre}.note{color:#555;font-size:13px}svg{display:block;margin:0.6em 0}
.missing{background:#fff4e5;border-left:4px solid #ff7f0e;padding:.4em .8em}
.own{background:#eef4fb;border-left:4px solid #1f77b4;padding:.4em .8em;white-space:pre-wrap}"""


def write_report(session: Session, verdicts: list[Verdict], *, kernels: StepKernels | None = None,
                 serving: ServingSweep | None = None, p99_target_ms: float | None = None,
                 path: str | Path | None = None, author: str = "", submission: Submission | None = None,
                 reference: Submission | None = None, own_words: str = "",
                 own_training: tables.Table | None = None, own_code: str = "", next_change_shown: bool = True) -> Path:
    """Write the report (see the module's docstring) and return its path. ``verdicts``: the baseline first, the
    final run last (each judged in this session); the file is replaced whole or not at all. ``author``: the
    learner's name; ``submission`` and ``reference``: the learner's run and the reference solution, to say what it
    changed (:func:`changes_from`); ``own_words``: the learner's reflection (blank lines part paragraphs);
    ``own_training``: the learner's own training judged to the target beside the reference solution's
    (:func:`.to_target.training_table`), and ``own_code``: the learner's training function, as written.
    ``next_change_shown=False``: the generated "biggest bottleneck" and "what to try next" are left out (together
    they answer exercise 06.2, which the learner has not passed yet: the group of kernels, how far from its roof, and
    the MFU it would lift the run to), and the report says so."""
    if len(verdicts) < 2:
        raise ValueError("the report compares runs: give the baseline's verdict first and the final run's last.")
    base, final = verdicts[0], verdicts[-1]
    rep = env.collect()
    path = Path(path) if path is not None else report_path()
    ceil = session.ceilings
    r = reflection(verdicts, kernels, session)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Final challenge: {_h(final.name)}</title>"
             f"<style>{_STYLE}</style></head><body>",
             f"<h1>Final challenge report{': ' + _h(author) if author.strip() else ''}</h1>",
             *_hand_in(author, submission, reference),
             f"<p class='meta'>{_h(env.today())}\n" + "\n".join(_h(line) for line in rep.lines()) + "</p>",
             f"<p>Every run of the ladder (its table below) trained the reference CNN on "
             f"{session.rules.images:,} images at "
             f"{session.rules.image_size}×{session.rules.image_size} and was judged on {session.rules.heldout:,} "
             f"held-out images. Ceilings measured in this session on {_h(ceil.device_name)}: "
             f"{_h(ceil.matmul_rate)} ({_h(ceil.matmul_dtype)} matmul), "
             f"{tables.sig(ceil.copy_gb_per_s)} GB/s (copy).</p>",
             *_own_training(own_training, own_code),
             "<h2>The baseline</h2>", _baseline_analysis(base, session),
             "<h2>One change at a time</h2>", _table(readable_table(verdicts)),
             svg.bar_chart([v.name for v in verdicts], [v.mfu_pct for v in verdicts],
                           title="MFU of each run (% of the measured matmul ceiling)", unit="%",
                           fmt=tables.percent)  # as the table above rounds it
             if final.bounded else f"<p class='note'>MFU of each run: {_h(bench.NOT_A_BOUND)}.</p>",
             "<h2>Before and after</h2>", _energy(base, final)]
    # each run on its own time axis: a run of a few seconds drawn beside a minute-long baseline would be a sliver;
    # img/s over one window for both, the shorter run's (as the notebook's compare_figure): a 1 s and a 0.3 s window
    # would compare two curves smoothed differently
    window = min(whole_run_window_s(base.monitor.steps), whole_run_window_s(final.monitor.steps))
    for v, label in ((base, "baseline"), (final, final.name)):
        util, ips = _monitor_series(v.monitor, label, False, window)
        # the record runs on past the timed steps (the held-out evaluation, the profiled steps): say where they were
        timed = [(p["start_s"], p["end_s"]) for p in v.monitor.phases
                 if str(p["name"]).endswith("measured") and p.get("end_s") is not None]
        when = (f", timed steps {timed[0][0]:.1f}–{timed[-1][1]:.1f} s (shaded; before them set-up and warm-up, "
                "after them the held-out evaluation and the profiled steps)") if timed else ""
        parts.append(svg.line_chart(util, title=f"{label}: utilisation over the run{when}",
                                    x_label="seconds since the run started", y_label="%", y_min=0,
                                    spans=timed, span_label="timed steps"))
        parts.append(svg.line_chart(ips, title=f"{label}: throughput, images over the last {window:g} s",
                                    x_label="seconds since the run started", y_label="img/s", y_min=0,
                                    spans=timed, span_label="timed steps"))
    for v in (base, final):
        if v.profile is not None:
            rows = v.profile.timeline_rows(max_per_row=600)
            untimed = (f" ({v.profile.untimed_events} events without a timestamp left out)"
                       if v.profile.untimed_events else "")
            parts.append(svg.timeline(rows, title=f"{v.name}: profiled steps, CPU and GPU on one time axis{untimed}",
                                      colors=TIMELINE_COLORS))  # the notebooks' timeline colours
    if kernels is not None:
        parts += ["<h2>The ladder's top rung: its kernels on the roofline</h2>", _table(kernels.readable(ceil))]
        if kernels.unplaced:
            parts.append("<p class='note'>Not on the roofline (their bytes depend on what the compiler fused), share "
                         "of the step's kernel time: " + _h(", ".join(f"{k} {v:.1f}%" for k, v in
                                                                        kernels.unplaced.items())) + ".</p>")
        per, unit = (1.0, "TFLOP/s") if ceil.matmul_tflops >= 1 else (1e3, "GFLOP/s")  # a CPU's rates in GFLOP/s
        by_kind = kind_colors(p.kind for p in kernels.points)  # a kind in the notebooks' rooflines' colour
        parts.append(svg.roofline([(p.name, p.intensity, per * p.achieved_tflops) for p in kernels.points],
                                  roof=lambda x: per * attainable_tflops(x, ceil), ridge=ridge_intensity(ceil),
                                  title=f"Roofline of {ceil.device_name}: the ladder's top rung's kernels", y_unit=unit,
                                  colors=[by_kind[p.kind] for p in kernels.points]))
    if serving is not None and serving.points:
        parts += ["<h2>Serving: latency against batch size</h2>", _table(serving.readable())]
        if serving.skipped:
            parts.append("<p class='note'>Left out: " + _h("; ".join(f"{k} ({v})" for k, v in
                                                                    serving.skipped.items())) + ".</p>")
        lines = [svg.Series(n, [p.batch for p in serving.of(n)], [p.p99_ms for p in serving.of(n)])
                 for n in dict.fromkeys(p.variant for p in serving.points)]
        target = (p99_target_ms, f"target {p99_target_ms:g} ms") if p99_target_ms is not None else None
        parts.append(svg.line_chart(lines, title="p99 latency per call", x_label="batch size", y_label="ms",
                                    x_log=True, y_log=True, hline=target))
        if p99_target_ms is not None:
            meet = serving.meeting(p99_target_ms)
            parts.append("<p>Within a p99 of " + _h(f"{p99_target_ms:g}") + " ms: " + _h("; ".join(
                f"{n}: batch {p.batch} ({p.img_per_s:,.0f} img/s)" if p else f"{n}: not even batch 1"
                for n, p in meet.items())) + ".</p>")
    parts += ["<h2>Reflection</h2>", _own_words(own_words),
              "<h3>Starting points, generated from the numbers above (argue with them)</h3><ol>",
              "<li><b>The biggest bottleneck.</b> "
              f"{_h(r.biggest_bottleneck if next_change_shown else NEXT_HELD_BACK)}</li>",
              f"<li><b>The change that paid most.</b> {_h(r.paid_most)}</li>",
              f"<li><b>What to try next.</b> {_h(r.try_next if next_change_shown else NEXT_HELD_BACK)}</li></ol>",
              "<p class='note'>Every number above was measured in one session on the machine named at the top.</p>",
              "</body></html>"]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("".join(parts))
    os.replace(tmp, path)
    return path
