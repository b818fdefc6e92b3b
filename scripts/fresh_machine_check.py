#!/usr/bin/env python3
"""The fresh-machine check: what README.md tells a newcomer to run, run as written, where nothing of ours is set up.

    python3 scripts/fresh_machine_check.py cpu           # a fresh clone of HEAD on this CPU machine: the README's
                                                        # two commands in its order (`make lab` until it serves
                                                        # the notebooks, then `make test`); `make time-fresh-clone`
    python3 scripts/fresh_machine_check.py offline-gpu   # on a GPU node, .whl/ copied beside the repository: the
                                                        # README's "on the node" lines (offline install, GPU run)
    python3 scripts/fresh_machine_check.py offline-gpu notebooks/05_ddp.ipynb   # the GPU run of some notebooks
    python3 scripts/fresh_machine_check.py conda         # environment.yml as the README says, where conda is

Each route reads its commands from README.md, so what a newcomer reads and what is checked cannot drift apart;
a command the README drops or renames fails the check. Each ends with one line per command: passed or failed,
and its seconds, and keeps its latest run in ``results/fresh-machine.json`` (where, when, each line's time; the
offline route also whether the node could reach the internet), which PRESENTING.md's "A fresh machine"
section is written from. The cpu route also records ``smoke_make_test_s[_avx2]`` (clone to the end of
`make test`, setup included) and ``fresh_clone_lab_ready_s`` in ``results/smoke*.json``. On a GPU node the
repository is often a copy whose ``results/`` is not kept: ``--out DIR`` writes the record to
``DIR/fresh-machine.json`` as well, and ``fresh_machine_check.py record DIR/fresh-machine.json`` merges it here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_block(marker: str, readme: Path = ROOT / "README.md") -> list[tuple[str, str]]:
    """``(command, its comment)`` for each line of the first ```bash block after ``marker`` in the README."""
    text = readme.read_text()
    at = text.find(marker)
    if at < 0:
        raise SystemExit(f"README.md no longer has {marker!r}: the check follows the README; update it.")
    block = re.search(r"```bash\n(.*?)```", text[at:], flags=re.S)
    if block is None:
        raise SystemExit(f"README.md has no ```bash block after {marker!r}.")
    out = []
    for line in block.group(1).splitlines():
        command, _, comment = line.partition("#")
        if command.strip():
            out.append((command.strip(), comment.strip()))
    return out


RECORD = ROOT / "results" / "fresh-machine.json"


def record_route(route: str, rows: list[tuple[str, bool, float]], *, where: str, path: Path = RECORD,
                 **extra) -> dict:
    """Keep ``route``'s latest run in ``path`` (the other routes' stay as they were); return its record."""
    data = json.loads(path.read_text()) if path.exists() else {}
    data[route] = {"where": where, "date": time.strftime("%Y-%m-%d"), "passed": bool(rows) and all(ok for _, ok, _ in rows),
                   **extra, "lines": [{"command": c, "passed": ok, "s": round(s, 1)} for c, ok, s in rows]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return data[route]


def guide_block(path: Path = RECORD) -> str:
    """PRESENTING.md's lines on the latest run of each route (between its markers)."""
    data = json.loads(path.read_text()) if path.exists() else {}
    lines = [BEGIN]
    names = {"cpu": "A new CPU machine, the README's two commands", "offline-gpu":
             "A GPU node with no internet, the wheelhouse route", "conda": "conda, `environment.yml`"}
    for route, title in names.items():
        r = data.get(route)
        if r is None:
            lines.append(f"- **{title}**: not run yet" + (" (no conda where the check ran: "
                         "`tests/test_dependencies.py` checks that `environment.yml` lists the packages and "
                         "minimums of `pyproject.toml`)." if route == "conda" else "."))
            continue
        if r.get("skipped"):
            lines.append(f"- **{title}**: not run on {r['where']}, {r['date']}: {r['skipped']}. "
                         "`tests/test_dependencies.py` checks that `environment.yml` lists the packages and minimums "
                         "of `pyproject.toml` instead.")
            continue
        steps = "; ".join(f"`{x['command']}` {'passed' if x['passed'] else 'FAILED'} in {x['s']:,.0f} s"
                          for x in r["lines"])
        net = "" if "internet_reachable" not in r else (
            ", with no internet" if not r["internet_reachable"] else ", which could reach the internet")
        lines.append(f"- **{title}**: {'passed' if r['passed'] else 'FAILED'} on {r['where']}{net}, "
                     f"{r['date']}: {steps}.")
    lines.append(END)
    return "\n".join(lines)


BEGIN = "<!-- fresh machine: written by scripts/fresh_machine_check.py from results/fresh-machine.json; do not edit by hand -->"
END = "<!-- /fresh machine -->"
GUIDE = ROOT / "PRESENTING.md"


def update_guide(*, check: bool = False) -> bool:
    sys.path.insert(0, str(ROOT / "scripts"))
    from readme_figures import rewrite_between

    return rewrite_between(GUIDE, BEGIN, END, guide_block(), check=check, what="fresh-machine")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_when_listening(url: str, timeout_s: float = 60) -> bytes:
    """GET ``url``, retrying while the server is not listening yet (JupyterLab prints its URL a moment before)."""
    deadline = time.time() + timeout_s
    while True:
        try:
            return urllib.request.urlopen(url, timeout=30).read()
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def lab_serves_the_notebooks(cwd: Path, timeout_s: float = 1800) -> float:
    """Run `make lab` in ``cwd`` (no display: it prints its URL) until it lists the notebooks; its seconds."""
    start = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    runtime = tempfile.mkdtemp()
    env.update(PORT=str(_free_port()), JUPYTER_RUNTIME_DIR=runtime)
    proc = subprocess.Popen(["make", "lab"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        deadline = time.time() + timeout_s
        for line in proc.stdout:
            print("  lab | " + line.rstrip())
            m = re.search(r"(http://127\.0\.0\.1:\d+)/lab\?token=(\w+)", line)
            if m:
                listing = _get_when_listening(f"{m.group(1)}/api/contents?token={m.group(2)}")
                if b"00_setup.ipynb" not in listing:
                    raise RuntimeError("JupyterLab started but does not list notebooks/00_setup.ipynb")
                return time.perf_counter() - start
            if time.time() > deadline:
                break
        raise RuntimeError(f"`make lab` printed no URL within {timeout_s:.0f} s (exit {proc.poll()})")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(runtime, ignore_errors=True)


def route_cpu() -> int:
    commands = [c for c, _ in readme_block("## Start here")]
    if sorted(commands) != ["make lab", "make test"]:
        raise SystemExit(f"the README's first block is now {commands}: teach this check the new commands.")
    work = Path(tempfile.mkdtemp())
    rows: list[tuple[str, bool, float]] = []
    start = time.perf_counter()
    lab_s = None
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(work / "clone")], check=True)
        clone = work / "clone"
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                                text=True).stdout.strip() or None  # the commit the time measures
        for command in commands:
            t0 = time.perf_counter()
            if command == "make lab":
                try:
                    lab_s = lab_serves_the_notebooks(clone)
                    ok = True
                except Exception as e:  # noqa: BLE001  the summary says what failed; the next command still runs
                    print(f"make lab failed: {e}", file=sys.stderr)
                    ok = False
            else:
                ok = subprocess.run(command, shell=True, cwd=clone).returncode == 0
            rows.append((command, ok, time.perf_counter() - t0))
        total = time.perf_counter() - start
    finally:
        shutil.rmtree(work, ignore_errors=True)
        # The clone's setup registered the Jupyter kernel with its own (now deleted) environment: point it back.
        venv_python = ROOT / ".venv" / "bin" / "python"
        if venv_python.exists():
            subprocess.run([str(venv_python), "-m", "ipykernel", "install", "--user", "--name", "gpu-perf-lab",
                            "--display-name", "Python (gpu-perf-lab)"], capture_output=True)
    _summary(rows)
    sys.path.insert(0, str(ROOT))
    from helpers import env

    # A failed run is kept too: the guide says what failed, and where.
    record_route("cpu", rows, where=f"{env.cpu_model()}, {env.usable_cpus()} usable cores, CPU kernels {env.cpu_capability()}")
    update_guide()
    if not all(ok for _, ok, _ in rows):
        return 1
    sys.path.insert(0, str(ROOT / "scripts"))
    import notebook_times  # noqa: E402  (a sibling script)

    path = notebook_times.record_fresh_clone(round(total, 1), lab_ready_s=round(lab_s, 1), commit=commit)
    print(f"fresh clone: make lab served the notebooks after {lab_s:.0f} s, make test passed; {total:.0f} s in all, "
          f"recorded in {path}")
    return 0


def internet_reachable(host: str = "pypi.org", port: int = 443, timeout_s: float = 5) -> bool:
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
        return True
    except OSError:
        return False


def route_offline_gpu(extra: list[str], out: Path | None) -> int:
    block = readme_block("**Offline GPU nodes**")
    on_node = [c for c, comment in block if "on the node" in comment]
    elsewhere = [c for c, comment in block if "on the node" not in comment]
    if not any(c.startswith("source <(scripts/offline_install.sh") for c in on_node):
        raise SystemExit("the README's offline block has no `source <(scripts/offline_install.sh ...)` on the node.")
    online = internet_reachable()
    print(("this node reaches the internet: the route runs, but it does not prove the offline install"
           if online else "this node has no internet, as an offline cluster node") + f"; built elsewhere: {elsewhere}")
    if extra:
        on_node[-1] = " ".join([on_node[-1], *extra])
    rows = []
    # One shell for every line: `source` sets PYTHONPATH for the lines after it, as on the node.
    script = "set -euo pipefail\n" + "\n".join(
        f'__t=$(date +%s.%N); {c}; echo "__step {i} $__t $(date +%s.%N)"' for i, c in enumerate(on_node))
    t0 = time.perf_counter()
    proc = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    times: dict[int, float] = {}
    for line in proc.stdout:
        m = re.match(r"__step (\d+) ([\d.]+) ([\d.]+)", line)
        if m:
            times[int(m.group(1))] = float(m.group(3)) - float(m.group(2))
        else:
            print(line.rstrip())
    rc = proc.wait()
    rows = [(c, i in times, times.get(i, time.perf_counter() - t0)) for i, c in enumerate(on_node)]
    _summary(rows)
    import torch

    n = torch.cuda.device_count()
    where = f"{n} × {torch.cuda.get_device_name(0)}" if n > 1 else (torch.cuda.get_device_name(0) if n else "a CPU")
    for path in {RECORD, *([out / "fresh-machine.json"] if out is not None else [])}:
        record_route("offline-gpu", rows, where=where, path=path, internet_reachable=online)
    return rc


def route_conda() -> int:
    conda = shutil.which("conda") or shutil.which("mamba")
    if conda is None:
        print("no conda here: tests/test_dependencies.py checks that environment.yml lists the packages and "
              "minimums of pyproject.toml (and binder/requirements.txt); nothing else to run.")
        sys.path.insert(0, str(ROOT))
        from helpers import env

        record_route("conda", [], where=f"{env.cpu_model()}, {env.usable_cpus()} usable cores", skipped="no conda or mamba on PATH")
        update_guide()
        return 0
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"`(conda env create -f environment\.yml[^`]*)`", readme)
    if m is None:
        raise SystemExit("the README no longer says how to use environment.yml: update this check.")
    prefix = Path(tempfile.mkdtemp()) / "env"
    try:  # as written, into a prefix of its own (not the user's named env), then the package imported from it
        steps = [[conda, "env", "create", "-q", "-f", "environment.yml", "-p", str(prefix)],
                 [conda, "run", "-p", str(prefix), "python", "-c", "import helpers, torch, nbval; print('ok')"]]
        rows = []
        for cmd in steps:
            t0 = time.perf_counter()
            rows.append((" ".join(cmd[:4]), subprocess.run(cmd, cwd=ROOT).returncode == 0, time.perf_counter() - t0))
        _summary(rows)
        record_route("conda", rows, where=f"conda at {conda}")
        update_guide()
        return 0 if all(ok for _, ok, _ in rows) else 1
    finally:
        shutil.rmtree(prefix.parent, ignore_errors=True)


def _summary(rows: list[tuple[str, bool, float]]) -> None:
    print("\nfresh-machine check:")
    for command, ok, s in rows:
        print(f"  {'passed' if ok else 'FAILED'}  {s:7.0f} s  {command}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="offline-gpu: a folder for a copy of the record (fresh-machine.json)")
    ap.add_argument("route", choices=["cpu", "offline-gpu", "conda", "record", "guide"],
                    help="record FILE: merge a route's record made elsewhere; guide [--check]: rewrite PRESENTING.md's lines")
    ap.add_argument("extra", nargs=argparse.REMAINDER,
                    help="offline-gpu: arguments added to the GPU run's line (notebooks, --unit ...)")
    args = ap.parse_args(argv)
    args.extra = [a for a in args.extra if a != "--"]
    if args.route == "cpu":
        return route_cpu()
    if args.route == "offline-gpu":
        return route_offline_gpu(args.extra, Path(args.out) if args.out else None)
    if args.route == "record":
        made = json.loads(Path(args.extra[0]).read_text())
        data = json.loads(RECORD.read_text()) if RECORD.exists() else {}
        RECORD.write_text(json.dumps({**data, **made}, indent=2, ensure_ascii=False) + "\n")
        update_guide()
        print(f"merged {', '.join(made)} into {RECORD.relative_to(ROOT)}; PRESENTING.md rewritten")
        return 0
    if args.route == "guide":
        if "--check" in args.extra:
            ok = update_guide(check=True)
            print("PRESENTING.md's fresh-machine lines are up to date" if ok else
                  "PRESENTING.md's fresh-machine lines are out of date: run scripts/fresh_machine_check.py guide")
            return 0 if ok else 1
        update_guide()
        return 0
    return route_conda()


if __name__ == "__main__":
    sys.exit(main())
