"""Write the command-line reference (`docs/cli.md`) from the parsers themselves: `hf-ext --help`, each command's
help, and each method's own scripts (`hf-ext METHOD SCRIPT --help`). Run by `make docs`; never edited by hand.

Usage: `python scripts/gen_cli_docs.py [--out docs/cli.md]`
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _help(argv: list[str]) -> str:
    from hf_ext.core.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(argv)
        except SystemExit:
            pass
    return buf.getvalue().rstrip()


def render() -> str:
    os.environ["COLUMNS"] = "110"  # argparse wraps help to the terminal width: fix it for a stable page
    import hf_ext

    parts = [
        "# Command line reference",
        "",
        "Generated from the parsers by `scripts/gen_cli_docs.py` (run by `make docs`). Flags are spelled with",
        "underscores; the dashed spelling of every flag is accepted too.",
        "",
        "## hf-ext",
        "",
        "```text",
        _help(["--help"]),
        "```",
    ]
    for command in ("list", "reproduce", "train", "push", "demo", "setup"):
        text = _help([command, "--help"]) if command != "train" else ""
        if text:
            parts += ["", f"## hf-ext {command}", "", "```text", text, "```"]
    for spec in hf_ext.list_methods():
        scripts = ["reproduce", *(["train"] if spec.train else []), *spec.commands]
        parts += ["", f"## {spec.name}", "", f"{spec.title}. See [the method's page](methods/{spec.name}.md)."]
        for script in scripts:
            text = _help([spec.name, script, "--help"])
            parts += ["", f"### hf-ext {spec.name} {script}", "", "```text", text or "(no --help output)", "```"]
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "cli.md")
    args = parser.parse_args(argv)
    args.out.write_text(render())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
