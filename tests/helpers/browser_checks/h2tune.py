"""How a visitor drives the h2tune Space (`hf_ext/h2tune/demo.py`), for tests/test_spaces_browser.py and
scripts/refresh_space_screenshots.py: `browser_check(page)` fills the inputs, presses the button and asserts on the
output; `browser_check_bad_input(page)` checks that bad input shows a readable message. Test code, not shipped."""


def browser_check(page) -> None:
    """A visitor picks the GPT-2-style client, types a program-output prompt and gets both answers."""
    from playwright.sync_api import expect

    from helpers import browser as b

    b.choose(page, "client-2")
    box = page.get_by_label("prompt", exact=True)
    box.fill("print((3+4)%10)>")
    b.press(page, "Generate")
    b.expect_cell(page, "h2tune-answers", "with federated H2Tune adapter")
    row = b.row_cells(page, "h2tune-answers", "without adapter")
    assert len(row) == 3 and row[2] in ("yes", "no"), row
    expect(page.locator("#h2tune-info")).to_contain_text("gpt2-style decoder")
    expect(page.locator("#h2tune-info")).to_contain_text("Reading:")


def browser_check_bad_input(page) -> None:
    """A prompt with characters the tiny decoders cannot read: the page names them."""
    import re

    from helpers import browser as b

    page.get_by_label("prompt", exact=True).fill("what is 3 + 4?")
    b.press(page, "Generate")
    b.expect_readable_error(page, re.compile(r"unsupported character\(s\)"))
