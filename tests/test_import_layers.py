"""The helpers' imports point one way: down the layers, never in a circle.

Every import counts, including those inside functions and under ``if TYPE_CHECKING``: an import
deferred to dodge a circle is still a circle in the design. A new module must be placed in LAYERS.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Bottom to top. A module may import only from rows above its own in this list (lower layers).
LAYERS: list[tuple[str, ...]] = [
    ("figure_check",),
    ("notices", "svg", "tables", "challenge.sandbox", "challenge.leftovers"),
    ("nvml", "models", "data", "ddp.protocol", "syncs", "gpt.model", "gpt.data", "gpt.text"),
    ("machine_profiles",),
    ("env",),
    ("timebox",),
    ("results",),  # below bench: the session's ceilings are kept beside the results (bench.session_ceilings)
    ("bench", "augment", "preflight", "ncu_target", "gpt.fp8", "kernels.softmax_triton", "kernels.relu_pool_triton",
     "kernels.cuda_ext", "memory.anatomy", "memory.accumulation", "memory.fragmentation", "memory.snapshot",
     "memory.oom_message",
     "ddp.launch", "challenge.accuracy", "challenge.training_data", "challenge.isolation", "inference", "gpt.flops",
     "gpt.memory"),
    ("loaders", "profiling", "roofline", "kernels.launches", "kernels.graphs", "kernels.softmax", "kernels.attention",
     "kernels.compile_practice", "memory.search", "ddp.worker", "ddp.overlap", "ddp.cluster", "leaderboard.entry",
     "gpt.sharded", "gpt.rungs", "gpt.activations"),
    ("leaderboard.seal",),
    ("leaderboard.store",),
    ("leaderboard.concurrency",),
    ("leaderboard",),
    ("ddp.scaling", "ddp.by_hand", "gpt.ladder", "gpt.sharded_speed"),
    ("ddp",),
    ("gpt",),
    ("train", "ncu", "nsys_stats", "memory.resilient", "memory.timeline", "challenge.step_roofline"),
    ("challenge.function_check", "gpt.step_kernels", "memory.scratch"),
    ("kernels.compile_modes", "memory.precision", "challenge.rules", "challenge.start", "challenge.recipes",
     "large_batch"),
    ("memory",),
    ("kernels",),
    ("monitor.telemetry", "monitor.energy"),
    ("monitor.record",),
    ("monitor.view", "monitor.exporters", "monitor.diagnosis"),
    ("monitor.sampling",),
    ("monitor",),
    ("exercises.cells",),
    ("widgets", "exercises.common", "challenge.harness"),
    ("exercises.predictions",),
    ("challenge.ladder", "challenge.report", "challenge.to_target"),
    ("nsys_target",),  # records the final challenge's baseline and top rung too: above the ladder
    ("nsys",),
    ("challenge.class_children",),
    ("challenge.classroom",),
    ("challenge",),
    ("exercises.nb00", "exercises.nb01", "exercises.nb02", "exercises.nb03", "exercises.nb04", "exercises.nb05",
     "exercises.nb06", "exercises.nb07"),
    ("exercises",),
]


def module_files(package_dir: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` for every module of the package at ``package_dir``."""
    top = package_dir.name
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if name.startswith(top):
            out[name] = path
    return out


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module → the package's modules it imports (anywhere in its source)."""
    files = module_files(package_dir)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
                edges |= {_nearest(t, files) for t in targets} - {None}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = package.split(".")
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    target = sub if sub in files else _nearest(base, files)
                    if target is not None:
                        edges.add(target)
        edges.discard(name)
        # A module's own ancestors are always imported before it: not an edge of the design.
        graph[name] = {e for e in edges if not name.startswith(e + ".")}
    return graph


def _nearest(dotted: str, files: dict[str, Path]) -> str | None:
    parts = dotted.split(".")
    while parts:
        if ".".join(parts) in files:
            return ".".join(parts)
        parts.pop()
    return None


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


GRAPH = import_graph(ROOT / "helpers")
LAYER_OF = {f"helpers.{m}": i for i, row in enumerate(LAYERS) for m in row}


def test_no_import_circle_inside_helpers():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import circle: " + " → ".join(cycle)


def test_every_module_has_a_layer():
    placed = set(LAYER_OF) | {"helpers"}
    missing = sorted(set(GRAPH) - placed)
    assert not missing, f"place these modules in LAYERS (tests/test_import_layers.py): {missing}"
    gone = sorted(set(LAYER_OF) - set(GRAPH))
    assert not gone, f"LAYERS names modules that no longer exist: {gone}"


@pytest.mark.parametrize("module", sorted(set(GRAPH) - {"helpers"}))
def test_imports_point_down_the_layers(module):
    up = [t for t in sorted(GRAPH[module]) if LAYER_OF[t] >= LAYER_OF[module]]
    assert not up, (f"{module} (layer {LAYER_OF[module]}) imports {up} from its own layer or above: move the shared "
                    "part down a layer, or the importing code up")


def test_the_checks_catch_a_circle_and_an_upward_import(tmp_path):
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import low, high\n")
    (pkg / "low.py").write_text("def f():\n    from .high import g  # deferred, still a circle\n")
    (pkg / "high.py").write_text("from .low import f\nfrom typing import TYPE_CHECKING\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "leaf.py").write_text("from .. import low\nfrom ..high import f\n")
    graph = import_graph(pkg)
    assert graph["demo.low"] == {"demo.high"} and graph["demo.high"] == {"demo.low"}
    assert graph["demo.sub.leaf"] == {"demo.low", "demo.high"}
    assert find_cycle(graph) in (["demo.high", "demo.low", "demo.high"], ["demo.low", "demo.high", "demo.low"])
    assert find_cycle({"a": {"b"}, "b": set()}) is None
