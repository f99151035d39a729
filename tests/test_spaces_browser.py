"""Every registered method's Space, used as a visitor would in Debian's headless Chromium (Playwright).

For each method in the registry: launch `build_demo()` from `spaces/<method>/app.py` on 127.0.0.1, open it in a
fresh Chromium, run the method's `browser_check(page)` (fill the inputs, press the button, assert on the output),
save a screenshot under `runs/spaces_browser/<method>.png` (or `$HF_EXT_SCREENSHOT_DIR`), then run its
`browser_check_bad_input(page)` on a fresh page and check a readable message shows instead of a stack trace.
A method without tests/helpers/browser_checks/<name>.py defining both fails here. See tests/helpers/browser.py.

The Spaces run offline (no model repo can load: each shows its small in-code fallback) with the checkout's
`../shared/data` hidden and the work dir (`$HF_EXT_HOME`) pointed at an empty folder, and every file the process
opens while a visitor uses a Space is recorded: a Space that reads `../shared` or `runs/` fails here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import browser

import hf_ext
from hf_ext.core.cli import load_space_app

REPO_ROOT = Path(__file__).resolve().parents[1]

METHODS = [spec.name for spec in hf_ext.list_methods()]
SCREENSHOT_DIR = Path(os.environ.get("HF_EXT_SCREENSHOT_DIR", REPO_ROOT / "runs" / "spaces_browser"))

pytestmark = pytest.mark.timeout(600)


def test_registry_has_spaces():
    assert METHODS, "no registered methods"


@pytest.fixture(scope="module", params=METHODS)
def space(request, tmp_path_factory):
    """`(spec, url, forbidden roots)` of the method's Space, launched once for both checks, with the shared data
    hidden and an empty work dir."""
    from hf_ext.core import paths

    spec = hf_ext.get_method(request.param)
    work = tmp_path_factory.mktemp(f"work_{spec.name}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(paths, "_CHECKOUT", None)  # data_dir() no longer finds ../shared/data
        for var in [v for v in os.environ if v.startswith("HF_EXT_") and v.endswith("_DATA")]:
            mp.delenv(var)
        mp.setenv("HF_EXT_HOME", str(work))
        roots = [REPO_ROOT.parent / "shared", REPO_ROOT / "runs", work]
        with browser.recording_opens() as opened:
            demo = load_space_app(spec).build_demo()
        _assert_self_contained(opened, roots)
        with browser.launched(demo) as url:
            yield spec, url, roots


def _assert_self_contained(opened: list[str], roots) -> None:
    outside = browser.outside_reads(opened, roots)
    assert not outside, f"the Space opened files outside itself (runs/, ../shared or the work dir): {outside[:5]}"


@pytest.fixture
def page(space):
    """A page showing the Space in a fresh headless Chromium (fresh user-data directory)."""
    _, url, _ = space
    with browser.chromium() as context:
        page = browser.open_space(context, url)
        yield page
        page.close()


@pytest.mark.parametrize("name", METHODS)
def test_space_declares_browser_script(name):
    browser.browser_script(hf_ext.get_method(name))  # raises BrowserCheckMissing naming the missing function


def test_space_main_interaction(space, page):
    spec, _, roots = space
    with browser.recording_opens() as opened:
        browser.browser_script(spec)["browser_check"](page)
    browser.assert_no_traceback(page)
    _assert_self_contained(opened, roots)
    shot = browser.save_screenshot(page, SCREENSHOT_DIR / f"{spec.name}.png")
    assert shot.stat().st_size > 10_000


def test_space_bad_input_shows_readable_message(space, page):
    spec, _, roots = space
    with browser.recording_opens() as opened:
        browser.browser_script(spec)["browser_check_bad_input"](page)
    browser.assert_no_traceback(page)
    _assert_self_contained(opened, roots)


def test_space_without_browser_script_fails():
    import dataclasses

    spec = dataclasses.replace(hf_ext.list_methods()[0], name="no_script", demo="hf_ext.core.registry:list_methods")
    with pytest.raises(browser.BrowserCheckMissing, match="browser_check / browser_check_bad_input"):
        browser.browser_script(spec)
