"""Retrieval evaluation through a faiss index: FinanceBench (100 test questions over their golden passages plus
distractor passages disjoint from every client's training data, [`~hf_ext.fede4rag.distractors`]) and in-domain
(each client's held-out questions over its own company's reference passages, and over all five companies'
references).

The frozen lower layers of every text are cached once; `evaluate(model)` then runs only the trainable top.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hf_ext.core.paths import work_dir

from .data import COMPANIES, load_pairs, load_test, reference_corpus
from .distractors import financebench_corpus
from .encoder import HiddenCache, encode_texts
from .metrics import RetrievalIndex, retrieval_metrics

HEADLINE = ("hit@1", "hit@10", "mrr", "ndcg@10")


def _mean(per: dict[str, dict[str, float]]) -> dict[str, float]:
    """Unweighted (macro) mean over clients: every company counts once, whatever its size."""
    first = next(iter(per.values()))
    return {k: float(np.mean([m[k] for m in per.values()])) for k in first}


class RetrievalEvaluator:
    """FinanceBench retrieval: the 100 test questions over golden passages + distractors disjoint from the training
    data ([`~hf_ext.fede4rag.distractors.financebench_corpus`]; the training pages are no longer distractors: a
    trained retriever is pulled towards them, which biased the proxy against every trained setting).

    Args:
        model, tokenizer: any retriever of the run (only its frozen lower layers are used for the cache).
        start_layer (`int`): first trainable layer (as in [`~hf_ext.fede4rag.task.RunConfig.start_layer`]).
        max_query_length, max_passage_length (`int`): truncation.
        cache_dir (`str`, *optional*): where the hidden states are cached (default `work_dir("fede4rag", "cache")`).
    """

    def __init__(
        self,
        model,
        tokenizer,
        start_layer: int,
        max_query_length: int = 64,
        max_passage_length: int = 128,
        cache_dir: str | None = None,
        data_path: str | None = None,
        test_path: str | None = None,
    ):
        cache_dir = cache_dir or str(work_dir("fede4rag", "cache"))
        pairs = load_pairs(data_path or None)
        self.questions, golden = load_test(test_path or None)
        self.corpus = financebench_corpus(pairs, golden, test_path=test_path)
        self.golden = [q.gold_ids for q in self.questions]
        self.q_cache = HiddenCache.cached(
            Path(cache_dir),
            model,
            tokenizer,
            [q.question for q in self.questions],
            max_query_length,
            start_layer,
            tag="testq",
        )
        self.p_cache = HiddenCache.cached(
            Path(cache_dir), model, tokenizer, self.corpus.texts, max_passage_length, start_layer, tag="corpus"
        )

    def index(self, model) -> RetrievalIndex:
        return RetrievalIndex(self.corpus.ids, encode_texts(model, cache=self.p_cache))

    def evaluate(self, model, k: int = 10) -> dict[str, float]:
        """hit@1/5/10, recall@1/5/10, MRR and NDCG@10 of `model` on the test questions."""
        index = self.index(model)
        retrieved, _ = index.search(encode_texts(model, cache=self.q_cache), k=max(k, 10))
        return retrieval_metrics(retrieved, self.golden)

    def corpus_stats(self) -> dict:
        sources = np.array(self.corpus.sources)
        return {
            "passages": len(self.corpus),
            "golden": int((sources == "gold").sum()),
            "distractors": int((sources == "distractor").sum()),
            "distractor_source": "test_50 evidence pages and golden passages, disjoint from the training data",
            "test_questions": len(self.questions),
        }


class InDomainEvaluator:
    """Each client's held-out questions (10 % of its company's pairs, never trained on) over the distinct training
    references: its own company's (`own`) and all five companies' (`union`). A question's golden passage is its own
    reference; some held-out references also have another, training question (counted in [`stats`]).

    Args:
        model, tokenizer: any retriever of the run (for the frozen-layer cache).
        heldout (`Sequence[Sequence[Pair]]`): per company, in [`COMPANIES`] order, its held-out pairs.
        pairs (`list[Pair]`): all training pairs (the corpus is built from their references).
        start_layer, max_query_length, max_passage_length, cache_dir: as [`RetrievalEvaluator`].
    """

    def __init__(
        self,
        model,
        tokenizer,
        heldout,
        pairs,
        start_layer: int,
        max_query_length: int = 64,
        max_passage_length: int = 128,
        cache_dir: str | None = None,
    ):
        if len(heldout) != len(COMPANIES):
            raise ValueError(f"held-out questions for {len(heldout)} companies, expected {len(COMPANIES)}")
        cache_dir = Path(cache_dir or str(work_dir("fede4rag", "cache")))
        self.corpus = reference_corpus(pairs)
        by_text: dict[str, list[str]] = {}
        for pid, text in zip(self.corpus.ids, self.corpus.texts):
            by_text.setdefault(text, []).append(pid)
        self.companies = [COMPANIES[i] for i in range(len(heldout))]
        self.questions = [p.question for part in heldout for p in part]
        self.golden = [tuple(by_text[p.reference]) for part in heldout for p in part]
        self.owner = [COMPANIES[i] for i, part in enumerate(heldout) for _ in part]
        if any(not g for g in self.golden):
            raise ValueError("a held-out question's reference is not in the reference corpus")
        trained = {p.question for p in pairs} - set(self.questions)
        train_refs = {p.reference for p in pairs if p.question in trained}
        self.n_reference_also_trained = sum(p.reference in train_refs for part in heldout for p in part)
        self.q_cache = HiddenCache.cached(
            cache_dir, model, tokenizer, self.questions, max_query_length, start_layer, tag="heldq"
        )
        self.p_cache = HiddenCache.cached(
            cache_dir, model, tokenizer, self.corpus.texts, max_passage_length, start_layer, tag="refs"
        )

    def evaluate(self, model, companies: Sequence[str] | None = None, k: int = 10) -> dict:
        """Per company `own` and `union` metrics, their macro means (`own_mean`, `union_mean`) and the micro mean
        over all held-out questions on the union corpus (`union_micro`)."""
        companies = list(companies or self.companies)
        passages = encode_texts(model, cache=self.p_cache)
        queries = encode_texts(model, cache=self.q_cache)
        union = RetrievalIndex(self.corpus.ids, passages)
        retrieved, _ = union.search(queries, k=k)
        sources = np.asarray(self.corpus.sources)
        owner = np.asarray(self.owner)
        out: dict = {"own": {}, "union": {}}
        for company in companies:
            rows = np.flatnonzero(owner == company)
            keep = np.flatnonzero(sources == company)
            own = RetrievalIndex([self.corpus.ids[i] for i in keep], passages[keep])
            got, _ = own.search(queries[rows], k=k)
            gold = [self.golden[i] for i in rows]
            out["own"][company] = retrieval_metrics(got, gold)
            out["union"][company] = retrieval_metrics([retrieved[i] for i in rows], gold)
        out["own_mean"], out["union_mean"] = _mean(out["own"]), _mean(out["union"])
        chosen = np.flatnonzero(np.isin(owner, companies))
        out["union_micro"] = retrieval_metrics([retrieved[i] for i in chosen], [self.golden[i] for i in chosen])
        return out

    def questions_of(self, company: str) -> list[str]:
        return [q for q, o in zip(self.questions, self.owner) if o == company]

    def stats(self) -> dict:
        return {
            "references": len(self.corpus),
            "heldout_questions": len(self.questions),
            "per_company": {c: int(sum(o == c for o in self.owner)) for c in self.companies},
            "heldout_reference_also_a_training_positive": self.n_reference_also_trained,
        }


class EvaluationSuite:
    """Both evaluations of one run (seed): `evaluate(model)` → `{"financebench": ..., "in_domain": ...}`."""

    def __init__(self, run, test_path: str | None = None):
        from .task import build_model, client_heldout

        model, tokenizer = build_model(run)
        pairs = load_pairs(run.data_path or None)
        args = (run.start_layer, run.max_query_length, run.max_passage_length, run.cache_dir)
        self.financebench = RetrievalEvaluator(
            model, tokenizer, *args, data_path=run.data_path or None, test_path=test_path
        )
        heldout = [client_heldout(i, run, pairs) for i in range(len(COMPANIES))]
        self.in_domain = InDomainEvaluator(model, tokenizer, heldout, pairs, *args)

    def evaluate(self, model, companies: Sequence[str] | None = None) -> dict:
        return {
            "financebench": self.financebench.evaluate(model),
            "in_domain": self.in_domain.evaluate(model, companies),
        }

    def stats(self) -> dict:
        return {"financebench": self.financebench.corpus_stats(), "in_domain": self.in_domain.stats()}


# ---- the user's own pairs ------------------------------------------------------------------------------------------

USER_METRICS = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10", "own.mrr", "own.recall@1")
"""What `hf-ext train fede4rag --data` records and `hf-ext evaluate fede4rag` reports: retrieval of each test query's
passage(s) among every client's passages (`recall@k`, `mrr`, `ndcg@10`; the reproduction's `union` corpus) and among
its own client's passages only (`own.*`; the reproduction's `own`)."""


def user_test_queries(up) -> list[tuple[str, str, tuple[int, ...]]]:
    """The test queries of [`~hf_ext.fede4rag.data.UserPairs`] as `(client, query, golden passage rows)`: rows of
    one client with the same query text are one query with several relevant passages."""
    row = {text: i for i, text in enumerate(up.passages)}
    grouped: dict[tuple[str, str], list[int]] = {}
    for p in up.test:
        grouped.setdefault((p.company, p.question), []).append(row[p.reference])
    return [(c, q, tuple(dict.fromkeys(g))) for (c, q), g in grouped.items()]


def score_user_pairs(model, tokenizer, up, *, max_query_length: int = 64, max_passage_length: int = 128) -> dict:
    """Per test query, every metric of [`USER_METRICS`] (lists aligned with [`user_test_queries`]), for paired
    comparisons; [`~hf_ext.fede4rag.metrics.retrieval_metrics`] on one query at a time, so the means are its means.

    Args:
        model: a retriever (a [`~hf_ext.fede4rag.FedE4RAGRetriever`], with or without a PEFT adapter).
        tokenizer: its tokenizer.
        up ([`~hf_ext.fede4rag.data.UserPairs`]): the user's split pairs.
    """
    queries = user_test_queries(up)
    ids = [str(i) for i in range(len(up.passages))]
    passages = encode_texts(model, tokenizer, list(up.passages), max_length=max_passage_length)
    vectors = encode_texts(model, tokenizer, [q for _, q, _ in queries], max_length=max_query_length)
    union = RetrievalIndex(ids, passages)
    retrieved, _ = union.search(vectors, k=10)
    own_rows: dict[str, list[int]] = {}
    row = {text: i for i, text in enumerate(up.passages)}
    for p in (*up.train, *up.test):
        own_rows.setdefault(p.company, [])
        if row[p.reference] not in own_rows[p.company]:
            own_rows[p.company].append(row[p.reference])
    own_index = {c: RetrievalIndex([ids[i] for i in rows], passages[rows]) for c, rows in own_rows.items()}
    out: dict[str, list[float]] = {name: [] for name in USER_METRICS}
    for j, (client, _, gold) in enumerate(queries):
        golden = [[ids[i] for i in gold]]
        m = retrieval_metrics([retrieved[j]], golden)
        own_got, _ = own_index[client].search(vectors[j : j + 1], k=10)
        own = retrieval_metrics(own_got, golden)
        for name in USER_METRICS:
            out[name].append(float(own[name[4:]] if name.startswith("own.") else m[name]))
    return out


def mean_scores(per_query: dict[str, list[float]]) -> dict[str, float]:
    return {name: float(np.mean(values)) for name, values in per_query.items()}


__all__ = [
    "EvaluationSuite",
    "HEADLINE",
    "InDomainEvaluator",
    "RetrievalEvaluator",
    "USER_METRICS",
    "mean_scores",
    "score_user_pairs",
    "user_test_queries",
]
