"""Imports read statically from source (no module is executed), for the layout tests: every `import` and
`from ... import` anywhere in a file, functions included, with relative imports resolved."""

from __future__ import annotations

import ast
from pathlib import Path


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_statements(
    path: Path, package: list[str], *, skip_type_checking: bool = False
) -> list[tuple[str, list[str]]]:
    """`(absolute module, imported names)` for every import in `path`; `package` is the dotted package the file
    lives in, split (`["hf_ext", "core"]`), against which relative imports resolve. `import a.b` gives
    `("a.b", [])`; `from .x import y, z` gives `("<package>.x", ["y", "z"])`. With `skip_type_checking`, imports
    under `if TYPE_CHECKING:` are left out (they never run)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip: set[int] = set()
    if skip_type_checking:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _is_type_checking(node):
                skip.update(id(n) for child in node.body for n in ast.walk(child))
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                absolute = ".".join(base + ([node.module] if node.module else []))
            else:
                absolute = node.module or ""
            out.append((absolute, [a.name for a in node.names]))
    return out
