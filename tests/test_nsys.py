"""helpers.nsys on a CPU: a fake ``nsys`` (a small Python script first on the PATH) answers ``--version``, the two
help texts, ``profile`` (writes a report file) and ``stats`` (prints CSV as the real one does), so the whole path is
tested: not installed, installed and read into tables, a version that records too few kernels, old and new flags and
report names, a timeout and a failure that say what to change.

The CSV below is in the real format: the current reports' headers as nsys 2024.1 printed them ("Processing [...] with
[...]..." before each report, a blank line after it), the old ones (``gpukernsum``, ``cudaapisum``, ``nvtxppsum``;
"Time(%)", "Average", ...) as their report scripts name their columns.

What Debian's nsys 2023.4 itself printed (help, stats, a recording, the importer's errors) is kept verbatim in
tests/fixtures/nsys/ (its README says by which command) and given to the fake or to the parser as it came. Where
scripts/nsys_debian.sh has built .nsys/, the real tool also records NVTX ranges on this CPU, imports them and reads
them back (marked slow).
"""

from __future__ import annotations

import contextlib
import json
import dataclasses
import os
import types
import sys
import time
from pathlib import Path

import pytest

from helpers import nsys, nsys_stats, nsys_target, profiling

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nsys"


def real(name: str) -> str:
    """What nsys 2023.4 printed (tests/fixtures/nsys/README.md says by which command)."""
    return (FIXTURES / name).read_text()


NEW_PROFILE_HELP = """usage: nsys profile [<args>] [application] [<application args>]
	-c, --capture-range=
	   Possible values are none, cudaProfilerApi, hotkey, nvtx.
	--capture-range-end=
	   Possible values are none, stop, stop-shutdown, repeat[:N] or repeat-shutdown:N.
	-p, --nvtx-capture=
"""
OLD_PROFILE_HELP = """usage: nsys profile [<args>] [application] [<application args>]
	-c, --capture-range=
	   Possible values are none, cudaProfilerApi, nvtx, hotkey.
	-x, --stop-on-range-end=
	   Possible values are 'true' or 'false'.
	-p, --nvtx-capture=
"""
NEW_REPORTS_HELP = """The following built-in reports are available:

  cuda_api_sum -- CUDA API Summary
  cuda_gpu_kern_sum[:nvtx-name][:base|:mangled] -- CUDA GPU Kernel Summary
  nvtx_pushpop_sum -- NVTX Push/Pop Range Summary
  nvtx_sum -- NVTX Range Summary
"""
OLD_REPORTS_HELP = """The following built-in reports are available:

  cudaapisum -- CUDA API Summary
  gpukernsum[:base] -- CUDA GPU Kernel Summary
  nvtxppsum -- NVTX Push/Pop Range Summary
"""

KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"


def new_stats(kernel_rows: str) -> str:
    """``nsys stats --report cuda_gpu_kern_sum,cuda_api_sum,nvtx_sum --format csv --output -`` as 2024.1 prints it."""
    where = "/opt/nvidia/nsight-systems/2024.1.1/host-linux-x64/reports"
    return f"""Generating SQLite file {{report}}.sqlite from {{report}}
Processing [{{report}}.sqlite] with [{where}/cuda_gpu_kern_sum.py]... 
Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
{kernel_rows}
Processing [{{report}}.sqlite] with [{where}/cuda_api_sum.py]... 
Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
80.0,8000000,400,20000.0,19000.0,15000,90000,3000.5,cudaLaunchKernel
20.0,2000000,2,1000000.0,1000000.0,900000,1100000,141421.4,cudaDeviceSynchronize

Processing [{{report}}.sqlite] with [{where}/nvtx_sum.py]... 
Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Style,Range
50.5,12000000,1,12000000.0,12000000.0,12000000,12000000,0.0,PushPop,profiled_steps
49.5,11800000,2,5900000.0,5900000.0,5800000,6000000,141421.4,PushPop,step

"""


# 400 launches of 3 kernels; the GEMM twice, as the versions that group by grid shape list it
NEW_KERNELS = f"""60.0,3000000,300,10000.0,10000.0,9000,11000,500.0,"{KERNEL}(int, at::native::FillFunctor<float>)"
25.0,1250000,60,20833.3,20000.0,20000,25000,100.0,sm90_xmma_gemm_bf16bf16_bf16f32
15.0,750000,40,18750.0,18000.0,18000,20000,100.0,sm90_xmma_gemm_bf16bf16_bf16f32
"""
ONE_KERNEL = "100.0,5000,1,5000.0,5000.0,5000,5000,0.0,cudnn_infer_ampere_scudnn_128x32_relu_small_nn_v1\n"

OLD_STATS = """Using {report}.sqlite file for stats and reports.
Exporting [/usr/local/cuda-11.2/bin/nsys-exporter] to [{report}.sqlite]... 
Running [/usr/local/cuda-11.2/nsight-systems-2021.1.1/target-linux-x64/reports/gpukernsum.py {report}.sqlite]... 
"Time(%)","Total Time (ns)","Instances","Average","Minimum","Maximum","Name"
"70.0","700000","70","10000.0","9000","11000","volta_sgemm_128x64_nn"
"30.0","300000","30","10000.0","9000","11000","void at::native::reduce_kernel<512, 1>(int, float)"

Running [/usr/local/cuda-11.2/nsight-systems-2021.1.1/target-linux-x64/reports/cudaapisum.py {report}.sqlite]... 
"Time(%)","Total Time (ns)","Num Calls","Average","Minimum","Maximum","Name"
"100.0","5000000","100","50000.0","40000","60000","cudaLaunchKernel"

Running [/usr/local/cuda-11.2/nsight-systems-2021.1.1/target-linux-x64/reports/nvtxppsum.py {report}.sqlite]... SKIPPED: {report}.sqlite does not contain NV Tools Extension (NVTX) data

"""

FAKE = '''#!{python}
"""A stand-in for nsys: answers as fake.json beside it says, and logs each call to calls.log."""
import json, os, subprocess, sys, time
from pathlib import Path

here = Path(__file__).resolve().parent
cfg = json.loads((here / "fake.json").read_text())
args = sys.argv[1:]
with open(here / "calls.log", "a") as log:
    log.write(json.dumps({{"argv": args, "register_only": os.environ.get("NSYS_NVTX_PROFILER_REGISTER_ONLY"),
                          "pythonpath": os.environ.get("PYTHONPATH", "")}}) + "\\n")
if args == ["--version"]:
    print(cfg["version_line"])
elif args[:2] == ["profile", "--help"]:
    print(cfg["profile_help"])
elif args[:2] == ["stats", "--help-reports"]:
    print(cfg["reports_help"])
elif args[:2] == ["stats", "--help"]:
    print(cfg.get("stats_help", ""))
elif args[0] == "profile":
    if cfg.get("sleep_s"):  # a program that runs too long: nsys's own child, as the real one launches it
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        (here / "child.pid").write_text(str(child.pid))
        time.sleep(cfg["sleep_s"])
    if cfg.get("profile_exit"):
        print(cfg.get("profile_said", ""), file=sys.stderr)
        sys.exit(cfg["profile_exit"])
    out = next(a.split("=", 1)[1] for a in args if a.startswith("--output="))
    if cfg.get("report_suffix"):
        Path(out + cfg["report_suffix"]).write_bytes(b"a report")
    print(cfg.get("profile_out", ""))
    print(cfg.get("profile_err", ""), file=sys.stderr)
elif args[0] == "stats":
    report = args[-1]
    if not Path(report).exists():
        print(f"ERROR: {{report}} does not exist.", file=sys.stderr)
        sys.exit(1)
    print(cfg["stats_out"].format(report=report))
    print(cfg.get("stats_err", ""), file=sys.stderr)
    sys.exit(cfg.get("stats_exit", 0))
'''


def install_fake(folder: Path, **cfg) -> Path:
    """A fake nsys in ``folder`` answering per ``cfg`` (a 2024.1 by default); returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    base = {"version_line": "NVIDIA Nsight Systems version 2024.1.1.59-241133802077v0",
            "profile_help": NEW_PROFILE_HELP, "reports_help": NEW_REPORTS_HELP, "report_suffix": ".nsys-rep",
            "stats_out": new_stats(NEW_KERNELS)}
    (folder / "fake.json").write_text(json.dumps({**base, **cfg}))
    exe = folder / "nsys"
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(0o755)
    return exe


def calls(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "calls.log").read_text().splitlines()]


@pytest.fixture
def only(monkeypatch, tmp_path):
    """PATH holds only the given folder (and the usual install places are not searched): nothing real is found."""
    def put_first(folder: Path) -> None:
        monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setattr(nsys, "PLACES", ())
    empty = tmp_path / "empty"
    empty.mkdir()
    put_first(empty)
    return put_first


def test_not_installed_says_so_in_one_line_with_how_to_get_it(only):
    assert nsys.find_nsys() is None
    res = nsys.measure(steps=1, batch=2, image_size=16)
    assert res.state == "not installed" and res.stats is None and res.command == ()
    assert "\n" not in res.line and "not installed" in res.line and "CUDA toolkit" in res.line
    assert nsys.availability_line(None) == res.line
    with pytest.raises(nsys.NsysError, match="not installed"):
        nsys.profile(steps=1)


def test_found_in_an_install_place_with_its_version_and_names(only, tmp_path):
    install_fake(tmp_path / "opt" / "nvidia" / "nsight-systems" / "2024.1.1" / "bin")
    tool = nsys.find_nsys(places=(str(tmp_path / "opt/nvidia/nsight-systems/*/bin/nsys"),))
    assert tool is not None and tool.path.endswith("2024.1.1/bin/nsys")
    assert tool.version == "2024.1.1.59" and tool.release == (2024, 1) and tool.name == "nsys 2024.1.1.59"
    assert tool.report_names() == {"kernels": "cuda_gpu_kern_sum", "api": "cuda_api_sum", "nvtx": "nvtx_sum"}
    assert tool.capture_end() == ["--capture-range-end=stop"]
    # where the help said nothing, the version decides: the reports were renamed in 2023.1
    assert nsys.NsysTool("x", "2022.4.2").report_names() == {"kernels": "gpukernsum", "api": "cudaapisum",
                                                             "nvtx": "nvtxppsum"}
    assert nsys.NsysTool("x", "2023.4.4").report_names()["kernels"] == "cuda_gpu_kern_sum"


def test_installed_records_with_an_nvtx_capture_range_and_reads_the_tables(only, tmp_path):
    fake = tmp_path / "bin"
    install_fake(fake)
    only(fake)
    rec = nsys.profile(steps=2, batch=4, image_size=16, folder=tmp_path / "out")
    assert rec.report == tmp_path / "out" / "steps.nsys-rep" and rec.report.exists()
    argv, env = calls(fake)[-1]["argv"], calls(fake)[-1]
    for flag in ("--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--capture-range=nvtx",
                 "--nvtx-capture=profiled_steps", "--capture-range-end=stop", "--force-overwrite=true",
                 f"--output={tmp_path / 'out' / 'steps'}"):
        assert flag in argv
    assert argv[argv.index("-m"):] == ["-m", "helpers.nsys_target", "--steps", "2", "--batch", "4",
                                       "--image-size", "16"]
    # PyTorch's NVTX names are unregistered strings: without this, the capture range never opens
    assert env["register_only"] == "0" and env["pythonpath"].split(os.pathsep)[0] == str(ROOT)

    st = nsys.stats(rec.report)
    assert calls(fake)[-1]["argv"] == ["stats", "--report=cuda_gpu_kern_sum,cuda_api_sum,nvtx_sum", "--format=csv",
                                       "--output=-", str(rec.report)]
    assert st.kernel_count == 400 and len(st.kernels) == 2  # the GEMM's two grid shapes are one kernel
    gemm = next(k for k in st.kernels if "xmma_gemm" in k.name)
    assert (gemm.instances, gemm.total_ms, gemm.share) == (100, pytest.approx(2.0), pytest.approx(0.40))
    assert st.kernels[0].name.startswith(KERNEL) and st.kernels[0].total_ms == pytest.approx(3.0)
    assert [(a.name, a.calls, a.total_ms) for a in st.api] == [("cudaLaunchKernel", 400, pytest.approx(8.0)),
                                                               ("cudaDeviceSynchronize", 2, pytest.approx(2.0))]
    assert [(r.name, r.instances) for r in st.ranges] == [("profiled_steps", 1), ("step", 2)]
    assert st.skipped == {}

    shown = st.tables()
    assert list(shown) == ["kernels", "CUDA API", "NVTX ranges"]
    k = shown["kernels"].shown
    assert list(k.columns) == ["kernel", "kind", "instances", "total ms", "share %"]
    assert k.iloc[0]["kind"] == "elementwise" and k.iloc[0]["share %"] == "60.0" and k.iloc[1]["instances"] == "100"
    assert k.iloc[0]["kernel"] == profiling.kernel_label(KERNEL) and k.iloc[0]["kernel"].endswith("…")
    assert shown["CUDA API"].shown.iloc[0]["total ms"] == "8.00"
    # shares from the times, not nsys's "Time (%)" to 0.1% (shown to three figures, 0.290 ms of 51.5 ms read 0.60)
    rounded = dataclasses.replace(st, api=tuple(dataclasses.replace(a, share=0.5) for a in st.api))
    assert list(rounded.tables()["CUDA API"].shown["share %"]) == ["80.0", "20.0"]

    ok = nsys.availability(nsys.find_nsys(), st, expected_kernels=410)
    assert ok.state == "ok" and (ok.kernels_recorded, ok.kernels_expected) == (400, 410)
    assert "\n" not in ok.line and "400 kernels run on the GPU" in ok.line and "410" in ok.line


def test_an_old_nsys_gets_its_own_flag_report_names_and_columns(only, tmp_path):
    fake = tmp_path / "bin"
    install_fake(fake, version_line="NVIDIA Nsight Systems version 2021.1.1.66-6c5c5cb", report_suffix=".qdrep",
                 profile_help=OLD_PROFILE_HELP, reports_help=OLD_REPORTS_HELP, stats_out=OLD_STATS)
    only(fake)
    rec = nsys.profile(steps=1, batch=2, image_size=16, folder=tmp_path / "out")
    assert rec.report.suffix == ".qdrep"
    assert "--stop-on-range-end=true" in rec.command and "--capture-range-end=stop" not in rec.command
    st = nsys.stats(rec.report)
    assert calls(fake)[-1]["argv"][1] == "--report=gpukernsum,cudaapisum,nvtxppsum"
    assert [(k.name, k.instances, k.total_ms, k.share) for k in st.kernels] == [
        ("volta_sgemm_128x64_nn", 70, pytest.approx(0.7), pytest.approx(0.7)),
        ("void at::native::reduce_kernel<512, 1>(int, float)", 30, pytest.approx(0.3), pytest.approx(0.3))]
    assert [(a.name, a.calls) for a in st.api] == [("cudaLaunchKernel", 100)]
    assert st.ranges == () and "NVTX" in st.skipped["nvtx"]
    assert any("recorded none" in note and "NVTX" in note for note in st.tables()["NVTX ranges"].notes)


def test_a_version_that_misses_kernels_says_so_with_the_counts(only, tmp_path, monkeypatch):
    import torch

    fake = tmp_path / "bin"
    install_fake(fake, version_line="NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0",
                 stats_out=new_stats(ONE_KERNEL))
    only(fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the fake records nothing real: no GPU needed
    res = nsys.measure(steps=2, batch=4, image_size=16, expected_kernels=100)
    assert res.state == "too few kernels" and res.stats is not None
    assert (res.availability.kernels_recorded, res.availability.kernels_expected) == (1, 100)
    assert "\n" not in res.line
    assert "nsys 2023.4.4.54 recorded 1 kernel where the steps launched 100" in res.line
    assert "NVTX ranges (3)" in res.line and "CUDA API calls (402)" in res.line
    if torch.version.cuda:
        assert f"CUDA {torch.version.cuda}" in res.line
    # what it did record is still read: the NVTX ranges and the API calls
    assert [r.name for r in res.stats.ranges] == ["profiled_steps", "step"]
    # near the launched count is no case of missing kernels: 1 recorded of 2 launched is within TOO_FEW
    assert nsys.availability(nsys.find_nsys(), res.stats, expected_kernels=2).state == "ok"


def test_a_timeout_stops_nsys_and_its_program_and_says_what_to_change(only, tmp_path, monkeypatch):
    import torch

    fake = tmp_path / "bin"
    install_fake(fake, sleep_s=30)
    only(fake)
    start = time.monotonic()
    with pytest.raises(nsys.NsysError) as e:
        nsys.profile(steps=3, batch=8, image_size=16, folder=tmp_path / "out", timeout_s=1)
    assert time.monotonic() - start < 15
    assert "longer than 1 s" in str(e.value) and "timeout_s" in str(e.value) and "steps=3" in str(e.value)
    assert e.value.command and e.value.command[1] == "profile"
    pid = int((fake / "child.pid").read_text())
    assert _gone(pid), "the program nsys launched was left running"

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    res = nsys.measure(steps=3, batch=8, image_size=16, expected_kernels=10, timeout_s=0.5)
    assert res.state == "failed" and "\n" not in res.line and "timeout_s" in res.line and res.command


def test_a_failure_says_what_went_wrong_and_what_to_change(only, tmp_path):
    fake = tmp_path / "bin"
    install_fake(fake, profile_exit=1, profile_said="unrecognized option '--capture-range-end=stop'")
    only(fake)
    tool = nsys.find_nsys()
    with pytest.raises(nsys.NsysError, match=r"exited with 1 \(unrecognized option.*nsys profile --help"):
        nsys.profile(tool=tool, steps=1, folder=tmp_path / "a")
    install_fake(fake, profile_exit=1, profile_said="Traceback (most recent call last):\nRuntimeError: no GPU")
    with pytest.raises(nsys.NsysError, match=r"RuntimeError: no GPU.*python -m helpers.nsys_target"):
        nsys.profile(tool=tool, steps=1, folder=tmp_path / "b")
    install_fake(fake)
    assert nsys.profile(tool=tool, steps=1, folder=tmp_path / "c").report.exists()
    install_fake(fake, report_suffix=".qdstrm")  # the same folder: the earlier report is not taken for this one
    with pytest.raises(nsys.NsysError, match="QdstrmImporter"):
        nsys.profile(tool=tool, steps=1, folder=tmp_path / "c")
    install_fake(fake, report_suffix="")
    with pytest.raises(nsys.NsysError, match="'profiled_steps' never started the recording"):
        nsys.profile(tool=tool, steps=1, folder=tmp_path / "d")
    install_fake(fake, stats_exit=1, stats_out="ERROR: Report 'cuda_gpu_kern_sum' could not be found.")
    with pytest.raises(nsys.NsysError, match=r"nsys stats exited with 1 \(ERROR: Report.*--help-reports"):
        nsys.stats(nsys.profile(tool=tool, steps=1, folder=tmp_path / "e").report, tool=tool)


def test_installed_without_a_gpu_says_so(only, tmp_path, monkeypatch):
    import torch

    fake = tmp_path / "bin"
    install_fake(fake)
    only(fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = nsys.measure(steps=1, batch=2, image_size=16)
    assert res.state == "no GPU" and "no CUDA GPU" in res.line and str(fake / "nsys") in res.line
    assert not any(c["argv"][0] == "profile" and "--help" not in c["argv"] for c in calls(fake))


def test_the_target_records_only_its_steps_inside_the_capture_range(monkeypatch):
    seen: list[str] = []

    class Steps:  # stands in for the course's Trainer (whose first optimizer imports torch._dynamo: seconds)
        cuda = False
        cfg = types.SimpleNamespace(batch_size=4, grad_accum=2)  # a step of 8 images

        def step(self, *, measure: bool = True) -> None:
            assert measure is False
            seen.append("step")

    @contextlib.contextmanager
    def nvtx_range(name: str):
        seen.append(f"open {name}")
        yield
        seen.append(f"close {name}")

    monkeypatch.setattr(nsys_target.profiling, "nvtx_range", nvtx_range)
    made = []
    monkeypatch.setattr(nsys_target, "make_trainer", lambda **kw: made.append(kw) or Steps())
    assert nsys_target.main(["--steps", "2", "--batch", "4", "--image-size", "16"]) == 0
    assert made == [{"batch": 4, "image_size": 16, "run": "course"}]
    assert nsys_target.main(["--steps", "1", "--run", "top"]) == 0
    assert made[-1]["run"] == "top"
    inside = ["open step", "step", "close step"]
    said = ["open images per step: 8", "close images per step: 8"]  # its images, named, before the steps
    first = ["step"] * nsys_target.WARMUP_STEPS + ["open profiled_steps", *said, *inside, *inside,
                                                   "close profiled_steps"]
    assert seen[:len(first)] == first
    assert nsys.CAPTURE_RANGE == "profiled_steps"  # the range nsys's --nvtx-capture names


def _gone(pid: int, wait_s: float = 5.0) -> bool:
    """Whether process ``pid`` has ended (a zombie waiting for its parent counts as ended)."""
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


# -- what Debian's nsys 2023.4 printed --------------------------------------------------------------------------------
def install_real(folder: Path, **cfg) -> Path:
    """A fake nsys answering --version and the three help texts as 2023.4 did."""
    return install_fake(folder, version_line=real("version.txt"), profile_help=real("profile_help.txt"),
                        reports_help=real("help_reports.txt"), stats_help=real("stats_help.txt"), **cfg)


def test_the_real_2023_4_help_gives_its_version_flags_and_report_names(only, tmp_path):
    fake = tmp_path / "bin"
    install_real(fake, stats_out=real("stats_nvtx_only.out.txt"))
    only(fake)
    tool = nsys.find_nsys()
    assert tool is not None and tool.version == "2023.4.4.54" and tool.release == (2023, 4)
    # --help-reports lists "cuda_gpu_kern_sum[:nvtx-name][:base|:mangled] -- ...": the names are read past the options
    assert tool.report_names() == {"kernels": "cuda_gpu_kern_sum", "api": "cuda_api_sum", "nvtx": "nvtx_sum"}
    assert tool.capture_end() == ["--capture-range-end=stop"]
    # every flag the course's command gives is one this version's help describes
    cmd = nsys.command(tool, output="x", steps=1, batch=2, image_size=16)
    flags = {a.split("=", 1)[0] for a in cmd[2:cmd.index(sys.executable)]}
    assert flags == {"--trace", "--sample", "--cpuctxsw", "--cuda-graph-trace", "--capture-range", "--nvtx-capture",
                     "--capture-range-end", "--output", "--force-overwrite"}
    assert "--cuda-graph-trace=node" in cmd  # a run replayed as CUDA graphs recorded kernel by kernel
    assert all(f"{flag}=" in tool.profile_help for flag in flags)
    # its stats help knows --force-export, so a stale .sqlite beside a report is never read for it
    rep = tmp_path / "steps.nsys-rep"
    rep.write_bytes(b"a report")
    nsys.stats(rep, tool=tool)
    assert "--force-export=true" in calls(fake)[-1]["argv"]


def test_a_host_part_alone_cannot_record_and_says_so_without_trying(only, tmp_path, monkeypatch):
    """The CLI without nsys-launcher and libToolsInjection64.so beside it (scripts/nsys_debian.sh's host part):
    2023.4 said "Failed to spawn process" there. An ELF binary stands in for nsys (a script is taken at its word)."""
    import torch

    host = tmp_path / "host"
    cli = host / "target-linux-x64" / "nsys"
    cli.parent.mkdir(parents=True)
    cli.write_bytes(Path(os.path.realpath(sys.executable)).read_bytes()[:64])  # an ELF header is all it reads
    cli.chmod(0o755)
    importer = host / "host-linux-x64" / "QdstrmImporter"
    importer.parent.mkdir()
    importer.write_text("#!/bin/sh\n")
    importer.chmod(0o755)
    monkeypatch.setattr(nsys, "_ask", lambda path, *args: real("version.txt") if args == ("--version",) else "")
    tool = nsys.tool_at(cli)
    assert not tool.can_record and tool.importer == str(importer) and tool.version == "2023.4.4.54"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # even with a GPU: it cannot record
    res = nsys.measure(tool=tool, steps=1, expected_kernels=10)
    assert res.state == "cannot record" and res.stats is None and "\n" not in res.line
    assert "can read reports but not record" in res.line and "nsys-launcher" in res.line and str(cli) in res.line
    with pytest.raises(nsys.NsysError, match="cannot record|not record"):
        nsys.profile(tool=tool, steps=1, folder=tmp_path / "out")
    assert not (tmp_path / "out").exists()

    # on the PATH (as .nsys/env.sh puts it) it does not hide an nsys that records
    only(cli.parent)
    whole = tmp_path / "whole" / "bin"
    install_fake(whole)
    monkeypatch.setattr(nsys, "_ask", lambda path, *args: "")
    assert nsys.find_nsys().path == str(cli)  # the only one: found, and said to be unable to record
    assert nsys.find_nsys(places=(str(whole / "nsys"),)).path == str(whole / "nsys")

    for name in nsys.RECORDS_WITH:  # the target part beside it: it records
        (cli.parent / name).write_bytes(b"")
    assert nsys.tool_at(cli).can_record


def test_the_real_stats_output_is_read_table_by_table(only, tmp_path):
    # a recording with NVTX ranges and no CUDA data: two reports skipped, each under its own table
    st = nsys_stats.parse_stats(real("stats_nvtx_only.out.txt"))
    assert [(r.name, r.instances) for r in st.ranges] == [("profiled_steps", 1), ("step", 3)]
    assert st.ranges[0].total_ms == pytest.approx(61.295147)
    assert st.skipped == {"kernels": "rec/steps.sqlite does not contain CUDA kernel data.",
                          "api": "rec/steps.sqlite does not contain CUDA trace data."}
    # 2023.4 skips all three with the same words: the report that line follows says which table it is
    empty = nsys_stats.parse_stats(real("stats_empty_sqlite.out.txt"))
    assert set(empty.skipped) == {"kernels", "api", "nvtx"}
    assert all("StringIds" in why for why in empty.skipped.values())
    assert empty.tables()["NVTX ranges"].notes == ("nsys recorded none: empty.sqlite file does not contain StringIds "
                                                   "table.",)


def test_real_stats_failures_say_what_to_change(only, tmp_path):
    fake = tmp_path / "bin"
    rep = tmp_path / "steps.nsys-rep"
    rep.write_bytes(b"a report")
    only(fake)
    # Debian's package as shipped: every report fails on stderr, and nsys exits 0
    install_real(fake, stats_out=real("stats_no_nsysstats.out.txt"), stats_err=real("stats_no_nsysstats.err.txt"))
    with pytest.raises(nsys.NsysError, match=r"cannot import nsysstats.*copy nsysstats.py.*host-linux-x64/python/lib"):
        nsys.stats(rep)
    # a report this version does not have: the others' tables came, that one's ERROR went to stderr, exit 0
    install_real(fake, stats_out=real("stats_unknown_report.out.txt"), stats_err=real("stats_unknown_report.err.txt"))
    with pytest.raises(nsys.NsysError, match=r"could not run a report \(ERROR: Report 'nosuch_sum' could not be "
                                             r"found\.\).*--help-reports"):
        nsys.stats(rep)
    # a stale .sqlite where --force-export is unknown: the line that says what to do, not the usage reminder
    install_fake(fake, stats_out="", stats_err=real("stats_stale_sqlite.err.txt"), stats_exit=1)
    with pytest.raises(nsys.NsysError, match=r"exited with 1 \(Use --force-export=true to update export file\.\)"):
        nsys.stats(rep)
    # a raw recording is refused before nsys says "Input file not a .nsys-rep, .qdrep or .sqlite file."
    assert "not a .nsys-rep" in real("stats_qdstrm.out.txt")
    with pytest.raises(nsys.NsysError, match=r"raw recording \(\.qdstrm\).*import_qdstrm"):
        nsys.stats(tmp_path / "steps.qdstrm")


def test_real_recording_outcomes_say_what_happened(only, tmp_path):
    fake = tmp_path / "bin"
    only(fake)
    # the target part alone: a .qdstrm, "Importer error status: ...", exit 0
    install_real(fake, report_suffix=".qdstrm", profile_out=real("record_target_only.out.txt"),
                 profile_err=real("record_target_only.err.txt"))
    with pytest.raises(nsys.NsysError, match=r"recorded the steps \(.*steps\.qdstrm\).*QdstrmImporter.*import_qdstrm"):
        nsys.profile(steps=1, folder=tmp_path / "a")
    # no range opened: "Generated:" and nothing after it, exit 0
    install_real(fake, report_suffix="", profile_out=real("record_never_started.out.txt"))
    with pytest.raises(nsys.NsysError, match=r"without a report \(Generated:\).*'profiled_steps' never started"):
        nsys.profile(steps=1, folder=tmp_path / "b")
    # an option this version does not know: its words, not the usage reminder after them
    install_real(fake, profile_exit=1, profile_said=real("record_old_flag.err.txt"))
    with pytest.raises(nsys.NsysError, match=r"exited with 1 \(unrecognised option '--stop-on-range-end=true'\); "
                                             r"this nsys 2023.4.4.54 does not know one of the command's flags"):
        nsys.profile(steps=1, folder=tmp_path / "c")
    # nsys does not make its output folder (2023.4 left the file in /tmp and exited 0): profile makes it
    assert "Failed to create" in real("record_no_folder.err.txt")
    install_real(fake, profile_out=real("record_target_only.out.txt"))
    assert nsys.profile(steps=1, folder=tmp_path / "new" / "deeper").report.parent == tmp_path / "new" / "deeper"


FAKE_IMPORTER = '''#!{python}
"""A stand-in for QdstrmImporter -i IN -o OUT -f: as the real one, it writes into its input."""
import json, sys
from pathlib import Path

cfg = json.loads((Path(__file__).resolve().parent / "importer.json").read_text())
args = sys.argv[1:]
src, out = Path(args[args.index("-i") + 1]), Path(args[args.index("-o") + 1])
with open(src, "ab") as f:
    f.write(b"28 bytes the importer adds..")
if cfg.get("err"):
    print(cfg["err"], file=sys.stderr, end="")
    sys.exit(2)
print(cfg.get("out", ""), end="")
out.write_bytes(b"a report")
'''


def install_importer(host: Path, **cfg) -> Path:
    """A host part at ``host``: a fake nsys in target-linux-x64, a fake importer in host-linux-x64."""
    install_fake(host / "target-linux-x64", version_line=real("version.txt"))
    exe = host / "host-linux-x64" / "QdstrmImporter"
    exe.parent.mkdir(parents=True, exist_ok=True)
    (exe.parent / "importer.json").write_text(json.dumps(cfg))
    exe.write_text(FAKE_IMPORTER.format(python=sys.executable))
    exe.chmod(0o755)
    return exe


def test_a_qdstrm_is_imported_from_a_copy_and_a_bad_one_says_why(only, tmp_path):
    host = tmp_path / "host"
    install_importer(host, out=real("import.out.txt"))
    tool = nsys.tool_at(host / "target-linux-x64" / "nsys")
    assert tool.importer == str(host / "host-linux-x64" / "QdstrmImporter")
    came_back = tmp_path / "files_at" / "steps.qdstrm"  # the node's files arrive read-only
    came_back.parent.mkdir()
    came_back.write_bytes(b"a recording")
    came_back.chmod(0o444)
    rep = nsys.import_qdstrm(came_back, tool=tool, output=tmp_path / "work" / "record-steps.nsys-rep")
    assert rep == tmp_path / "work" / "record-steps.nsys-rep" and rep.exists()
    assert came_back.read_bytes() == b"a recording"  # the importer wrote into a copy
    for name, why in (("import_cut.err.txt", r"File is corrupted\."),
                      ("import_invalid.err.txt", r"Import Failed with unexpected exception: ReadStreamException"),
                      ("import_missing.err.txt", r"File not found or could not be opened")):
        install_importer(host, err=real(name))
        with pytest.raises(nsys.NsysError, match=rf"could not import .*steps\.qdstrm \(exit 2: {why}.*\): .*did not "
                                                 r"finish writing.*nsys 2023\.4\.4\.54"):
            nsys.import_qdstrm(came_back, tool=tool, output=tmp_path / "work" / "x.nsys-rep")
    with pytest.raises(nsys.NsysError, match="no .qdstrm at"):
        nsys.import_qdstrm(tmp_path / "nothere.qdstrm", tool=tool)
    # a target part alone has no importer: where to get one
    bare = nsys.NsysTool(str(tmp_path / "t" / "nsys"), "2023.4.4.54")
    with pytest.raises(nsys.NsysError, match=r"no host part beside it.*scripts/nsys_debian.sh"):
        nsys.import_qdstrm(came_back, tool=bare)


NSYS_DIR = ROOT / ".nsys"
NVTX_SCRIPT = """import time, torch
torch.cuda.nvtx.range_push("warm-up"); time.sleep(0.01); torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.range_push("profiled_steps")
for _ in range(3):
    torch.cuda.nvtx.range_push("step"); time.sleep(0.02); torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.range_pop()
"""


@pytest.mark.slow
@pytest.mark.skipif(not (NSYS_DIR / "host" / ".complete").exists() or not (NSYS_DIR / "target.tar.xz").exists(),
                    reason="Debian's nsys is not built here: bash scripts/nsys_debian.sh builds it into .nsys/")
def test_the_real_nsys_records_nvtx_on_a_cpu_and_the_host_part_reads_it(tmp_path):
    """The node's path end to end, without a GPU: target.tar.xz's nsys records NVTX ranges (which need none) into a
    .qdstrm it cannot import; the host part imports it and reads the tables."""
    import subprocess
    import tarfile

    with tarfile.open(NSYS_DIR / "target.tar.xz") as tar:
        tar.extractall(tmp_path / "node", filter="tar")
    target = nsys.tool_at(tmp_path / "node" / "target-linux-x64" / "nsys")
    host = nsys.tool_at(NSYS_DIR / "host" / "target-linux-x64" / "nsys")
    assert target.version == host.version == "2023.4.4.54"
    assert target.can_record and not target.importer and not host.can_record and host.importer

    script = tmp_path / "nvtx_only.py"
    script.write_text(NVTX_SCRIPT)
    (tmp_path / "rec").mkdir()
    proc = subprocess.run([target.path, "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw=none",
                           "--capture-range=nvtx", "--nvtx-capture=profiled_steps", *target.capture_end(),
                           f"--output={tmp_path / 'rec' / 'steps'}", "--force-overwrite=true", sys.executable,
                           str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NSYS_NVTX_PROFILER_REGISTER_ONLY": "0"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "importer binary and its dependencies were not found" in proc.stderr
    qdstrm = tmp_path / "rec" / "steps.qdstrm"
    assert qdstrm.exists() and not qdstrm.with_suffix(".nsys-rep").exists()

    st = nsys.stats(nsys.import_qdstrm(qdstrm, tool=host), tool=host)
    assert [(r.name, r.instances) for r in st.ranges] == [("profiled_steps", 1), ("step", 3)]
    assert st.kernels == () and set(st.skipped) == {"kernels", "api"}
    line = nsys.availability_line(target, st, expected_kernels=0)
    assert line.startswith("nsys 2023.4.4.54 recorded 0 kernels run on the GPU") and "4 NVTX ranges" in line


def test_the_final_challenges_baseline_and_top_rung_are_recorded_as_the_harness_builds_them(monkeypatch):
    """``--run baseline`` and ``--run top``: the ladder's first and last rung at this machine's size of the
    challenge (smoke here), with the challenge's image size and batch, on a few batches of its images."""
    from helpers.challenge import ladder
    from helpers.challenge.rules import Rules

    rules = Rules.at_scale()
    rungs = ladder.ladder(rules=rules)
    base = nsys_target.make_trainer(batch=999, image_size=999, run="baseline")  # a rung brings its own
    assert base.cfg.image_size == rules.image_size and base.cfg.batch_size == rungs[0].submission.config.batch_size
    assert base.cfg.dtype == "fp32" and base.cfg.item_each_step and base.cfg.data == "memory"
    assert base.cfg.dataset_size == base.cfg.batch_size * nsys_target._RUN_BATCHES  # a few batches, not 50,000
    nsys_target.run_steps(base, steps=1)  # the classic loop's steps run (on a CPU, no range is recorded)
    top = nsys_target.make_trainer(batch=4, image_size=16, run="top")
    want = rules.fit(rungs[-1].submission.config)
    assert (top.cfg.batch_size, top.cfg.compile, top.cfg.fused_optimizer, top.cfg.data) == (
        want.batch_size, True, True, "gpu")
    assert type(top.model.conv1).__name__ == "PaddedInputConv"  # built as the top rung builds it: conv1 padded
    with pytest.raises(ValueError, match="'course', 'baseline', 'top'"):
        nsys_target.make_trainer(batch=4, image_size=16, run="final")


def test_a_rung_is_recorded_with_its_name_and_cuda_graphs_kernel_by_kernel_where_nsys_knows_how(only, tmp_path):
    fake = tmp_path / "bin"
    install_fake(fake, profile_help=NEW_PROFILE_HELP + "\n   --cuda-graph-trace=\n      graph or node\n")
    only(fake)
    rec = nsys.profile(steps=2, run="top", folder=tmp_path / "out")
    argv = calls(fake)[-1]["argv"]
    assert "--cuda-graph-trace=node" in argv and argv[-2:] == ["--run", "top"]
    assert rec.command[rec.command.index("-m"):][-2:] == ("--run", "top")
    with pytest.raises(ValueError, match="nsys records one of"):
        nsys.profile(run="final", folder=tmp_path / "out")


def test_two_recordings_read_side_by_side_per_step():
    from helpers.nsys_stats import ApiRow, KernelRow, NsysStats, RangeRow, per_step

    base = NsysStats(kernels=(KernelRow("void cudnn_conv", 10, 30.0, 0.75), KernelRow("elementwise", 10, 10.0, 0.25)),
                     api=(ApiRow("cudaLaunchKernel", 40, 4.0, 0.2), ApiRow("cudaStreamSynchronize_v2", 10, 60.0, 0.7),
                          ApiRow("cudaMemcpyAsync", 20, 2.0, 0.1), ApiRow("cudaLaunchKernelExC_v11060", 15, 1.0, 0.05),
                          ApiRow("cudaMemsetAsync", 5, 0.1, 0.01)),
                     ranges=(RangeRow("profiled_steps", 1, 101.0), RangeRow(":step", 5, 100.0)))
    top = NsysStats(kernels=(KernelRow("triton_fused", 50, 9.0, 1.0),),
                    api=(ApiRow("cudaGraphLaunch", 10, 0.5, 0.5), ApiRow("cuLaunchKernel", 5, 0.5, 0.5)),
                    ranges=(RangeRow("step", 5, 10.0), RangeRow("profiled_steps", 1, 12.5)))
    bare = NsysStats(kernels=(), api=(), ranges=())
    t = per_step({"baseline": base, "top rung": top, "no steps": bare})
    d = t.data
    assert list(d.columns) == ["baseline", "top rung", "no steps"]
    assert d.loc["host time inside the step, ms", "baseline"] == pytest.approx(20.0)
    assert d.loc["wall time per step, ms", "baseline"] == pytest.approx(101.0 / 5)
    assert d.loc["kernel time on the GPU, ms", "baseline"] == pytest.approx(8.0)
    assert d.loc["GPU busy, % of the wall time", "baseline"] == pytest.approx(100 * 8.0 / (101.0 / 5))
    # the host ran ahead of the GPU (its steps took 2 ms, the GPU's 1.8): the wall time is the capture's
    assert d.loc["host time inside the step, ms", "top rung"] == pytest.approx(2.0)
    assert d.loc["GPU busy, % of the wall time", "top rung"] == pytest.approx(100 * 1.8 / 2.5)
    assert d.loc["kernels run on the GPU", "top rung"] == pytest.approx(10.0)
    assert d.loc["kernel launches (CUDA API)", "baseline"] == pytest.approx(11.0)  # cudaLaunchKernelExC_v11060 too
    assert d.loc["memory sets (CUDA API)", "baseline"] == pytest.approx(1.0)  # not among the copies
    assert d.loc["kernel launches (CUDA API)", "top rung"] == pytest.approx(1.0)  # cuLaunchKernel counts too
    assert d.loc["CUDA graph launches (CUDA API)", "top rung"] == pytest.approx(2.0)
    assert d.loc["synchronizing calls (CUDA API)", "baseline"] == pytest.approx(2.0)  # _v2 is the same call
    assert d.loc["time in synchronizing calls, ms", "baseline"] == pytest.approx(12.0)
    assert d.loc["copies (CUDA API)", "baseline"] == pytest.approx(4.0)
    assert d["no steps"].isna().all()
    assert any("no steps: no 'step' NVTX range" in n for n in t.notes)
    assert any("in the baseline, the synchronizing calls include the one that closes" in n for n in t.notes)
    no_capture = NsysStats(kernels=(), api=(), ranges=(RangeRow("step", 2, 4.0),))
    t2 = per_step({"x": no_capture})
    import pandas as pd

    assert pd.isna(t2.data.loc["wall time per step, ms", "x"])
    assert any("no 'profiled_steps' NVTX range" in n for n in t2.notes)


def test_the_recordings_closing_sync_is_not_counted_as_a_steps():
    """03's top rung read 8.1 ms a step in synchronizing calls beside a 11.9 ms step whose host never waited: the
    one sync that closes the recording waited for the five steps the host had queued ahead. Its NVTX range lets the
    per-step rows leave it out."""
    from helpers import nsys_target
    from helpers.nsys_stats import CLOSE_RANGE, ApiRow, NsysStats, RangeRow, per_step

    assert CLOSE_RANGE == nsys_target.CLOSE_RANGE
    top = NsysStats(kernels=(), api=(ApiRow("cudaGraphLaunch", 10, 0.5, 0.1), ApiRow("cudaDeviceSynchronize", 1, 40.5, 0.9)),
                    ranges=(RangeRow("step", 5, 18.0), RangeRow("profiled_steps", 1, 60.0),
                            RangeRow("closing sync", 1, 40.6)))
    base = NsysStats(kernels=(), api=(ApiRow("cudaStreamSynchronize", 11, 30.0, 1.0),),
                     ranges=(RangeRow("step", 5, 100.0), RangeRow("profiled_steps", 1, 101.0),
                             RangeRow("closing sync", 1, 0.2)))
    t = per_step({"top rung": top, "baseline": base})
    d = t.data
    assert d.loc["synchronizing calls (CUDA API)", "top rung"] == 0
    assert d.loc["time in synchronizing calls, ms", "top rung"] == 0  # 40.5 - 40.5: the closing call's own time
    assert d.loc["CUDA API calls in all", "top rung"] == pytest.approx(10 / 5)
    assert d.loc["synchronizing calls (CUDA API)", "baseline"] == pytest.approx(10 / 5)
    assert d.loc["time in synchronizing calls, ms", "baseline"] == pytest.approx(29.8 / 5)
    assert d.loc["wall time per step, ms", "top rung"] == pytest.approx(12.0)  # the wall time keeps the wait
    shown = t.shown  # whole counts read whole: 2, not 2.00; a time keeps its figures
    assert shown.loc["CUDA API calls in all", "top rung"] == "2" and shown.loc["synchronizing calls (CUDA API)",
                                                                              "top rung"] == "0"
    assert shown.loc["wall time per step, ms", "top rung"] == "12.0"
    note = next(n for n in t.notes if "closes each recording" in n)
    # the call's own time, as the API table's note below reads it (03 read 44.6 ms here, the NVTX range, and 44.4 ms
    # there); the baseline's closing range has no lone device sync call: its range's time
    assert "40.5 ms in the top rung's, 0.200 ms in the baseline's" in note
    assert not any("include the one that closes" in n for n in t.notes)
    assert any(n.startswith("each recording ran in a process of its own under nsys") for n in t.notes)
    # the API table itself says its largest row is that one call (03's top rung read cudaDeviceSynchronize at 93%)
    api_notes = top.tables()["CUDA API"].notes
    # its time is the call's row (40.5 ms, as the table reads), not the NVTX range around it (40.6 ms)
    assert any("include the synchronisation that closes the recording" in n and "(cudaDeviceSynchronize: 1 call, "
               "40.5 ms waiting" in n for n in api_notes)
    two = dataclasses.replace(top, api=(ApiRow("cudaDeviceSynchronize", 2, 41.0, 0.9),))  # not one call: its range
    assert any("(1 call, 40.6 ms in its range waiting" in n for n in two.tables()["CUDA API"].notes)
    assert not any("closes the recording" in n for n in top.tables()["kernels"].notes)
    plain = NsysStats(kernels=(), api=base.api, ranges=(RangeRow("step", 5, 100.0),))
    assert not any("closes the recording" in n for n in plain.tables()["CUDA API"].notes)
    assert "images per step" not in d.index  # neither recording said its batch: no per-image rows


def test_recordings_of_different_batches_compare_per_image():
    """03's per-step table set the baseline's steps of 32 images beside the top rung's of 256 and did not say so."""
    import dataclasses as dc

    from helpers import nsys_target
    from helpers.nsys_stats import IMAGES_RANGE, NsysStats, RangeRow, per_step

    assert IMAGES_RANGE == nsys_target.IMAGES_RANGE
    top = NsysStats(kernels=(), api=(), ranges=(RangeRow("step", 5, 18.0), RangeRow("profiled_steps", 1, 60.0),
                                                RangeRow(":images per step: 256", 1, 0.001)))
    base = NsysStats(kernels=(), api=(), ranges=(RangeRow("step", 5, 100.0), RangeRow("profiled_steps", 1, 200.0),
                                                 RangeRow("images per step: 32", 1, 0.001)))
    t = per_step({"baseline": base, "top rung": top})
    assert list(t.data.index[:2]) == ["images per step", "wall time per image, µs"]
    assert t.shown.loc["images per step", "top rung"] == "256" and t.shown.loc["images per step", "baseline"] == "32"
    assert t.data.loc["wall time per image, µs", "top rung"] == pytest.approx(1e3 * 12.0 / 256)
    assert t.data.loc["wall time per image, µs", "baseline"] == pytest.approx(1e3 * 40.0 / 32)
    # one recording without the range: no per-image rows, rather than a row with a hole (03's sentence needs all)
    bare = dc.replace(top, ranges=top.ranges[:2])
    assert "images per step" not in per_step({"baseline": base, "top rung": bare}).data.index


def test_nsys_per_step_divides_the_times_as_the_table_shows_them():
    """03's per-step table read 1,404 µs and 46.3 µs per image and GPU busy 96.9% from the unrounded times, beside
    44.9 ms ÷ 32 (1,403 µs), 11.9 ms ÷ 256 (46.5 µs) and 11.5 ÷ 11.9 ms (96.6%): each is now the reader's own
    division of the figures the table shows."""
    from helpers.nsys_stats import KernelRow, NsysStats, RangeRow, per_step

    def recording(wall_ms: float, kernel_ms: float, images: int) -> NsysStats:
        return NsysStats(kernels=(KernelRow("k", 5, 5 * kernel_ms, 1.0),), api=(),
                         ranges=(RangeRow("step", 5, 5 * wall_ms * 0.5), RangeRow("profiled_steps", 1, 5 * wall_ms),
                                 RangeRow(f":images per step: {images}", 1, 0.001)))

    t = per_step({"baseline": recording(44.93, 43.0, 32), "top rung": recording(11.86, 11.49, 256)})
    shown, d = t.shown, t.data
    wall, kernel = "wall time per step, ms", "kernel time on the GPU, ms"
    per_image, busy = "wall time per image, µs", "GPU busy, % of the wall time"
    assert list(shown.loc[wall]) == ["44.9", "11.9"] and shown.loc[kernel, "top rung"] == "11.5"
    assert list(shown.loc[per_image]) == ["1,403", "46.5"]  # not 1,404 and 46.3 (44.93 ms and 11.86 ms divided)
    assert shown.loc[busy, "top rung"] == "96.6"  # not 96.9 (11.49 ÷ 11.86)
    # the reader's arithmetic on the shown figures, to the last digit shown
    assert shown.loc[per_image, "top rung"] == f"{1e3 * 11.9 / 256:.1f}"
    assert shown.loc[busy, "top rung"] == f"{100 * 11.5 / 11.9:.1f}"
    # 03-nsys-3's sentence reads the data (":.0f"): from the same shown times, it rounds as the table's cell does
    assert d.loc[busy, "top rung"] == pytest.approx(100 * 11.5 / 11.9) and f"{d.loc[busy, 'top rung']:.0f}" == "97"
    assert d.loc[per_image, "baseline"] == pytest.approx(1e3 * 44.9 / 32)


def test_the_stats_tables_shares_are_the_shown_times_over_their_sum():
    # 03's CUDA API table read cudaLaunchKernel 4.5% beside 2.02 ms in a column adding to 44.37 ms (4.55%)
    from helpers import tables
    from helpers.nsys_stats import ApiRow, NsysStats

    api = (ApiRow("cudaDeviceSynchronize", 1, 40.8049, 0.92), ApiRow("cudaLaunchKernel", 130, 2.0151, 0.045),
           ApiRow("cudaGraphLaunch_v10000", 10, 1.4801, 0.033), ApiRow("cuKernelGetName", 130, 0.05489, 0.001),
           ApiRow("cudaStreamIsCapturing_v10000", 10, 0.01811, 0.0004))
    shown = NsysStats(kernels=(), api=api, ranges=()).tables()["CUDA API"].shown
    times = [tables.as_shown(t) for t in shown["total ms"]]
    assert sum(times) == pytest.approx(44.3730)
    for t, share in zip(times, shown["share %"]):
        assert share == tables.percent(100 * t / sum(times))
    assert list(shown["share %"])[1] == "4.6"


def test_the_per_step_host_and_sync_times_are_the_shown_times_divided():
    # 03 read host time 38.3 ms beside "step 5 × 191 ms", and sync time 5.50 ms where (27.4 + 0.195 − 0.0634) ÷ 5
    # is 5.51
    from helpers.nsys_stats import ApiRow, NsysStats, RangeRow, per_step

    st = NsysStats(kernels=(), api=(ApiRow("cudaDeviceSynchronize", 11, 27.4449, 0.6),
                                    ApiRow("cudaStreamSynchronize", 15, 0.19549, 0.01)),
                   ranges=(RangeRow("step", 5, 191.449), RangeRow("profiled_steps", 1, 200.0),
                           RangeRow("closing sync", 1, 0.06344)))
    d = per_step({"baseline": st}).data
    assert d.loc["host time inside the step, ms", "baseline"] == pytest.approx(191 / 5)
    assert d.loc["time in synchronizing calls, ms", "baseline"] == pytest.approx((27.4 + 0.195 - 0.0634) / 5)
