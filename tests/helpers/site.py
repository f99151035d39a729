"""Build the documentation site offline and look at it in Debian's headless Chromium.

Used by `tests/test_docs.py` (the strict build, then Home and a method page opened in Chromium) and by
`scripts/refresh_site_screenshots.py` (`make site-screenshots`), which writes `docs/screenshots/`.

The site is built from a copy of `docs/` with the CLI reference generated from the parsers (as `make docs` does),
so the checkout is never written to, and served on 127.0.0.1 (the browser helper refuses every other host, so a
page that needs a CDN or web fonts shows it).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from playwright.sync_api import Page

REPO_ROOT = Path(__file__).resolve().parents[2]

SCREENSHOT_PAGES: dict[str, str] = {"site_index.png": "index.html", "site_methods_gpmfs.png": "methods/gpmfs.html"}
"""Screenshot file (under docs/screenshots/) -> page of the built site: Home and one method page."""


class SiteBuildError(RuntimeError):
    """`mkdocs build --strict` or the CLI-reference generator failed (the message holds their stderr)."""


def build_site(work: Path, timeout: int = 600) -> Path:
    """Builds the site into `work/site` from a copy of `docs/` in `work/docs`; returns the site folder."""
    docs = work / "docs"
    shutil.copytree(REPO_ROOT / "docs", docs, ignore=shutil.ignore_patterns("cli.md"))
    gen = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "gen_cli_docs.py"), "--out", str(docs / "cli.md")],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if gen.returncode != 0:
        raise SiteBuildError(gen.stderr[-3000:])
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text())  # no custom tags: plain YAML reads it
    config["docs_dir"] = str(docs)
    config["site_dir"] = str(work / "site")
    for ext in config["markdown_extensions"]:
        if isinstance(ext, dict) and "pymdownx.snippets" in ext:
            ext["pymdownx.snippets"]["base_path"] = [str(REPO_ROOT)]
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            plugin["mkdocstrings"]["handlers"]["python"]["paths"] = [str(REPO_ROOT)]
    (work / "mkdocs.yml").write_text(yaml.safe_dump(config))
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        raise SiteBuildError("mkdocs is not installed (the `docs` extra, installed by `make`)")
    proc = subprocess.run(
        [str(mkdocs), "build", "--strict", "-f", str(work / "mkdocs.yml")],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
        cwd=work,
    )
    if proc.returncode != 0:
        raise SiteBuildError(proc.stderr[-5000:])
    return work / "site"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@contextlib.contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serves `site` on 127.0.0.1 (a free port) in a thread; yields the base URL (ending in `/`)."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def open_page(context, url: str) -> Page:
    """Opens `url` and waits until Material has laid out the page (header, navigation, article)."""
    from playwright.sync_api import expect

    page = context.new_page()
    page.goto(url, wait_until="load")
    expect(page.locator("article").first).to_be_visible()
    return page


def check_page(page: Page, title: str, nav: list[str], table_cell: str | None = None) -> None:
    """Asserts what a reader sees: the page title (tab and first heading), the navigation entries `nav`, a rendered
    table (a header and at least one row of two or more cells) and, when `table_cell` is given, a table cell showing
    it. Structure only, never pixels."""
    from playwright.sync_api import expect

    assert title in page.title(), page.title()
    expect(page.locator("article h1").first).to_contain_text(title)
    sidebar = page.locator("nav.md-nav--primary")
    for entry in nav:
        expect(sidebar.get_by_text(entry, exact=True).first).to_be_attached()
    table = page.locator("article table").first
    expect(table).to_be_visible()
    expect(table.locator("th").first).to_be_visible()
    assert table.locator("tbody tr").count() >= 1 and table.locator("tbody tr").first.locator("td").count() >= 2
    if table_cell is not None:
        expect(page.locator("article table td", has_text=table_cell).first).to_be_visible()
    text = page.locator("body").inner_text()
    assert "Traceback" not in text and "Error 404" not in text


def screenshot(page: Page, path: Path) -> Path:
    """The visible top of the page (1280 x 900), as a reader first sees it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=False, animations="disabled", caret="hide")
    return path
