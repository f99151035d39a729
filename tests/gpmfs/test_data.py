import numpy as np
import pandas as pd
import pytest

from hf_ext.gpmfs.data import make_sklearn_multilabel, split_frame, to_hf_dataset
from hf_ext.gpmfs.planted import make_planted


def test_yeast_is_the_mulan_dataset(yeast):
    assert yeast.shape == (2417, 103, 14)
    assert yeast.Y.sum(axis=1).mean() == pytest.approx(4.24, abs=0.01)  # label cardinality
    assert set(np.unique(yeast.Y)) == {0, 1} and np.isfinite(yeast.X).all()


def test_planted_structure(planted):
    assert planted.shape == (600, 200, 8)
    planted_all = np.concatenate([planted.shared_features, *planted.private_features])
    assert len(np.unique(planted_all)) == 10 + 8 * 5
    assert np.all(np.abs(planted.Y.mean(axis=0) - 0.35) < 0.08)
    # each label depends on its private features more than on another label's
    X, Y = planted.X, planted.Y
    own = np.mean([np.abs(np.corrcoef(X[:, planted.private_features[j]].T, Y[:, j])[-1, :-1]).mean() for j in range(8)])
    other = np.mean(
        [np.abs(np.corrcoef(X[:, planted.private_features[(j + 1) % 8]].T, Y[:, j])[-1, :-1]).mean() for j in range(8)]
    )
    assert own > 2 * other
    with pytest.raises(ValueError, match="n_features"):
        make_planted(n_features=20)


def test_sklearn_generator_and_hf_dataset():
    data = make_sklearn_multilabel(n_samples=50, n_features=8, n_classes=4)
    assert data.X.shape == (50, 8) and (data.Y.sum(axis=0) > 0).all()
    ds = to_hf_dataset(data)
    assert ds.column_names == ["features", "labels"] and len(ds[0]["features"]) == 8
    with pytest.raises(ValueError, match="layout"):
        to_hf_dataset(data, "rows")


def test_split_frame():
    df = pd.DataFrame({"a": [0.5, 1.5, 2.0], "b": [1, 0, 1], "y1": [0, 1, 1], "y2": [1, 1, 0]})
    auto = split_frame(df)  # trailing 0/1 run: b, y1, y2 (b is binary too)
    assert auto.label_names == ["b", "y1", "y2"]
    explicit = split_frame(df, ["y1", "y2"])
    assert explicit.feature_names == ["a", "b"]
    with pytest.raises(ValueError, match="label_columns"):
        split_frame(df[["a"]])
    with pytest.raises(ValueError, match="label_columns"):
        split_frame(df, ["nope"])
    with pytest.raises(ValueError, match="X"):
        split_frame(df.assign(a=["x", "y", "z"]), ["y1", "y2"])


def test_offline_real_datasets():
    from hf_ext.gpmfs.data import REAL_DATASETS

    flare = REAL_DATASETS["flare"][0]()
    assert flare.shape == (1066, 23, 2) and flare.Y.sum(axis=0).tolist() == [182, 36]
    digits = REAL_DATASETS["digits"][0]()
    assert digits.shape == (1797, 64, 4)
    # 0 is even, < 5, not prime, has a loop
    from sklearn.datasets import load_digits

    zero = np.flatnonzero(load_digits().target == 0)[0]
    assert digits.Y[zero].tolist() == [1, 0, 0, 1]
    assert set(REAL_DATASETS) == {"yeast", "flare", "digits"}
