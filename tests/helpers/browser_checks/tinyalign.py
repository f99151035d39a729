"""How a visitor drives the tinyalign Space (`hf_ext/tinyalign/demo.py`), for tests/test_spaces_browser.py and
scripts/refresh_space_screenshots.py: `browser_check(page)` fills the inputs, presses the button and asserts on the
output; `browser_check_bad_input(page)` checks that bad input shows a readable message. Test code, not shipped."""


def browser_check(page) -> None:
    """A visitor picks test digit 3 and presses the button: both captions and four neighbours show."""
    from helpers import browser as b

    b.set_number(page, "test digit index (0–239)", 3)
    b.press(page, "Caption with and without retrieval")
    b.expect_cell(page, "tinyalign-captions", "TinyAlign, top-4 retrieval")
    row = b.row_cells(page, "tinyalign-captions", "TinyAlign, top-4 retrieval")
    assert len(row) == 2 and row[1].startswith("a "), row
    b.expect_cell(page, "tinyalign-neighbours", "4")
    assert len(b.row_cells(page, "tinyalign-neighbours", "1")) == 3
    b.expect_image(page, "tinyalign-input")
    from playwright.sync_api import expect

    expect(page.locator("#tinyalign-reading")).to_contain_text("Reading: words matching the reference caption")


def browser_check_bad_input(page) -> None:
    """An index outside the test split: the page names the valid range, not a stack trace."""
    import re

    from helpers import browser as b

    b.set_number(page, "test digit index (0–239)", 1000)
    b.press(page, "Caption with and without retrieval")
    b.expect_readable_error(page, re.compile(r"digit index must be a whole number between 0 and 239"))
