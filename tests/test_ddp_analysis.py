"""05_ddp's analysis on known inputs: scaling tables, the communication share, HTA's overlap of a trace whose
answer is known, the cluster commands and Slurm script, and the exercises' checks against known-wrong answers."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from helpers.ddp import cluster, overlap, scaling
from helpers.ddp import launch as L
from helpers.ddp.scaling import RunStats
from helpers.exercises import nb05

pytestmark = pytest.mark.slow  # launches groups of gloo ranks: `make test-slow`


def _stats(label, world, batch, step_ms, ddp=True):
    return RunStats(label, world, batch, batch, step_ms, step_ms * 0.9, step_ms * 1.1, ddp)


def test_efficiency_and_the_scaling_table():
    runs = {1: {"batch 256": _stats("batch 256", 1, 256, 30.0, False), "batch 32": _stats("batch 32", 1, 32, 4.0, False)},
            2: {"batch 256": _stats("batch 256", 2, 256, 31.0), "batch 32": _stats("batch 32", 2, 32, 6.0)}}
    assert scaling.efficiency_pct(runs[1]["batch 256"], runs[2]["batch 256"]) == pytest.approx(100 * 30 / 31)
    table = scaling.scaling_table(runs)
    assert table.loc[(32, 2), "efficiency %"] == pytest.approx(100 * 4 / 6)
    assert table.loc[(32, 2), "speed-up ×"] == pytest.approx(2 * 4 / 6)
    assert table.loc[(256, 1), "efficiency %"] == pytest.approx(100)
    assert table.loc[(256, 2), "img/s"] == pytest.approx(2 * 256 / 0.031)
    fig = scaling.scaling_figure(table)
    assert len(fig.data) == 6  # per batch: measured, ideal, efficiency bars
    with pytest.raises(ValueError, match="one-GPU run"):
        scaling.scaling_table({2: runs[2]})


def test_the_tables_figures_are_the_arithmetic_of_the_rank_lines_as_printed():
    """05's table read 8,557 img/s under a rank's "29.92 ms per step, 8,556 img/s", and a median of 5.68 beside a
    range of "5.7–5.7": the times are kept to the hundredth the rank lines print, and shown so."""
    from helpers.ddp.worker import step_line
    from helpers.tables import readable

    def result(world, rank, ms, lo, hi):
        return {"mode": "train", "label": "batch 256", "world_size": world, "rank": rank, "batch": 256,
                "images_per_step": 256, "step_ms_median": ms, "step_ms_min": lo, "step_ms_max": hi, "ddp": world > 1}

    one = scaling.summarize([result(1, 0, 29.9171, 29.8012, 30.0049)])
    two = scaling.summarize([result(2, 0, 30.7391, 30.70, 30.80), result(2, 1, 30.7412, 30.69, 30.81)])
    assert one["batch 256"].step_ms == 29.92 and two["batch 256"].step_ms_min == 30.69
    table = scaling.scaling_table({1: one, 2: two})
    shown = readable(table).shown
    line = step_line("batch 256", 0.0299171, 256)  # "batch 256: 29.92 ms per step, 8,556 img/s on this rank"
    assert shown["img/s"].iloc[0] in line and shown["step ms"].iloc[0] in line
    assert list(shown["step ms (min–max)"]) == ["29.80–30.00", "30.69–30.81"]
    assert shown["img/s"].iloc[1] == f"{512 / 0.03074:,.0f}"  # 2 × 8,328: both ranks, from the slowest's 30.74 ms


def test_communication_share_per_image_accounts_for_accumulation():
    stats = {"local": _stats("local", 2, 256, 30.0), "synced": _stats("synced", 2, 256, 32.0),
             "accumulated": RunStats("accumulated", 2, 64, 256, 34.0, 33.0, 35.0, True)}
    assert scaling.comm_share_pct(stats["synced"], stats["local"]) == pytest.approx(100 * 2 / 32)
    table = scaling.variants_table(stats, local="local")
    assert table.loc["synced", scaling.NOT_HIDDEN] == pytest.approx(2 / 256)
    assert table.loc["accumulated", scaling.PER_RANK_MS] == pytest.approx(34 / 256)
    # a rank's images and ms per image beside both ranks' img/s, each named so (05 read 256 images, 0.121 ms per
    # image beside 16,497 img/s, which is two ranks' 8,258 together)
    assert table.loc["synced", scaling.ALL_RANKS_RATE] == pytest.approx(2 * 256 / 0.032)
    assert all(("per rank" in c) for c in (scaling.PER_RANK_IMAGES, scaling.PER_RANK_MS, scaling.NOT_HIDDEN))
    assert "all ranks" in scaling.ALL_RANKS_RATE and scaling.ALL_RANKS_RATE in table.columns
    assert table.loc["local", "share of the step %"] == pytest.approx(0)
    assert len(scaling.variants_figure(table, title="t").data) == 1


def test_accumulation_is_measured_against_a_no_sync_run_of_its_own_shape():
    # 4 × 64 with no all-reduce takes 36 ms against 30 ms for one batch of 256: compute, not communication. One
    # all-reduce per step then adds 1 ms to each shape; against the 256 baseline the accumulation would read 7 ms.
    stats = {"local": _stats("local", 2, 256, 30.0), "synced": _stats("synced", 2, 256, 31.0),
             "local 4x64": RunStats("local 4x64", 2, 64, 256, 36.0, 35.0, 37.0, True),
             "synced 4x64": RunStats("synced 4x64", 2, 64, 256, 37.0, 36.0, 38.0, True),
             "8x32": RunStats("8x32", 2, 32, 256, 40.0, 39.0, 41.0, True)}
    table = scaling.variants_table(stats, local=["local", "local 4x64"])
    assert table.loc["synced 4x64", scaling.NOT_HIDDEN] == pytest.approx(1 / 256)
    assert table.loc["synced 4x64", "share of the step %"] == pytest.approx(100 / 37)
    assert table.loc["synced", "share of the step %"] == pytest.approx(100 / 31)
    assert table.loc["synced 4x64", "against"] == "local 4x64" and table.loc["synced", "against"] == "local"
    assert table.loc["8x32", "against"] == "" and pd.isna(table.loc["8x32", "share of the step %"])  # no baseline
    one = scaling.variants_table(stats, local="local")  # one baseline: only its own shape is compared
    assert pd.isna(one.loc["synced 4x64", "share of the step %"])
    # an empty cell says why (a notebook's table with an unexplained empty cell fails its run)
    from helpers.tables import readable
    assert any("no no_sync run of this row's micro-batch shape" in n for n in readable(one).notes)


def test_the_hidden_share_timed_and_said_beside_htas_overlap():
    synced, local = _stats("synced", 2, 256, 31.0), _stats("local", 2, 256, 30.2)
    # 0.8 ms added to the step by an all-reduce of 1.45 ms alone: 45% of it hidden
    assert scaling.hidden_fraction(synced, local, 1.45) == pytest.approx(1 - 0.8 / 1.45)
    assert scaling.hidden_fraction(local, synced, 1.45) == 1.0  # faster than no_sync: noise, all hidden
    assert scaling.hidden_fraction(_stats("s", 2, 256, 40.0), local, 1.45) == 0.0  # slower than the all-reduce alone
    with pytest.raises(ValueError):
        scaling.hidden_fraction(synced, local, 0.0)
    h = scaling.hidden_fraction(synced, local, 1.45)
    apart = overlap.hidden_two_ways(92.4, 0.8, 1.45, h)
    assert "HTA's overlap: 92%" in apart and "timed: 45%" in apart and "+0.80 ms" in apart
    assert "counts 48 points more" in apart and "slower" in apart and "uses the timed share" in apart
    close = overlap.hidden_two_ways(50.0, 0.8, 1.45, h)
    assert "agree within 5 points" in close and "more as hidden" not in close
    assert "less than HTA's overlap" in overlap.hidden_two_ways(10.0, 0.8, 1.45, h)
    assert "not measured" in overlap.hidden_two_ways(None, 0.8, 1.45, h)



def test_the_steady_state_of_the_two_gpu_launch_alone_each_gpu_on_its_own():
    from helpers.monitor.record import MonitorRecord

    # GPU 0 busy through both launches, GPU 1 idle through the one-GPU launch; two GPUs sampled at each moment, every
    # 0.25 s, from 0 to 10 s; the one-GPU launch timed 1–2 s, the two-GPU launch 6–7 s, and 2 GPU 8–8.5 s for another
    # variant. The whole steady state would read 75% on average over 7.5 s and count two rows per moment.
    samples = [{"t_s": i / 4, "gpu": g, "util_pct": 0 if g == 1 and i / 4 < 5 else 100,
                "sm_active_pct": None if g == 1 and i / 4 < 5 else 60 + 10 * g} for i in range(41) for g in (0, 1)]
    phases = [{"name": "1 GPU", "start_s": 0.5, "end_s": 2.5}, {"name": "1 GPU: batch 256 measured", "start_s": 1.0, "end_s": 2.0},
              {"name": "2 GPUs", "start_s": 5.0, "end_s": 9.0}, {"name": "2 GPUs: batch 256 measured", "start_s": 6.0, "end_s": 7.0},
              {"name": "2 GPUs: batch 32 measured", "start_s": 8.0, "end_s": 8.5}]
    rec = MonitorRecord(source="nvml", devices=[0, 1, 2], period_s=0.25, samples=samples, phases=phases)
    text = scaling.steady_state_text(rec, 2)
    assert text.startswith("the 2-GPU launch's timed steps alone (1.5 s, 8 moments sampled): ")  # 6–7 s: 5, 8–8.5: 3
    assert "GPU 0: utilisation (NVML) 100%, SM activity (GPM) 60%; GPU 1: utilisation (NVML) 100%, SM activity (GPM) 70%" in text
    assert "GPU 2" not in text  # a third GPU of the node, unused by two ranks
    assert "none recorded" in scaling.steady_state_text(rec, 4)
    host = MonitorRecord(source="host", devices=[], period_s=0.25, phases=phases,
                         samples=[{"t_s": i / 4, "gpu": None, "cpu_pct": 50.0} for i in range(41)])
    assert scaling.steady_state_text(host, 2).endswith("(1.5 s, 8 moments sampled): CPU utilisation 50%")

def _fake_traces(d: Path) -> Path:
    """Two ranks' traces: compute 1000–1200 µs, NCCL 1150–1250 µs: half the communication overlapped."""
    d.mkdir(exist_ok=True)
    for rank in (0, 1):
        kernels = [("sm90_xmma_gemm_bf16", 1000, 100, 7), ("sm90_xmma_gemm_bf16", 1100, 100, 7),
                   ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1150, 100, 20), ("Memcpy DtoD", 1300, 10, 7)]
        ev = [{"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": s, "ts": t, "dur": dur,
               "args": {"stream": s, "device": 0, "correlation": i, "External id": i}}
              for i, (n, t, dur, s) in enumerate(kernels)]
        ev += [{"ph": "X", "cat": "gpu_user_annotation", "name": n, "pid": 0, "tid": 7, "ts": t, "dur": dur, "args": {}}
               for n, t, dur in (("ProfilerStep#1", 1000, 400), ("backward", 1100, 200))]
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 990, "dur": 5,
                   "args": {"External id": 0}})
        trace = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
                 "traceEvents": ev, "deviceProperties": [], "baseTimeNanoseconds": 0}
        (d / f"rank{rank}.json").write_text(json.dumps(trace))
    return d


def test_hta_measures_the_overlap_of_a_trace_with_a_known_answer(tmp_path):
    d = _fake_traces(tmp_path / "trace")
    kernels = overlap.trace_kernels(d / "rank0.json")
    assert list(kernels["kind"]) == ["computation", "computation", "communication", "memory"]
    assert overlap.has_gpu_kernels(d)
    df = overlap.hta_overlap(d)
    assert list(df.index) == [0, 1]
    assert df["communication overlapped by computation %"].tolist() == pytest.approx([50.0, 50.0])
    fig = overlap.timeline_figure(d / "rank0.json", steps=1)
    assert {t.name for t in fig.data} == {"computation", "communication", "memory"}
    assert any("NCCL" in y for t in fig.data for y in t.y)


def test_the_timeline_names_a_sliver_of_a_phase_without_drawing_labels_over_one_another(tmp_path):
    """On a fast GPU the host's forward range is a sliver beside backward (two H200s, 2026-11-26): the phases'
    names go on rows of their own above the plot, so the figure check finds nothing drawn over anything."""
    from helpers import figure_check

    d = _fake_traces(tmp_path / "trace")
    trace = json.loads((d / "rank0.json").read_text())
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["name"] != "backward"]
    trace["traceEvents"] += [{"ph": "X", "cat": "gpu_user_annotation", "name": n, "pid": 0, "tid": 7, "ts": t, "dur": dur,
                              "args": {}}
                             for n, t, dur in (("forward", 1000, 3), ("backward", 1003, 250), ("optimizer", 1253, 4))]
    (d / "rank0.json").write_text(json.dumps(trace))
    fig = overlap.timeline_figure(d / "rank0.json", steps=1)
    named = [a.text for a in fig.layout.annotations]
    assert sorted(named) == ["backward", "forward", "optimizer"]
    assert figure_check.problems(fig) == []
    # rows far enough apart that two labels read as two: at 14 px (and planned on a taller plot than drawn),
    # "forward" and "optimizer" stacked at one time on two H200s touched and read "forward optimizer"
    lay = fig.layout
    plot_h = lay.height - lay.margin.t - lay.margin.b
    ys = sorted({round(a.y * plot_h, 3) for a in lay.annotations})
    assert len(ys) >= 2 and min(b - a for a, b in zip(ys, ys[1:])) >= 1.5 * lay.annotations[0].font.size


def test_the_phases_are_where_the_gpu_ran_the_kernels_each_host_range_launched(tmp_path):
    """Each host range (forward, backward, optimizer, the profiler's step) spans, on the GPU, the kernels launched
    inside it, matched by correlation id: backward's all-reduce, launched from its hook, is in backward."""
    kernels = [  # (name, launched at, ran at, for, correlation)
        ("conv_fwd", 100, 1000, 300, 1), ("conv_bwd", 420, 1300, 500, 2),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 450, 1500, 200, 3), ("sgd_update", 620, 1800, 50, 4)]
    ev = [{"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": t, "dur": d,
           "args": {"stream": 7, "device": 0, "correlation": c}} for n, _l, t, d, c in kernels]
    ev += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": l, "dur": 5,
            "args": {"correlation": c}} for _n, l, _t, _d, c in kernels]
    ev += [{"ph": "X", "cat": "user_annotation", "name": n, "pid": 1, "tid": 1, "ts": t, "dur": d, "args": {}}
           for n, t, d in (("ProfilerStep#1", 90, 600), ("forward", 90, 200), ("backward", 400, 150),
                           ("optimizer", 600, 40))]
    ev += [{"ph": "X", "cat": "gpu_user_annotation", "name": "forward", "pid": 0, "tid": 7, "ts": 1000, "dur": 2,
            "args": {}}]  # the profiler's own projection, a sliver: not used where launches can be matched
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    phases = overlap.trace_phases(path).set_index("name")
    assert phases.loc["forward"].tolist() == [1000.0, 300.0]
    assert phases.loc["backward"].tolist() == [1300.0, 500.0]  # conv_bwd and the all-reduce beside it
    assert phases.loc["optimizer"].tolist() == [1800.0, 50.0]
    assert phases.loc["ProfilerStep#1"].tolist() == [1000.0, 850.0]


def test_cluster_commands_and_a_slurm_script_that_parses(tmp_path):
    job = cluster.ClusterJob(nnodes=3, gpus_per_node=4, head="gpu-07", port=29611)
    lines = cluster.node_commands(job)
    assert len(lines) == 3 and len({line.splitlines()[1] for line in lines}) == 1  # the same command on every node
    cmd = lines[0].splitlines()[1]
    for part in ("--nnodes 3", "--nproc-per-node 4", "--rdzv-backend c10d", "--rdzv-endpoint gpu-07:29611",
                 "-m helpers.ddp.worker"):
        assert part in cmd
    path = cluster.write_slurm_script(tmp_path / "sub" / "ddp.sbatch", job, partition="gpu", time="00:05:00")
    text = path.read_text()
    assert "#SBATCH --nodes=3" in text and "#SBATCH --gpus-per-node=4" in text and "#SBATCH --partition=gpu" in text
    assert '--rdzv-endpoint "$head_node:$MASTER_PORT"' in text and "export MASTER_PORT=29611" in text
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    with pytest.raises(ValueError, match="port"):
        cluster.ClusterJob(port=80)


def test_prediction_check_passes_the_formula_and_names_known_mistakes():
    assert nb05.check_predicted_efficiency(nb05.predicted_efficiency_pct).passed
    wrongs = {
        "percent": lambda c, a, h: c / (c + (1 - h) * a),
        "hidden share": lambda c, a, h: 100 * c / (c + a),
        "the rest": lambda c, a, h: 100 * c / (c + h * a),
        "upside down": lambda c, a, h: 100 * (c + (1 - h) * a) / c,
    }
    for phrase, fn in wrongs.items():
        res = nb05.check_predicted_efficiency(fn)
        assert res.status == "failed" and phrase in res.message, (phrase, res.message)
        assert res.value is nb05.predicted_efficiency_pct
    other = nb05.check_predicted_efficiency(lambda c, a, h: 42.0)
    assert other.status == "failed" and "71.43%" in other.message


def _worker(folder, old="", new="") -> Path:
    assert old in nb05.WORKER_SOLUTION
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "worker.py"
    path.write_text(nb05.WORKER_SOLUTION.replace(old, new))
    return path


def test_the_reference_worker_passes_and_a_missing_one_is_not_done(tmp_path):
    res = nb05.check_ddp_worker(_worker(tmp_path))
    assert res.passed, res.message
    assert res.value == tmp_path / "worker.py"
    missing = nb05.check_ddp_worker(tmp_path / "nope.py")
    assert missing.status == "not done" and missing.value.read_text() == nb05.WORKER_SOLUTION


def test_the_worker_as_handed_out_is_not_done_and_is_the_notebooks_cell(tmp_path):
    cell = next(c for c in json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "05_ddp.ipynb").read_text())
                ["cells"] if c.get("id") == "05-28")
    assert "".join(cell["source"]).split("\n", 1)[1] == nb05.WORKER_HANDED_OUT
    path = tmp_path / "my_worker.py"
    path.write_text(nb05.WORKER_HANDED_OUT + "\n\n")  # blank lines added by an editor change nothing
    res = nb05.check_ddp_worker(path)
    assert res.status == "not done" and "[05-28]" in res.message, res.message


WRONG = [  # (what the worker has instead of the reference's line, what the check must say)
    ("loader = DataLoader(data, batch_size=8, sampler=sampler)", "loader = DataLoader(data, batch_size=8, shuffle=True)",
     "saw all 64 items"),
    ("sampler = DistributedSampler(data)", "sampler = DistributedSampler(data, rank=int(os.environ['LOCAL_RANK']))",
     "LOCAL_RANK 0"),
    ("    sampler.set_epoch(epoch)", "    pass", "in the first epoch's order"),
    ("if rank == 0:", "if int(os.environ['LOCAL_RANK']) == 0:", "2 checkpoints"),
    ("model.module.state_dict()", "model.state_dict()", "'module.'"),
    ("loader = DataLoader(data, batch_size=8, sampler=sampler)",
     "loader = DataLoader(data, batch_size=8, sampler=sampler, shuffle=True)", "mutually exclusive"),
]


@pytest.fixture(scope="module")
def wrong_workers(tmp_path_factory) -> dict[tuple[str, str], nb05.CheckResult]:
    """The check's verdict on each known-wrong worker, all of them run in one launch of two "nodes" on 127.0.0.1
    (tests/workers_in_one_launch.py: one start-up instead of one each; the reference worker above has its own)."""
    tmp = tmp_path_factory.mktemp("wrong_workers")
    paths = [_worker(tmp / "workers" / str(i), old, new) for i, (old, new, _) in enumerate(WRONG)]
    out, logs = tmp / "out", tmp / "logs"
    logs.mkdir()
    driver = Path(__file__).with_name("workers_in_one_launch.py")
    nodes = L.launch_nodes([L.LaunchSpec(nproc_per_node=1, nnodes=2, node_rank=r, script=str(driver), timeout_s=300,
                                         args=(str(r), str(out), str(logs), "60", *map(str, paths))) for r in (0, 1)],
                           on_line=None)
    assert all(n.ok for n in nodes), [n.error for n in nodes]
    verdicts = {}
    for i, (old, new, _) in enumerate(WRONG):
        runs = []
        for r, node in enumerate(nodes):  # each node's launch, narrowed to what worker i did there
            rc = (logs / f"{i}.node{r}.rc").read_text()
            lines = tuple((logs / f"{i}.node{r}.log").read_text().splitlines())
            runs.append(dataclasses.replace(node, returncode=None if rc == "timeout" else int(rc),
                                            timed_out=rc == "timeout", lines=lines, results=L.parse_results(lines)))
        verdicts[(old, new)] = nb05._verdict(paths[i], runs, out / str(i))
    return verdicts


@pytest.mark.parametrize("old, new, phrase", WRONG)
def test_known_wrong_workers_are_rejected_with_what_to_change(wrong_workers, old, new, phrase):
    res = wrong_workers[(old, new)]
    assert res.status == "failed" and phrase in res.message, res.message
    assert res.value.read_text() == nb05.WORKER_SOLUTION


def test_a_ranks_step_line_reads_its_img_per_s_from_the_step_it_prints():
    """05 printed "31.02 ms per step, 8,252 img/s" for 256 images, where 256 ÷ 31.02 ms is 8,253."""
    from helpers.ddp import worker

    assert worker.step_line("all-reduce", 0.031024, 256) == "all-reduce: 31.02 ms per step, 8,253 img/s on this rank"
