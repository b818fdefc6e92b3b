#!/usr/bin/env python3
"""Read back what scripts/nsys_on_node.sh recorded on the GPU node: import each .qdstrm with the host part that
scripts/nsys_debian.sh built (.nsys/host), read nsys stats' three tables, and say what the notebook's line would be.

    .venv/bin/python scripts/nsys_import.py FILES_AT        # the folder that came back: it holds nsys/node.json
    .venv/bin/python scripts/nsys_import.py FILES_AT --host .nsys/host --top 20 --work results/local/nsys

For each recording (record/steps.qdstrm: the script's own ``-t cuda,nvtx``; measure/steps.qdstrm: the notebook's
command) it prints the tables and the line :func:`helpers.nsys.availability_line` gives with the kernel count
torch.profiler measured on the node (node.json's ``expected_kernels``), then the line measure gave on the node.
The reports (.nsys-rep, .sqlite) go to ``--work``; the files that came back are read, never written (the importer
writes into its input: :func:`helpers.nsys.import_qdstrm` gives it a copy). Exits 1 where no recording was read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from helpers import nsys  # noqa: E402 - after the repository is on the path


def node_record(folder: Path) -> tuple[Path, dict]:
    """node.json in ``folder`` (or its nsys/) and what it says; an empty record where there is none."""
    for base in (folder / "nsys", folder):
        if (base / "node.json").exists():
            return base, json.loads((base / "node.json").read_text())
    return (folder / "nsys" if (folder / "nsys").is_dir() else folder), {}


def node_tool(node: dict) -> nsys.NsysTool:
    """The node's nsys as node.json names it: the lines name its version, not this machine's host part."""
    about = node.get("nsys") or {}
    return nsys.NsysTool(about.get("path", "nsys (on the node)"), about.get("version", ""),
                         can_record=about.get("can_record", True))


def read_one(qdstrm: Path, *, base: Path, host: nsys.NsysTool, work: Path, node: dict, top: int) -> bool:
    """Import one recording, print its tables and its line; False where it could not be read."""
    name = "-".join(qdstrm.relative_to(base).with_suffix("").parts)  # record-steps, measure-steps
    print(f"\n== {qdstrm} ({qdstrm.stat().st_size:,} bytes)")
    try:
        report = nsys.import_qdstrm(qdstrm, tool=host, output=work / f"{name}.nsys-rep")
        st = nsys.stats(report, tool=host)
    except nsys.NsysError as e:
        print(f"could not read it: {e}")
        return False
    print(f"report: {report}\n{st}")
    for title, table in st.tables(top=top).items():
        print(f"\n{title}\n{table!r}")
    line = nsys.availability_line(node_tool(node), st, expected_kernels=node.get("expected_kernels"),
                                  torch_cuda=node.get("torch_cuda") or "")
    print(f"\nline: {line}")
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", type=Path, help="the folder that came back from the node (holds nsys/node.json)")
    ap.add_argument("--host", type=Path, default=ROOT / ".nsys" / "host", help="scripts/nsys_debian.sh's host part")
    ap.add_argument("--work", type=Path, default=ROOT / "results" / "local" / "nsys", help="where the reports go")
    ap.add_argument("--top", type=int, default=15, help="rows of each table")
    args = ap.parse_args(argv)

    cli = args.host / "target-linux-x64" / "nsys"
    if not cli.exists():
        print(f"no nsys at {cli}: build the host part with `bash scripts/nsys_debian.sh` (it makes .nsys/host)")
        return 1
    host = nsys.tool_at(cli)
    base, node = node_record(args.files)
    print(f"host part: {host.name} ({host.path}), importer {host.importer or 'missing'}")
    if node:
        rec = node.get("record", {})
        print(f"node: {node.get('gpu')} ({node.get('host')}, {node.get('when')}), torch {node.get('torch')} "
              f"(CUDA {node.get('torch_cuda')}), {node.get('nsys', {}).get('version', 'nsys ?')}; "
              f"nsys profile exited with {rec.get('rc')} after {rec.get('seconds')} s; torch.profiler counted "
              f"{node.get('expected_kernels')} kernels for {node.get('args')}")
        for key in ("environment_error", "count_error", "measure_error"):
            if key in node:
                print(f"node: {key}: {node[key]}")
    else:
        print(f"no node.json under {args.files}: no kernel count to compare with")
    found = sorted(base.rglob("*.qdstrm"))
    if not found:
        print(f"no .qdstrm under {base}: nsys recorded nothing on the node (record.stdout, record.stderr and run.log "
              "there say why)")
    read = [read_one(q, base=base, host=host, work=args.work, node=node, top=args.top) for q in found]
    if node.get("measure"):
        print(f"\non the node, measure said ({node['measure']['state']}): {node['measure']['line']}")
    return 0 if any(read) else 1


if __name__ == "__main__":
    raise SystemExit(main())
