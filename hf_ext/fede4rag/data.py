"""FedE4RAG data: 1,000 FinanceBench-style (question, reference passage) pairs from five companies' 10-K reports
(one company = one client, as the official `IDPartitioner` does), and 100 FinanceBench test questions with golden
passages.

Read from `../shared/data/fede4rag/` relative to the project root (or `$HF_EXT_FEDE4RAG_DATA`). The retrieval corpus
is every test golden passage plus every distinct training `page` as a distractor (the released distractor corpus
`B.json` is not public); its size is recorded in the results.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from hf_ext.core import paths

DATA_ENV = paths.data_env_var("fede4rag")
COMPANIES = ("PEPSICO", "PG", "BOEING", "ACTIVISIONBLIZZARD", "AES")  # by size, as in select_data.json


def data_dir() -> Path:
    """The folder holding `train_qa.json` and `test_100.json`."""
    return paths.data_dir("fede4rag")


@dataclass(frozen=True)
class Pair:
    """One training pair: an LLM-written question about a reference passage of a company's 10-K page."""

    company: str
    question: str
    reference: str
    page: str
    index: int


@dataclass(frozen=True)
class TestQuestion:
    """One FinanceBench question with its golden passage ids (corpus ids `gold-<reference_idx>`)."""

    question: str
    answer: str
    gold_ids: tuple[str, ...]
    company: str


@dataclass
class Corpus:
    """The retrieval corpus: ids, texts and where each passage comes from (`"gold"` or `"train-page"`)."""

    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, pid: str, text: str, source: str) -> None:
        self.ids.append(pid)
        self.texts.append(text)
        self.sources.append(source)


def _read_json(path: Path):
    if not path.is_file():
        raise FileNotFoundError(
            f"FedE4RAG data file {path} is missing; put the shared data at {data_dir()} or set ${DATA_ENV}"
        )
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from None


def load_pairs(path: str | os.PathLike | None = None) -> list[Pair]:
    """The 1,000 training pairs (`train_qa.json`); a record without a needed field raises `ValueError` naming it."""
    rows = _read_json(Path(path) if path else data_dir() / "train_qa.json")
    pairs = []
    for i, row in enumerate(rows):
        missing = [k for k in ("company", "question", "reference", "page", "index") if k not in row]
        if missing:
            raise ValueError(f"training record {i} lacks {missing}")
        pairs.append(Pair(row["company"], row["question"], row["reference"], row["page"], int(row["index"])))
    return pairs


def _parse_ids(value) -> list[int]:
    if isinstance(value, str):
        value = json.loads(value)
    return [int(v) for v in value]


def load_test(path: str | os.PathLike | None = None) -> tuple[list[TestQuestion], dict[str, str]]:
    """The FinanceBench test questions and their golden passages (`test_100.json`).

    Returns:
        `(questions, golden)`: the questions, and corpus id → text of every golden passage.
    """
    rows = _read_json(Path(path) if path else data_dir() / "test_100.json")
    questions, golden = [], {}
    for i, row in enumerate(rows):
        kc = row.get("key_content")
        if not isinstance(kc, dict) or not {"reference", "reference_idx", "question"} <= set(kc):
            raise ValueError(f"test record {i} lacks key_content.reference / reference_idx / question")
        ids = _parse_ids(kc["reference_idx"])
        refs = kc["reference"]
        if len(ids) != len(refs):
            raise ValueError(f"test record {i}: {len(ids)} reference ids but {len(refs)} reference texts")
        for idx, text in zip(ids, refs):
            golden.setdefault(f"gold-{idx}", text)
        other = row.get("other_info", "")
        company = other.get("company", "") if isinstance(other, dict) else ""
        questions.append(
            TestQuestion(kc["question"], str(kc.get("answer", "")), tuple(f"gold-{i}" for i in ids), company)
        )
    return questions, golden


def build_corpus(pairs: list[Pair], golden: dict[str, str]) -> Corpus:
    """Golden test passages first, then every distinct training page (distractors), deduplicated by text."""
    corpus, seen = Corpus(), set()
    for pid, text in golden.items():
        corpus.add(pid, text, "gold")
        seen.add(text)
    for pair in pairs:
        if pair.page not in seen:
            seen.add(pair.page)
            corpus.add(f"page-{pair.company}-{pair.index}", pair.page, "train-page")
    return corpus


def reference_corpus(pairs: list[Pair]) -> Corpus:
    """The in-domain corpus: every distinct training `reference` passage (914 of the 1,000), its `source` the company.

    A held-out question's golden passage is its own reference; the other references are the distractors (the same
    company's for the per-client corpus, all five companies' for the union). Pages are not used: they repeat their
    references and, truncated to 64–128 tokens, often do not even contain them.
    """
    corpus, seen = Corpus(), {}
    for pair in pairs:
        key = (pair.company, pair.reference)
        if key not in seen:
            seen[key] = f"ref-{pair.company}-{len(seen)}"
            corpus.add(seen[key], pair.reference, pair.company)
    return corpus


def partition_by_company(pairs: list[Pair], companies: tuple[str, ...] = COMPANIES) -> list[list[Pair]]:
    """One client per company (the official `IDPartitioner`: natural, non-IID split), in `companies` order."""
    unknown = sorted({p.company for p in pairs} - set(companies))
    if unknown:
        raise ValueError(f"pairs from companies {unknown} have no client (clients: {list(companies)})")
    return [[p for p in pairs if p.company == c] for c in companies]


def train_holdout_split(pairs: list[Pair], holdout: float = 0.1, seed: int = 0) -> tuple[list[Pair], list[Pair]]:
    """Shuffles a client's pairs and holds out `holdout` of them (the code's `train_holdout` 0.1)."""
    if not 0.0 <= holdout < 1.0:
        raise ValueError(f"holdout must be in [0, 1), got {holdout}")
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    n_hold = int(round(holdout * len(pairs)))
    return [pairs[i] for i in order[n_hold:]], [pairs[i] for i in order[:n_hold]]


__all__ = [
    "COMPANIES",
    "Corpus",
    "Pair",
    "TestQuestion",
    "build_corpus",
    "data_dir",
    "load_pairs",
    "load_test",
    "partition_by_company",
    "reference_corpus",
    "train_holdout_split",
]
