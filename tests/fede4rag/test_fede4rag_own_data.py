"""Issue 36, FedE4RAG on the user's own (query, passage, client) rows: free-form client names (each distinct value is
one client), train → load → evaluate (the same test rows, the same numbers) → push with no extra flag, a paired
comparison with a baseline, and bad data failing before any work with one line naming the column."""

import csv
import json
from dataclasses import replace

import pytest

from hf_ext.core.cli import main as cli
from hf_ext.core.user_data import UserDataError
from hf_ext.fede4rag.data import PAIRS_SCHEMA, load_user_pairs, write_example_data
from hf_ext.fede4rag.testing import tiny_encoder_folder
from tests.helpers.own_data import check_own_data_path

TINY = ["--lora_layers", "1", "--lora_rank", "2", "--max_passage_length", "32"]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return tiny_encoder_folder(tmp_path_factory.mktemp("encoder") / "bert")


def _write(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_free_form_client_names_are_the_clients(tmp_path):
    """The issue's `pairs from companies ['ACME', 'GLOBEX'] have no client`: any client value is a client now
    (numbers included, as text), each client trains only on its own rows and is tested on its own held-out ones."""
    from hf_ext.fede4rag.task import RunConfig, client_heldout, client_pairs

    data = write_example_data(tmp_path / "pairs.csv", clients=("ACME", "GLOBEX", "42"), per_client=10)
    up = load_user_pairs(str(data), test=0.2, seed=3)
    assert up.clients == ("42", "ACME", "GLOBEX")
    run = RunConfig(user_data=str(data), test_fraction=0.2, seed=3, batch_size=2)
    assert run.client_names == up.clients and run.companies == (0, 1, 2)
    for i, name in enumerate(up.clients):
        train, held = client_pairs(i, run), client_heldout(i, run)
        assert train and {p.company for p in train} == {name}
        assert {p.company for p in held} <= {name}
        assert not {p.question for p in held} & {p.question for p in train}
    assert sum(len(client_pairs(i, run)) for i in range(3)) == len(up.train) == 30 - round(0.2 * 30)
    # the split is seeded: the same seed gives the same test rows, another seed other ones
    assert load_user_pairs(str(data), test=0.2, seed=3).test == up.test
    assert load_user_pairs(str(data), test=0.2, seed=4).test != up.test
    with pytest.raises(ValueError, match="partition-id 3 has no client"):
        client_pairs(3, replace(run, client_companies=""))


def test_train_evaluate_push_on_own_pairs(tmp_path, encoder):
    data = write_example_data(tmp_path / "data" / "pairs.csv", clients=("ACME", "GLOBEX"), per_client=16)
    artifact = tmp_path / "retriever"
    train_argv = ["--data", data, "--output_dir", artifact, "--base_model", encoder, "--engine", "local"]
    train_argv += ["--rounds", "1", "--learning_rate", "0.01", *TINY]

    def load(path):
        from transformers import AutoModel

        return AutoModel.from_pretrained(path)

    result = check_own_data_path(
        "fede4rag",
        tmp_path,
        data=data,
        artifact=artifact,
        train_argv=[str(a) for a in train_argv],
        load=load,
        expect_metrics=("recall@1", "recall@10", "mrr", "ndcg@10", "own.mrr"),
    )
    record = result["record"]
    assert record["config"]["clients"] == ["ACME", "GLOBEX"]
    assert record["config"]["user_data"] == str(data) and record["config"]["split"]["test"] == 3
    assert record["datasets"][0]["name"] == "pairs.csv" and record["datasets"][0]["rows"] == {"train": 32}
    assert record["base_model"] is None  # a local encoder folder is no Hub base; its path is in the config
    # evaluate re-derives the recorded split: the same test queries give the record's numbers
    got = {m["name"]: m["value"] for m in result["evaluation"]["metrics"]}
    assert got == pytest.approx({m["name"]: m["value"] for m in record["metrics"]}, abs=1e-6)
    # the saved retriever keeps sentence-transformers' layout
    assert json.loads((artifact / "modules.json").read_text())[1]["path"] == "1_Pooling"

    # a baseline that is the model itself: every paired difference is exactly zero; the base encoder: per query
    out = tmp_path / "self.json"
    assert cli(["evaluate", "fede4rag", "--model", str(artifact), "--data", str(data), "--output", str(out),
                "--baseline", str(artifact)]) == 0  # fmt: skip
    comparison = json.loads(out.read_text())["comparison"]
    assert set(comparison) >= {"mrr", "recall@1", "own.mrr"}
    assert all(c["mean"] == 0.0 and c["n"] == 3 and set(c["per_pair"]) == {0.0} for c in comparison.values())
    out = tmp_path / "base.json"
    assert cli(["evaluate", "fede4rag", "--model", str(artifact), "--data", str(data), "--output", str(out),
                "--baseline", "base"]) == 0  # fmt: skip
    base = json.loads(out.read_text())["comparison"]["mrr"]
    assert base["baseline"] == str(encoder) and base["method"] == "bootstrap" and len(base["per_pair"]) == 3


@pytest.mark.parametrize(
    ("rows", "needle"),
    [
        ([{"query": "q1", "client": "A"}, {"query": "q2", "client": "B"}], "'passage'"),
        ([{"query": 1, "passage": "p1", "client": "A"}, {"query": 2, "passage": "p2", "client": "B"}], "'query'"),
    ],
    ids=["missing passage", "numeric query"],
)
def test_bad_data_fails_in_one_line_naming_the_column(tmp_path, capsys, rows, needle):
    data = _write(tmp_path / "pairs.csv", rows * 5)
    with pytest.raises(UserDataError, match=needle):
        load_user_pairs(str(data))
    for command in ("train", "evaluate"):
        argv = [command, "fede4rag", "--data", str(data)]
        argv += ["--output_dir", str(tmp_path / "out")] if command == "train" else ["--model", str(tmp_path)]
        assert cli(argv) == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.startswith("hf-ext")]  # not datasets' progress bars
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()  # nothing was trained


def test_a_client_needs_two_training_pairs(tmp_path):
    """(With the user's own train / test files in a folder: their test split is used as given.)"""
    rows = [{"query": f"q{i}", "passage": f"p{i}", "client": "BIG"} for i in range(10)]
    _write(tmp_path / "test.csv", rows[:2])
    _write(tmp_path / "train.csv", [*rows[2:], {"query": "lonely", "passage": "alone", "client": "TINY"}])
    with pytest.raises(UserDataError, match="client 'TINY' has 1 training pair"):
        load_user_pairs(str(tmp_path))
    _write(tmp_path / "train.csv", rows[2:])
    up = load_user_pairs(str(tmp_path))
    assert up.clients == ("BIG",) and [p.question for p in up.test] == ["q0", "q1"] and len(up.train) == 8


def test_docs_page_shows_the_schema():
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "methods" / "fede4rag.md"
    assert PAIRS_SCHEMA.to_markdown() in page.read_text()
