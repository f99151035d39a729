"""The ORCA Space: pick generator settings (or upload a Tenrec QK-article CSV), train the baseline and ORCA on the
same backbone, and compare their CTR × dwell-time heatmaps and metrics."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from hf_ext.core.demo import MAX_FILE_BYTES, check_csv_shape, check_file, check_range, readable_errors, time_limited

# what each number is and which way is better (↑ higher, ↓ lower, ≈ closer to the true share)
METRIC_ROWS = [
    ("moderate_share_pred", "share of predictions in moderate bins 2–5 (≈ true share)"),
    ("moderate_share_true", "true share in moderate bins 2–5"),
    ("js_distance", "JS distance predicted vs true bins ↓"),
    ("pred_entropy_norm", "normalised entropy of predicted bins"),
    ("dt_macro_f1", "DT macro-F1 ↑"),
    ("dt_accuracy", "DT accuracy ↑"),
    ("dt_mae_s", "DT MAE (seconds) ↓"),
    ("ndcg@5", "NDCG@5 per user ↑"),
    ("ctr_auc", "CTR AUC ↑"),
    ("ctr_logloss", "CTR log-loss ↓"),
]
MAX_CSV_ROWS = 200_000  # a Tenrec upload: rows are impressions (the synthetic slider stops at 60,000)
MAX_CSV_COLUMNS = 64


def reading(results: dict[str, dict[str, float]]) -> str:
    """One honest line: does ORCA move the dwell-time predictions toward the truth here, and at what CTR cost."""
    b, o = results["baseline"], results["ORCA"]
    js, f1, auc = o["js_distance"] - b["js_distance"], o["dt_macro_f1"] - b["dt_macro_f1"], o["ctr_auc"] - b["ctr_auc"]
    better = (js < 0) + (f1 > 0)
    verdict = {2: "closer to the true dwell-time distribution than", 1: "mixed against", 0: "not better than"}[better]
    return (f"**Reading:** here ORCA is {verdict} the baseline (JS distance {js:+.3f}, macro-F1 {f1:+.3f}) at a CTR "
            f"AUC change of {auc:+.4f}; one seed and one split, while the README's seed spread is larger than most "
            "single-run differences.")


def compare(
    shortcut_strength: float = 3.0,
    num_impressions: int = 20_000,
    backbone: str = "mmoe",
    epochs: float = 2.0,
    seed: int = 0,
    csv_path: str | None = None,
    progress=None,
) -> tuple[list[list], str, str]:
    """Trains baseline and ORCA on one data set and returns `(metric rows, heatmap PNG path, one-line reading)`.

    Raises `ValueError` with a readable message on bad input (the Space shows it instead of a stack trace).
    """
    from .data import (
        FIELD_NAMES, POST_CLICK_FIELDS, SyntheticOrcaConfig, field_vocab_sizes, generate_synthetic,
        to_model_features, train_val_test_split,
    )
    from .tenrec import load_tenrec_qk_article
    from .metrics import ctr_dt_heatmap
    from .reproduce import OrcaReproduceArguments, evaluate, plot_heatmaps, train_one

    if backbone not in ("mmoe", "ple"):
        raise ValueError(f"backbone must be 'mmoe' or 'ple', got {backbone!r}")
    if not 2_000 <= int(num_impressions) <= 200_000:
        raise ValueError(f"num_impressions must be between 2,000 and 200,000, got {num_impressions}")
    epochs = check_range("epochs", epochs, 1, 5)
    shortcut_strength = check_range("shortcut strength s", shortcut_strength, 0, 3)
    step = progress if progress is not None else (lambda *a, **k: None)
    step(0.05, desc="preparing the data")
    if csv_path:
        check_file(csv_path, MAX_FILE_BYTES, "the CSV")  # 300 MiB uploads used to take 2.9 GB
        check_csv_shape(csv_path, max_rows=MAX_CSV_ROWS, max_columns=MAX_CSV_COLUMNS)
        data = load_tenrec_qk_article(csv_path)
        ds, names, sizes, post_click = data.dataset, data.field_names, data.vocab_sizes, data.post_click_fields
        title = f"uploaded CSV ({len(ds)} rows)"
    else:
        gen = SyntheticOrcaConfig(num_impressions=int(num_impressions), num_users=1000, num_items=600,
                                  shortcut_strength=float(shortcut_strength), seed=int(seed))
        ds, names, sizes, post_click = generate_synthetic(gen), list(FIELD_NAMES), field_vocab_sizes(gen), list(POST_CLICK_FIELDS)
        title = f"synthetic, s = {shortcut_strength:g}"
    splits = train_val_test_split(to_model_features(ds, names, sizes), seed=int(seed))
    test = splits["test"]
    clicked = np.asarray(test["click_labels"]) > 0.5
    if clicked.sum() < 10:
        raise ValueError("the test split has fewer than 10 clicked impressions; use more data")
    run = OrcaReproduceArguments(out=tempfile.mkdtemp(prefix="orca_space_"), epochs=float(epochs))
    results, panels = {}, {}
    if "true_click_prob" in test.column_names:
        panels["ground truth"] = ctr_dt_heatmap(np.asarray(test["true_click_prob"])[clicked],
                                                np.asarray(test["dwell_labels"])[clicked])
    for i, (variant, use_orca) in enumerate((("baseline", False), ("ORCA", True))):
        step(0.1 + 0.4 * i, desc=f"training the {variant} ({backbone}, {epochs:g} epochs)")
        model = train_one(splits, names, sizes, backbone, int(seed), run, use_orca=use_orca,
                          post_click_fields=post_click)
        results[variant], pred = evaluate(model, test)
        panels[f"{backbone} {variant}"] = ctr_dt_heatmap(pred["click_probs"][clicked],
                                                         pred["dt_probs"][clicked].argmax(-1))
    png = Path(run.out) / "heatmaps.png"
    plot_heatmaps(panels, png, f"{title}: clicked test impressions, CTR bucket × DT bin")
    rows = [[label, round(results["baseline"][k], 4), round(results["ORCA"][k], 4)] for k, label in METRIC_ROWS]
    return rows, str(png), reading(results)


def build_demo():
    """The Gradio Blocks of the ORCA Space."""
    import gradio as gr

    def handler(strength, impressions, backbone, epochs, seed, csv_file, progress=gr.Progress()):
        return compare(strength, impressions, backbone, epochs, seed, csv_file, progress=progress)

    # bad input or an overlong request: a readable message in the page, not a stack trace
    run = readable_errors(time_limited(handler, seconds=300), errors=(ValueError, TimeoutError))

    with gr.Blocks(title="ORCA: debiased dwell-time prediction") as demo:
        gr.Markdown(
            "# ORCA — multi-task CTR + dwell time with causal decoupling\n"
            "[arXiv 2508.16573](https://arxiv.org/abs/2508.16573) · hf_ext. Generate impressions with a known "
            "clickbait shortcut (or upload a Tenrec QK-article CSV), train the plain multi-task baseline and ORCA on "
            "the same backbone, and compare where their dwell-time predictions land. Uploads: at most 20 MiB and "
            f"{MAX_CSV_ROWS:,} rows; one request may take up to 5 minutes."
        )
        with gr.Row():
            strength = gr.Slider(0, 3, value=3, step=0.5, label="clickbait shortcut strength s")
            impressions = gr.Slider(2_000, 60_000, value=20_000, step=1_000, label="impressions")
            backbone = gr.Radio(["mmoe", "ple"], value="mmoe", label="backbone")
        with gr.Row():
            epochs = gr.Slider(1, 5, value=2, step=1, label="epochs")
            seed = gr.Number(value=0, precision=0, label="seed")
            csv_file = gr.File(label="optional: Tenrec QK-article CSV", file_types=[".csv"], type="filepath",
                               elem_id="orca-csv")
        gr.Examples(
            examples=[[0, 8_000, "mmoe", 1, 0, None], [3, 8_000, "mmoe", 1, 0, None], [3, 8_000, "ple", 1, 0, None]],
            inputs=[strength, impressions, backbone, epochs, seed, csv_file],
            label="examples: no shortcut, a strong clickbait shortcut (MMoE), the same on PLE",
        )
        button = gr.Button("Train baseline and ORCA", variant="primary")
        table = gr.Dataframe(headers=["metric", "baseline", "ORCA"], label="test metrics (clicked impressions)",
                             elem_id="orca-metrics")
        verdict = gr.Markdown(elem_id="orca-reading")
        image = gr.Image(label="CTR bucket × DT bin heatmaps", type="filepath", elem_id="orca-heatmaps")
        button.click(run, [strength, impressions, backbone, epochs, seed, csv_file], [table, image, verdict],
                     api_name="compare")
    return demo


def browser_check(page) -> None:
    """How a visitor uses the Space (run in headless Chromium by tests/test_spaces_browser.py): small settings,
    press the button, then the metric table and the heatmap image must show."""
    from hf_ext.core import browser as b

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
    from playwright.sync_api import expect

    expect(page.locator("#orca-reading")).to_contain_text("Reading:")


def browser_check_bad_input(page) -> None:
    """A CSV without Tenrec's columns: the page shows which columns are missing, not a stack trace."""
    import re

    from hf_ext.core import browser as b

    bad = Path(tempfile.mkdtemp(prefix="orca_bad_csv_")) / "qk_article.csv"
    bad.write_text("user_id,item_id,click\n1,2,1\n")
    b.set_slider(page, "impressions", 4_000)
    b.set_slider(page, "epochs", 1)
    b.upload(page, "orca-csv", bad)
    b.press(page, "Train baseline and ORCA")
    b.expect_readable_error(page, re.compile(r"missing column\(s\).*read_time"))
