"""TinyAlign on the user's own image–caption pairs: `hf-ext train tinyalign --data` → load → `hf-ext evaluate` (with
the no-memory baseline, paired) → `hf-ext push --dry-run`; the schema's failures through the CLI; any vision encoder
and LM given as local folders; resume from a checkpoint. Tiny parts (random ConvNeXt, 1-block Llama): seconds."""

from __future__ import annotations

import json

import pytest
from helpers.own_data import REPO_ROOT, check_own_data_path, run_cli

from hf_ext.core.cli import main as cli
from hf_ext.core.records import load_training_record
from hf_ext.tinyalign.data import SCHEMA, load_caption_data, split_caption_data, write_example_data

TINY = ("--vision_model", "tiny", "--language_model", "tiny", "--tiny_lm_steps", "40", "--disable_tqdm", "true")
METRICS = ("caption CE (nats/token)", "token accuracy", "BLEU-4")


def _train_argv(data, out, *extra):
    return [
        "--data",
        data,
        "--output_dir",
        out,
        *TINY,
        "--max_steps",
        "6",
        "--per_device_train_batch_size",
        "8",
        *extra,
    ]


def test_own_data_train_evaluate_push_with_baseline(tmp_path):
    from transformers import AutoModelForImageTextToText

    data = write_example_data(tmp_path / "pairs", n=20)
    run_cli("train", "tinyalign", *_train_argv(data, tmp_path / "base", "--variant", "baseline"))
    result = check_own_data_path(
        "tinyalign",
        tmp_path,
        data=data,
        artifact=tmp_path / "out" / "artifact",
        train_argv=_train_argv(data, tmp_path / "out"),
        evaluate_argv=["--baseline", tmp_path / "base" / "artifact"],
        load=AutoModelForImageTextToText.from_pretrained,
        expect_metrics=METRICS,
    )
    record = result["record"]
    # evaluate rebuilds the recorded split: the same test pairs, hence the same scores as train measured
    trained = {m["name"]: m["value"] for m in record["metrics"]}
    evaluated = {m["name"]: m["value"] for m in result["evaluation"]["metrics"]}
    assert evaluated == pytest.approx(trained, abs=1e-5)
    split = record["config"]["split"]
    assert split["rows"] == {"train": 8, "test": 4, "memory": 8} and split["seed"] == 0
    assert record["config"]["variant"] == "k4" and record["datasets"][0]["rows"]["test"] == 4
    comparison = result["evaluation"]["comparison"]
    assert comparison["caption CE (nats/token)"]["n"] == 4  # paired over the 4 test captions
    base_record = load_training_record(tmp_path / "base" / "artifact")
    base_ce = next(m["value"] for m in base_record["metrics"] if m["name"].startswith("caption CE"))
    assert comparison["baseline"]["caption_ce"] == pytest.approx(base_ce, abs=1e-5)
    assert comparison["caption CE (nats/token)"]["mean"] == pytest.approx(
        trained["caption CE (nats/token)"] - base_ce, abs=0.05
    )  # a per-caption mean, not token-weighted: close to, not equal to, the difference of the corpus CEs


def _cli_error(capsys, *argv) -> str:
    rc = cli([str(a) for a in argv])
    err = capsys.readouterr().err
    # one line for the error (datasets' progress bars may precede it), no traceback
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("hf-ext")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_missing_and_ill_typed_columns_name_the_column(tmp_path, capsys):
    write_example_data(tmp_path / "imgs", n=4)
    missing = tmp_path / "missing.csv"
    missing.write_text("image,text\nimgs/000.png,a red square\n")
    err = _cli_error(capsys, "train", "tinyalign", "--data", missing, "--output_dir", tmp_path / "o", *TINY)
    assert "no column 'caption'" in err
    typed = tmp_path / "typed.csv"
    typed.write_text("image,caption\n1,a red square\n2,a blue circle\n")
    err = _cli_error(capsys, "train", "tinyalign", "--data", typed, "--output_dir", tmp_path / "o", *TINY)
    assert "column 'image' should be image, found int64" in err
    absent = tmp_path / "absent.csv"
    absent.write_text("image,caption\nimgs/nope.png,a red square\n")
    err = _cli_error(capsys, "evaluate", "tinyalign", "--model", tmp_path, "--data", absent)
    assert "column 'image'" in err and "nope.png" in err
    assert not (tmp_path / "o").exists()  # nothing was trained


def test_csv_with_relative_image_paths_and_seeded_split(tmp_path):
    write_example_data(tmp_path / "imgs", n=10)
    table = tmp_path / "pairs.csv"
    table.write_text("image,caption\n" + "".join(f"imgs/{i:03d}.png,caption {i}\n" for i in range(10)))
    data = load_caption_data(table)
    assert data["train"][3]["image"].size == (32, 32) and data["train"][3]["caption"] == "caption 3"
    a, b = split_caption_data(data, seed=1), split_caption_data(data, seed=1)
    assert a["test"]["caption"] == b["test"]["caption"]
    captions = [set(a[s]["caption"]) for s in ("memory", "train", "test")]
    assert sum(map(len, captions)) == 10 and len(set().union(*captions)) == 10  # disjoint, all rows used


def test_any_vision_encoder_and_lm_from_local_folders(tmp_path):
    """`--vision_model` / `--language_model` as folders (what a Hub id resolves to): the artifact references them
    and reloads them from there; the LM's own tokenizer gets the placeholders."""
    from transformers import AutoConfig, AutoModel, AutoModelForImageTextToText, LlamaForCausalLM

    from hf_ext.tinyalign.presets import TINY_VISION
    from hf_ext.tinyalign.processing_tinyalign import build_tokenizer

    data = write_example_data(tmp_path / "pairs", n=12)
    cfg = dict(TINY_VISION)
    AutoModel.from_config(AutoConfig.for_model(cfg.pop("model_type"), **cfg)).save_pretrained(tmp_path / "vision")
    tokenizer = build_tokenizer(load_caption_data(data)["train"]["caption"])
    tokenizer.save_pretrained(tmp_path / "lm")
    lm_config = AutoConfig.for_model(
        "llama", vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    LlamaForCausalLM(lm_config).save_pretrained(tmp_path / "lm")
    out = tmp_path / "out"
    run_cli("train", "tinyalign", "--data", data, "--output_dir", out, "--vision_model", tmp_path / "vision",
            "--language_model", tmp_path / "lm", "--max_steps", "2", "--disable_tqdm", "true")  # fmt: skip
    record = load_training_record(out / "artifact")
    assert record["base_model"] == [str(tmp_path / "vision"), str(tmp_path / "lm")]
    config = json.loads((out / "artifact" / "config.json").read_text())
    assert config["text_model_name_or_path"] == str(tmp_path / "lm")
    model = AutoModelForImageTextToText.from_pretrained(out / "artifact")
    reference = LlamaForCausalLM.from_pretrained(tmp_path / "lm")
    assert all((a == b).all() for a, b in zip(model.language_model.parameters(), reference.parameters(), strict=True))


def test_resume_from_checkpoint(tmp_path):
    data = write_example_data(tmp_path / "pairs", n=12)
    out = tmp_path / "out"
    argv = _train_argv(data, out, "--save_strategy", "steps", "--save_steps", "3")
    run_cli("train", "tinyalign", *argv)
    full = load_training_record(out / "artifact")["metrics"]
    assert (out / "checkpoint-3").is_dir() and (out / "checkpoint-6").is_dir()
    run_cli("train", "tinyalign", *argv, "--resume_from_checkpoint", out / "checkpoint-3")
    resumed = load_training_record(out / "artifact")
    assert "--resume_from_checkpoint" in resumed["command"]
    # steps 4-6 replayed from the step-3 checkpoint (model, optimiser, scheduler, RNG): the same result
    assert {m["name"]: m["value"] for m in resumed["metrics"]} == pytest.approx(
        {m["name"]: m["value"] for m in full}, abs=1e-4
    )


def test_docs_show_the_schema():
    page = (REPO_ROOT / "docs" / "methods" / "tinyalign.md").read_text()
    assert SCHEMA.to_markdown() in page
    assert "## Train on your own data" in page
