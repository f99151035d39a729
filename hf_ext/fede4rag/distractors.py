"""The FinanceBench distractor corpus, disjoint from the clients' training data.

The earlier FinanceBench proxy put every training page of the five client companies into the corpus as distractors:
a trained retriever has been pulled towards exactly those pages, so the proxy was biased against every trained
setting. The distractors here come from FinanceBench's own evidence pages of the 50 questions of `test_50.json` that
are not evidence of any of the 100 test questions, cut into passages of about [`CHUNK_CHARS`] characters, plus those
questions' golden passages; a passage is dropped when

* its document belongs to one of the clients' companies (their 10-Ks are where the training pages come from),
* its text equals, contains or is contained in a training page or reference (whitespace-normalised), or
* it contains, or is contained in, a golden passage of a test question (it would be a second relevant passage).

Ids are `fb-<doc>-p<page>-<k>` / `fb-gold50-<idx>`, never the training pages' `page-<company>-<index>`.
`tests/fede4rag/test_distractors.py` checks that they share no page, passage id or text with the training data.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .data import COMPANIES, Corpus, Pair, _read_json, data_dir

CHUNK_CHARS = 600
# FinanceBench document-name prefixes of the clients' companies (the training data's `company` values, and P&G's
# FinanceBench spelling)
CLIENT_DOC_PREFIXES = frozenset(COMPANIES) | {"PROCTERGAMBLE", "PROCTER"}


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _chunks(text: str, size: int) -> list[str]:
    """Consecutive passages of about `size` characters, cut at whitespace."""
    words, out, cur = text.split(), [], []
    length = 0
    for w in words:
        if cur and length + len(w) + 1 > size:
            out.append(" ".join(cur))
            cur, length = [], 0
        cur.append(w)
        length += len(w) + 1
    if cur:
        out.append(" ".join(cur))
    return out


def _rows(path: Path) -> list[tuple[dict, dict]]:
    out = []
    for i, row in enumerate(_read_json(path)):
        kc, info = row.get("key_content"), row.get("other_info")
        if not isinstance(kc, dict) or not isinstance(info, dict):
            raise ValueError(f"{path} record {i} lacks the key_content / other_info objects")
        out.append((kc, info))
    return out


def _evidence(info: dict) -> list[dict]:
    return [e for e in info.get("evidence") or [] if isinstance(e, dict)]


def disjoint_distractors(
    pairs: list[Pair],
    golden: dict[str, str],
    test_path: str | os.PathLike | None = None,
    extra_path: str | os.PathLike | None = None,
    chunk_chars: int = CHUNK_CHARS,
) -> Corpus:
    """The distractor passages (source `"distractor"`), disjoint from `pairs`' pages and references and from the
    `golden` test passages.

    Args:
        pairs (`list[Pair]`): the training pairs (every client's).
        golden (`dict[str, str]`): the test questions' golden passages (id → text).
        test_path, extra_path: `test_100.json` (whose evidence pages are excluded) and `test_50.json` (where the
            distractors come from); default: the shared data folder.
        chunk_chars (`int`): passage length in characters.
    """
    if chunk_chars < 50:
        raise ValueError(f"chunk_chars must be at least 50, got {chunk_chars}")
    test = _rows(Path(test_path) if test_path else data_dir() / "test_100.json")
    extra = _rows(Path(extra_path) if extra_path else data_dir() / "test_50.json")
    test_pages = {(e.get("doc_name"), e.get("evidence_page_num")) for _, info in test for e in _evidence(info)}
    training = [_norm(t) for p in pairs for t in (p.page, p.reference)]
    gold = [_norm(t) for t in golden.values()]
    golden_ids = set(golden)

    def clashes(text: str) -> bool:
        n = _norm(text)
        return any(n in t or t in n for t in training) or any(n in g or g in n for g in gold)

    def from_client(doc: str) -> bool:
        return str(doc).split("_")[0].upper() in CLIENT_DOC_PREFIXES

    corpus, seen = Corpus(), set()

    def add(pid: str, text: str) -> None:
        n = _norm(text)
        if n and n not in seen and pid not in seen and not clashes(text):
            seen.update((n, pid))
            corpus.add(pid, text, "distractor")

    for kc, info in extra:
        docs = {e.get("doc_name") for e in _evidence(info)}
        for e in _evidence(info):
            key = (e.get("doc_name"), e.get("evidence_page_num"))
            if key in test_pages or from_client(key[0]):
                continue
            for k, text in enumerate(_chunks(str(e.get("evidence_text_full_page", "")), chunk_chars)):
                add(f"fb-{key[0]}-p{key[1]}-{k}", text)
        if any(from_client(d) for d in docs):
            continue
        ids = kc.get("reference_idx", [])
        ids = ids if isinstance(ids, list) else []
        for idx, text in zip(ids, kc.get("reference", [])):
            if f"gold-{idx}" not in golden_ids:
                add(f"fb-gold50-{idx}", str(text))
    return corpus


def financebench_corpus(pairs: list[Pair], golden: dict[str, str], **kwargs) -> Corpus:
    """The FinanceBench retrieval corpus: the golden test passages (source `"gold"`), then the
    [`disjoint_distractors`] (source `"distractor"`); `kwargs` go to [`disjoint_distractors`]."""
    corpus = Corpus()
    for pid, text in golden.items():
        corpus.add(pid, text, "gold")
    extra = disjoint_distractors(pairs, golden, **kwargs)
    for pid, text in zip(extra.ids, extra.texts):
        corpus.add(pid, text, "distractor")
    return corpus


__all__ = ["CHUNK_CHARS", "CLIENT_DOC_PREFIXES", "disjoint_distractors", "financebench_corpus"]
