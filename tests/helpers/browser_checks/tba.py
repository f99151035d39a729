"""How a visitor drives the tba Space (`hf_ext/tba/demo.py`), for tests/test_spaces_browser.py and
scripts/refresh_space_screenshots.py: `browser_check(page)` fills the inputs, presses the button and asserts on the
output; `browser_check_bad_input(page)` checks that bad input shows a readable message. Test code, not shipped."""

from hf_ext.tba.demo import LINF, SHIFT


def browser_check(page) -> None:
    """How a visitor uses the Space (run in headless Chromium by tests/test_spaces_browser.py): eps 8/255, TBA with
    5 steps on the first example; the three images and the metric table must show, with the perturbation inside
    the budget."""
    from helpers import browser as b

    b.set_number(page, "eps (x/255)", 8)
    b.choose(page, "TBA")
    b.set_slider(page, "steps", 5)
    b.press(page, "Attack")
    from playwright.sync_api import expect

    b.expect_cell(page, "tba-metrics", SHIFT)
    linf = float(b.row_cells(page, "tba-metrics", LINF)[1])
    assert 0 < linf <= 8.0 + 1e-3, linf
    assert float(b.row_cells(page, "tba-metrics", SHIFT)[1]) > 0
    expect(page.locator("#tba-reading")).to_contain_text("Reading: TBA moved the predicted joints by")
    for elem in ("tba-clean", "tba-delta", "tba-adv"):
        b.expect_image(page, elem)


def browser_check_bad_input(page) -> None:
    """An eps of 0 typed into the budget box: the page says what eps must be, not a stack trace."""
    from helpers import browser as b

    b.set_number(page, "eps (x/255)", 0)
    b.press(page, "Attack")
    b.expect_readable_error(page, "eps (the L-infinity budget) must be > 0, got 0/255")
