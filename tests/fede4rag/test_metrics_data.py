"""Retrieval metrics against hand-computed values, the faiss index, and the data/corpus construction."""

import math

import numpy as np
import pytest

from hf_ext.fede4rag.data import (
    COMPANIES,
    build_corpus,
    load_pairs,
    load_test,
    partition_by_company,
    train_holdout_split,
)
from hf_ext.fede4rag.metrics import RetrievalIndex, retrieval_metrics


def test_metrics_closed_form():
    retrieved = [["x", "g1", "y", "g2"], ["a", "b", "c", "d"]]
    golden = [["g1", "g2"], ["z"]]
    m = retrieval_metrics(retrieved, golden, ks=(1, 2, 4), ndcg_k=4)
    assert m["hit@1"] == 0 and m["hit@2"] == 0.5 and m["hit@4"] == 0.5
    assert m["recall@2"] == pytest.approx(0.25) and m["recall@4"] == pytest.approx(0.5)
    assert m["mrr"] == pytest.approx(0.25)  # (1/2 + 0) / 2
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3)
    assert m["ndcg@4"] == pytest.approx(dcg / idcg / 2)
    with pytest.raises(ValueError, match="no golden"):
        retrieval_metrics([["a"]], [[]])


def test_faiss_index_ranks_by_inner_product():
    vecs = np.eye(3, dtype=np.float32)
    index = RetrievalIndex(["a", "b", "c"], vecs)
    ids, scores = index.search(np.array([[0.1, 0.9, 0.3]], dtype=np.float32), k=3)
    assert ids == [["b", "c", "a"]] and scores[0, 0] == pytest.approx(0.9)
    with pytest.raises(ValueError, match="shape"):
        index.search(np.zeros((1, 4)), k=1)
    with pytest.raises(ValueError, match="NaN"):
        RetrievalIndex(["a"], np.array([[np.nan, 0, 0]]))


def test_data_partition_and_corpus():
    pairs = load_pairs()
    parts = partition_by_company(pairs)
    assert [len(p) for p in parts] == [439, 195, 137, 136, 93]
    assert all({x.company for x in part} == {c} for part, c in zip(parts, COMPANIES))
    train, hold = train_holdout_split(parts[4], 0.1, seed=0)
    assert len(hold) == 9 and len(train) == 84 and not {id(x) for x in hold} & {id(x) for x in train}
    questions, golden = load_test()
    assert len(questions) == 100 and len(golden) == 115
    corpus = build_corpus(pairs, golden)
    assert len(corpus) == 1052 and corpus.sources.count("gold") == 115
    assert all(set(q.gold_ids) <= set(corpus.ids) for q in questions)


def test_bad_data_is_named(tmp_path):
    bad = tmp_path / "train.json"
    bad.write_text('[{"company": "AES", "question": "q"}]')
    with pytest.raises(ValueError, match="lacks"):
        load_pairs(bad)
    with pytest.raises(FileNotFoundError, match="missing"):
        load_pairs(tmp_path / "nope.json")
