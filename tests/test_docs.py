"""The documentation: the README stays a front door, and the site builds offline with strict link and reference
checking (MkDocs + Material + mkdocstrings), its CLI reference generated from the parsers."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from helpers import site

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_a_front_door():
    text = (REPO_ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "session" not in text.lower()  # the work log lives in CHANGELOG.md and on the method pages
    for method in ("orca", "gpmfs", "h2tune", "fl_llama", "tinyalign", "codebc", "fede4rag", "proto_evfl", "tba"):
        assert f"(docs/methods/{method}.md)" in text


def test_every_method_has_a_page_with_citation():
    import hf_ext

    nav = (REPO_ROOT / "mkdocs.yml").read_text()
    for spec in hf_ext.list_methods():
        page = REPO_ROOT / "docs" / "methods" / f"{spec.name}.md"
        assert page.is_file(), page
        assert f"methods/{spec.name}.md" in nav
        text = page.read_text()
        assert "## Citation" in text and (spec.arxiv_id or "") in text


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> Path:
    """The site built once for this module (strict, offline, CLI reference generated): `tests/helpers/site.py`."""
    try:
        return site.build_site(tmp_path_factory.mktemp("docs_site"))
    except site.SiteBuildError as err:
        pytest.fail(str(err))


def test_site_builds_strict_offline(built_site):
    cli = (built_site.parent / "docs" / "cli.md").read_text()
    assert "--repo_id" in cli and "## orca" in cli
    index = (built_site / "index.html").read_text()
    assert "ORCA" in index and "fonts.googleapis" not in index
    api = (built_site / "api" / "core.html").read_text()
    assert "VerdictRule" in api and re.search(r"paired.difference", api)


@pytest.mark.timeout(600)
def test_site_in_chromium(built_site, tmp_path):
    """Home and a method page open in headless Chromium and show their title, the navigation and a table; the
    screenshots land in `$HF_EXT_SCREENSHOT_DIR` (default tmp), `make site-screenshots` commits them."""
    from helpers import browser

    browser.chromium_path()  # a readable error naming the install command when Chromium is missing
    out = Path(os.environ.get("HF_EXT_SCREENSHOT_DIR", tmp_path))
    nav = ["Home", "Install", "Quickstart", "Concepts", "GPMFS", "Command line", "Changelog"]
    with site.serve(built_site) as url, browser.chromium() as context:
        home = site.open_page(context, url + "index.html")
        site.check_page(home, "hf_ext", nav, table_cell="ORCA")
        shot = site.screenshot(home, out / "site_index.png")
        gpmfs = site.open_page(context, url + "methods/gpmfs.html")
        site.check_page(gpmfs, "GPMFS", nav)  # its report tables are rendered from results.json: any table
        site.screenshot(gpmfs, out / "site_methods_gpmfs.png")
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
    assert set(site.SCREENSHOT_PAGES) == {"site_index.png", "site_methods_gpmfs.png"}
    for name in site.SCREENSHOT_PAGES:  # the committed screenshots exist (refreshed by `make site-screenshots`)
        assert (REPO_ROOT / "docs" / "screenshots" / name).is_file(), name
