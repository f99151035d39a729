"""The method layout CONTRIBUTING.md describes, read statically from the source: each method folder registers in
its own `__init__.py`, imports no sibling method, keeps `testing.py` out of production code, keeps files under the
size limit, and points `hf-ext train` at `train.py:main`."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.static_imports import import_statements

import hf_ext

PACKAGE = Path(hf_ext.__file__).resolve().parent
METHODS = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file() and p.name != "core")
MAX_LINES = 600


def _imports(path: Path, method: str) -> set[str]:
    """Absolute module names imported anywhere in `path` (relative imports resolved inside the method)."""
    rel_parts = path.relative_to(PACKAGE / method).with_suffix("").parts
    out = set()
    for module, names in import_statements(path, ["hf_ext", method, *rel_parts[:-1]]):
        out.add(module)
        out.update(f"{module}.{n}" for n in names)
    return out


def _files(method: str) -> list[Path]:
    return sorted(p for p in (PACKAGE / method).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("method", METHODS)
def test_method_imports_no_sibling(method):
    siblings = {m for m in METHODS if m != method}
    bad = {
        f.name: sorted(i for i in _imports(f, method) if i.split(".")[:2][-1] in siblings and i.startswith("hf_ext."))
        for f in _files(method)
    }
    assert not {k: v for k, v in bad.items() if v}


@pytest.mark.parametrize("method", METHODS)
def test_production_code_does_not_import_testing(method):
    testing = f"hf_ext.{method}.testing"
    bad = [f.name for f in _files(method) if f.name != "testing.py" and testing in _imports(f, method)]
    assert not bad, f"{method}: runtime configs belong in presets.py, not testing.py; imported by {bad}"


@pytest.mark.parametrize("method", METHODS)
def test_files_are_small(method):
    big = {f.name: n for f in _files(method) if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert not big, f"{method}: split these by role (limit {MAX_LINES} lines): {big}"


@pytest.mark.parametrize("method", METHODS)
def test_registration_lives_in_init_and_train_in_train_py(method):
    calls = [f.name for f in _files(method) if "register_method(" in f.read_text()]
    assert calls == ["__init__.py"], f"{method}: register_method is called in {calls}"
    spec = hf_ext.get_method(method)
    if spec.train is not None:
        assert spec.train == f"hf_ext.{method}.train:main", spec.train
        assert (PACKAGE / method / "train.py").is_file()


SPREAD_CALLS = ("np.std(", "numpy.std(", ".std(", "statistics.stdev(", "statistics.pstdev(", "pstdev(", "np.var(")


@pytest.mark.parametrize("method", METHODS)
def test_reproductions_compute_no_spread_of_their_own(method):
    """Seed spreads and intervals come from hf_ext.core.reporting (sample SD, t intervals), nowhere else."""
    reporting_files = [f for f in _files(method) if f.name.startswith(("reproduce", "report")) or f.name == "loco.py"]
    bad = {}
    for f in reporting_files:
        for lineno, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if any(call in code for call in SPREAD_CALLS):
                bad.setdefault(f.name, []).append(lineno)
    assert not bad, f"{method}: use hf_ext.core.reporting.summarize / paired_difference instead: {bad}"


@pytest.mark.parametrize("method", METHODS)
def test_scripts_use_one_flag_style(method):
    """Scripts build their parsers with `HfArgumentParser` or `hf_ext.core.arguments.ArgumentParser`, which both
    take `--flag_name` with `--flag-name` as an alias; a plain `argparse.ArgumentParser` would take only one."""
    bad = [f.name for f in _files(method) if "argparse.ArgumentParser(" in f.read_text()]
    assert not bad, f"{method}: use hf_ext.core.arguments.ArgumentParser in {bad}"


@pytest.mark.parametrize("method", METHODS)
def test_every_method_trains_and_evaluates_on_own_data(method):
    """Issue 36's contract: `hf-ext train` and `hf-ext evaluate` exist for every method, each at its own module, and
    the own-data path (train → load → evaluate → push) has its test file."""
    spec = hf_ext.get_method(method)
    assert spec.train == f"hf_ext.{method}.train:main"
    assert spec.evaluate == f"hf_ext.{method}.evaluate:main"
    assert (PACKAGE / method / "evaluate.py").is_file()
    tests = PACKAGE.parent / "tests" / method
    assert list(tests.glob("test_*own_data*.py")), f"tests/{method} has no test_*own_data*.py"
    page = (PACKAGE.parent / "docs" / "methods" / f"{method}.md").read_text()
    assert "## Train on your own data" in page
