"""Drive a method's Gradio Space in a real browser: Debian's headless Chromium through Playwright's Python package.

Each registered method declares how a visitor uses its Space with two module-level functions in the module that
defines its demo (the module part of `MethodSpec.demo`, e.g. `hf_ext.orca.demo`):

- `browser_check(page) -> None`: fill the inputs, press the button, wait for the output and assert on what the page
  shows (a table cell's value, a loaded image, the generated text). The screenshot is taken right after it returns.
- `browser_check_bad_input(page) -> None`: give one bad input and assert that a readable message appears in the page
  (use [`expect_readable_error`]); no stack trace may show.

`page` is a Playwright `Page` already showing the Space. The helpers below cover the usual Gradio components; a
script may also use Playwright's API directly. `tests/test_spaces_browser.py` runs both functions for every
registered method (a method without them fails) and `scripts/refresh_space_screenshots.py` writes
`docs/spaces/<method>.png` with the same code.

No browser is ever downloaded: Chromium is Debian's (`apt-get install chromium chromium-driver`, done by
`make install` / `make test`), started with [`CHROMIUM_FLAGS`] and a fresh user-data directory.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Locator, Page

    from hf_ext.core.registry import MethodSpec

CHROMIUM_PATH = "/usr/bin/chromium"
"""Debian's Chromium; `HF_EXT_CHROMIUM` overrides it."""

CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

ACTION_TIMEOUT_MS = 30_000
"""Default for clicks, fills and page-level waits."""
UPLOAD_TIMEOUT_MS = 90_000
"""Wait for an upload to show in its File block (the server copies and hashes the file; slow on a loaded machine)."""

RESULT_TIMEOUT_MS = 240_000
"""How long a Space may compute before its output must be on the page (training on two shared CPU cores)."""

VIEWPORT = {"width": 1280, "height": 900}

CHECK_FUNCTIONS: tuple[str, ...] = ("browser_check", "browser_check_bad_input")

TRACEBACK_MARKERS: tuple[str, ...] = ("Traceback",)  # Python's "Traceback (most recent call last)"

_NOT_LOCAL = re.compile(r"^(?!(?:https?|wss?)://(?:127\.0\.0\.1|localhost)[:/]).+://")


class BrowserCheckMissing(LookupError):
    """A registered method's Space does not say how a visitor drives it."""


def chromium_path() -> str:
    """Path of Debian's Chromium; raises a readable error with the install command when it is missing."""
    path = os.environ.get("HF_EXT_CHROMIUM", CHROMIUM_PATH)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise FileNotFoundError(
            f"no Chromium at {path}; install Debian's: `apt-get update && apt-get install -y "
            f"--no-install-recommends chromium chromium-driver` (`make install` does it), or set HF_EXT_CHROMIUM"
        )
    return path


# Paths opened for reading while [`recording_opens`] is active, from any thread (a Space answers in Gradio's
# worker threads).
_OPENS: list[list[str]] = []
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND


def _is_read(mode, flags) -> bool:
    if isinstance(mode, str):
        return not any(c in mode for c in "wax+")
    return isinstance(flags, int) and not flags & _WRITE_FLAGS


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _OPENS and isinstance(args[0], (str, bytes, os.PathLike)) and _is_read(*args[1:3]):
        for record in _OPENS:
            record.append(os.fsdecode(args[0]))


@contextlib.contextmanager
def recording_opens() -> Iterator[list[str]]:
    """Yields a list that collects every path Python opens for reading until the block ends (an audit hook on
    `open`: it sees `open()`, `pathlib`, `io`, `os.open` and C extensions that go through Python's file API).
    Used to check that a Space reads nothing outside itself (`runs/`, `../shared`); writes (a cache filled on
    first use) are not recorded."""
    import sys

    if not getattr(_audit, "installed", False):  # an audit hook cannot be removed: install it once
        sys.addaudithook(_audit)
        _audit.installed = True
    record: list[str] = []
    _OPENS.append(record)
    try:
        yield record
    finally:
        _OPENS.remove(record)


def outside_reads(opened: list[str], roots: list[str | os.PathLike]) -> list[str]:
    """The paths of `opened` that lie under one of `roots` (resolved, so `../shared` and symlinks count)."""
    resolved = [Path(r).resolve() for r in roots]
    hits = []
    for path in opened:
        try:
            real = Path(path).resolve()
        except (OSError, RuntimeError):
            continue
        if any(real == root or root in real.parents for root in resolved):
            hits.append(path)
    return sorted(set(hits))


@contextlib.contextmanager
def chromium(viewport: dict[str, int] | None = None) -> Iterator[BrowserContext]:
    """Starts headless Chromium with [`CHROMIUM_FLAGS`] and a fresh user-data directory (removed afterwards).

    Yields a Playwright `BrowserContext`; open pages with `context.new_page()` or [`open_space`].
    """
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    user_data_dir = tempfile.mkdtemp(prefix="hf_ext_chromium_")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                user_data_dir,
                executable_path=executable,
                headless=True,
                args=list(CHROMIUM_FLAGS),
                viewport=viewport or VIEWPORT,
                device_scale_factor=1,
                locale="en-US",
                timezone_id="UTC",
                reduced_motion="reduce",
            )
            # Hermetic: the Space is local; any other host (fonts, CDNs, telemetry) is refused at once.
            context.route(_NOT_LOCAL, lambda route: route.abort())
            context.set_default_timeout(ACTION_TIMEOUT_MS)
            context.set_default_navigation_timeout(ACTION_TIMEOUT_MS)
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(user_data_dir, ignore_errors=True)


@contextlib.contextmanager
def launched(demo: Any) -> Iterator[str]:
    """Launches a `gradio.Blocks` on 127.0.0.1 (a free port) without blocking; yields its URL, closes it after."""
    _, url, _ = demo.launch(
        server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True, share=False
    )
    try:
        yield url
    finally:
        demo.close()


def open_space(context: BrowserContext, url: str) -> Page:
    """Opens the Space in a new page and waits until Gradio has rendered it."""
    from playwright.sync_api import expect

    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    expect(page.locator(".gradio-container").first).to_be_visible(timeout=ACTION_TIMEOUT_MS)
    # Gradio renders its components after fetching the config; wait for the first button a visitor could press.
    expect(page.locator(".gradio-container button").first).to_be_visible(timeout=ACTION_TIMEOUT_MS)
    return page


def browser_script(spec: MethodSpec) -> dict[str, Callable[[Page], None]]:
    """The method's `browser_check` / `browser_check_bad_input`, from `tests/helpers/browser_checks/<name>.py`.

    Test code, not shipped in the wheel. Raises [`BrowserCheckMissing`] naming what to add when either is missing.
    """
    module_name = f"helpers.browser_checks.{spec.name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name:
            raise
        module = None
    found = {name: getattr(module, name, None) for name in CHECK_FUNCTIONS}
    missing = [name for name, fn in found.items() if not callable(fn)]
    if missing:
        raise BrowserCheckMissing(
            f"{spec.name}: {module_name} defines no {' / '.join(missing)}(page); every Space declares how a visitor "
            f"drives it (see tests/helpers/browser.py and tests/helpers/browser_checks/orca.py)"
        )
    return found


def page_text(page: Page) -> str:
    return page.locator("body").inner_text()


def assert_no_traceback(page: Page) -> None:
    text = page_text(page)
    for marker in TRACEBACK_MARKERS:
        assert marker not in text, f"the page shows a stack trace:\n{text[-2000:]}"


def save_screenshot(page: Page, path: str | os.PathLike) -> Path:
    """A full-page PNG of the Space (animations off, caret hidden)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True, animations="disabled", caret="hide")
    return path


def run_space(
    spec: MethodSpec,
    check: str = "browser_check",
    screenshot: str | os.PathLike | None = None,
    context: BrowserContext | None = None,
) -> Path | None:
    """Launches the method's Space, opens it in Chromium, runs one of its browser scripts, checks no stack trace
    shows and optionally saves a screenshot. Returns the screenshot path."""
    from hf_ext.core.cli import load_space_app

    script = browser_script(spec)[check]
    demo = load_space_app(spec).build_demo()
    with launched(demo) as url, contextlib.nullcontext(context) if context else chromium() as ctx:
        page = open_space(ctx, url)
        try:
            script(page)
            assert_no_traceback(page)
            return save_screenshot(page, screenshot) if screenshot else None
        finally:
            page.close()


# --- helpers for browser scripts --------------------------------------------------------------------------------


def set_slider(page: Page, label: str, value: float) -> None:
    """Types `value` into the number box of the Gradio slider labelled `label` (as a visitor would) and checks
    the slider took it."""
    from playwright.sync_api import expect

    box = page.get_by_label(f"number input for {label}", exact=True)
    box.fill(_fmt(value))
    box.press("Enter")
    box.blur()
    expect(page.get_by_label(f"range slider for {label}", exact=True)).to_have_value(_fmt(value))


def set_number(page: Page, label: str, value: float) -> None:
    """Types `value` into the Gradio Number labelled `label`."""
    from playwright.sync_api import expect

    box = page.get_by_role("spinbutton", name=label, exact=True)
    box.fill(_fmt(value))
    box.press("Enter")
    box.blur()
    expect(box).to_have_value(_fmt(value))


def choose(page: Page, option: str) -> None:
    """Picks the radio option `option`."""
    from playwright.sync_api import expect

    radio = page.get_by_role("radio", name=option, exact=True)
    radio.check()
    expect(radio).to_be_checked()


def upload(page: Page, elem_id: str, path: str | os.PathLike) -> None:
    """Uploads `path` through the Gradio File with `elem_id` and waits until the file shows as uploaded."""
    from playwright.sync_api import expect

    block = page.locator(f"#{elem_id}")
    shown = block.get_by_text(Path(path).name).first
    # Up to three tries: once under load (two xdist workers), ORCA's upload right after a tab switch never showed
    # the file in 90 s and a rerun passed, so the browser's change event can be lost; choosing the file again
    # recovers that, while an upload that never works still fails after the third try.
    for attempt in range(3):
        block.locator("input[type=file]").set_input_files(str(path))
        try:
            expect(shown).to_be_visible(timeout=UPLOAD_TIMEOUT_MS // 3)
            return
        except AssertionError:
            if attempt == 2:
                raise


def press(page: Page, button: str) -> None:
    """Clicks the button whose text is `button`."""
    page.get_by_role("button", name=button, exact=True).click()


def expect_cell(page: Page, elem_id: str, text: str | re.Pattern) -> Locator:
    """Waits (up to [`RESULT_TIMEOUT_MS`]) for a cell of the Gradio Dataframe `elem_id` showing `text` (a string
    matches the whole cell)."""
    from playwright.sync_api import expect

    cell = page.locator(f"#{elem_id}").get_by_role("gridcell", name=text, exact=isinstance(text, str)).first
    expect(cell).to_be_visible(timeout=RESULT_TIMEOUT_MS)
    return cell


def row_cells(page: Page, elem_id: str, first_cell: str) -> list[str]:
    """The texts of the visible Dataframe row whose first cell is exactly `first_cell`."""
    from playwright.sync_api import expect

    first = page.locator('[role=gridcell][aria-colindex="1"]').filter(has=page.get_by_text(first_cell, exact=True))
    row = page.locator(f"#{elem_id}").get_by_role("row").filter(has=first).first
    expect(row).to_be_visible()
    return [t.strip() for t in row.get_by_role("gridcell").all_inner_texts()]


def expect_image(page: Page, elem_id: str) -> Locator:
    """Waits (up to [`RESULT_TIMEOUT_MS`]) for a loaded, non-empty `<img>` inside the component `elem_id`."""
    from playwright.sync_api import expect

    img = page.locator(f"#{elem_id} img").first
    expect(img).to_be_visible(timeout=RESULT_TIMEOUT_MS)
    page.wait_for_function(
        "img => img.complete && img.naturalWidth > 0 && img.naturalHeight > 0",
        arg=img.element_handle(),
        timeout=ACTION_TIMEOUT_MS,
    )
    return img


def expect_readable_error(page: Page, message: str | re.Pattern) -> Locator:
    """Waits (up to [`RESULT_TIMEOUT_MS`]) for `message` in the page (a Gradio error toast or the Space's own
    message) and asserts that no stack trace shows."""
    from playwright.sync_api import expect

    shown = page.get_by_text(message).first
    expect(shown).to_be_visible(timeout=RESULT_TIMEOUT_MS)
    assert_no_traceback(page)
    return shown


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
