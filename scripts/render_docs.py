"""Renders the report sections of the docs from the committed results (`hf_ext.core.results_render`).

    python scripts/render_docs.py                   # re-render pages, cards, README and figures from docs/results/
    python scripts/render_docs.py --collect runs/   # first copy runs/<method>/results.json (+ its PNGs) there
    python scripts/render_docs.py --check           # exit 1, naming each page that differs from its render

`make run` ends with `--collect $HF_EXT_HOME` (default `runs/`): the quick results and their figures land in
`docs/results/<method>/quick/`, and every page between its `<!-- results:start -->` / `<!-- results:end -->`
markers (the README's methods table between `<!-- results-table:start -->` / `<!-- results-table:end -->`) is
rewritten from them. A `--full` run is collected the same way into `docs/results/<method>/full/`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from hf_ext.core.results_render import ResultsSchemaError, collect, render_tree, rendered_pages  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="render_docs.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--collect", metavar="RUNS", help="copy RUNS/<method>/results.json and PNGs first")
    parser.add_argument("--methods", nargs="+", help="collect only these methods")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page differs")
    parser.add_argument("--root", default=str(REPO_ROOT), help="the checkout (default: this one)")
    args = parser.parse_args(argv)
    root = Path(args.root)
    try:
        if args.check:
            stale = [p for p, text in rendered_pages(root).items() if p.read_text(encoding="utf-8") != text]
            for p in stale:
                print(f"differs from the render of its results.json: {p.relative_to(root)}", file=sys.stderr)
            return 1 if stale else 0
        if args.collect:
            for path in collect(args.collect, root, methods=args.methods):
                print(f"collected {path.relative_to(root)}")
        for path in render_tree(root):
            print(f"rendered {path.relative_to(root)}")
    except ResultsSchemaError as err:
        print(f"render_docs.py: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
