"""How a visitor drives the amplitudes Space (`hf_ext/amplitudes/demo.py`), for tests/test_spaces_browser.py and
scripts/refresh_space_screenshots.py: `browser_check(page)` fills the inputs, presses the button and asserts on the
output; `browser_check_bad_input(page)` checks that bad input shows a readable message. Test code, not shipped."""

from hf_ext.amplitudes.demo import DEFAULT_X


def browser_check(page) -> None:
    """How a visitor uses the Space (run in headless Chromium by tests/test_spaces_browser.py): N = 4, scan α′ from
    0.01 to 3, press Plot, then the plot image and the summary (string ≈ field theory at small α′) must show."""
    import re

    from playwright.sync_api import expect

    from helpers import browser as b

    b.choose(page, "4")
    box = page.locator("#amplitudes-x textarea")
    # the N = 4 default, filled in by the radio's change event (a server round trip: slow on a loaded machine)
    expect(box).to_have_value(DEFAULT_X[4], timeout=b.ACTION_TIMEOUT_MS)
    box.fill("0.7, 1.3")
    b.choose(page, "closed_form")
    b.set_number(page, "from", 0.01)
    b.set_number(page, "to", 3)
    b.press(page, "Plot")
    summary = page.locator("#amplitudes-summary")
    expect(summary).to_contain_text("N = 4; at the smallest α′ = 0.01", timeout=b.RESULT_TIMEOUT_MS)
    number = r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"
    found = re.search(rf"string {number}, field theory {number}", summary.inner_text())
    assert found, summary.inner_text()
    string, field = float(found[1]), float(found[2])
    assert abs(string - field) < 0.01 * abs(field), (string, field)  # α′ → 0: the field-theory limit
    b.expect_image(page, "amplitudes-plot")


def browser_check_bad_input(page) -> None:
    """Two planar variables for N = 5: the page says how many are needed, not a stack trace."""
    from helpers import browser as b

    b.choose(page, "5")
    page.locator("#amplitudes-x textarea").fill("0.9, 1.7")
    b.press(page, "Plot")
    b.expect_readable_error(page, "N = 5 needs 5 planar variables (X13, X14, X24, X25, X35), got 2")
