"""Refresh `docs/screenshots/site_*.png`: the documentation site built offline (strict, as `make docs`, from a copy
of `docs/`), served on 127.0.0.1 and opened in Debian's headless Chromium; Home and one method page are checked
(title, navigation, a table) and screenshotted, with the same code as `tests/test_docs.py::test_site_in_chromium`.

Usage: `python scripts/refresh_site_screenshots.py [--out docs/screenshots]` (or `make site-screenshots`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))  # the browser and site helpers are test code

from helpers import browser, site  # noqa: E402

CHECKS = {
    "site_index.png": ("hf_ext", "ORCA"),
    "site_methods_gpmfs.png": ("GPMFS", None),
}  # screenshot -> (title, a table cell the page shows, if any: the report tables are rendered from results)
NAV = ["Home", "Install", "Quickstart", "Concepts", "GPMFS", "Command line", "Changelog"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "screenshots", help="output folder")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hf_ext_site_") as work:
        built = site.build_site(Path(work))
        with site.serve(built) as url, browser.chromium() as context:
            for name, page_path in site.SCREENSHOT_PAGES.items():
                title, cell = CHECKS[name]
                page = site.open_page(context, url + page_path)
                site.check_page(page, title, NAV, table_cell=cell)
                print(site.screenshot(page, args.out / name))
                page.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
