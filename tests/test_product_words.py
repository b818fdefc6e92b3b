"""The product speaks to a learner who has only this repository: it never points to material outside it.

The course grew out of earlier course material that a learner does not have. Notebooks, helpers, scripts and
READMEs name each thing by what it is (the reference workload, the classic training loop, the benchmark grid)
and describe it where it is used.
"""

import functools
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Words that point outside the repository, each with what to write instead.
OUTSIDE = {
    r"\bseed (lab|lesson|lecture|slides|material)s?\b": "name the thing itself (the reference workload, the classic "
                                                        "training loop, the benchmark grid) and describe it here",
    r"\bthe seed'?s\b": "say whose habit or code it is in this repository (the classic training loop's, ...)",
    r"\bshared GPU notes\b": "state the fact where it is used, measured by the code that prints it",
    r"\.\./shared\b|\bshared/(DESIGN|GPU)\.md\b|\bseeds/": "the learner has no such folder: say it here",
}
_SUFFIXES = {".py", ".ipynb", ".md", ".sh", ".yml", ".yaml", ".toml", ".txt", ".cfg", ""}


@functools.lru_cache(maxsize=1)
def product_files() -> tuple[Path, ...]:
    """Every text file a learner or CI reads, except this test (which has to spell the words). The walk skips the
    ignored folders as it goes (the virtual environment alone holds tens of thousands of files), once a session."""
    skip_dirs = {".git", ".venv", "build", "__pycache__", "local", ".whl", ".nsys", "runs", ".ipynb_checkpoints"}
    out = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip_dirs and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            if path.suffix in _SUFFIXES and path != Path(__file__).resolve():
                out.append(path)
    return tuple(sorted(out))


def test_the_scan_sees_the_product():
    names = {p.relative_to(ROOT).as_posix() for p in product_files()}
    for expected in ("README.md", "notebooks/01_baseline.ipynb", "helpers/train.py", "scripts/gpu_test.py",
                     "results/README.md"):
        assert expected in names


@functools.lru_cache(maxsize=1)
def product_texts() -> tuple[tuple[Path, str], ...]:
    """Each product file's text, read once for every pattern (the exports alone are megabytes)."""
    return tuple((path, path.read_text(errors="replace")) for path in product_files())


@pytest.mark.parametrize("pattern", list(OUTSIDE))
def test_nothing_points_outside_the_repository(pattern):
    rx = re.compile(pattern, re.IGNORECASE)
    hits = []
    for path, text in product_texts():
        if not rx.search(text):  # the whole file first: line by line only where it has a hit
            continue
        for n, line in enumerate(text.splitlines(), start=1):
            m = rx.search(line)
            if m:
                hits.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r}")
    assert not hits, f"{OUTSIDE[pattern]}:\n" + "\n".join(hits)


def test_the_scan_would_catch_them():
    samples = ["Run the seed lab's loop", "see shared GPU notes", "as in ../shared/GPU.md", "the seed's habit"]
    for text in samples:
        assert any(re.search(p, text, re.IGNORECASE) for p in OUTSIDE), text
    assert not any(re.search(p, "seed=0, the seed for the generator", re.IGNORECASE) for p in OUTSIDE)
