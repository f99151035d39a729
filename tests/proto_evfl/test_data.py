"""The vertical split: who holds what, balanced aligned/test sets, long-tailed disjoint pools with differing
dominant classes, the zero-shot variant, and bad configurations."""

import numpy as np
import pytest

from hf_ext.proto_evfl.data import VerticalDataConfig, build_vertical_split, feature_widths


@pytest.fixture(scope="module")
def zero_shot():
    return build_vertical_split(VerticalDataConfig(unseen_class=3, seed=0))


def test_parties_hold_their_own_columns_and_the_same_aligned_entities(zero_shot):
    left, right = zero_shot.party(0), zero_shot.party(1)
    assert left.width == right.width == 32 and feature_widths("digits", 2) == [32, 32]
    np.testing.assert_array_equal(left.aligned_ids, right.aligned_ids)
    x = zero_shot.features[zero_shot.aligned_ids].reshape(-1, 8, 8)
    np.testing.assert_array_equal(left.aligned_features, x[:, :, :4].reshape(-1, 32))  # left image half
    np.testing.assert_array_equal(right.aligned_features, x[:, :, 4:].reshape(-1, 32))
    assert not hasattr(left, "labels")  # a party's view carries no labels


def test_balanced_aligned_and_test_sets_and_the_unseen_class(zero_shot):
    counts = zero_shot.class_counts()
    assert counts["aligned"].tolist() == [10, 10, 10, 0, 10, 10, 10, 10, 10, 10]
    assert counts["test"].tolist() == [30] * 10
    ranks = zero_shot.class_ranks
    assert ranks[1, 3] == 1  # the unseen class is frequent at the passive party ...
    assert counts["unaligned_party_1"][3] > 10 * counts["unaligned_party_0"][3] / 2  # ... and rare at the other
    assert zero_shot.labels().unseen_class == 3


def test_pools_are_disjoint_long_tailed_and_dominated_by_different_classes(zero_shot):
    ids = [zero_shot.aligned_ids, zero_shot.test_ids, *zero_shot.unaligned_ids]
    everything = np.concatenate(ids)
    assert len(np.unique(everything)) == len(everything)  # no entity in two places
    counts = zero_shot.class_counts()
    for k in (0, 1):
        pool = counts[f"unaligned_party_{k}"]
        assert pool.max() == 120 and 40 <= pool.max() / pool.min() <= 120  # IR 50 (rounded, at least 1)
    assert counts["unaligned_party_0"].argmax() != counts["unaligned_party_1"].argmax()


def test_breast_cancer_blocks_are_standardised_per_party():
    split = build_vertical_split(VerticalDataConfig(dataset="breast_cancer", imbalance_ratio=10))
    party = split.party(1)
    assert party.width == 15 and split.num_classes == 2
    own = np.concatenate([party.aligned_features, party.unaligned_features])
    np.testing.assert_allclose(own.mean(0), 0, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"dataset": "mnist"}, "dataset must be one of"), ({"num_parties": 1}, "at least 2 parties"),
     ({"imbalance_ratio": 0.5}, "imbalance_ratio"), ({"num_parties": 9}, "8 pixel columns")],
)  # fmt: skip
def test_bad_configurations_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        build_vertical_split(VerticalDataConfig(**kwargs))
    with pytest.raises(ValueError, match=r"unseen_class must be in \[0, 10\)"):
        build_vertical_split(VerticalDataConfig(unseen_class=10))


def test_missing_fashion_mnist_names_the_debian_package(monkeypatch, tmp_path):
    from hf_ext.core.paths import DataNotFoundError
    from hf_ext.proto_evfl.data import fashion_mnist_dir

    monkeypatch.setenv("HF_EXT_FASHION_MNIST_DATA", str(tmp_path))
    with pytest.raises(DataNotFoundError, match=r"Install the Debian package 'dataset-fashion-mnist' \(`apt-get"):
        fashion_mnist_dir()


def _fashion_available():
    from hf_ext.proto_evfl.data import fashion_mnist_dir

    try:
        fashion_mnist_dir()
        return True
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not _fashion_available(), reason="Fashion-MNIST absent: apt-get install -y dataset-fashion-mnist")
def test_fashion_mnist_split_is_extremely_unaligned_and_imbalanced():
    from hf_ext.proto_evfl.reproduce import DATA_SCALE

    scale = {k: v for k, v in DATA_SCALE["fashion_mnist"].items() if k != "ratio"}
    split = build_vertical_split(VerticalDataConfig(dataset="fashion_mnist", imbalance_ratio=100.0, unseen_class=3,
                                                    **scale))  # fmt: skip
    counts = split.class_counts()
    unaligned = counts["unaligned_party_0"].sum() + counts["unaligned_party_1"].sum()
    assert counts["aligned"].sum() / (counts["aligned"].sum() + unaligned) <= 0.01  # ≤ 1 % aligned
    for k in range(2):
        c = counts[f"unaligned_party_{k}"]
        assert c.max() / c.min() == pytest.approx(100, rel=0.05)  # intra-party imbalance
    assert counts["unaligned_party_0"].argmax() != counts["unaligned_party_1"].argmax()  # inter-party
    assert counts["aligned"][3] == 0 and counts["unaligned_party_1"][3] > 1000  # the unseen class, frequent at 1
    assert split.party(0).width == split.party(1).width == 392
