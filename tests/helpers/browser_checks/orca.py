"""How a visitor drives the orca Space (`hf_ext/orca/demo.py`), for tests/test_spaces_browser.py and
scripts/refresh_space_screenshots.py: `browser_check(page)` fills the inputs, presses the button and asserts on the
output; `browser_check_bad_input(page)` checks that bad input shows a readable message. Test code, not shipped."""

import tempfile
from pathlib import Path


def browser_check(page) -> None:
    """How a visitor uses the Space (run in headless Chromium by tests/test_spaces_browser.py, offline: the
    in-code fallback): train both models on small settings in the second tab, then score the published model with
    the shortcut absent in the first; the metric tables, the heatmaps, the readings and the fallback note must show."""
    from playwright.sync_api import expect

    from helpers import browser as b

    page.get_by_role("tab", name="Train baseline vs ORCA here").click()
    b.set_slider(page, "clickbait shortcut strength s", 3)
    b.set_slider(page, "impressions", 4_000)
    b.set_slider(page, "epochs", 1)
    b.choose(page, "mmoe")
    b.set_number(page, "seed", 0)
    b.press(page, "Train baseline and ORCA")
    b.expect_cell(page, "orca-metrics", "CTR AUC ↑")
    auc = b.row_cells(page, "orca-metrics", "CTR AUC ↑")
    assert len(auc) == 3 and all(0.0 <= float(v) <= 1.0 for v in auc[1:]), auc
    share = b.row_cells(page, "orca-metrics", "true share in moderate bins 2–5")
    assert 0.0 <= float(share[1]) <= 1.0, share
    b.expect_image(page, "orca-heatmaps")
    expect(page.locator("#orca-reading")).to_contain_text("Reading:")

    page.get_by_role("tab", name="Published model").click()  # last, so the screenshot shows the first tab
    b.set_slider(page, "test shortcut strength s", 0)
    b.set_slider(page, "test impressions", 4_000)
    b.press(page, "Score the published model")
    b.expect_cell(page, "orca-linked-metrics", "DT cross-entropy (nats) ↓")
    expect(page.locator("#orca-model-source")).to_contain_text("trained here in code")  # the visible note
    ce = b.row_cells(page, "orca-linked-metrics", "DT cross-entropy (nats) ↓")
    assert len(ce) == 4 and float(ce[1]) > 0 and float(ce[3]) > 0, ce
    b.expect_image(page, "orca-linked-heatmaps")
    expect(page.locator("#orca-linked-reading")).to_contain_text("Reading:")


def browser_check_bad_input(page) -> None:
    """A CSV without Tenrec's columns: the page shows which columns are missing, not a stack trace."""
    import re

    from helpers import browser as b

    bad = Path(tempfile.mkdtemp(prefix="orca_bad_csv_")) / "qk_article.csv"
    bad.write_text("user_id,item_id,click\n1,2,1\n")
    page.get_by_role("tab", name="Train baseline vs ORCA here").click()
    b.set_slider(page, "impressions", 4_000)
    b.set_slider(page, "epochs", 1)
    b.upload(page, "orca-csv", bad)
    b.press(page, "Train baseline and ORCA")
    b.expect_readable_error(page, re.compile(r"missing column\(s\).*read_time"))
