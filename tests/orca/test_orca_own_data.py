"""ORCA on the user's own click log (issue 36): the documented schema, `hf-ext train orca --data` -> `from_pretrained`
-> `hf-ext evaluate orca` (with the baseline) -> `hf-ext push --dry-run`, the encoding of the log, resume, and bad
columns failing before any work with one line naming them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.own_data import check_own_data_path, run_cli

from hf_ext.core.cli import main as cli
from hf_ext.orca.data import CLICK_LOG_SCHEMA, IGNORE_INDEX, bin_dwell_time, encode_click_log, write_example_click_log

REPO_ROOT = Path(__file__).resolve().parents[2]
METRICS = ("DT cross-entropy", "DT macro-F1", "moderate-bin recall", "CTR AUC")
TINY = ["--per_device_train_batch_size", "64", "--disable_tqdm", "true", "--use_cpu", "true", "--report_to", "none"]


def _train(log: Path, out: Path, *extra: str) -> None:
    run_cli("train", "orca", "--data", log, "--output_dir", out, "--num_train_epochs", "1", *TINY, *extra)


def test_train_evaluate_push_on_a_click_log_with_the_baseline(tmp_path):
    from transformers import AutoModel

    log = Path(write_example_click_log(tmp_path / "clicks.csv"))
    out = tmp_path / "orca"
    result = check_own_data_path(
        "orca",
        tmp_path,
        data=log,
        artifact=out / "artifact",
        train_argv=[
            "--data", log, "--output_dir", out, "--num_train_epochs", "1", "--post_click_fields", "category", *TINY,
        ],
        load=lambda path: AutoModel.from_pretrained(path),
        expect_metrics=METRICS,
    )  # fmt: skip
    record, evaluation = result["record"], result["evaluation"]
    # evaluate scores the very rows train held out: the same numbers, not merely the same names
    assert {m["name"]: m["value"] for m in evaluation["metrics"]} == pytest.approx(
        {m["name"]: m["value"] for m in record["metrics"]}
    )
    assert record["datasets"][0]["rows"] == {"train": 320, "validation": 40, "test": 40}
    model = AutoModel.from_pretrained(out / "artifact")
    assert model.config.post_click_fields == ["category"]
    assert model.config.field_names == ["user_id", "item_id", "category", "hour"]  # every column but the labels
    assert model.config.field_values["category"] == ["news", "sport", "tech", "travel"]

    # the plain multi-task baseline on the same data and split; the paired comparison is over the same items
    _train(log, tmp_path / "base", "--use_orca", "false")
    report = tmp_path / "paired.json"
    run_cli("evaluate", "orca", "--model", out, "--data", log, "--baseline", tmp_path / "base", "--output", report)
    paired = json.loads(report.read_text())
    base = json.loads((tmp_path / "base" / "artifact" / "training_record.json").read_text())
    ce = {m["name"]: m["value"] for m in record["metrics"]}["DT cross-entropy"]
    base_ce = {m["name"]: m["value"] for m in base["metrics"]}["DT cross-entropy"]
    diff = paired["comparison"]["DT cross-entropy"]
    assert diff["method"] == "bootstrap" and diff["n"] == int(np.sum(_test_clicks(log)))
    assert diff["mean"] == pytest.approx(ce - base_ce)  # mean of per-item differences = difference of the means
    assert diff["ci_low"] <= diff["mean"] <= diff["ci_high"]
    assert paired["comparison"]["CTR AUC"]["method"] == "point"


def _test_clicks(log: Path) -> np.ndarray:
    """The clicked flags of the held-out rows (the seeded split of `hf_ext.core.user_data.split_data`, seed 42)."""
    from hf_ext.core.user_data import load_user_data, split_data

    return np.asarray(split_data(load_user_data(log), seed=42)["test"]["click"])


def test_encoding_follows_the_documented_conventions():
    import datasets

    table = datasets.Dataset.from_pandas(
        pd.DataFrame(
            {
                "user_id": ["b", "a", "c", "a"],
                "click": [1, 0, 1, 1],
                "dwell_time": [30.0, np.nan, 0.0, 1000.0],
            }
        )
    )
    values = {"user_id": ["a", "b"]}  # "c" was not seen in training
    frame = encode_click_log(table, ["user_id"], values)
    # sorted string values -> ids; an unseen value -> V + 1, the out-of-vocabulary bucket (V is the blocked id)
    assert frame["user_id"] == [1, 0, 3, 0]
    # clicked rows: seconds clipped to [1, 400] (0 -> 1 s), ORCA's bins; unclicked: 0 s and the ignore index
    assert frame["dwell_seconds"] == pytest.approx([30.0, 0.0, 1.0, 400.0])
    assert frame["dwell_bin"] == [int(bin_dwell_time(30.0)), IGNORE_INDEX, 0, 7]


def test_resume_from_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    import shutil

    from safetensors.numpy import load_file, save_file

    log = Path(write_example_click_log(tmp_path / "clicks.csv", num_rows=300))
    steps = ["--max_steps", "4", "--save_strategy", "steps", "--save_steps", "2"]
    _train(log, tmp_path / "full", *steps)
    _train(log, tmp_path / "resumed", *steps, "--resume_from_checkpoint", str(tmp_path / "full" / "checkpoint-2"))
    a = load_file(tmp_path / "full" / "artifact" / "model.safetensors")
    b = load_file(tmp_path / "resumed" / "artifact" / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    # the resumed run really starts from the checkpoint (a fresh run with the same seed would also match above):
    # from an edited copy of checkpoint-2 it ends elsewhere
    edited = tmp_path / "edited"
    shutil.copytree(tmp_path / "full" / "checkpoint-2", edited)
    weights = load_file(edited / "model.safetensors")
    key = next(k for k, v in weights.items() if v.dtype == np.float32 and v.ndim == 2)
    save_file({**weights, key: weights[key] + 0.5}, edited / "model.safetensors", metadata={"format": "pt"})
    _train(log, tmp_path / "from_edited", *steps, "--resume_from_checkpoint", str(edited))
    c = load_file(tmp_path / "from_edited" / "artifact" / "model.safetensors")
    assert not np.array_equal(a[key], c[key])


@pytest.mark.parametrize(
    "change, column",
    [
        (lambda f: f.drop(columns=["dwell_time"]), "dwell_time"),
        (lambda f: f.assign(click=np.where(f["click"] == 1, "yes", "no")), "click"),
        (lambda f: f.assign(click=f["click"] * 2), "click"),
    ],
    ids=["missing dwell_time", "text click", "click not 0/1"],
)
def test_bad_columns_fail_before_training_with_one_line(tmp_path, capsys, change, column):
    log = tmp_path / "clicks.csv"
    change(pd.read_csv(write_example_click_log(log))).to_csv(log, index=False)
    rc = cli(["train", "orca", "--data", str(log), "--output_dir", str(tmp_path / "out"), *TINY])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("hf-ext train: error:")]
    assert repr(column) in line
    assert not (tmp_path / "out" / "artifact").exists()


def test_field_flags_name_columns_the_log_has(tmp_path, capsys):
    log = write_example_click_log(tmp_path / "clicks.csv")
    rc = cli(["train", "orca", "--data", log, "--output_dir", str(tmp_path / "o"), "--field_columns", "item_id,shop"])
    assert rc == 2 and "'shop'" in capsys.readouterr().err
    rc = cli(["train", "orca", "--data", log, "--output_dir", str(tmp_path / "o"), "--post_click_fields", "genre"])
    assert rc == 2 and "--post_click_fields: ['genre']" in capsys.readouterr().err


def test_docs_page_shows_the_schema_verbatim():
    page = (REPO_ROOT / "docs" / "methods" / "orca.md").read_text()
    assert CLICK_LOG_SCHEMA.to_markdown() in page
