"""CodeBC on the user's own contracts and causal LM: `hf-ext train codebc --data contracts/ --model_name_or_path` →
base + adapter load as a user would → `hf-ext evaluate codebc` (same held-out contracts, paired with the base) →
`hf-ext push --dry-run`; tags from `correct/` / `bug/` folders or a `tag` column; bad data fails in one line before any
training."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hf_ext.codebc.data import SCHEMA, write_example_contracts
from hf_ext.codebc.presets import save_tiny_causal_lm
from hf_ext.codebc.solidity import toolchain_problem
from hf_ext.core.cli import main as cli
from tests.helpers.own_data import check_own_data_path

TINY = ["--steps", "2", "--batch_size", "4", "--learning_rate", "1e-2", "--max_length", "256"]


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """The user's contracts (a folder of .sol files, 8 under correct/, 4 under bug/) and their causal LM (a tiny
    random Llama with a BPE trained on the contracts)."""
    root = tmp_path_factory.mktemp("codebc_user")
    folder = write_example_contracts(root / "contracts")
    codes = [p.read_text() for p in sorted(folder.rglob("*.sol"))]
    return {"contracts": folder, "lm": save_tiny_causal_lm(root / "my-lm", codes), "codes": codes}


def _load(path: Path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    return PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(path), path / "adapter")


def test_train_evaluate_push_on_own_contracts(user, tmp_path):
    out = tmp_path / "codebc"
    argv = ["--data", user["contracts"], "--model_name_or_path", user["lm"], "--output_dir", out, *TINY]
    result = check_own_data_path(
        "codebc",
        tmp_path,
        data=user["contracts"],
        artifact=out,
        train_argv=[*argv, "--test_split", "0.25", "--max_new_tokens", "8"],
        evaluate_argv=["--baseline", user["lm"]],
        load=_load,
        expect_metrics=["test loss", "test VD accuracy"],
    )
    record, evaluation = result["record"], result["evaluation"]
    config = record["config"]
    assert config["split_rows"] == {"train": 9, "test": 3}
    assert config["tag_sources"] == {"data": 12}  # every file sits under correct/ or bug/
    assert sum(config["test_tags"].values()) == 3
    got = {m["name"]: m["value"] for m in record["metrics"]}
    # the compile rate is measured exactly when solc-js is installed (generation on, max_new_tokens 8)
    assert ("test compile rate" in got) == (toolchain_problem() is None)
    again = {m["name"]: m["value"] for m in evaluation["metrics"]}
    assert again["test loss"] == pytest.approx(got["test loss"], rel=1e-6)  # the same three contracts
    assert again["test VD accuracy"] == got["test VD accuracy"]
    pair = evaluation["comparison"]["test loss (per contract)"]
    assert pair["contracts"] == 3 and pair["model"] == pytest.approx(got["test loss"], rel=1e-6)
    assert pair["mean"] == pytest.approx(pair["model"] - pair["baseline"], abs=0.05)  # per-contract mean vs pooled
    assert not (tmp_path / ".codebc-trainer").exists()  # Trainer's scratch folder is removed


def test_table_with_some_untagged_rows(user, tmp_path):
    table = tmp_path / "contracts.csv"
    with table.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["code", "tag"])
        for i, code in enumerate(user["codes"]):
            writer.writerow([code, "" if i % 3 == 0 else ("bug" if "tx.origin" in code else "correct")])
    out = tmp_path / "codebc"
    argv = ["train", "codebc", "--data", table, "--model_name_or_path", user["lm"], "--output_dir", out]
    assert cli([str(a) for a in argv] + ["--stages", "TI", "--steps", "1", "--max_new_tokens", "0",
                                         "--label_untagged", "correct"]) == 0  # fmt: skip
    record = json.loads((out / "training_record.json").read_text())
    assert record["config"]["tag_sources"] == {"data": 8, "default": 4}
    assert record["config"]["stages"] == ["TI"] and record["config"]["labeller"] == "correct"
    assert {m["name"] for m in record["metrics"]} == {"test loss", "test VD accuracy"}  # no generation: no compile


def _fails(capsys, argv: list) -> str:
    assert cli([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("hf-ext")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_missing_ill_typed_and_bad_tag_columns_are_named(user, tmp_path, capsys):
    rows = {
        "missing": [{"source": c} for c in user["codes"][:4]],
        "ill_typed": [{"code": i} for i in range(4)],
        "bad_tag": [{"code": c, "tag": "maybe"} for c in user["codes"][:4]],
    }
    common = ["--model_name_or_path", user["lm"], "--output_dir", tmp_path / "never"]
    errors = {}
    for name, table in rows.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in table))
        errors[name] = _fails(capsys, ["train", "codebc", "--data", path, *common])
    assert "has no column 'code'" in errors["missing"] and "source" in errors["missing"]
    assert "column 'code' should be str, found int64" in errors["ill_typed"]
    assert "column 'tag' must be one of ('correct', 'bug')" in errors["bad_tag"] and "maybe" in errors["bad_tag"]
    assert not (tmp_path / "never").exists()


def test_lora_targets_must_exist_in_the_model(user):
    from transformers import AutoModelForCausalLM

    from hf_ext.codebc.train_contracts import lora_targets

    model = AutoModelForCausalLM.from_pretrained(user["lm"])
    assert lora_targets(model, "q_proj, v_proj") == ["q_proj", "v_proj"]
    with pytest.raises(ValueError, match=r"--lora_targets c_attn: no such linear layer.*'q_proj'"):
        lora_targets(model, "c_attn")


def test_data_needs_a_model(user, tmp_path):
    with pytest.raises(SystemExit, match="--data needs --model_name_or_path"):
        cli(["train", "codebc", "--data", str(user["contracts"]), "--output_dir", str(tmp_path / "out")])


def test_docs_page_shows_the_schema():
    page = Path(__file__).resolve().parents[2] / "docs" / "methods" / "codebc.md"
    assert SCHEMA.to_markdown() in page.read_text()
