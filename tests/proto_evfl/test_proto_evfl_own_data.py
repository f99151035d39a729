"""Proto-EVFL on the user's own files (issue 36): one feature file per party keyed by entity id plus the active
party's labels → `hf-ext train` → `from_pretrained` → `hf-ext evaluate` (paired with a vanilla-VFL baseline) →
`hf-ext push --dry-run`; alignment by id in the paper's terms; bad files fail naming the column or the ids."""

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.own_data import check_own_data_path, run_cli

from hf_ext.core.cli import main as cli
from hf_ext.core.user_data import UserDataError
from hf_ext.proto_evfl.data import LABELS_SCHEMA, PARTY_SCHEMA
from hf_ext.proto_evfl.party_data import align_party_files, resolve_party_files, write_example_data

TINY = ["--rounds", "3", "--warmup_rounds", "1", "--local_steps", "1"]


def test_own_files_train_load_evaluate_against_vanilla_vfl_and_push(tmp_path):
    from transformers import AutoModel

    from hf_ext.proto_evfl.inference import load_federation

    data = write_example_data(tmp_path / "my parties")
    base = tmp_path / "vanilla"
    run_cli("train", "proto_evfl", "--data", data, "--output_dir", base, "--selection", "none", *TINY)
    out = tmp_path / "out"
    result = check_own_data_path(
        "proto_evfl",
        tmp_path,
        data=data,
        artifact=out / "artifact",
        train_argv=["--data", str(data), "--output_dir", str(out), *TINY],
        evaluate_argv=["--baseline", str(base / "artifact")],
        load=lambda p: (AutoModel.from_pretrained(p), load_federation(p)),
        expect_metrics=["accuracy", "macro-F1"],
    )
    record, evaluation = result["record"], result["evaluation"]
    config = record["config"]
    assert config["class_names"] == ["no", "yes"] and config["id_column"] == "id"
    assert record["datasets"][0]["rows"]["test"] == 11  # 53 aligned labelled entities, 20 % held out
    # evaluate re-aligns the files, re-draws the recorded split and scores the same test entities with the saved
    # models: exactly the numbers the federation measured at the end of training
    recorded = {m["name"]: m["value"] for m in record["metrics"]}
    assert {m["name"]: m["value"] for m in evaluation["metrics"]} == pytest.approx(recorded, abs=1e-12)
    paired = evaluation["comparison"]["accuracy"]
    assert paired["n"] == 11 and paired["mean"] == pytest.approx(recorded["accuracy"] - paired["baseline_accuracy"])
    # the train output folder is accepted as --model, and the files named one by one are the same data
    again = tmp_path / "again.json"
    argv = ["evaluate", "proto_evfl", "--model", str(out), "--party_data", str(data / "party-0.csv"),
            str(data / "party-1.csv"), "--labels", str(data / "labels.csv"), "--output", str(again)]  # fmt: skip
    assert cli(argv) == 0
    named = {m["name"]: m["value"] for m in json.loads(again.read_text())["metrics"]}
    assert named == {m["name"]: m["value"] for m in evaluation["metrics"]}


def test_the_simulated_default_also_writes_a_record_that_pushes(tmp_path):
    from hf_ext.core.records import load_training_record

    out = tmp_path / "sim"
    run_cli("train", "proto_evfl", "--output_dir", out, "--rounds", "2", "--warmup_rounds", "1", "--local_steps", "1")
    record = load_training_record(out / "artifact")
    assert record["command"].startswith("hf-ext train proto_evfl --output_dir") and record["trained"]
    assert record["datasets"][0]["name"] == "digits" and "data" not in record["config"]
    metrics = json.loads((out / "metrics.json").read_text())["metrics"]
    assert {m["name"]: m["value"] for m in record["metrics"]} == {"accuracy": metrics["accuracy"],
                                                                   "macro-F1": metrics["macro_f1"]}  # fmt: skip
    run_cli("push", "proto_evfl", "--repo-id", "someone/p", "--from", out / "artifact", "--dry-run", "--out",
            tmp_path / "up")  # fmt: skip


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    path.write_text("\n".join(",".join(map(str, r)) for r in [header, *rows]) + "\n")
    return path


@pytest.fixture
def hand_made(tmp_path):
    """Party 0 holds ids 1-8, party 1 ids 3-10; labels for 1 (party 0 only) and 3-8 (both)."""
    a = write_csv(tmp_path / "a.csv", ["customer", "age", "income"], [[i, i, 2 * i] for i in range(1, 9)])
    b = write_csv(tmp_path / "b.csv", ["customer", "visits"], [[i, 0.5 * i] for i in range(3, 11)])
    y = write_csv(tmp_path / "y.csv", ["customer", "churn"], [[i, i % 2] for i in (1, 3, 4, 5, 6, 7, 8)])
    return tmp_path, a, b, y


def test_alignment_by_id_in_the_papers_terms(hand_made, capsys):
    folder, a, b, y = hand_made
    files = resolve_party_files("", [a, b], str(y), id_column="customer", label_column="churn")
    aligned = align_party_files(files, test_size=0.34, seed=3)
    assert sorted(aligned.train_ids + aligned.test_ids) == ["3", "4", "5", "6", "7", "8"]  # held by both, labelled
    assert len(aligned.test_ids) == 2 and not set(aligned.test_ids) & set(aligned.train_ids)
    assert aligned.unaligned_ids(0) == ["1", "2"] and aligned.unaligned_ids(1) == ["9", "10"]
    assert aligned.widths == [2, 1] and aligned.class_names == ("0", "1")
    assert "1 labelled entities are not held by every party ('1'; missing from party 1: 1)" in capsys.readouterr().out
    np.testing.assert_array_equal(aligned.features_of(1, ["4", "3"]), [[2.0], [1.5]])
    # a YAML manifest naming the same files (relative paths, its own column names) aligns identically
    (folder / "federation.yaml").write_text("parties: [a.csv, b.csv]\nlabels: y.csv\nid_column: customer\n"
                                            "label_column: churn\n")  # fmt: skip
    again = align_party_files(resolve_party_files(str(folder / "federation.yaml")), test_size=0.34, seed=3)
    assert again.test_ids == aligned.test_ids and again.labels == aligned.labels


def test_schemas_document_the_files():
    assert PARTY_SCHEMA.names == ["id"] and LABELS_SCHEMA.names == ["id", "label"]
    page = (Path(__file__).parents[2] / "docs/methods/proto_evfl.md").read_text()
    assert PARTY_SCHEMA.to_markdown() in page and LABELS_SCHEMA.to_markdown() in page


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing label column", r"has no column 'label'"),
        ("string feature", r"column 'city' should be float, found (large_)?string"),
        ("label in no party", r"1 labelled id\(s\) are in no party file \('99'\)"),
        ("repeated id", r"repeats ids \['3'\]"),
    ],
)
def test_bad_files_fail_before_training_naming_the_column_or_ids(hand_made, capsys, case, message):
    folder, a, b, y = hand_made
    if case == "missing label column":
        y = write_csv(folder / "y.csv", ["id", "churn"], [[3, 1]])
    a = write_csv(folder / "a.csv", ["id", "age"], [[i, i] for i in range(1, 9)])
    b = write_csv(folder / "b.csv", ["id", "visits"], [[i, i] for i in range(3, 11)])
    if case != "missing label column":
        y = write_csv(folder / "y.csv", ["id", "label"], [[i, i % 2] for i in range(3, 9)])
    if case == "string feature":
        b = write_csv(folder / "b.csv", ["id", "visits", "city"], [[i, i, "Oslo"] for i in range(3, 11)])
    if case == "label in no party":
        y = write_csv(folder / "y.csv", ["id", "label"], [[i, i % 2] for i in (3, 4, 5, 99)])
    if case == "repeated id":
        a = write_csv(folder / "a.csv", ["id", "age"], [[i, i] for i in (1, 2, 3, 3, 4, 5, 6)])
    with pytest.raises(UserDataError, match=message):
        align_party_files(resolve_party_files("", [a, b], str(y)))
    capsys.readouterr()
    argv = ["train", "proto_evfl", "--party_data", str(a), str(b), "--labels", str(y), "--output_dir",
            str(folder / "never")]  # fmt: skip
    assert cli(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("hf-ext train: error:") and "Traceback" not in err
    assert not (folder / "never").exists()  # nothing trained, nothing written


def test_data_flag_forms_are_checked(tmp_path):
    data = write_example_data(tmp_path / "d")
    with pytest.raises(UserDataError, match="either --data"):
        resolve_party_files(str(data), [str(data / "party-0.csv")], "")
    with pytest.raises(UserDataError, match="needs --party_data"):
        resolve_party_files("", [str(data / "party-0.csv")], "")
    with pytest.raises(UserDataError, match="at least 2 party files"):
        resolve_party_files("", [str(data / "party-0.csv")], str(data / "labels.csv"))
    (tmp_path / "m.json").write_text(json.dumps({"parties": ["d/party-0.csv"], "lables": "d/labels.csv"}))
    with pytest.raises(UserDataError, match="needs 'parties'"):
        resolve_party_files(str(tmp_path / "m.json"))
    assert resolve_party_files(str(data)).parties == (str(data / "party-0.csv"), str(data / "party-1.csv"))
