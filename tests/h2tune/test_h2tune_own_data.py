"""Issue 36, H2Tune on the user's own federation: a federation file naming each client's base decoder (tiny Llama-
and GPT-2-style folders built in tmp, with their own tokenizer: heterogeneous architectures) and instruction data →
`hf-ext train h2tune --federation` → every client saved and loadable → `hf-ext evaluate` (the same test items, the
same numbers; paired with the local-only baseline) → `hf-ext push --dry-run`; bad files fail in one line naming the
client and the column."""

import csv
import json
from pathlib import Path

import pytest

from hf_ext.core.cli import main as cli
from hf_ext.core.user_data import UserDataError
from hf_ext.h2tune.federation import INSTRUCTION_SCHEMA, read_federation, write_example_federation
from tests.helpers.own_data import check_own_data_path

QUICK = ["--num_server_rounds", "1", "--local_steps", "2", "--batch_size", "8"]


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    return write_example_federation(tmp_path_factory.mktemp("fed") / "my-federation")


def test_train_evaluate_push_on_own_federation(tmp_path, federation):
    from transformers import AutoConfig

    from hf_ext.h2tune.artifact import load_release

    artifact = tmp_path / "trained"
    train_argv = ["--federation", str(federation), "--output_dir", str(artifact), *QUICK, "--with_local_only"]
    result = check_own_data_path(
        "h2tune",
        tmp_path,
        data=federation,
        artifact=artifact,
        train_argv=train_argv,
        evaluate_argv=["--baseline", "local-only"],
        load=load_release,
        expect_metrics=("clinic exact match", "clinic answer loss", "lab exact match", "exact match (all clients)"),
    )
    record = result["record"]
    assert [c["name"] for c in record["config"]["federation"]] == ["clinic", "lab"]
    assert record["config"]["federation"][1]["base_model"] == str(federation.parent / "gpt2-tiny")  # resolved
    assert record["base_model"] is None  # local folders are no Hub base; each one is in config.federation
    assert [d["name"] for d in record["datasets"]] == ["clinic: clinic.jsonl", "lab: lab.csv"]
    assert all(d["fingerprint"].startswith("sha256:") for d in record["datasets"])
    # heterogeneous clients: the root folder is clinic's Llama, clients/lab is the GPT-2 one, each with its adapter
    assert AutoConfig.from_pretrained(artifact).model_type == "llama"
    lab = load_release(artifact / "clients" / "lab")
    assert lab.get_base_model().config.model_type == "gpt2"
    assert type(lab.peft_config["default"]).__name__ == "H2TuneConfig"
    local = load_release(artifact / "local-only" / "lab")
    assert type(local.peft_config["default"]).__name__ == "LoraConfig"
    # evaluate re-derives each client's seeded test split: the record's numbers, and 4 paired items per client
    got = {m["name"]: m["value"] for m in result["evaluation"]["metrics"]}
    assert got == pytest.approx({m["name"]: m["value"] for m in record["metrics"]}, abs=1e-5)
    comparison = result["evaluation"]["comparison"]
    assert comparison["lab exact match"]["n"] == 4 and comparison["exact match (all clients)"]["n"] == 8
    assert comparison["clinic answer loss"]["baseline"] == str(artifact / "local-only")
    # a federation compared with itself: every paired difference is exactly zero
    out = tmp_path / "self.json"
    assert cli(["evaluate", "h2tune", "--model", str(artifact), "--data", str(federation), "--output", str(out),
                "--baseline", str(artifact)]) == 0  # fmt: skip
    assert all(set(c["per_pair"]) == {0.0} for c in json.loads(out.read_text())["comparison"].values())


def test_json_and_yaml_federation_files_agree_and_paths_resolve_against_the_file(tmp_path, federation):
    clients = read_federation(federation)
    as_json = tmp_path / "fed.json"
    as_json.write_text(json.dumps({"clients": [
        {"name": "clinic", "base_model": str(federation.parent / "llama-tiny"), "data": str(federation.parent /
         "clinic.jsonl"), "rank": 4},
        {"name": "lab", "base_model": str(federation.parent / "gpt2-tiny"), "data": str(federation.parent / "lab.csv"),
         "rank": 8}]}))  # fmt: skip
    assert read_federation(as_json) == clients
    assert clients[0].rank == 4 and Path(clients[0].data).is_absolute()
    hub = tmp_path / "hub.yaml"
    hub.write_text("- {base_model: HuggingFaceTB/SmolLM2-135M-Instruct, data: someone/instructions}\n")
    (c,) = read_federation(hub)
    assert (c.name, c.base_model, c.data, c.rank) == ("client-0", "HuggingFaceTB/SmolLM2-135M-Instruct",
                                                     "someone/instructions", None)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("clients: [{base_model: a}]", "lacks ['data']"),
        ("clients: [{base_model: a, data: b, lr: 1}]", "unknown key(s) ['lr']"),
        ("clients: [{base_model: a, data: b, rank: 0}]", "'rank' must be an integer >= 1"),
        ("clients: [{name: x, base_model: a, data: b}, {name: x, base_model: a, data: b}]", "must be distinct"),
        ("clients: []", "non-empty list 'clients'"),
    ],
)
def test_bad_federation_files_name_the_problem(tmp_path, text, needle):
    path = tmp_path / "fed.yaml"
    path.write_text(text)
    with pytest.raises(UserDataError) as err:
        read_federation(path)
    assert needle in str(err.value)


@pytest.mark.parametrize(
    ("rows", "needle"),
    [
        ([["instruction"], ["What is 1+1?"]], "'response'"),
        ([["instruction", "response"], [1, "x"]], "'instruction'"),
    ],
    ids=["missing response", "numeric instruction"],
)
def test_bad_client_data_fails_in_one_line_naming_client_and_column(tmp_path, federation, capsys, rows, needle):
    import shutil

    folder = tmp_path / "fed"
    shutil.copytree(federation.parent, folder)
    with open(folder / "lab.csv", "w", newline="") as f:
        csv.writer(f).writerows([rows[0], *[rows[1]] * 10])
    for command in ("train", "evaluate"):
        argv = [command, "h2tune", "--federation" if command == "train" else "--data", str(folder / "federation.yaml")]
        argv += ["--output_dir", str(tmp_path / "out")] if command == "train" else ["--model", str(tmp_path)]
        assert cli(argv) == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.startswith("hf-ext")]  # not datasets' progress bars
        assert len(lines) == 1 and needle in lines[0] and "client 'lab'" in lines[0] and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing was trained


def test_a_client_file_with_the_older_prompt_answer_columns_is_read_and_split_with_the_seed(tmp_path):
    from hf_ext.h2tune.federation import load_client_split

    rows = [{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(20)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    train, test = load_client_split(str(tmp_path / "d.jsonl"), seed=1, num_train=100, num_test=100)
    assert len(train) == 18 and len(test) == 2 and not set(train) & set(test)
    assert sorted(train + test) == sorted((r["prompt"], r["answer"]) for r in rows)
    assert load_client_split(str(tmp_path / "d.jsonl"), seed=1, num_train=5, num_test=100) == (train[:5], test)
    assert load_client_split(str(tmp_path / "d.jsonl"), seed=2, num_train=100, num_test=100)[1] != test


def test_docs_page_shows_the_schema():
    page = Path(__file__).resolve().parents[2] / "docs" / "methods" / "h2tune.md"
    assert INSTRUCTION_SCHEMA.to_markdown() in page.read_text()
