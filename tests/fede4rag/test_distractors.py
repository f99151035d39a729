"""The FinanceBench distractor corpus is disjoint from the clients' training data: no training page, passage id or
text (nor a text containing one, or contained in one) and no document of a client company; no distractor is a second
copy of a test question's golden passage; the evaluator's corpus is the golden passages plus these distractors."""

import re

import pytest

from hf_ext.fede4rag.data import COMPANIES, load_pairs, load_test
from hf_ext.fede4rag.distractors import _chunks, disjoint_distractors, financebench_corpus


def _norm(text):
    return re.sub(r"\s+", " ", text).strip()


@pytest.fixture(scope="module")
def data():
    pairs = load_pairs()
    _, golden = load_test()
    return pairs, golden, disjoint_distractors(pairs, golden)


def test_distractors_share_nothing_with_the_training_data(data):
    pairs, golden, corpus = data
    assert len(corpus) >= 200 and set(corpus.sources) == {"distractor"}
    assert len(set(corpus.ids)) == len(corpus)
    train_ids = {f"page-{p.company}-{p.index}" for p in pairs}
    assert not set(corpus.ids) & train_ids and not any(i.startswith("page-") for i in corpus.ids)
    training = {_norm(t) for p in pairs for t in (p.page, p.reference)}
    texts = [_norm(t) for t in corpus.texts]
    assert not set(texts) & training
    for text in texts:  # not a fragment of a training page, and no training passage inside it
        assert not any(text in t or t in text for t in training)
    docs = {i.split("-p")[0].removeprefix("fb-") for i in corpus.ids if not i.startswith("fb-gold50-")}
    assert docs and not any(d.split("_")[0].upper() in COMPANIES for d in docs)
    gold = [_norm(t) for t in golden.values()]
    assert not any(g in t or t in g for t in texts for g in gold)


def test_evaluation_corpus_is_golden_plus_disjoint_distractors(data):
    pairs, golden, distractors = data
    corpus = financebench_corpus(pairs, golden)
    assert corpus.ids[: len(golden)] == list(golden) and corpus.sources.count("gold") == len(golden)
    assert corpus.ids[len(golden) :] == distractors.ids
    questions, _ = load_test()
    assert all(set(q.gold_ids) <= set(corpus.ids[: len(golden)]) for q in questions)


def test_a_training_page_in_the_source_is_dropped(tmp_path, data):
    """A distractor page equal to a training page (or containing a training reference) never enters the corpus."""
    import json

    from hf_ext.fede4rag.data import data_dir

    pairs, golden, corpus = data
    rows = json.loads((data_dir() / "test_50.json").read_text())
    planted = pairs[0].reference + " trailing words that make it a different text"
    rows[0]["other_info"]["evidence"] = [
        {"doc_name": "ZZZCORP_2020_10K", "evidence_page_num": 1, "evidence_text_full_page": planted}
    ]
    path = tmp_path / "test_50.json"
    path.write_text(json.dumps(rows))
    out = disjoint_distractors(pairs, golden, extra_path=path, chunk_chars=10_000)
    assert not any(pairs[0].reference in t for t in out.texts)
    assert _chunks("a b c d e", 4) == ["a b", "c d", "e"]
    with pytest.raises(ValueError, match="chunk_chars"):
        disjoint_distractors(pairs, golden, chunk_chars=10)
