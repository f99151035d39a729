"""Retrieval index (faiss, exact inner product over normalised vectors) and retrieval metrics.

Metrics follow the official `evaluate_TRT.py` definitions over retrieved ids vs golden ids: hit@k (any golden id in the
top k), recall@k (fraction of golden ids in the top k), MRR (1 / rank of the first golden id, 0 if none is retrieved
within the searched depth) and NDCG@k with binary gains and a log2 discount (ideal DCG over min(|golden|, k)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

KS = (1, 5, 10)


class RetrievalIndex:
    """An exact faiss `IndexFlatIP` over passage vectors (cosine when the vectors are L2-normalised).

    Args:
        ids (`Sequence[str]`): passage ids, row-aligned with `vectors`.
        vectors (`np.ndarray` of shape `(n, d)`): passage vectors (float32).
    """

    def __init__(self, ids: Sequence[str], vectors: np.ndarray):
        import faiss

        vectors = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
        if vectors.ndim != 2 or len(ids) != vectors.shape[0]:
            raise ValueError(f"{len(ids)} ids for vectors of shape {vectors.shape}")
        if not np.isfinite(vectors).all():
            raise ValueError("passage vectors contain NaN or Inf")
        self.ids = list(ids)
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(vectors)

    def __len__(self) -> int:
        return self.index.ntotal

    def search(self, queries: np.ndarray, k: int = 10) -> tuple[list[list[str]], np.ndarray]:
        """Top-`k` passage ids per query (best first) and their scores."""
        queries = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        if queries.ndim != 2 or queries.shape[1] != self.index.d:
            raise ValueError(f"queries must have shape (n, {self.index.d}), got {queries.shape}")
        k = min(k, len(self))
        scores, rows = self.index.search(queries, k)
        return [[self.ids[r] for r in row if r >= 0] for row in rows], scores


def retrieval_metrics(
    retrieved: Sequence[Sequence[str]], golden: Sequence[Sequence[str]], ks: Sequence[int] = KS, ndcg_k: int = 10
) -> dict[str, float]:
    """Mean hit@k, recall@k, MRR and NDCG@`ndcg_k` over queries.

    Args:
        retrieved (`Sequence[Sequence[str]]`): per query, retrieved ids best first.
        golden (`Sequence[Sequence[str]]`): per query, the relevant ids (at least one each).
        ks (`Sequence[int]`, defaults to `(1, 5, 10)`): cut-offs for hit and recall.
        ndcg_k (`int`, defaults to 10): cut-off of NDCG.
    """
    if len(retrieved) != len(golden):
        raise ValueError(f"{len(retrieved)} retrieved lists for {len(golden)} golden lists")
    if not golden:
        raise ValueError("no queries to score")
    sums: dict[str, float] = {f"hit@{k}": 0.0 for k in ks} | {f"recall@{k}": 0.0 for k in ks}
    sums["mrr"] = 0.0
    sums[f"ndcg@{ndcg_k}"] = 0.0
    for got, gold in zip(retrieved, golden):
        gold = set(gold)
        if not gold:
            raise ValueError("a query has no golden passage")
        for k in ks:
            found = gold.intersection(got[:k])
            sums[f"hit@{k}"] += float(bool(found))
            sums[f"recall@{k}"] += len(found) / len(gold)
        first = next((rank for rank, pid in enumerate(got, start=1) if pid in gold), None)
        sums["mrr"] += 1.0 / first if first else 0.0
        dcg = sum(1.0 / math.log2(rank + 1) for rank, pid in enumerate(got[:ndcg_k], start=1) if pid in gold)
        idcg = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(gold), ndcg_k) + 1))
        sums[f"ndcg@{ndcg_k}"] += dcg / idcg
    return {k: v / len(golden) for k, v in sums.items()}


__all__ = ["KS", "RetrievalIndex", "retrieval_metrics"]
