"""`hf-ext reproduce proto_evfl` at a tiny scale: the results JSON has every setting × variant with seed spread, and
the published artifacts load through AutoModel."""

import json

import numpy as np
import pytest
from transformers import AutoModel

from hf_ext.proto_evfl import ProtoEvflForClassification, ProtoEvflPartyModel
from hf_ext.proto_evfl.reproduce import main, make_parser


def test_parser_defaults():
    ns = make_parser().parse_args([])
    assert ns.out is None and ns.full is False
    assert make_parser().parse_args(["--full"]).full


def test_tiny_reproduce_writes_results_and_artifacts(tmp_path):
    out = tmp_path / "run"
    results = main(["--out", str(out), "--rounds", "3", "--seeds", "0", "1", "--workers", "1",
                    "--variants", "vanilla_vfl", "local_only", "proto_evfl"])  # fmt: skip
    saved = json.loads((out / "results.json").read_text())
    assert saved["rows"] == results["rows"]
    assert [(r["setting"], r["variant"]) for r in saved["rows"]] == [
        (s, v) for s in ("long_tail", "zero_shot") for v in ("vanilla_vfl", "local_only", "proto_evfl")
    ]
    for row in saved["rows"]:
        assert len(row["per_seed"]) == 2
        acc = [m["accuracy"] for m in row["per_seed"]]
        assert row["metrics"]["accuracy"]["std"] == float(np.std(acc))
        assert ("unseen_accuracy" in row["metrics"]) == (row["setting"] == "zero_shot")
    assert "| digits | zero_shot | 50 | proto_evfl |" in results["table"]
    zs = {r["variant"]: r for r in saved["rows"] if r["setting"] == "zero_shot"}
    assert "oracle_unseen_accuracy" in zs["proto_evfl"]["metrics"]  # the ceiling of the prototype transfer
    assert zs["proto_evfl"]["metrics"]["label_leak_accuracy"]["mean"] == 1.0  # argmin ∂L/∂s^k is the label
    # Paired differences: seed by seed, the same split for both variants.
    paired = {(p["setting"], p["variant"]): p["minus_vanilla_vfl"] for p in saved["paired"]}
    d = paired[("zero_shot", "proto_evfl")]["accuracy"]["per_seed"]
    assert d == [
        a["accuracy"] - b["accuracy"] for a, b in zip(zs["proto_evfl"]["per_seed"], zs["vanilla_vfl"]["per_seed"])
    ]
    top = AutoModel.from_pretrained(out / "artifact")
    party = AutoModel.from_pretrained(out / "artifact" / "parties" / "party-1")  # published with the top model
    assert isinstance(top, ProtoEvflForClassification) and isinstance(party, ProtoEvflPartyModel)
    assert top.unseen_classes.numel() == 1 and party.config.party_index == 1
    assert (out / "artifact" / "README.md").read_text().count("## ") >= 3  # the rendered model card


def test_train_help_shows_the_real_options(capsys):
    from hf_ext.core.cli import main as cli

    with pytest.raises(SystemExit):
        cli(["train", "proto_evfl", "--help"])
    text = capsys.readouterr().out
    for option in ("--unseen_class", "--dataset", "--prior_mix", "--party_data_dir", "--local_loss_weight"):
        assert option in text
