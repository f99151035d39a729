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
from hf_ext.core.user_data import Column, DataSchema

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
    """The retrieval corpus: ids, texts and where each passage comes from (`"gold"`, `"distractor"`, `"train-page"`)."""

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


# ---- the user's own pairs -------------------------------------------------------------------------------------------

PAIRS_SCHEMA = DataSchema(
    (
        Column("query", "str", "a question a user of the client's RAG system asks"),
        Column("passage", "str", "the passage of the client's own documents that answers it (the positive)"),
        Column(
            "client",
            "any",
            "who holds the pair (a company, a site, a department): any value; each distinct value is one federated "
            "client",
        ),
    ),
    description="one row per (query, relevant passage) pair, held by the client named in the row",
)
"""The user's data for `hf-ext train fede4rag --data`: (query, passage, client) rows (FedE4RAG's question–reference
pairs, one client per data holder as the official `IDPartitioner` does with companies)."""


@dataclass(frozen=True)
class UserPairs:
    """The user's pairs after the seeded split: the clients (distinct `client` values, sorted by name), the
    training and test pairs (a [`Pair`]'s `company` is its client, `question` the query, `reference` and `page`
    the passage, `index` the row), and the retrieval corpus (every distinct passage of every split, in order of
    first appearance)."""

    clients: tuple[str, ...]
    train: tuple[Pair, ...]
    test: tuple[Pair, ...]
    passages: tuple[str, ...]

    def client_train(self, client: int) -> list[Pair]:
        return [p for p in self.train if p.company == self.clients[client]]

    def client_test(self, client: int) -> list[Pair]:
        return [p for p in self.test if p.company == self.clients[client]]


def _client_name(value) -> str:
    return str(value).strip()


def load_user_pairs(source: str, *, test: float = 0.1, seed: int = 0) -> UserPairs:
    """The user's (query, passage, client) rows ([`PAIRS_SCHEMA`]) read with
    [`~hf_ext.core.user_data.load_user_data`] and split with [`~hf_ext.core.user_data.split_data`] (the user's own
    `test` split where the source has one, else a seeded `test` share of the rows; no validation split).

    Client names are free-form: each distinct `client` value (as text, stripped) is one client. A test query whose
    exact text is also a training query of the same client is dropped from the test split (it was trained on).

    Raises:
        [`~hf_ext.core.user_data.UserDataError`]: a missing or ill-typed column, an empty query / passage / client,
            or fewer than two training pairs for some client (in-batch negatives need two).
    """
    from hf_ext.core.user_data import UserDataError, load_user_data, split_data

    data = split_data(load_user_data(source, schema=PAIRS_SCHEMA), validation=0.0, test=test, seed=seed)
    if "test" not in data:
        raise UserDataError(f"{source}: no test split (give the data a test split or a test share above 0)")
    out: dict[str, list[Pair]] = {}
    for split in ("train", "test"):
        rows = []
        table = data[split]
        for i, (q, p, c) in enumerate(zip(table["query"], table["passage"], table["client"])):
            name = _client_name(c) if c is not None else ""
            for column, value in (("query", q), ("passage", p), ("client", name)):
                if value is None or not str(value).strip():
                    raise UserDataError(f"{source}: split {split!r} row {i} has an empty {column!r}")
            rows.append(Pair(name, str(q), str(p), str(p), i))
        out[split] = rows
    clients = tuple(sorted({p.company for p in out["train"]}))
    unseen = sorted({p.company for p in out["test"]} - set(clients))
    if unseen:
        raise UserDataError(f"{source}: test rows of client(s) {unseen} have no training rows")
    for name in clients:
        n = sum(p.company == name for p in out["train"])
        if n < 2:
            raise UserDataError(
                f"{source}: client {name!r} has {n} training pair(s); each client needs at least 2 (in-batch negatives)"
            )
    trained = {(p.company, p.question) for p in out["train"]}
    test_pairs = [p for p in out["test"] if (p.company, p.question) not in trained]
    if not test_pairs:
        raise UserDataError(f"{source}: no test pair is left to evaluate on (add rows or a test split)")
    passages = dict.fromkeys(p.reference for p in out["train"] + out["test"])
    return UserPairs(clients, tuple(out["train"]), tuple(test_pairs), tuple(passages))


def write_example_data(path: str | os.PathLike, *, clients: tuple[str, ...] = ("ACME", "GLOBEX"), per_client=12):
    """Writes a small CSV in [`PAIRS_SCHEMA`] (query, passage, client): `per_client` made-up report passages per
    client, each with one question. For the docs example and the tests; real data has one row per (query, passage)."""
    import csv

    metrics = ("revenue", "net income", "headcount", "capital expenditure", "R&D spending", "dividend", "debt")
    rows = []
    for c, name in enumerate(clients):
        for i in range(per_client):
            year, what = 2010 + i, metrics[(i + c) % len(metrics)]
            value = 100 + 37 * i + 11 * c
            rows.append(
                {
                    "query": f"What was {name.title()}'s {what} in {year}?",
                    "passage": f"In fiscal {year}, {name.title()} reported {what} of {value} million dollars.",
                    "client": name,
                }
            )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["query", "passage", "client"])
        writer.writeheader()
        writer.writerows(rows)
    return path


__all__ = [
    "COMPANIES",
    "PAIRS_SCHEMA",
    "UserPairs",
    "load_user_pairs",
    "write_example_data",
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
