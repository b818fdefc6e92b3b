"""Nsight Systems (``nsys``) on a few training steps, read into tables, and one line saying what happened.

    res = measure(steps=5, batch=32, image_size=64)
    print(res.line)          # not installed (and how to get it), too few kernels recorded (with the counts), or ok
    base = measure(run="baseline")  # the final challenge's baseline (nsys_target.RUNS), its own batch and size
    res.stats.tables()       # {"kernels": Table, "CUDA API": Table, "NVTX ranges": Table} where nsys ran

    tool = find_nsys()                                    # NsysTool(path='/usr/local/cuda/bin/nsys', ...), or None
    rec = profile(tool=tool, steps=5, folder="runs/nsys") # the .nsys-rep, kept: it opens in the Nsight Systems GUI
    st = stats(rec.report, tool=tool)                     # NsysStats: kernels, CUDA API calls, NVTX ranges
    availability_line(tool, st, expected_kernels=nsys_target.count_kernels(steps=5, batch=32, image_size=64))

    host = tool_at(".nsys/host/target-linux-x64/nsys")    # one nsys by its path (scripts/nsys_debian.sh's host part)
    host.can_record                                       # False: the CLI without the part that records
    rep = import_qdstrm("steps.qdstrm", tool=host)        # a .qdstrm recorded elsewhere -> steps.nsys-rep beside it

nsys records the whole program's timeline: CUDA API calls on the host, kernels on the GPU, NVTX ranges. The course
records only the steps of :mod:`helpers.nsys_target` (``--capture-range=nvtx``: recording starts when the NVTX range
:data:`~helpers.nsys_target.CAPTURE_RANGE` opens and stops when it closes), without CPU sampling or context-switch
tracing, and without the operating system's calls (``osrt``): on our GPU nodes, CPU sampling made 20 steps 2 GB
(one H100, 2026-11-25), and tracing ``osrt`` made 5 steps 2.4 GB and over 55 s (one H200, Debian's 2023.4,
2026-11-28), against 1.9 MB in 13 s with ``-t cuda,nvtx``. ``nsys stats`` then
reads the report into three CSV tables (:mod:`helpers.nsys_stats`). Flags and report names differ between versions:
each is read from the installed nsys's own help (``nsys profile --help``, ``nsys stats --help-reports``), and from
its version where the help says nothing.

An nsys whose CUPTI cannot follow the CUDA that PyTorch runs on can record NVTX ranges and CUDA API calls but miss
the kernels: the line compares the kernels recorded with the count torch.profiler measured for the same steps, so
that case is found by measuring, not assumed from version numbers. (Debian's 2023.4, CUPTI 12.4, recorded 1 kernel of
about 100 under a CUDA 13 PyTorch on one H100 on 2026-11-25, with CPU sampling on; with ``-t cuda,nvtx -s none`` it
recorded all 420 of five steps on one H200 on 2026-11-28, driver 580.)

An nsys is two parts: the target part records (``target-linux-x64``: nsys, nsys-launcher, libToolsInjection64.so,
the CUPTIs) and writes a ``.qdstrm``; the host part (``host-linux-x64``: QdstrmImporter, the stats reports) turns that
into the ``.nsys-rep`` that ``nsys stats`` reads. With the target part alone, nsys profile ends with the ``.qdstrm``
(:func:`import_qdstrm` imports it where the host part is); with the CLI alone, it cannot record (``can_record``).
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from . import nsys_target
from .nsys_stats import NsysStats, parse_stats
from .nsys_target import CAPTURE_RANGE

__all__ = ["PLACES", "TRACE", "REPORTS", "TOO_FEW", "STATES", "RECORDS_WITH", "NsysError", "NsysTool", "Recording",
           "Availability", "NsysResult", "find_nsys", "tool_at", "command", "profile", "import_qdstrm", "stats",
           "availability", "availability_line", "measure"]

#: Where nsys lives when it is not on the PATH: a CUDA toolkit's bin (or its nsight-systems-<version> folder),
#: NVIDIA's own package, Debian's. Newest-looking first within each pattern.
PLACES = ("/usr/local/cuda/bin/nsys", "/usr/local/cuda-*/bin/nsys", "/usr/local/cuda*/nsight-systems-*/bin/nsys",
          "/opt/nvidia/nsight-systems/*/bin/nsys", "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
          "/usr/lib/nsight-systems*/bin/nsys", "/usr/lib/nsight-systems*/target-linux-x64/nsys")
#: What nsys traces: CUDA's API and kernels, and NVTX ranges (``osrt``, the operating system's calls, is left out: see
#: the module's docstring).
TRACE = "cuda,nvtx"
#: Each table's report, by name: the 2023 versions renamed them (2022.4 still ran gpukernsum; now cuda_gpu_kern_sum,
#: cuda_api_sum, nvtx_sum for cudaapisum and nvtxppsum/nvtxsum). The first name is the current one.
REPORTS = {"kernels": ("cuda_gpu_kern_sum", "gpukernsum"), "api": ("cuda_api_sum", "cudaapisum"),
           "nvtx": ("nvtx_sum", "nvtxsum", "nvtxppsum")}
#: Fewer kernels recorded than this share of those torch.profiler counted is a version that misses them. The two
#: counts differ a little anyway (a kernel at the range's edge, cuDNN's choices in another process); a missing-kernels
#: nsys records almost none (1 of about 100, measured), so any share between those two cases would do.
TOO_FEW = 0.5
STATES = ("not installed", "cannot record", "no GPU", "failed", "too few kernels", "ok")
#: What nsys needs beside its binary to record: without them, 2023.4's nsys profile says "Failed to spawn process"
#: (no nsys-launcher) or runs the program and writes no report (no injection library).
RECORDS_WITH = ("nsys-launcher", "libToolsInjection64.so")
_ROOT = Path(__file__).resolve().parents[1]


class NsysError(RuntimeError):
    """nsys could not record or read the steps; the message (one line) says what to change."""

    def __init__(self, message: str, command: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.command = command


@dataclasses.dataclass(frozen=True)
class NsysTool:
    """An installed nsys: where it is, its version, and what its help says it knows."""

    path: str
    version: str  # "2023.4.4.54"; "" where `nsys --version` did not answer
    profile_help: str = dataclasses.field(default="", repr=False)  # `nsys profile --help`
    reports_help: str = dataclasses.field(default="", repr=False)  # `nsys stats --help-reports`
    stats_help: str = dataclasses.field(default="", repr=False)  # `nsys stats --help`
    can_record: bool = True  # False: the CLI without its target part (RECORDS_WITH), which reads reports only
    importer: str = ""  # the host part's QdstrmImporter beside it ("" where there is none)

    @property
    def name(self) -> str:
        """``"nsys 2023.4.4.54"``, as the lines name it."""
        return f"nsys {self.version}" if self.version else "nsys (version unknown)"

    @property
    def release(self) -> tuple[int, int] | None:
        """(year, release): ``(2023, 4)``; None where the version is unknown."""
        m = re.match(r"(\d{4})\.(\d+)", self.version)
        return (int(m[1]), int(m[2])) if m else None

    def report_names(self) -> dict[str, str]:
        """Each table's report name (:data:`REPORTS`) as this nsys calls it: the first its help lists, else by
        version (before 2023: the old names)."""
        known = set(re.findall(r"\w+", self.reports_help))
        if known & {n for names in REPORTS.values() for n in names}:
            return {kind: next((n for n in names if n in known), names[0]) for kind, names in REPORTS.items()}
        old = self.release is not None and self.release[0] < 2023
        return {kind: names[-1] if old else names[0] for kind, names in REPORTS.items()}

    def capture_end(self) -> list[str]:
        """The flag that stops recording when the capture range closes and lets the program finish:
        ``--capture-range-end=stop``, or the older ``--stop-on-range-end=true`` where only that one is known."""
        if "--capture-range-end" not in self.profile_help and "--stop-on-range-end" in self.profile_help:
            return ["--stop-on-range-end=true"]
        return ["--capture-range-end=stop"]


@dataclasses.dataclass(frozen=True)
class Recording:
    """A report nsys wrote, and the command that wrote it."""

    report: Path
    command: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Availability:
    """What happened, in one line (``state``: one of :data:`STATES`), with the kernel counts it compared."""

    state: str
    line: str
    kernels_recorded: int | None = None
    kernels_expected: int | None = None


@dataclasses.dataclass(frozen=True)
class NsysResult:
    """:func:`measure`'s answer: the tables where nsys ran (else None), what happened, the command it ran."""

    stats: NsysStats | None
    availability: Availability
    command: tuple[str, ...] = ()

    @property
    def line(self) -> str:
        return self.availability.line

    @property
    def state(self) -> str:
        return self.availability.state


def find_nsys(places: tuple[str, ...] | None = None) -> NsysTool | None:
    """The nsys on the PATH, else the first in ``places`` (glob patterns; :data:`PLACES` by default); None where
    there is none. One that can record comes before one that cannot (a host part on the PATH, as
    ``.nsys/env.sh`` puts it, does not hide a CUDA toolkit's whole nsys)."""
    found = [p for p in (shutil.which("nsys"),) if p] + [
        p for pattern in (PLACES if places is None else places) for p in sorted(glob.glob(pattern), reverse=True)
        if os.path.isfile(p) and os.access(p, os.X_OK)]
    if not found:
        return None
    return tool_at(next((p for p in found if _can_record(p)), found[0]))


def tool_at(path: str | Path) -> NsysTool:
    """The nsys at ``path``: its version and what its help says it knows (each asked of it: a fraction of a second
    each), whether it can record, and the QdstrmImporter beside it."""
    path = str(path)
    m = re.search(r"\b(\d{4}\.\d+(?:\.\d+){0,2})", _ask(path, "--version"))
    # --help-reports exits 1 even where it lists every report (2023.4): what it printed is read, not its status
    return NsysTool(path, m[1] if m else "", profile_help=_ask(path, "profile", "--help"),
                    reports_help=_ask(path, "stats", "--help-reports"), stats_help=_ask(path, "stats", "--help"),
                    can_record=_can_record(path), importer=_importer(path))


def command(tool: NsysTool, *, output: str, steps: int, batch: int, image_size: int, run: str = "course") -> list[str]:
    """The ``nsys profile`` command line the course runs (a notebook prints it for a learner to run by hand)."""
    # each kernel a CUDA graph replays is recorded as a kernel, as torch.profiler counts it (by default nsys records
    # the graph as one item, and a run replayed as graphs would read as missing its kernels)
    graphs = ["--cuda-graph-trace=node"] if "--cuda-graph-trace" in tool.profile_help else []
    return [tool.path, "profile", f"--trace={TRACE}", "--sample=none", "--cpuctxsw=none", *graphs,
            "--capture-range=nvtx", f"--nvtx-capture={CAPTURE_RANGE}", *tool.capture_end(), f"--output={output}",
            "--force-overwrite=true", sys.executable, "-m", "helpers.nsys_target", "--steps", str(steps), "--batch",
            str(batch), "--image-size", str(image_size), *(["--run", run] if run != "course" else [])]


def profile(*, tool: NsysTool | None = None, steps: int = 5, batch: int = 32, image_size: int = 64,
            folder: str | Path | None = None, timeout_s: float = 300, run: str = "course") -> Recording:
    """Record ``steps`` training steps of :mod:`helpers.nsys_target` (``run``: one of its ``RUNS``) into ``folder``
    (a new temporary folder by default, left for the caller: the report opens in the Nsight Systems GUI). Raises
    :class:`NsysError`."""
    if run not in nsys_target.RUNS:
        raise ValueError(f"run={run!r}: nsys records one of {', '.join(map(repr, nsys_target.RUNS))}")
    tool = tool or find_nsys()
    if tool is None or not tool.can_record:
        raise NsysError(availability(tool).line)
    folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="gpu-perf-lab-nsys-"))
    folder.mkdir(parents=True, exist_ok=True)  # nsys does not make it: it leaves its file in /tmp and exits 0
    stem = folder / "steps"
    for old in (".nsys-rep", ".qdrep", ".qdstrm", ".sqlite"):  # an earlier run's: never read as this one's
        stem.with_suffix(old).unlink(missing_ok=True)
    cmd = tuple(command(tool, output=str(stem), steps=steps, batch=batch, image_size=image_size, run=run))
    try:
        proc = _run(cmd, timeout_s=timeout_s, env=_child_env())
    except subprocess.TimeoutExpired:
        raise NsysError(f"nsys profile took longer than {timeout_s:.0f} s and was stopped: give it more time "
                        f"(timeout_s) or record less (steps={steps}, batch={batch}, image_size={image_size} now)",
                        cmd) from None
    said = proc.stdout + "\n" + proc.stderr
    if proc.returncode != 0:
        if re.search(r"(unrecognized|unknown|invalid|unrecognised) (option|argument|switch)", said, re.I):
            hint = (f"this {tool.name} does not know one of the command's flags: `nsys profile --help` lists those "
                    "it knows")
        elif "Traceback" in said:
            hint = f"the program it ran failed: run `python -m helpers.nsys_target --run {run}` alone to see why"
        else:
            hint = "run the command (.command) by hand to see all of nsys's output"
        raise NsysError(f"nsys profile exited with {proc.returncode} ({_gist(said)}); {hint}", cmd)
    report = next((p for p in (stem.with_suffix(".nsys-rep"), stem.with_suffix(".qdrep")) if p.exists()), None)
    if report is None and stem.with_suffix(".qdstrm").exists():
        # 2023.4 says "Importer error status: The importer binary and its dependencies were not found." and exits 0
        raise NsysError(f"nsys recorded the steps ({stem.with_suffix('.qdstrm')}) but could not turn them into a "
                        "report: its host part (QdstrmImporter) is missing here; install the whole Nsight Systems, "
                        "not its target part alone, or import the .qdstrm where the host part is "
                        "(helpers.nsys.import_qdstrm)", cmd)
    if report is None:
        raise NsysError(f"nsys profile finished without a report ({_gist(said)}): the NVTX range "
                        f"'{CAPTURE_RANGE}' never started the recording; it opens only on a CUDA GPU", cmd)
    return Recording(report, cmd)


def import_qdstrm(qdstrm: str | Path, *, tool: NsysTool | None = None, output: str | Path | None = None,
                  timeout_s: float = 300) -> Path:
    """The ``.nsys-rep`` of a ``.qdstrm`` that nsys's target part recorded alone (on a node without the host part),
    made by the host part's QdstrmImporter beside ``tool``; written to ``output`` (the .qdstrm's name with
    .nsys-rep by default), over an earlier one. The .qdstrm itself is left as it was: the importer writes into its
    input (2023.4 appended 28 bytes), so it reads a copy. Raises :class:`NsysError`."""
    tool = tool or find_nsys()
    if tool is None:
        raise NsysError(availability(None).line)
    if not tool.importer:
        raise NsysError(f"{tool.name} ({tool.path}) has no host part beside it (host-linux-x64/QdstrmImporter) to "
                        "import a .qdstrm: use a whole Nsight Systems of the version that recorded it, or build "
                        "Debian's with scripts/nsys_debian.sh (.nsys/host)")
    qdstrm = Path(qdstrm)
    if not qdstrm.is_file():
        raise NsysError(f"there is no .qdstrm at {qdstrm}: give the path of the file nsys profile wrote")
    output = Path(output) if output is not None else qdstrm.with_suffix(".nsys-rep")
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpu-perf-lab-qdstrm-") as scratch:
        copy = Path(scratch) / qdstrm.name
        shutil.copyfile(qdstrm, copy)
        cmd = (tool.importer, "-i", str(copy), "-o", str(output.resolve()), "-f")
        try:
            proc = _run(cmd, timeout_s=timeout_s)
        except subprocess.TimeoutExpired:
            raise NsysError(f"QdstrmImporter took longer than {timeout_s:.0f} s and was stopped: give it more time "
                            "(timeout_s)", cmd) from None
    if proc.returncode != 0 or not output.exists():
        raise NsysError(f"QdstrmImporter could not import {qdstrm} (exit {proc.returncode}: "
                        f"{_importer_gist(proc.stderr, proc.stdout)}): a "
                        "recording nsys did not finish writing (stopped, or copied while it ran) cannot be imported; "
                        f"one from another nsys version needs that version's importer (this is {tool.name})", cmd)
    return output


def stats(report: str | Path, *, tool: NsysTool | None = None, timeout_s: float = 180) -> NsysStats:
    """``nsys stats``' kernel, CUDA API and NVTX tables of ``report`` (.nsys-rep, .qdrep or .sqlite), as CSV, read
    into :class:`NsysStats`."""
    tool = tool or find_nsys()
    if tool is None:
        raise NsysError(availability(None).line)
    if Path(report).suffix == ".qdstrm":
        raise NsysError(f"{report} is a raw recording (.qdstrm), which nsys stats does not read: turn it into a "
                        "report first (helpers.nsys.import_qdstrm)")
    names = tool.report_names()
    # a .sqlite beside the report is nsys's export of it: an older one makes 2023.4 refuse (exit 1, "Use
    # --force-export=true"), one from an earlier recording of the same name would be read as this one
    fresh = ["--force-export=true"] if "--force-export" in tool.stats_help else []
    cmd = (tool.path, "stats", f"--report={names['kernels']},{names['api']},{names['nvtx']}", "--format=csv",
           "--output=-", *fresh, str(report))
    try:
        proc = _run(cmd, timeout_s=timeout_s)
    except subprocess.TimeoutExpired:
        raise NsysError(f"nsys stats took longer than {timeout_s:.0f} s and was stopped: give it more time "
                        "(timeout_s) or record fewer steps", cmd) from None
    said = proc.stdout + "\n" + proc.stderr
    if proc.returncode != 0:
        raise NsysError(f"nsys stats exited with {proc.returncode} ({_gist(said)}); if it names a report, "
                        f"`nsys stats --help-reports` lists those this {tool.name} has", cmd)
    # a report that fails prints ERROR on stderr and nsys still exits 0 (2023.4): its table would be missing unsaid
    failed = [line.strip() for line in proc.stderr.splitlines() if line.strip().startswith("ERROR")]
    if any("No module named 'nsysstats'" in line for line in failed):
        raise NsysError(f"nsys stats' reports cannot import nsysstats ({failed[0]}): copy nsysstats.py from "
                        f"{tool.name}'s target-linux-x64/python/lib into host-linux-x64/python/lib, where its Python "
                        "looks (Debian's package moved it; scripts/nsys_debian.sh does this)", cmd)
    if failed:
        raise NsysError(f"nsys stats could not run a report ({failed[0]}): `nsys stats --help-reports` lists those "
                        f"this {tool.name} has", cmd)
    out = parse_stats(said, reports=tuple(names.values()))
    if not (out.kernels or out.api or out.ranges or out.skipped):
        raise NsysError(f"nsys stats printed none of the tables asked for ({_gist(said)})", cmd)
    return out


def availability(tool: NsysTool | None, stats: NsysStats | None = None, *, expected_kernels: int | None = None,
                 error: str | None = None, gpu: bool = True, torch_cuda: str | None = None) -> Availability:
    """What happened, in one line: nsys not installed (and how to get it), one that cannot record, no GPU, it failed
    (``error``), it recorded far fewer kernels than the ``expected_kernels`` the steps launched, or what it recorded.
    ``torch_cuda``: the CUDA PyTorch runs on (``torch.version.cuda`` by default), named where kernels are missing."""
    if tool is None:
        return Availability("not installed", "Nsight Systems (nsys) is not installed here (looked on the PATH and in "
                            "/usr/local/cuda*/bin, /opt/nvidia/nsight-systems/*/bin, /usr/lib/nsight-systems*): a "
                            "CUDA toolkit brings it in its bin folder, as does NVIDIA's Nsight Systems package; "
                            "torch.profiler's timeline shows the same steps without it.")
    if not tool.can_record:
        return Availability("cannot record", f"{tool.name} at {tool.path} can read reports but not record: the part "
                            f"that records ({', '.join(RECORDS_WITH)}) is not beside it; install the whole Nsight "
                            "Systems (a CUDA toolkit's, or NVIDIA's package) to record here.")
    if not gpu:
        return Availability("no GPU", f"{tool.name} is installed ({tool.path}), but there is no CUDA GPU here for it "
                                      "to record.")
    if error is not None or stats is None:
        return Availability("failed", f"{tool.name} could not record the steps: {error or 'no tables were read'}")
    got = stats.kernel_count
    seen = f"its NVTX ranges ({stats.range_count:,}) and CUDA API calls ({stats.api_call_count:,}) are shown"
    if not (got or stats.api or stats.ranges):
        return Availability("failed", f"{tool.name} recorded nothing in the range '{CAPTURE_RANGE}' (no kernel, CUDA "
                                      "API call or NVTX range): the steps ran outside it", 0, expected_kernels)
    if expected_kernels and got < TOO_FEW * expected_kernels:
        if torch_cuda is None:
            import torch

            torch_cuda = torch.version.cuda
        cuda = f"CUDA {torch_cuda}" if torch_cuda else "the CUDA PyTorch uses"
        return Availability("too few kernels",
                            f"{tool.name} recorded {got:,} kernel{'' if got == 1 else 's'} where the steps launched "
                            f"{expected_kernels:,} (torch.profiler's count): this nsys is likely older than {cuda}, "
                            f"which PyTorch runs on, and cannot see its kernels; {seen}.", got, expected_kernels)
    # kernels the GPU ran, not launches: a replayed CUDA graph runs many from one launch (03's top rung read "375
    # kernel launches" beside its table's 26 launches and 2 graph launches a step)
    compared = (f"torch.profiler counted {expected_kernels:,} for the same steps" if expected_kernels
                else "no count to compare with")
    return Availability("ok", f"{tool.name} recorded {got:,} kernels run on the GPU ({compared}), "
                              f"{stats.api_call_count:,} CUDA API calls and {stats.range_count:,} NVTX ranges.",
                        got, expected_kernels)


def availability_line(tool: NsysTool | None, stats: NsysStats | None = None, **kwargs) -> str:
    """:func:`availability`'s line alone."""
    return availability(tool, stats, **kwargs).line


def measure(*, steps: int = 5, batch: int = 32, image_size: int = 64, expected_kernels: int | None = None,
            timeout_s: float = 300, folder: str | Path | None = None, tool: NsysTool | None = None,
            run: str = "course") -> NsysResult:
    """Everything at once, never raising for nsys's sake: find nsys (or use ``tool``), count the kernels the steps
    launch (unless ``expected_kernels`` is given), record them, read the tables, and say in one line what happened.
    ``run``: what to record (:data:`helpers.nsys_target.RUNS`: the course's step, or the final challenge's baseline
    or top rung, each with its own batch and image size). ``folder``: keep the report there (by default it is
    deleted with its temporary folder)."""
    if run not in nsys_target.RUNS:
        raise ValueError(f"run={run!r}: nsys records one of {', '.join(map(repr, nsys_target.RUNS))}")
    tool = tool or find_nsys()
    if tool is None or not tool.can_record:
        return NsysResult(None, availability(tool))
    import torch

    if not torch.cuda.is_available():
        return NsysResult(None, availability(tool, gpu=False))
    if expected_kernels is None:
        expected_kernels = nsys_target.count_kernels(steps=steps, batch=batch, image_size=image_size, run=run)
    with tempfile.TemporaryDirectory(prefix="gpu-perf-lab-nsys-") as scratch:
        try:
            rec = profile(tool=tool, steps=steps, batch=batch, image_size=image_size, folder=folder or scratch,
                          timeout_s=timeout_s, run=run)
            st = stats(rec.report, tool=tool, timeout_s=timeout_s)
        except NsysError as e:
            return NsysResult(None, availability(tool, error=str(e)), e.command)
    return NsysResult(st, availability(tool, st, expected_kernels=expected_kernels), rec.command)


# -- helpers --------------------------------------------------------------------------------------------------------
def _ask(path: str, *args: str) -> str:
    """What ``path args`` prints (both streams); "" where it fails or hangs."""
    try:
        proc = _run((path, *args), timeout_s=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout + proc.stderr


def _run(cmd: tuple[str, ...] | list[str], *, timeout_s: float, env: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess:
    """``subprocess.run`` in a process group of its own: at the timeout the whole group is killed (nsys and the
    program it launched, both started here), not nsys alone with its program left running."""
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a process that left the group still holds the pipes: stop waiting
            pass
        raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # torch.cuda.nvtx names its ranges with plain (unregistered) strings; nsys matches --nvtx-capture against
    # registered strings only unless this is 0, and would never start recording
    env["NSYS_NVTX_PROFILER_REGISTER_ONLY"] = "0"
    return env


def _can_record(path: str) -> bool:
    """Whether the nsys at ``path`` has its target part (:data:`RECORDS_WITH`) beside it. A wrapper script (a CUDA
    toolkit's bin/nsys may be one) cannot be followed to its binary: it is taken at its word."""
    real = Path(os.path.realpath(path))
    try:
        with open(real, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return True
    except OSError:
        return False
    return all((real.parent / name).exists() for name in RECORDS_WITH)


def _importer(path: str) -> str:
    """The host part's QdstrmImporter where nsys itself looks for it: ../host-linux-x64 from its real folder."""
    found = Path(os.path.realpath(path)).parent.parent / "host-linux-x64" / "QdstrmImporter"
    return str(found) if os.access(found, os.X_OK) else ""


def _importer_gist(stderr: str, stdout: str) -> str:
    """What QdstrmImporter said went wrong: its first line on stderr ("File is corrupted."), or, where it threw
    (a first line of 300 characters naming its source file), the exception's name."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    what = next((line.removeprefix("std::exception::what:").strip() for line in lines
                 if line.startswith("std::exception::what:")), None)
    if what:
        return f"{lines[0].split(':', 1)[0]}: {what}"
    return lines[0][:160] if lines else _gist(stdout)


def _gist(text: str) -> str:
    """The line of nsys's output that says what went wrong: its first ERROR, else its last line that is not the
    usage reminder it prints after every mistake ("usage: ...", "Try 'nsys ... --help' for more information.")."""
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith("usage:") and not re.fullmatch(r"Try '.*' for more.*", line)]
    pick = next((line for line in said if line.startswith("ERROR")), said[-1] if said else None)
    return pick[:160] if pick else "it printed nothing"
