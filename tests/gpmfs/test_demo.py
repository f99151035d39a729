import numpy as np
import pandas as pd

from hf_ext.gpmfs.demo import build_demo, run_selection


def test_build_demo_returns_blocks():
    import gradio as gr

    assert isinstance(build_demo(), gr.Blocks)


def test_csv_upload_runs(tmp_path, small):
    path = tmp_path / "data.csv"
    small.frame().to_csv(path, index=False)
    md, glob, per_label, metrics, plot = run_selection("Upload CSV", str(path), "", 50, 0.3)
    assert "Error" not in md and "Label-specific strength" in md
    assert len(glob) == 6 and list(per_label["label"]) == small.label_names
    assert list(metrics["selection"]) == ["GPMFS (theta=0.30)", "global-only (theta=1)", "all features"]
    assert np.all((metrics["average precision ↑"] >= 0) & (metrics["average precision ↑"] <= 1))
    assert "Reading:" in md and "global-only ablation" in md and plot is not None


def test_errors_are_messages_not_tracebacks(tmp_path, small):
    md, *tables, plot = run_selection("Upload CSV", None, "", 20, 0.5)
    assert md.startswith("**Error:**") and all(t.empty for t in tables) and plot is None
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"a": [1.0, 2.0, 3.0], "y": [0, 2, 1]}).to_csv(bad, index=False)
    assert "label_columns" in run_selection("Upload CSV", str(bad), "", 20, 0.5)[0]
    assert "y must be binary" in run_selection("Upload CSV", str(bad), "y", 20, 0.5)[0]
    path = tmp_path / "data.csv"
    frame = small.frame()
    frame.loc[0, small.feature_names[0]] = np.nan
    frame.to_csv(path, index=False)
    assert "NaN" in run_selection("Upload CSV", str(path), "", 20, 0.5)[0]


def test_caps_refuse_wide_and_long_csv_before_parsing(tmp_path):
    """A 10⁶-column CSV used to hang the Space for minutes; it is refused from its header line."""
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"c{i}" for i in range(5000)) + "\n" + ",".join("0" for _ in range(5000)) + "\n")
    md = run_selection("Upload CSV", str(wide), "", 20, 0.5)[0]
    assert "5000 columns; the Space accepts at most 2000" in md
    long = tmp_path / "long.csv"
    long.write_text("a,y\n" + "1.0,0\n" * 100_001)
    assert (
        "100001 data rows; the Space accepts at most 100000" in run_selection("Upload CSV", str(long), "", 20, 0.5)[0]
    )
    assert "theta must be in [0.0, 1.0]" in run_selection("Yeast (MULAN, bundled)", None, "", 20, 1.5)[0]


def test_reading_says_when_gpmfs_loses_to_its_ablation():
    good = {
        k: 0.5
        for k in ("hamming_loss", "ranking_loss", "one_error", "coverage", "average_precision", "macro_f1", "micro_f1")
    }
    worse = {k: (v - 0.1 if k in ("average_precision", "macro_f1", "micro_f1") else v + 0.1) for k, v in good.items()}
    from hf_ext.gpmfs.demo import reading

    line = reading({"GPMFS": worse, "global-only": good, "all": good}, 0.5)
    assert "worse than its own global-only ablation (better on 0 of 7" in line
