"""Refresh `docs/spaces/<method>.png`: each registered Space driven in Debian's headless Chromium by its own
`browser_check` (the same code as tests/test_spaces_browser.py), then screenshotted.

Usage: `python scripts/refresh_space_screenshots.py [METHOD ...] [--out docs/spaces]` (or `make screenshots`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hf_ext.core.offline import set_offline_env

set_offline_env()

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))  # the browser driver and each Space's checks are test code

from helpers import browser  # noqa: E402

import hf_ext  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("methods", nargs="*", help="methods to refresh (default: every registered method)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "spaces", help="output folder")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    specs = [hf_ext.get_method(name) for name in args.methods] or hf_ext.list_methods()
    with browser.chromium() as context:
        for spec in specs:
            path = browser.run_space(spec, "browser_check", screenshot=args.out / f"{spec.name}.png", context=context)
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
