"""A usable federation: `hf-ext train h2tune` takes every run-config key as a flag and saves a pushable client; the
Flower apps' pyprojects declare every key (so `flwr run --run-config "variant=... pretrain-steps=..."` is accepted);
the run config names the clients' models and data."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from hf_ext.h2tune.task import VARIANTS, RunConfig

ROOT = Path(__file__).parents[2]
APPS = [ROOT / "examples" / "h2tune_app", Path(__file__).parent / "flower_app"]
# example-app defaults that deliberately differ from RunConfig's: a real pretraining budget, the work dir as cache,
# the server waiting for its three nodes and all three rounds
APP_OVERRIDES = {"pretrain-steps", "cache-dir", "min-nodes", "min-rounds"}
TEST_ONLY_KEYS = {"corrupt-partition", "dishonest-partition", "dishonest-mode", "marker-dir"}


@pytest.mark.parametrize("app", APPS, ids=lambda p: p.parent.name + "/" + p.name)
def test_flower_apps_declare_every_run_config_key(app):
    config = tomllib.loads((app / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
    keys = RunConfig().to_run_config()
    missing = sorted(set(keys) - set(config))
    assert not missing, f"{app}: flwr run --run-config would refuse {missing}"
    # the tests' app: its client app reads and removes its test-only keys before the shipped parser sees the rest
    config = {k: v for k, v in config.items() if k not in TEST_ONLY_KEYS}
    parsed = RunConfig.from_run_config(config)
    if app.parent.name == "examples":
        for key, value in keys.items():
            if key not in APP_OVERRIDES:
                assert config[key] == value, key
    for variant in VARIANTS:
        assert RunConfig.from_run_config({**config, "variant": variant}).variant == variant
    assert parsed.clients == RunConfig().clients


def test_run_config_names_the_clients_models_and_data(tmp_path):
    from datasets import Dataset, DatasetDict

    from hf_ext.h2tune.data import load_pairs
    from hf_ext.h2tune.testing import tiny_base_config

    tiny_base_config("llama", layers=3, hidden=48).save_pretrained(tmp_path / "my-model")
    data = DatasetDict({s: Dataset.from_dict({"prompt": ["1+1="], "answer": ["2"]}) for s in ("train", "test")})
    data.save_to_disk(str(tmp_path / "my-data"))
    run = RunConfig.from_run_config(
        {
            "client-models": f"{tmp_path / 'my-model'},,",
            "client-ranks": "2,,",
            "client-datasets": f",{tmp_path / 'my-data'},",
            "variant": "flora",
        }
    )
    c0, c1, c2 = run.clients
    assert (c0.model, c0.layers, c0.hidden, c0.rank, c0.family) == (str(tmp_path / "my-model"), 3, 48, 2, "llama")
    assert c1.dataset == str(tmp_path / "my-data") and c1.task == "custom" and c2.model == "" and run.mode == "flora"
    assert run.max_layers == 4
    assert load_pairs(str(tmp_path / "my-data"), "test") == [("1+1=", "2")]
    with pytest.raises(ValueError, match="one entry per client"):
        RunConfig.from_run_config({"client-models": "a,b", "client-ranks": "1,2,3"})
    with pytest.raises(ValueError, match="lacks column"):
        Dataset.from_dict({"q": ["x"]}).save_to_disk(str(tmp_path / "bad"))
        load_pairs(str(tmp_path / "bad"), "train")


def test_hf_ext_train_h2tune_runs_a_variant_and_saves_a_pushable_client(tmp_path):
    from hf_ext.core.registry import get_method
    from hf_ext.h2tune.artifact import load_release

    main = get_method("h2tune").load("train")
    out = main(
        [
            "--variant",
            "h2tune",
            "--num-server-rounds",
            "1",
            "--local-steps",
            "1",
            "--num-train",
            "8",
            "--num-test",
            "4",
            "--batch-size",
            "8",
            "--client",
            "2",
            "--artifact_dir",
            str(tmp_path / "art"),
        ]
    )
    assert set(out["accuracy_per_round"]) == {"client-0", "client-1", "client-2"}
    assert out["bytes_sent_per_round"] == 3 * 4 * 7 * 16 * 16 * 4  # three clients, G_c float32
    model = load_release(out["artifact_dir"])
    assert type(model.peft_config["default"]).__name__ == "H2TuneConfig"
    assert (Path(out["artifact_dir"]) / "training_record.json").is_file()
