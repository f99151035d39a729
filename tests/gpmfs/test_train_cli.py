"""`hf-ext train gpmfs` (alias `hf-ext gpmfs fit`) on a small CSV: the artifact it writes loads and selects what
the report says."""

import json

import numpy as np
import pandas as pd
import pytest

from hf_ext.gpmfs.data import load_multilabel
from hf_ext.gpmfs.selector import GPMFSSelector
from hf_ext.gpmfs.train import cli, main, parse_budget


@pytest.fixture
def csv_path(small, tmp_path):
    frame = small.frame()
    frame.insert(3, "note_id", np.arange(len(frame)))  # a numeric non-label column in the middle stays a feature
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    return path


def test_fit_writes_a_loadable_artifact_and_a_report(small, csv_path, tmp_path):
    out = tmp_path / "sel"
    report = main(
        [
            "--csv",
            str(csv_path),
            "--labels",
            ",".join(small.label_names),
            "--budget",
            "5",
            "--theta",
            "0.3",
            "--output",
            str(out),
        ]
    )
    sel = GPMFSSelector.from_pretrained(out)
    assert sel.budget_ == 5 and sel.theta == 0.3 and sel.n_labels_ == len(small.label_names)
    saved = json.loads((out / "selection.json").read_text())
    assert saved == json.loads(json.dumps(report))
    names = list(sel.feature_names_in_)
    assert "note_id" in names
    for j, label in enumerate(small.label_names):
        assert saved["label_features"][label] == [names[i] for i in sel.label_indices_[j]]
    # the same fit in Python on the same training rows (the seeded 80 % split) gives the same selection
    user = load_multilabel(csv_path, ",".join(small.label_names), test=0.2, seed=0)
    assert saved["n_samples"] == len(user.train.X) == round(0.8 * len(small.X))
    ref = GPMFSSelector(budget=5, theta=0.3).fit(
        pd.DataFrame(user.train.X, columns=user.train.feature_names), user.train.Y
    )
    np.testing.assert_array_equal(ref.global_indices_, sel.global_indices_)
    # trailing 0/1 columns are the labels by default, and a second fit replaces the artifact whole
    main(["--csv", str(csv_path), "--budget", "30%", "--output", str(out)])
    assert GPMFSSelector.from_pretrained(out).budget_ == round(0.3 * len(names))


def test_tune_reports_the_chosen_weights(small, csv_path, tmp_path):
    report = main(["--csv", str(csv_path), "--budget", "0.4", "--tune", "--output", str(tmp_path / "t")])
    tuned = report["tuned"]
    assert set(tuned["params"]) == {"alpha", "beta", "gamma", "lam"} and tuned["theta"] in (0.2, 0.4, 0.6, 0.8, 1.0)
    assert tuned["trials"] >= 20  # 4 weights x 7 grid values, one coordinate sweep (shared start point)
    sel = GPMFSSelector.from_pretrained(tmp_path / "t")
    assert sel.theta == tuned["theta"] and sel.lam == tuned["params"]["lam"]


def test_through_the_hf_ext_command(small, csv_path, tmp_path, capsys):
    from hf_ext.core.cli import main as hf_ext

    assert hf_ext(["gpmfs", "fit", "--csv", str(csv_path), "--budget", "4", "--output", str(tmp_path / "c")]) == 0
    assert "wrote" in capsys.readouterr().out
    # `hf-ext train gpmfs` is the same script (underscore flags, dashed and old spellings too)
    for out_flag in ("--output_dir", "--output-dir"):
        out = tmp_path / out_flag.strip("-")
        assert hf_ext(["train", "gpmfs", "--csv", str(csv_path), "--budget", "4", out_flag, str(out)]) == 0
        assert GPMFSSelector.from_pretrained(out).budget_ == 4
    with pytest.raises(SystemExit) as exc:
        cli(["--csv", str(csv_path), "--budget", "0", "--output", str(tmp_path / "d")])
    assert exc.value.code == 2 and "--budget must be" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_parse_budget_forms():
    assert parse_budget("20%") == 0.2 and parse_budget("0.25") == 0.25 and parse_budget("15") == 15
    for bad in ("0", "-3", "1.5", "abc", "0%"):
        with pytest.raises(ValueError, match="--budget"):
            parse_budget(bad)
