import numpy as np
import pandas as pd

from hf_ext.gpmfs.demo import build_demo, run_selection


def test_build_demo_returns_blocks():
    import gradio as gr

    assert isinstance(build_demo(), gr.Blocks)


def test_csv_upload_runs(tmp_path, small):
    path = tmp_path / "data.csv"
    small.frame().to_csv(path, index=False)
    md, glob, per_label, metrics = run_selection("Upload CSV", str(path), "", 50, 0.3)
    assert "Error" not in md and "Label-specific strength" in md
    assert len(glob) == 6 and list(per_label["label"]) == small.label_names
    assert list(metrics["selection"]) == ["GPMFS (theta=0.30)", "global-only (theta=1)", "all features"]
    assert np.all((metrics["average_precision"] >= 0) & (metrics["average_precision"] <= 1))


def test_errors_are_messages_not_tracebacks(tmp_path, small):
    md, *tables = run_selection("Upload CSV", None, "", 20, 0.5)
    assert md.startswith("**Error:**") and all(t.empty for t in tables)
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"a": [1.0, 2.0, 3.0], "y": [0, 2, 1]}).to_csv(bad, index=False)
    assert "label_columns" in run_selection("Upload CSV", str(bad), "", 20, 0.5)[0]
    assert "y must be binary" in run_selection("Upload CSV", str(bad), "y", 20, 0.5)[0]
    path = tmp_path / "data.csv"
    frame = small.frame()
    frame.loc[0, small.feature_names[0]] = np.nan
    frame.to_csv(path, index=False)
    assert "NaN" in run_selection("Upload CSV", str(path), "", 20, 0.5)[0]
