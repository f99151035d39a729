"""Every Space is self-contained: no Space source reads `runs/`, `../shared` or a method's data loader, and the
pieces the Spaces share (the read recorder the browser test uses, the bar plot) do what they say.

The runtime half of the check is in tests/test_spaces_browser.py: each Space is used in Chromium with the shared
data hidden and every file the process opens for reading recorded.
"""

from __future__ import annotations

import ast
import importlib
import os
from pathlib import Path

import pytest
from helpers import browser

import hf_ext

REPO_ROOT = Path(__file__).resolve().parents[2]
METHODS = [spec.name for spec in hf_ext.list_methods()]

# Calls that read the work dir (`runs/`) or the checkout's `../shared/data`: a Space may call none of them.
FORBIDDEN_CALLS = {
    "work_dir",
    "data_dir",
    "load_pairs",
    "load_test",
    "build_corpus",
    "load_multirc",
    "load_secure_contracts",
    "humaneval_tasks",
    "humaneval_prompt",
    "humaneval_reference",
    "default_references_dir",
    "released_outputs_dir",
}


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def outside_references(source: str) -> list[str]:
    """What in `source` (Python) points outside a Space: forbidden calls and path strings into `runs/` or
    `shared/` (docstrings excluded: they may say what the code does not do)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if name in FORBIDDEN_CALLS:
                found.append(f"line {node.lineno}: calls {name}()")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value.replace("\\", "/")
            if "shared/data" in text or "../shared" in text or text.startswith(("runs/", "./runs")) or text == "runs":
                found.append(f"line {node.lineno}: path {node.value!r}")
    return found


def _demo_source(name: str) -> str:
    module = importlib.import_module(hf_ext.get_method(name).demo.partition(":")[0])
    return Path(module.__file__).read_text()


@pytest.mark.parametrize("name", METHODS)
def test_no_space_reads_runs_or_shared(name):
    spec = hf_ext.get_method(name)
    app = (spec.space_dir / "app.py").read_text()
    assert outside_references(app) == [], f"spaces/{name}/app.py"
    assert outside_references(_demo_source(name)) == [], f"the demo module of {name}"


def test_the_scan_finds_what_it_forbids():
    bad = (
        "from hf_ext.core.paths import work_dir\n"
        "def f():\n"
        '    """Reads nothing from runs/ (a docstring may say so)."""\n'
        '    a = work_dir("orca", "artifact")\n'
        '    b = open("../shared/data/multirc/train.jsonl")\n'
        "    c = load_pairs()\n"
        '    d = Path("runs/orca")\n'
    )
    found = outside_references(bad)
    assert sorted(f.split(":")[0] for f in found) == ["line 4", "line 5", "line 6", "line 7"], found


@pytest.mark.parametrize("name", METHODS)
def test_space_requirements_install_the_pinned_wheel(name):
    spec = hf_ext.get_method(name)
    lines = [ln.strip() for ln in (spec.space_dir / "requirements.txt").read_text().splitlines()]
    wheel = [ln for ln in lines if ln.startswith("./wheels/hf_ext-")]
    assert wheel and wheel[0].endswith(f"[{name.replace('_', '-')}]"), lines
    assert not any(ln.startswith("hf_ext>=") or ln == "hf_ext" for ln in lines), "no index has hf_ext"


def test_recording_opens_sees_reads_from_any_thread_and_not_writes(tmp_path):
    import threading

    inside, other = tmp_path / "runs", tmp_path / "elsewhere"
    inside.mkdir()
    other.mkdir()
    (inside / "a.json").write_text("{}")
    (other / "b.json").write_text("{}")
    (tmp_path / "link").symlink_to(inside / "a.json")
    with browser.recording_opens() as opened:
        thread = threading.Thread(target=lambda: (inside / "a.json").read_text())  # Gradio answers in a worker
        thread.start()
        thread.join()
        (other / "b.json").read_text()
        (tmp_path / "link").read_text()  # a symlink into runs/ counts
        (inside / "new.json").write_text("{}")  # a cache written on first use is not a read
        fd = os.open(inside / "a.json", os.O_RDONLY)
        os.close(fd)
    (inside / "a.json").read_text()  # after the block: not recorded
    hits = browser.outside_reads(opened, [inside])
    assert hits == sorted({str(inside / "a.json"), str(tmp_path / "link")}), hits
    assert str(inside / "new.json") not in opened


def test_bar_figure_draws_one_bar_per_group_and_series():
    from hf_ext.core.demo import bar_figure

    fig = bar_figure(["client", "server"], {"cached": [10, 20], "resent": [100, 300]}, "bytes", log=True)
    ax = fig.axes[0]
    heights = [[bar.get_height() for bar in c] for c in ax.containers]
    assert heights == [[10, 20], [100, 300]] and ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="one value per group"):
        bar_figure(["a", "b"], {"x": [1]}, "y")
