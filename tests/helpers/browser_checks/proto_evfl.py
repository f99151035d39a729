"""How a visitor drives the proto_evfl Space (`hf_ext/proto_evfl/demo.py`), for tests/test_spaces_browser.py and
scripts/refresh_space_screenshots.py: `browser_check(page)` fills the inputs, presses the button and asserts on the
output; `browser_check_bad_input(page)` checks that bad input shows a readable message. Test code, not shipped."""


def browser_check(page) -> None:
    """How a visitor uses the Space (run in headless Chromium by tests/test_spaces_browser.py, offline: the
    in-code fallback): train both models with imbalance ratio 50, class 3 never labelled and 10 rounds in the second
    tab, then predict with the published model in the first; the tables, figures and the fallback note must show."""
    from playwright.sync_api import expect

    from helpers import browser as b

    page.get_by_role("tab", name="Train vanilla VFL vs Proto-EVFL here").click()
    b.set_slider(page, "imbalance ratio of the unaligned pools", 50)
    expect(page.get_by_label("unseen class", exact=True)).to_have_value("3")
    b.set_slider(page, "rounds", 10)
    b.set_number(page, "seed", 0)
    b.press(page, "Train vanilla VFL and Proto-EVFL")
    b.expect_cell(page, "proto-evfl-metrics", "accuracy")
    for metric in ("accuracy", "macro-F1", "unseen-class acc"):
        cells = b.row_cells(page, "proto-evfl-metrics", metric)
        assert len(cells) == 3 and all(0.0 <= float(v) <= 100.0 for v in cells[1:]), cells
    assert float(b.row_cells(page, "proto-evfl-metrics", "accuracy")[2]) > 20.0  # well above chance (10 %)
    b.expect_image(page, "proto-evfl-per-class")
    b.expect_image(page, "proto-evfl-prototypes")
    expect(page.locator("#proto-evfl-reading")).to_contain_text("Reading: on this seed Proto-EVFL is")

    page.get_by_role("tab", name="Published model").click()  # last, so the screenshot shows the first tab
    b.set_slider(page, "digits shown", 6)
    b.press(page, "Predict with the published model")
    b.expect_cell(page, "proto-evfl-linked-metrics", "accuracy")
    expect(page.locator("#proto-evfl-model-source")).to_contain_text("trained here in code")  # the visible note
    acc = b.row_cells(page, "proto-evfl-linked-metrics", "accuracy")
    assert len(acc) == 2 and 0.0 <= float(acc[1]) <= 100.0, acc
    b.expect_image(page, "proto-evfl-digits")
    expect(page.locator("#proto-evfl-linked-reading")).to_contain_text("Reading: this federation labels")


def browser_check_bad_input(page) -> None:
    """A negative seed typed into the seed box: the page says what a seed must be, not a stack trace."""
    from helpers import browser as b

    page.get_by_role("tab", name="Train vanilla VFL vs Proto-EVFL here").click()
    b.set_slider(page, "rounds", 10)
    b.set_number(page, "seed", -1)
    b.press(page, "Train vanilla VFL and Proto-EVFL")
    b.expect_readable_error(page, "seed must be 0 or a positive whole number, got -1")
