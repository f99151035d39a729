"""Every registered method's Space, used as a visitor would in Debian's headless Chromium (Playwright).

For each method in the registry: launch `build_demo()` from `spaces/<method>/app.py` on 127.0.0.1, open it in a
fresh Chromium, run the method's `browser_check(page)` (fill the inputs, press the button, assert on the output),
save a screenshot under `runs/spaces_browser/<method>.png` (or `$HF_EXT_SCREENSHOT_DIR`), then run its
`browser_check_bad_input(page)` on a fresh page and check a readable message shows instead of a stack trace.
A method whose demo module lacks either function fails here. See hf_ext/core/browser.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import hf_ext
from hf_ext.core import browser
from hf_ext.core.cli import load_space_app

REPO_ROOT = Path(__file__).resolve().parents[1]

METHODS = [spec.name for spec in hf_ext.list_methods()]
SCREENSHOT_DIR = Path(os.environ.get("HF_EXT_SCREENSHOT_DIR", REPO_ROOT / "runs" / "spaces_browser"))

pytestmark = pytest.mark.timeout(600)


def test_registry_has_spaces():
    assert METHODS, "no registered methods"


@pytest.fixture(scope="module", params=METHODS)
def space(request):
    """`(spec, url)` of the method's Space, launched once for both checks."""
    spec = hf_ext.get_method(request.param)
    with browser.launched(load_space_app(spec).build_demo()) as url:
        yield spec, url


@pytest.fixture
def page(space):
    """A page showing the Space in a fresh headless Chromium (fresh user-data directory)."""
    _, url = space
    with browser.chromium() as context:
        page = browser.open_space(context, url)
        yield page
        page.close()


@pytest.mark.parametrize("name", METHODS)
def test_space_declares_browser_script(name):
    browser.browser_script(hf_ext.get_method(name))  # raises BrowserCheckMissing naming the missing function


def test_space_main_interaction(space, page):
    spec, _ = space
    browser.browser_script(spec)["browser_check"](page)
    browser.assert_no_traceback(page)
    shot = browser.save_screenshot(page, SCREENSHOT_DIR / f"{spec.name}.png")
    assert shot.stat().st_size > 10_000


def test_space_bad_input_shows_readable_message(space, page):
    spec, _ = space
    browser.browser_script(spec)["browser_check_bad_input"](page)
    browser.assert_no_traceback(page)


def test_space_without_browser_script_fails():
    import dataclasses

    spec = dataclasses.replace(hf_ext.list_methods()[0], name="no_script", demo="hf_ext.core.registry:list_methods")
    with pytest.raises(browser.BrowserCheckMissing, match="browser_check / browser_check_bad_input"):
        browser.browser_script(spec)
