"""`hf-ext reproduce proto_evfl` at a tiny scale: the results JSON has every setting × variant with seed spread, and
the published artifacts load through AutoModel."""

import json

import numpy as np
from transformers import AutoModel

from hf_ext.proto_evfl import ProtoEvflForClassification, ProtoEvflPartyModel
from hf_ext.proto_evfl.reproduce import main, make_parser


def test_parser_defaults():
    ns = make_parser().parse_args([])
    assert ns.out == "runs/proto_evfl" and ns.full is False
    assert make_parser().parse_args(["--full"]).full


def test_tiny_reproduce_writes_results_and_artifacts(tmp_path):
    out = tmp_path / "run"
    results = main(["--out", str(out), "--rounds", "3", "--seeds", "0", "1", "--workers", "1",
                    "--variants", "vanilla_vfl", "proto_evfl"])  # fmt: skip
    saved = json.loads((out / "results.json").read_text())
    assert saved["rows"] == results["rows"]
    assert [(r["setting"], r["variant"]) for r in saved["rows"]] == [
        (s, v) for s in ("long_tail", "zero_shot") for v in ("vanilla_vfl", "proto_evfl")
    ]
    for row in saved["rows"]:
        assert len(row["per_seed"]) == 2
        acc = [m["accuracy"] for m in row["per_seed"]]
        assert row["metrics"]["accuracy"]["std"] == float(np.std(acc))
        assert ("unseen_accuracy" in row["metrics"]) == (row["setting"] == "zero_shot")
    assert "| zero_shot | 50 | proto_evfl |" in results["table"]
    top = AutoModel.from_pretrained(out / "artifact")
    party = AutoModel.from_pretrained(out / "parties" / "party-1")
    assert isinstance(top, ProtoEvflForClassification) and isinstance(party, ProtoEvflPartyModel)
    assert top.unseen_classes.numel() == 1 and party.config.party_index == 1
    assert (out / "artifact" / "README.md").read_text().count("## ") >= 3  # the rendered model card

