"""How a visitor drives the codebc Space (`hf_ext/codebc/demo.py`), for tests/test_spaces_browser.py and
scripts/refresh_space_screenshots.py: `browser_check(page)` fills the inputs, presses the button and asserts on the
output; `browser_check_bad_input(page)` checks that bad input shows a readable message. Test code, not shipped."""


def browser_check(page) -> None:
    """A visitor asks for a contract with the `bug` tag and sees the code, the compile verdict and Slither's table."""
    import re

    from playwright.sync_api import expect

    from helpers import browser as b

    b.choose(page, "bug")
    b.press(page, "Generate")
    expect(page.locator("#codebc-status")).to_contain_text(re.compile(r"compile"), timeout=b.RESULT_TIMEOUT_MS)
    b.expect_cell(page, "codebc-findings", re.compile(r".+"))


def browser_check_bad_input(page) -> None:
    """An empty requirement: the page says so."""
    import re

    from helpers import browser as b

    page.get_by_label("requirement", exact=True).fill("   ")
    b.press(page, "Generate")
    b.expect_readable_error(page, re.compile(r"requirement is empty"))
