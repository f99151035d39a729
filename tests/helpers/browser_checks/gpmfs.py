"""How a visitor drives the gpmfs Space (`hf_ext/gpmfs/demo.py`), for tests/test_spaces_browser.py and
scripts/refresh_space_screenshots.py: `browser_check(page)` fills the inputs, presses the button and asserts on the
output; `browser_check_bad_input(page)` checks that bad input shows a readable message. Test code, not shipped."""


def browser_check(page) -> None:
    """How a visitor uses the Space (run in headless Chromium by tests/test_spaces_browser.py): Yeast, budget 20 %,
    theta 0.5, press the button, then the summary and the metric and selection tables must show."""
    from playwright.sync_api import expect

    from helpers import browser as b

    b.choose(page, "Yeast (MULAN, bundled)")
    b.set_slider(page, "budget (% of features per label)", 20)
    b.set_slider(page, "theta", 0.5)
    b.press(page, "Select features")
    b.expect_cell(page, "gpmfs-metrics", "GPMFS (theta=0.50)")
    for selection in ("GPMFS (theta=0.50)", "global-only (theta=1)", "all features"):
        cells = b.row_cells(page, "gpmfs-metrics", selection)
        assert len(cells) == 8 and all(float(v) >= 0.0 for v in cells[1:]) and 0 < float(cells[-1]) <= 1, cells
    expect(page.locator("#gpmfs-status")).to_contain_text(
        "2417 samples, 103 features, 14 labels; budget 21 features per label"
    )
    assert b.row_cells(page, "gpmfs-global", "1")[0] == "1"  # the global set G, ranked from 1


def browser_check_bad_input(page) -> None:
    """ "Upload CSV" without a file: the page says what to do, not a stack trace."""
    from helpers import browser as b

    b.choose(page, "Upload CSV")
    b.press(page, "Select features")
    b.expect_readable_error(page, "upload a CSV file, or choose the Yeast dataset")


def browser_check_caps(page, wide_csv) -> None:
    """A CSV with more columns than the cap gets a readable refusal (it used to hang for minutes)."""
    from helpers import browser as b

    b.choose(page, "Upload CSV")
    b.upload(page, "gpmfs-csv", wide_csv)
    b.press(page, "Select features")
    b.expect_readable_error(page, "the Space accepts at most 2000")
