"""FL-LLaMA on the user's own corpus and Llama: `hf-ext train fl_llama --data --model_name_or_path` → the client part
loads with `AutoModel` → `hf-ext evaluate fl_llama` (same test documents, paired with the unsplit base) → `hf-ext push
--dry-run`; the `.txt` one-document-per-line format; bad data, a non-Llama model and a missing flag fail in one line
before any training."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hf_ext.core.cli import main as cli
from hf_ext.fl_llama.data import SCHEMA, write_example_corpus
from hf_ext.fl_llama.presets import save_tiny_llama
from tests.helpers.own_data import check_own_data_path

TINY = ["--steps", "6", "--batch_size", "4", "--lr", "1e-2", "--max_length", "32"]


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """The user's corpus (JSONL, `text` column) and their Llama (a tiny random one with its own tokenizer)."""
    root = tmp_path_factory.mktemp("fl_llama_user")
    corpus = write_example_corpus(root / "corpus.jsonl", documents=30)
    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines()]
    return {"corpus": corpus, "llama": save_tiny_llama(root / "my-llama", texts), "texts": texts}


def test_train_evaluate_push_on_own_corpus(user, tmp_path):
    from transformers import AutoModel

    out = tmp_path / "split"
    result = check_own_data_path(
        "fl_llama",
        tmp_path,
        data=user["corpus"],
        artifact=out,
        train_argv=["--data", user["corpus"], "--model_name_or_path", user["llama"], "--output_dir", out, *TINY],
        evaluate_argv=["--baseline", user["llama"]],
        load=lambda path: AutoModel.from_pretrained(path / "client"),
        expect_metrics=["test loss", "test perplexity"],
    )
    record, evaluation = result["record"], result["evaluation"]
    got = {m["name"]: m["value"] for m in record["metrics"]}
    assert math.isclose(got["test perplexity"], math.exp(got["test loss"]), rel_tol=1e-9)
    rows = record["config"]["split_rows"]
    assert rows == {"train": 24, "validation": 3, "test": 3}  # 30 documents, seeded 10 % / 10 % split
    assert record["datasets"][0]["rows"] == {"train": 30}
    # evaluate repeats the run's split: the same test documents give the same loss (noise-free split, s = 0)
    again = {m["name"]: m["value"] for m in evaluation["metrics"]}
    assert again["test loss"] == pytest.approx(got["test loss"], rel=1e-6)
    # the unsplit base it was split from, on the same documents, equals the base score the record kept
    pair = evaluation["comparison"]["test loss (per document)"]
    assert pair["documents"] == 3
    assert pair["baseline"] == pytest.approx(record["config"]["base_model_test_loss"], rel=1e-6)
    assert pair["model"] < pair["baseline"]  # six steps at lr 1e-2 already beat the random base
    # both parties' parts carry the run's record; the client part says which half it is
    for part in ("client", "server"):
        part_record = json.loads((out / part / "training_record.json").read_text())
        assert part_record["metrics"] == record["metrics"]
    assert "client's part" in json.loads((out / "client" / "training_record.json").read_text())["notes"]


def test_txt_corpus_is_one_document_per_line(user, tmp_path):
    corpus = tmp_path / "corpus.txt"
    # 20 documents, with blank lines between some of them (skipped, not documents)
    corpus.write_text("\n".join(t + ("\n" if i % 4 == 0 else "") for i, t in enumerate(user["texts"][:20])) + "\n\n")
    out = tmp_path / "split"
    argv = ["--data", corpus, "--model_name_or_path", user["llama"], "--output_dir", out, "--steps", "1"]
    assert cli(["train", "fl_llama", *map(str, argv), "--max_length", "16", "--test_split", "0.2"]) == 0
    record = json.loads((out / "training_record.json").read_text())
    assert record["datasets"][0]["rows"] == {"train": 20}
    assert record["config"]["split_rows"] == {"train": 14, "validation": 2, "test": 4}
    assert record["command"].startswith("hf-ext train fl_llama --data")


def _fails(capsys, argv: list[str]) -> str:
    assert cli([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    # one error line (datasets' progress bars may precede it on stderr), no traceback
    lines = [line for line in err.splitlines() if line.startswith("hf-ext")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_missing_and_ill_typed_text_column_are_named(user, tmp_path, capsys):
    missing = tmp_path / "missing.jsonl"
    missing.write_text("\n".join(json.dumps({"body": t}) for t in user["texts"][:5]))
    ill_typed = tmp_path / "ill_typed.jsonl"
    ill_typed.write_text("\n".join(json.dumps({"text": i}) for i in range(5)))
    common = ["--model_name_or_path", user["llama"], "--output_dir", tmp_path / "never"]
    err = _fails(capsys, ["train", "fl_llama", "--data", missing, *common])
    assert "has no column 'text'" in err and "body" in err
    err = _fails(capsys, ["train", "fl_llama", "--data", ill_typed, *common])
    assert "column 'text' should be str, found int64" in err
    err = _fails(capsys, ["evaluate", "fl_llama", "--model", tmp_path / "never", "--data", missing])
    assert not (tmp_path / "never").exists()


def test_a_non_llama_model_is_refused_naming_its_architecture(user, tmp_path, capsys):
    from transformers import GPT2Config

    GPT2Config(n_layer=2, n_embd=16, n_head=2, architectures=["GPT2LMHeadModel"]).save_pretrained(tmp_path / "gpt2")
    err = _fails(capsys, ["train", "fl_llama", "--data", user["corpus"], "--model_name_or_path", tmp_path / "gpt2",
                          "--output_dir", tmp_path / "out"])  # fmt: skip
    assert "'gpt2' model (GPT2LMHeadModel)" in err and "model_type 'llama'" in err
    assert not (tmp_path / "out").exists()


def test_data_needs_a_model(user, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli(["train", "fl_llama", "--data", str(user["corpus"]), "--output_dir", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert "--data needs --model_name_or_path" in capsys.readouterr().err


def test_docs_page_shows_the_schema():
    page = Path(__file__).resolve().parents[2] / "docs" / "methods" / "fl_llama.md"
    assert SCHEMA.to_markdown() in page.read_text()
