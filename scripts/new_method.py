"""Scaffold a new hf_ext method from `templates/method/` (see CONTRIBUTING.md, "Adding a method").

Usage:
    python scripts/new_method.py NAME [--class-name CamelName] [--dest DIR]

With the default `--dest hf_ext`, the method becomes `hf_ext/NAME/` and is discovered by `import hf_ext` with no
other edit; its card and Space start inside the folder (`model_card.md`, `space/`) — move them to
`model_cards/NAME.md` and `spaces/NAME/` and drop `card_path` / `space_path` when it joins this repository. With
another `--dest` the method is a stand-alone package `NAME` (an extension outside the repository; declare it under
the `hf_ext.methods` entry point group so `import hf_ext` registers it).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "method"


def scaffold(name: str, dest: Path, class_name: str | None = None) -> Path:
    """Copies the template to `dest / name`, renaming `mymethod` / `MyMethod` and filling the Gradio version."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"the method name must be a lowercase identifier (letters, digits, _), got {name!r}")
    class_name = class_name or "".join(part.capitalize() for part in name.split("_"))
    if not class_name.isidentifier():
        raise ValueError(f"--class-name must be a Python identifier, got {class_name!r}")
    target = Path(dest) / name
    if target.exists():
        raise FileExistsError(f"{target} already exists")
    inside_hf_ext = Path(dest).resolve().name == "hf_ext" and (Path(dest) / "core").is_dir()
    module = f"hf_ext.{name}" if inside_hf_ext else name
    try:
        import gradio

        gradio_version = gradio.__version__
    except ImportError:
        gradio_version = "6.31.0"
    shutil.copytree(TEMPLATE, target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in sorted(target.rglob("*")):
        if not path.is_file():
            continue
        text = path.read_text()
        text = re.sub(r'"mymethod\.', f'"{module}.', text)
        text = text.replace("from mymethod.", f"from {module}.")
        text = text.replace("mymethod", name).replace("MyMethod", class_name).replace("GRADIO_VERSION", gradio_version)
        path.write_text(text)
        if "mymethod" in path.name:
            path.rename(path.with_name(path.name.replace("mymethod", name)))
    return target


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="the method's lowercase name (the CLI, card and Space id)")
    parser.add_argument("--class-name", "--class_name", default=None, help="class prefix (default: CamelCase name)")
    parser.add_argument("--dest", default="hf_ext", type=Path, help="folder that receives NAME/ (default: hf_ext)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    target = scaffold(args.name, args.dest, args.class_name)
    print(f"created {target}; next: fill in the paper's method, then `pytest tests/test_method_contract.py`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
