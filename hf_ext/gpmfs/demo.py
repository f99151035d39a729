"""Gradio demo of GPMFS: choose Yeast or upload a CSV, pick a budget and theta, see the global set, each label's set
and held-out ML-kNN metrics against the global-only ablation and all features.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740). `build_demo()` only builds the Blocks; nothing launches on import.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .data import MultiLabelData, load_yeast, split_frame
from .metrics import evaluate_all
from .mlknn import MLkNN
from .selector import GPMFSSelector

MAX_CSV_BYTES = 50 * 2**20


def _load(source: str, csv_file: str | None, label_columns: str) -> MultiLabelData:
    if source == "Yeast (MULAN, bundled)":
        return load_yeast()
    if not csv_file:
        raise ValueError("upload a CSV file, or choose the Yeast dataset")
    import os

    if os.path.getsize(csv_file) > MAX_CSV_BYTES:
        raise ValueError(f"the CSV is larger than {MAX_CSV_BYTES // 2**20} MiB")
    try:
        df = pd.read_csv(csv_file)
    except Exception as err:  # noqa: BLE001 - any parse failure is shown as one message
        raise ValueError(f"could not read the CSV: {err}") from err
    names = [c.strip() for c in label_columns.split(",") if c.strip()] if label_columns else None
    return split_frame(df, names, name=os.path.basename(csv_file))


def _scores(Xtr, Ytr, Xte, Yte, subsets) -> dict[str, float]:
    lo, span = Xtr.min(axis=0), np.ptp(Xtr, axis=0)
    span = np.where(span > 0, span, 1.0)
    S = MLkNN(k=10).fit((Xtr - lo) / span, Ytr, subsets).predict_proba((Xte - lo) / span)
    return evaluate_all(Yte, (S > 0.5).astype(np.int64), S)


def run_selection(source: str, csv_file: str | None, label_columns: str, budget_pct: float, theta: float,
                  seed: int = 0) -> tuple[str, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Fits GPMFS on a 70 % split and reports the selections and test metrics.

    Args:
        source (`str`): `"Yeast (MULAN, bundled)"` or `"Upload CSV"`.
        csv_file (`str`, *optional*): path of the uploaded CSV (numeric features, 0/1 label columns).
        label_columns (`str`): comma-separated label column names; empty takes the trailing 0/1 columns.
        budget_pct (`float`): features per label, in percent of the number of features.
        theta (`float`): personalisation threshold in [0, 1] (1 = global-only).
        seed (`int`): split seed.

    Returns:
        `(markdown, global_table, per_label_table, metrics_table)`; on bad input the markdown holds the error and
        the tables are empty (never a stack trace).
    """
    from sklearn.model_selection import train_test_split
    from threadpoolctl import threadpool_limits

    empty = pd.DataFrame()
    try:
        data = _load(source, csv_file, label_columns)
        if not 0 < float(budget_pct) <= 100:
            raise ValueError(f"budget must be in (0, 100] percent, got {budget_pct}")
        budget = max(1, int(round(float(budget_pct) / 100 * data.X.shape[1])))
        Xtr, Xte, Ytr, Yte = train_test_split(data.X, data.Y, test_size=0.3, random_state=seed)
        with threadpool_limits(limits=1):
            sel = GPMFSSelector(budget=budget, theta=float(theta)).fit(Xtr, Ytr)
            glob = sel.with_selection(theta=1.0)
            rows = {"GPMFS (theta=%.2f)" % float(theta): _scores(Xtr, Ytr, Xte, Yte, sel.label_feature_sets()),
                    "global-only (theta=1)": _scores(Xtr, Ytr, Xte, Yte, glob.label_feature_sets()),
                    "all features": _scores(Xtr, Ytr, Xte, Yte, None)}
    except ValueError as err:
        return f"**Error:** {err}", empty, empty, empty
    except Exception as err:  # noqa: BLE001 - the demo shows a message, not a traceback
        return f"**Unexpected error** ({type(err).__name__}): {err}", empty, empty, empty
    names = data.feature_names
    global_table = pd.DataFrame({"rank": range(1, len(sel.global_indices_) + 1),
                                 "feature": [names[i] for i in sel.ranking_[: len(sel.global_indices_)]],
                                 "row norm": np.round(sel.feature_importances_[sel.ranking_[: budget]], 4)})
    per_label = pd.DataFrame({
        "label": data.label_names,
        "personal features": [", ".join(names[i] for i in p) or "-" for p in sel.personal_indices_],
        "size": [len(s) for s in sel.label_indices_],
    })
    metrics = pd.DataFrame(rows).T.round(4).reset_index(names="selection")
    n, d, q = data.shape
    md = (f"**{data.name}**: {n} samples, {d} features, {q} labels; budget {budget} features per label, "
          f"theta {float(theta):.2f}. Label-specific strength (mean |P_j| / |G|): "
          f"**{sel.label_specific_strength_:.3f}**. Metrics: ML-kNN (k=10) on a 30 % held-out split.")
    return md, global_table, per_label, metrics


def build_demo():
    """The GPMFS Gradio app (`gradio.Blocks`); launch it with `build_demo().launch()`."""
    import gradio as gr

    with gr.Blocks(title="GPMFS multi-label feature selection") as demo:
        gr.Markdown("# GPMFS: global + personalised multi-label feature selection\n"
                    "Paper: [arXiv:2504.12740](https://arxiv.org/abs/2504.12740). A global feature set from the "
                    "row norms of W, plus per-label features above the threshold theta (theta = 1: global-only).")
        with gr.Row():
            source = gr.Radio(["Yeast (MULAN, bundled)", "Upload CSV"], value="Yeast (MULAN, bundled)",
                              label="data")
            csv_file = gr.File(label="CSV (numeric features, 0/1 label columns)", file_types=[".csv"],
                               type="filepath")
            label_columns = gr.Textbox(label="label columns (comma-separated; empty = trailing 0/1 columns)")
        with gr.Row():
            budget = gr.Slider(5, 100, value=20, step=5, label="budget (% of features per label)")
            theta = gr.Slider(0.0, 1.0, value=0.5, step=0.05, label="theta")
        button = gr.Button("Select features", variant="primary")
        status = gr.Markdown(elem_id="gpmfs-status")
        metrics = gr.Dataframe(label="held-out metrics", elem_id="gpmfs-metrics")
        with gr.Row():
            global_table = gr.Dataframe(label="global set G", elem_id="gpmfs-global")
            per_label = gr.Dataframe(label="personal features per label")
        button.click(run_selection, [source, csv_file, label_columns, budget, theta],
                     [status, global_table, per_label, metrics])
    return demo


def browser_check(page) -> None:
    """How a visitor uses the Space (run in headless Chromium by tests/test_spaces_browser.py): Yeast, budget 20 %,
    theta 0.5, press the button, then the summary and the metric and selection tables must show."""
    from playwright.sync_api import expect

    from hf_ext.core import browser as b

    b.choose(page, "Yeast (MULAN, bundled)")
    b.set_slider(page, "budget (% of features per label)", 20)
    b.set_slider(page, "theta", 0.5)
    b.press(page, "Select features")
    b.expect_cell(page, "gpmfs-metrics", "GPMFS (theta=0.50)")
    for selection in ("GPMFS (theta=0.50)", "global-only (theta=1)", "all features"):
        cells = b.row_cells(page, "gpmfs-metrics", selection)
        assert len(cells) == 8 and all(float(v) >= 0.0 for v in cells[1:]) and 0 < float(cells[-1]) <= 1, cells
    expect(page.locator("#gpmfs-status")).to_contain_text(
        "2417 samples, 103 features, 14 labels; budget 21 features per label")
    assert b.row_cells(page, "gpmfs-global", "1")[0] == "1"  # the global set G, ranked from 1


def browser_check_bad_input(page) -> None:
    """"Upload CSV" without a file: the page says what to do, not a stack trace."""
    from hf_ext.core import browser as b

    b.choose(page, "Upload CSV")
    b.press(page, "Select features")
    b.expect_readable_error(page, "upload a CSV file, or choose the Yeast dataset")


if __name__ == "__main__":
    build_demo().launch()
