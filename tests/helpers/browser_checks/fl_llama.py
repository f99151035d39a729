"""How a visitor drives the fl_llama Space (`hf_ext/fl_llama/demo.py`), for tests/test_spaces_browser.py and
scripts/refresh_space_screenshots.py: `browser_check(page)` fills the inputs, presses the button and asserts on the
output; `browser_check_bad_input(page)` checks that bad input shows a readable message. Test code, not shipped."""


def browser_check(page) -> None:
    """How a visitor uses the Space: a = 2, c = 1, no noise, 16 tokens; the traffic table must show that the cached
    run sent far fewer client bytes than the no-cache run, and both produced the same tokens."""
    from helpers import browser as b

    b.set_slider(page, "a (client input blocks)", 2)
    b.set_slider(page, "tokens to generate", 16)
    b.press(page, "Generate through the split model")
    b.expect_cell(page, "fl-llama-bytes", "with KV caches")
    cached = b.row_cells(page, "fl-llama-bytes", "with KV caches")
    resent = b.row_cells(page, "fl-llama-bytes", "no cache (prefix resent)")
    assert cached[-1] == "yes" and resent[-1] == "yes", (cached, resent)
    assert int(resent[1].replace(",", "")) > 3 * int(cached[1].replace(",", "")), (cached, resent)
    from playwright.sync_api import expect

    expect(page.locator("#fl-llama-reading")).to_contain_text("Reading: with KV caches the client sent")


def browser_check_bad_input(page) -> None:
    """a = 3 and c = 3 leave the 6-layer server nothing: the page says so, not a stack trace."""
    from helpers import browser as b

    b.set_slider(page, "a (client input blocks)", 3)
    b.set_slider(page, "c (client output blocks)", 3)
    b.press(page, "Generate through the split model")
    b.expect_readable_error(page, "a + c must be less than the 6 layers")
