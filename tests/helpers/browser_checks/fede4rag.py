"""How a visitor drives the fede4rag Space (`hf_ext/fede4rag/demo.py`), for tests/test_spaces_browser.py and
scripts/refresh_space_screenshots.py: `browser_check(page)` fills the inputs, presses the button and asserts on the
output; `browser_check_bad_input(page)` checks that bad input shows a readable message. Test code, not shipped."""

from hf_ext.fede4rag.demo import EXAMPLE_QUESTIONS


def browser_check(page) -> None:
    """A visitor asks about airplane deliveries and gets a ranked passage list from both retrievers."""
    from playwright.sync_api import expect

    from helpers import browser as b

    page.get_by_label("question", exact=True).fill(EXAMPLE_QUESTIONS[0])
    b.press(page, "Retrieve")
    for elem in ("fede4rag-federated", "fede4rag-zeroshot"):
        b.expect_cell(page, elem, "Altair Aerospace")
        row = b.row_cells(page, elem, "1")
        assert len(row) == 4 and row[1] == "Altair Aerospace", row
    expect(page.locator("#fede4rag-info")).to_contain_text("20 10-K-style passages")
    expect(page.locator("#fede4rag-info")).to_contain_text("Reading:")


def browser_check_bad_input(page) -> None:
    """A question without words: the page says so."""
    import re

    from helpers import browser as b

    page.get_by_label("question", exact=True).fill("?? 123 !!")
    b.press(page, "Retrieve")
    b.expect_readable_error(page, re.compile(r"the question has no words"))
