"""pyproject.toml, environment.yml and binder/requirements.txt must list the same packages at the same minimums."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONDA_TO_PYPI = {"pytorch": "torch"}
NOT_PACKAGES = {"python", "pip"}


def _norm(spec: str) -> tuple[str, str]:
    spec = spec.split(";")[0]  # a platform marker (triton: Linux only) is not a version
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", spec)
    name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
    return CONDA_TO_PYPI.get(name, name), m.group(2).replace(" ", "")


def pyproject() -> dict[str, str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = meta["dependencies"] + meta["optional-dependencies"]["test"]
    return dict(_norm(s) for s in specs)


def environment_yml() -> dict[str, str]:
    out = {}
    text = (ROOT / "environment.yml").read_text()
    for line in text.split("\ndependencies:\n", 1)[1].splitlines():
        # conda's own dependencies, and those of its pip section that conda-forge lacks (not pip's options)
        m = re.match(r"^  - ([^\s:]+)\s*$", line) or re.match(r"^      - ([A-Za-z][^\s#]*)\s*(#.*)?$", line)
        if m:
            name, spec = _norm(m.group(1))
            if name not in NOT_PACKAGES:
                out[name] = spec
    return out


def binder() -> dict[str, str]:
    lines = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    return dict(_norm(l) for l in lines if l.strip() and not l.startswith(("#", "-")))


def test_three_dependency_lists_agree():
    want = pyproject()
    assert "torch" in want and "nvidia-ml-py" in want and "nbval" in want
    assert environment_yml() == want
    assert binder() == want


def test_wrong_nvml_binding_is_not_listed():
    for deps in (pyproject(), environment_yml(), binder()):
        assert "pynvml" not in deps and "nvidia-ml-py3" not in deps
