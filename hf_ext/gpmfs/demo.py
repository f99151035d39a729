"""Gradio demo of GPMFS: choose Yeast or upload a CSV, pick a budget and theta, see the global set, each label's set
and held-out ML-kNN metrics against the global-only ablation and all features, as a table, a plot and one honest line.

The published selector of the model repo the Space links (`models:`) is loaded with `from_pretrained` and its global
set shown; offline, the page says so and only the selection fitted here is shown. Caps: uploads ≤ 20 MiB (Gradio
`max_file_size` and a check here), ≤ 2,000 columns and ≤ 100,000 rows (counted before the CSV is parsed), and a
per-request time limit.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740). `build_demo()` only builds the Blocks; nothing launches on import.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hf_ext.core.demo import MAX_FILE_BYTES, check_csv_shape, check_file, check_range, load_linked, time_limited

from .data import MultiLabelData, load_yeast, split_frame
from .metrics import evaluate_all
from .mlknn import MLkNN
from .selector import GPMFSSelector

MAX_CSV_BYTES = MAX_FILE_BYTES
YEAST = "Yeast (MULAN, bundled)"
# column headers: what the number is and which way is better (the paper's seven metrics)
METRIC_HEADERS = {
    "hamming_loss": "Hamming loss ↓",
    "ranking_loss": "ranking loss ↓",
    "one_error": "one-error ↓",
    "coverage": "coverage ↓",
    "average_precision": "average precision ↑",
    "macro_f1": "macro-F1 ↑",
    "micro_f1": "micro-F1 ↑",
}
HIGHER_IS_BETTER = {"average_precision", "macro_f1", "micro_f1"}


def _load(source: str, csv_file: str | None, label_columns: str) -> MultiLabelData:
    if source == YEAST:
        return load_yeast()
    if not csv_file:
        raise ValueError("upload a CSV file, or choose the Yeast dataset")
    import os

    check_file(csv_file, MAX_CSV_BYTES, "the CSV")
    check_csv_shape(csv_file)  # a 10⁶-column CSV is refused here, before pandas parses it
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


def reading(rows: dict[str, dict[str, float]], theta: float) -> str:
    """One honest line: on how many of the seven metrics GPMFS beats its own global-only ablation and all features."""
    names = list(rows)
    gp, glob, full = (rows[n] for n in names)

    def wins(a, b):
        return sum((a[k] > b[k]) if k in HIGHER_IS_BETTER else (a[k] < b[k]) for k in a)

    w_glob, w_full = wins(gp, glob), wins(gp, full)
    if theta >= 1.0:
        return (
            f"**Reading:** theta = 1 is the global-only selection itself; it beats all features on {w_full} of 7 "
            "metrics."
        )
    verdict = "better than" if w_glob >= 5 else ("worse than" if w_glob <= 2 else "mixed against")
    return (
        f"**Reading:** at theta {theta:.2f} GPMFS is {verdict} its own global-only ablation (better on {w_glob} "
        f"of 7 metrics) and better than all features on {w_full} of 7; one 30 % split, so differences of a "
        "few thousandths are noise."
    )


def _plot(rows: dict[str, dict[str, float]]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(METRIC_HEADERS)
    fig, ax = plt.subplots(figsize=(8, 3.2))
    width = 0.8 / len(rows)
    for i, (name, values) in enumerate(rows.items()):
        ax.bar(np.arange(len(keys)) + i * width, [values[k] for k in keys], width, label=name)
    ax.set_xticks(
        np.arange(len(keys)) + width * (len(rows) - 1) / 2,
        [METRIC_HEADERS[k] for k in keys],
        rotation=20,
        ha="right",
        fontsize=8,
    )
    ax.set_ylabel("held-out value")
    ax.legend(fontsize=8)
    ax.set_title("ML-kNN on the selected features (↑ higher is better, ↓ lower is better)", fontsize=9)
    fig.tight_layout()
    return fig


def run_selection(
    source: str, csv_file: str | None, label_columns: str, budget_pct: float, theta: float, seed: int = 0, progress=None
):
    """Like [`select`], but bad input comes back as an `**Error:**` message with empty tables (never a trace)."""
    try:
        return select(source, csv_file, label_columns, budget_pct, theta, seed, progress)
    except (ValueError, TimeoutError) as err:
        return f"**Error:** {err}", pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), None
    except Exception as err:  # noqa: BLE001 - the demo shows a message, not a traceback
        return (
            f"**Unexpected error** ({type(err).__name__}): {err}",
            pd.DataFrame(),
            pd.DataFrame(),
            pd.DataFrame(),
            None,
        )


def select(
    source: str, csv_file: str | None, label_columns: str, budget_pct: float, theta: float, seed: int = 0, progress=None
):
    """Fits GPMFS on a 70 % split and reports the selections and test metrics.

    Args:
        source (`str`): `"Yeast (MULAN, bundled)"` or `"Upload CSV"`.
        csv_file (`str`, *optional*): path of the uploaded CSV (numeric features, 0/1 label columns).
        label_columns (`str`): comma-separated label column names; empty takes the trailing 0/1 columns.
        budget_pct (`float`): features per label, in percent of the number of features.
        theta (`float`): personalisation threshold in [0, 1] (1 = global-only).
        seed (`int`): split seed.
        progress (`gr.Progress`, *optional*): Gradio's progress tracker.

    Returns:
        `(markdown, global_table, per_label_table, metrics_table, plot)`. Raises `ValueError` naming the problem on
        bad input (too large, unreadable, out of range).
    """
    from sklearn.model_selection import train_test_split
    from threadpoolctl import threadpool_limits

    step = progress if progress is not None else (lambda *a, **k: None)
    step(0.05, desc="reading the data")
    data = _load(source, csv_file, label_columns)
    budget_pct = check_range("budget (% of features per label)", budget_pct, 1e-9, 100)
    theta = check_range("theta", theta, 0.0, 1.0)
    budget = max(1, int(round(budget_pct / 100 * data.X.shape[1])))
    Xtr, Xte, Ytr, Yte = train_test_split(data.X, data.Y, test_size=0.3, random_state=seed)
    with threadpool_limits(limits=1):
        step(0.2, desc="fitting GPMFS")
        sel = GPMFSSelector(budget=budget, theta=theta).fit(Xtr, Ytr)
        glob = sel.with_selection(theta=1.0)
        step(0.6, desc="scoring the three selections with ML-kNN")
        rows = {
            f"GPMFS (theta={theta:.2f})": _scores(Xtr, Ytr, Xte, Yte, sel.label_feature_sets()),
            "global-only (theta=1)": _scores(Xtr, Ytr, Xte, Yte, glob.label_feature_sets()),
            "all features": _scores(Xtr, Ytr, Xte, Yte, None),
        }
    names = data.feature_names
    global_table = pd.DataFrame(
        {
            "rank": range(1, len(sel.global_indices_) + 1),
            "feature": [names[i] for i in sel.ranking_[: len(sel.global_indices_)]],
            "row norm of W ↑ (importance)": np.round(sel.feature_importances_[sel.ranking_[:budget]], 4),
        }
    )
    per_label = pd.DataFrame(
        {
            "label": data.label_names,
            "personal features (beyond G)": [", ".join(names[i] for i in p) or "-" for p in sel.personal_indices_],
            "set size (features)": [len(s) for s in sel.label_indices_],
        }
    )
    metrics = pd.DataFrame(rows).T.round(4).rename(columns=METRIC_HEADERS).reset_index(names="selection")
    n, d, q = data.shape
    md = (
        f"**{data.name}**: {n} samples, {d} features, {q} labels; budget {budget} features per label, "
        f"theta {theta:.2f}. Label-specific strength (mean |P_j| / |G|): "
        f"**{sel.label_specific_strength_:.3f}**. Metrics: ML-kNN (k=10) on a 30 % held-out split.\n\n"
        + reading(rows, theta)
    )
    return md, global_table, per_label, metrics, _plot(rows)


def _published_selector():
    """The linked repo's selector (fitted on all of Yeast by `hf-ext reproduce gpmfs`) and a note, or `None`."""
    selector, note = load_linked(
        "gpmfs",
        GPMFSSelector.from_pretrained,
        lambda: None,
        "only the selection fitted on this page (no published selector)",
    )
    if selector is None:
        return note
    names = getattr(selector, "feature_names_in_", None)
    top = [names[i] if names is not None else f"x{i}" for i in selector.global_indices_[:10]]
    return f"{note}. Its global set starts with: {', '.join(map(str, top))}."


def build_demo():
    """The GPMFS Gradio app (`gradio.Blocks`); launch it with `build_demo().launch()`."""
    import gradio as gr

    def handler(source, csv_file, label_columns, budget_pct, theta, progress=gr.Progress()):
        return run_selection(source, csv_file, label_columns, budget_pct, theta, progress=progress)

    handler = time_limited(handler)  # over the limit: TimeoutError, shown by run_selection's message below

    def on_click(source, csv_file, label_columns, budget_pct, theta, progress=gr.Progress()):
        try:
            return handler(source, csv_file, label_columns, budget_pct, theta, progress=progress)
        except TimeoutError as err:
            return f"**Error:** {err}", pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), None

    with gr.Blocks(title="GPMFS multi-label feature selection") as demo:
        gr.Markdown(
            "# GPMFS: global + personalised multi-label feature selection\n"
            "Paper: [arXiv:2504.12740](https://arxiv.org/abs/2504.12740). A global feature set from the "
            "row norms of W, plus per-label features above the threshold theta (theta = 1: global-only). "
            "Uploads: at most 20 MiB, 2,000 columns and 100,000 rows."
        )
        gr.Markdown(_published_selector(), elem_id="gpmfs-model")
        with gr.Row():
            source = gr.Radio([YEAST, "Upload CSV"], value=YEAST, label="data")
            csv_file = gr.File(
                label="CSV (numeric features, 0/1 label columns)",
                file_types=[".csv"],
                type="filepath",
                elem_id="gpmfs-csv",
            )
            label_columns = gr.Textbox(label="label columns (comma-separated; empty = trailing 0/1 columns)")
        with gr.Row():
            budget = gr.Slider(5, 100, value=20, step=5, label="budget (% of features per label)")
            theta = gr.Slider(0.0, 1.0, value=0.5, step=0.05, label="theta")
        gr.Examples(
            examples=[[YEAST, None, "", 20, 0.5], [YEAST, None, "", 20, 1.0], [YEAST, None, "", 10, 0.2]],
            inputs=[source, csv_file, label_columns, budget, theta],
            label="examples: the default, the global-only ablation (theta 1), a small budget with strong "
            "personalisation",
        )
        button = gr.Button("Select features", variant="primary")
        status = gr.Markdown(elem_id="gpmfs-status")
        metrics = gr.Dataframe(
            label="held-out metrics (↑ higher is better, ↓ lower is better)", elem_id="gpmfs-metrics"
        )
        plot = gr.Plot(label="held-out metrics", elem_id="gpmfs-plot")
        with gr.Row():
            global_table = gr.Dataframe(label="global set G", elem_id="gpmfs-global")
            per_label = gr.Dataframe(label="personal features per label")
        button.click(
            on_click, [source, csv_file, label_columns, budget, theta], [status, global_table, per_label, metrics, plot]
        )
    return demo


if __name__ == "__main__":
    from hf_ext.core.demo import launch_kwargs, prepare

    prepare(build_demo()).launch(**launch_kwargs())
