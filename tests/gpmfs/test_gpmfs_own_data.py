"""GPMFS on the user's own feature and label matrices (issue 36): the documented schema, CSV / NumPy / MULAN ARFF
(dense, sparse, label count, XML label file, MEKA's -C), `hf-ext train gpmfs --data` -> `from_pretrained` ->
`hf-ext evaluate gpmfs` (with a baseline selection) -> `hf-ext push --dry-run`, and bad columns failing with one line
naming them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.own_data import check_own_data_path, run_cli

from hf_ext.core.cli import main as cli
from hf_ext.gpmfs.data import SCHEMA, load_multilabel, read_arff, write_example_data
from hf_ext.gpmfs.evaluate import per_sample
from hf_ext.gpmfs.metrics import evaluate_all
from hf_ext.gpmfs.selector import GPMFSSelector

REPO_ROOT = Path(__file__).resolve().parents[2]
METRICS = ("Hamming loss", "ranking loss", "coverage", "average precision", "macro-F1", "micro-F1")


def test_train_evaluate_push_on_a_csv_with_a_baseline(tmp_path):
    data = Path(write_example_data(tmp_path / "data.csv"))
    result = check_own_data_path(
        "gpmfs",
        tmp_path,
        data=data,
        artifact=tmp_path / "sel",
        train_argv=["--data", data, "--budget", "4", "--output_dir", tmp_path / "sel"],
        load=GPMFSSelector.from_pretrained,
        expect_metrics=METRICS,
    )
    record, evaluation = result["record"], result["evaluation"]
    assert {m["name"]: m["value"] for m in evaluation["metrics"]} == pytest.approx(
        {m["name"]: m["value"] for m in record["metrics"]}
    )
    assert record["config"]["data_split"]["labels"] == ["label_0", "label_1", "label_2", "label_3"]  # label_* columns
    assert record["datasets"][0]["rows"] == {"train": 120, "test": 30}
    # the selection is a fit on the training rows only: the same fit in Python on the same split agrees
    user = load_multilabel(data, test=0.2, seed=0)
    ref = GPMFSSelector(budget=4, theta=0.5, seed=0).fit(
        pd.DataFrame(user.train.X, columns=user.train.feature_names), user.train.Y
    )
    np.testing.assert_array_equal(GPMFSSelector.from_pretrained(tmp_path / "sel").global_indices_, ref.global_indices_)

    # baseline: the global foundation alone (theta = 1) on the same split; and ML-kNN on every feature
    run_cli("train", "gpmfs", "--data", data, "--budget", "4", "--theta", "1", "--output_dir", tmp_path / "glob")
    base_record = json.loads((tmp_path / "glob" / "training_record.json").read_text())
    for baseline, base_metrics in ((tmp_path / "glob", base_record["metrics"]), ("all", None)):
        out = tmp_path / "paired.json"
        run_cli(
            "evaluate", "gpmfs", "--model", tmp_path / "sel", "--data", data, "--baseline", baseline, "--output", out
        )
        comparison = json.loads(out.read_text())["comparison"]
        assert comparison["average precision"]["n"] == 30 and comparison["macro-F1"]["method"] == "point"
        if base_metrics is not None:  # mean of per-sample differences = difference of the means
            mine = {m["name"]: m["value"] for m in record["metrics"]}
            theirs = {m["name"]: m["value"] for m in base_metrics}
            for name in ("Hamming loss", "coverage", "average precision"):
                assert comparison[name]["mean"] == pytest.approx(mine[name] - theirs[name])


def test_per_sample_metrics_average_to_the_paper_metrics():
    rng = np.random.default_rng(0)
    Y = rng.integers(0, 2, (40, 5))
    Y[0] = 0  # no relevant label: average precision and ranking loss undefined there
    Y[1] = 1  # every label relevant: ranking loss undefined
    S = rng.random((40, 5))
    full = evaluate_all(Y, (S > 0.5).astype(np.int64), S)
    for key, values in per_sample(Y, S).items():
        assert np.nanmean(values) == pytest.approx(full[key]), key


def test_numpy_and_arff_give_the_csv_data(tmp_path):
    csv = load_multilabel(write_example_data(tmp_path / "d.csv"))
    npz = load_multilabel(write_example_data(tmp_path / "d.npz"))
    arff = load_multilabel(write_example_data(tmp_path / "d.arff"), "4")  # MULAN: the last 4 attributes
    for other in (npz, arff):
        np.testing.assert_allclose(other.train.X, csv.train.X)
        np.testing.assert_array_equal(other.test.Y, csv.test.Y)
        assert other.train.label_names == csv.train.label_names


def test_sparse_arff_xml_labels_and_meka_relation(tmp_path):
    dense = "@relation 'toy: -C -2'\n@attribute a numeric\n@attribute 'b c' numeric\n@attribute y1 {0,1}\n"
    dense += "@attribute y2 {0,1}\n@data\n1,2,0,1\n0,0,1,0\n3,?,1,1\n"
    sparse = dense.replace("@data\n1,2,0,1\n0,0,1,0\n3,?,1,1\n", "@data\n{0 1,1 2,3 1}\n{2 1}\n{0 3,1 ?,2 1,3 1}\n")
    for text in (dense, sparse):
        path = tmp_path / "toy.arff"
        path.write_text(text)
        frame, relation = read_arff(path)
        assert relation == "toy: -C -2" and list(frame.columns) == ["a", "b c", "y1", "y2"]
        np.testing.assert_array_equal(frame[["y1", "y2"]].to_numpy(), [[0, 1], [1, 0], [1, 1]])
        assert frame["a"].tolist() == [1, 0, 3] and np.isnan(frame["b c"][2])
    xml = tmp_path / "toy.xml"
    xml.write_text('<labels xmlns="http://mulan.sourceforge.net/labels"><label name="y1"/><label name="y2"/></labels>')
    path = tmp_path / "big.arff"
    rows = "\n".join(f"{i % 7},{i % 5},{i % 2},{(i // 2) % 2}" for i in range(30))
    path.write_text(dense.split("@data")[0] + "@data\n" + rows + "\n")
    for labels in (None, str(xml), "2", "y1,y2"):  # MEKA's -C -2, the XML file, a count, names
        assert load_multilabel(path, labels).train.label_names == ["y1", "y2"]


@pytest.mark.parametrize(
    "change, flags, needle",
    [
        (lambda f: f.drop(columns=["label_2"]), ["--labels", "label_0,label_2"], "['label_2']"),
        (lambda f: f.assign(f3=["x"] * len(f)), [], "'f3'"),
        (lambda f: f.assign(label_1=f["label_1"] * 2), [], "['label_1']"),
        (lambda f: f.assign(f5=f["f5"].where(f.index != 3)), [], "['f5']"),
    ],
    ids=["missing label column", "text feature", "label not 0/1", "missing feature values"],
)
def test_bad_columns_fail_with_one_line_naming_them(tmp_path, capsys, change, flags, needle):
    path = tmp_path / "d.csv"
    change(pd.read_csv(write_example_data(path))).to_csv(path, index=False)
    rc = cli(["train", "gpmfs", "--data", str(path), "--output_dir", str(tmp_path / "out"), *flags])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("hf-ext train: error:")]
    assert needle in line
    assert not (tmp_path / "out").exists()


def test_docs_page_shows_the_schema_verbatim():
    page = (REPO_ROOT / "docs" / "methods" / "gpmfs.md").read_text()
    assert SCHEMA.to_markdown() in page
