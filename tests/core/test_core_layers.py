"""`hf_ext.core` is layered: every core module imports only modules of lower layers (imports inside functions count
too), so the import graph has no cycle, and no core module imports a method or the top-level package (which
imports every method). Read statically from the source, so a lazy import hidden in a function cannot slip by."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.static_imports import import_statements

CORE = Path(__file__).resolve().parents[2] / "hf_ext" / "core"

# The dependency order CONTRIBUTING.md describes, lowest first. A module may import its own layer's package
# internals only where listed as lower; a new core module must be placed here.
LAYERS: list[set[str]] = [
    {
        "paths",
        "offline",
        "lazy",
        "devices",
        "validation",
        "reporting",
        "trainer_metrics",
        "arguments",
        "user_data",
        "wheel",
        "progress",
        "gc_freeze",
        "run_log",
    },
    {"parallel", "reproduce_pool", "integrity", "extras", "results_schema"},
    {"registry", "results_render"},
    {"auto", "records", "pretrained", "testing"},
    {"cards"},
    {"hub", "demo"},
    {"federated.results", "federated.records", "federated.run_config"},
    {"federated.guard", "federated.local", "federated.simulation", "federated.deployment"},
    {"federated.strategy"},
    {"federated"},
    {"cli"},
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(CORE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _core_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(CORE.rglob("*.py")) if _module_name(p)}


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """Core modules (and `hf_ext.<other>` targets, prefixed `!`) that `path` imports anywhere in its body."""
    package = name.split(".")[:-1] if not path.name == "__init__.py" else name.split(".")
    out: set[str] = set()

    def add(absolute: str, names: list[str]) -> None:
        if absolute == "hf_ext" or (absolute.startswith("hf_ext.") and not absolute.startswith("hf_ext.core")):
            if absolute not in ("hf_ext._version",):
                out.add("!" + absolute)
            return
        if not absolute.startswith("hf_ext.core"):
            return
        mod = absolute[len("hf_ext.core") :].lstrip(".")
        for n in names:  # `from hf_ext.core import hub` / `from . import x` imports a submodule
            sub = f"{mod}.{n}".lstrip(".")
            if sub in modules:
                out.add(sub)
                break
        else:
            if mod:
                out.add(mod)

    for absolute, names in import_statements(path, ["hf_ext", "core", *package], skip_type_checking=True):
        add(absolute, names)
    out.discard(name)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _core_modules()
    return {name: _imports(path, name, set(modules)) for name, path in modules.items()}


def test_every_core_module_has_a_layer():
    placed = set().union(*LAYERS)
    missing = sorted(set(_core_modules()) - placed)
    assert not missing, f"place these core modules in LAYERS (and in CONTRIBUTING.md's order): {missing}"


def test_core_imports_no_method_and_not_the_top_package():
    # `cli` is the console entry point: it imports the package so that discovery registers every method (it never
    # names one); every other core module must work without any method imported.
    graph = _graph()
    graph["cli"] = graph["cli"] - {"!hf_ext"}
    bad = {m: sorted(t for t in targets if t.startswith("!")) for m, targets in graph.items()}
    bad = {m: t for m, t in bad.items() if t}
    assert not bad, f"core modules importing a method or the hf_ext package: {bad}"


def test_core_imports_only_lower_layers():
    layer = {m: i for i, group in enumerate(LAYERS) for m in group}
    upward = []
    for module, targets in _graph().items():
        for target in targets:
            if target.startswith("!"):
                continue
            if layer.get(target, -1) >= layer.get(module, 99) and not module.startswith(target + "."):
                upward.append(f"{module} (layer {layer.get(module)}) -> {target} (layer {layer.get(target)})")
    assert not upward, "imports that are not strictly downward:\n" + "\n".join(sorted(upward))


def test_core_import_graph_is_acyclic():
    graph = _graph()
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if nxt.startswith("!") or nxt not in graph or node.startswith(nxt + "."):
                continue  # a package's own __init__ imported by its submodule is not a cycle of modules
            if state.get(nxt) == 1:
                cycle.extend([*stack, node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, [*stack, node]):
                return True
        state[node] = 2
        return False

    for node in graph:
        if state.get(node) is None and visit(node, []):
            break
    assert not cycle, " -> ".join(cycle)


def test_the_checker_sees_imports_inside_functions(tmp_path):
    """The static reader itself: a function-level relative import is an edge (this is how the old cycle hid)."""
    src = tmp_path / "mod.py"
    src.write_text("def f():\n    from .hub import x\n    import hf_ext.orca\n")
    edges = _imports(src, "cards", {"hub", "cards"})
    assert edges == {"hub", "!hf_ext.orca"}


@pytest.mark.parametrize("module", ["registry", "integrity"])
def test_low_layers_import_nothing_above_them(module):
    assert _graph()[module] <= {"paths", "lazy", "integrity", "validation"}
