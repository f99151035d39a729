"""Retrieval evaluation of a retriever on the 100 FinanceBench test questions over the corpus (golden passages plus
every training page as a distractor), through a faiss index."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hf_ext.core.paths import work_dir

from .data import build_corpus, load_pairs, load_test
from .encoder import HiddenCache, encode_texts
from .metrics import RetrievalIndex, retrieval_metrics


class RetrievalEvaluator:
    """Caches the frozen lower layers of every corpus passage and test question once; `evaluate(model)` then runs
    only the top layers.

    Args:
        model, tokenizer: any retriever of the run (only its frozen lower layers are used for the cache).
        start_layer (`int`): first trainable layer (as in [`~hf_ext.fede4rag.task.RunConfig.start_layer`]).
        max_query_length, max_passage_length (`int`): truncation.
        cache_dir (`str`, *optional*): where the hidden states are cached (default `work_dir("fede4rag", "cache")`).
    """

    def __init__(self, model, tokenizer, start_layer: int, max_query_length: int = 64, max_passage_length: int = 128,
                 cache_dir: str | None = None, data_path: str | None = None, test_path: str | None = None):
        cache_dir = cache_dir or str(work_dir("fede4rag", "cache"))
        pairs = load_pairs(data_path or None)
        self.questions, golden = load_test(test_path or None)
        self.corpus = build_corpus(pairs, golden)
        self.golden = [q.gold_ids for q in self.questions]
        self.q_cache = HiddenCache.cached(Path(cache_dir), model, tokenizer, [q.question for q in self.questions],
                                          max_query_length, start_layer, tag="testq")
        self.p_cache = HiddenCache.cached(Path(cache_dir), model, tokenizer, self.corpus.texts, max_passage_length,
                                          start_layer, tag="corpus")

    def index(self, model) -> RetrievalIndex:
        return RetrievalIndex(self.corpus.ids, encode_texts(model, cache=self.p_cache))

    def evaluate(self, model, k: int = 10) -> dict[str, float]:
        """hit@1/5/10, recall@1/5/10, MRR and NDCG@10 of `model` on the test questions."""
        index = self.index(model)
        retrieved, _ = index.search(encode_texts(model, cache=self.q_cache), k=max(k, 10))
        return retrieval_metrics(retrieved, self.golden)

    def corpus_stats(self) -> dict[str, int]:
        sources = np.array(self.corpus.sources)
        return {"passages": len(self.corpus), "golden": int((sources == "gold").sum()),
                "distractors": int((sources == "train-page").sum()), "test_questions": len(self.questions)}


__all__ = ["RetrievalEvaluator"]
