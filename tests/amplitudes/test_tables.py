"""The amplitude-table config, the `datasets` builder, the saved folder, the dataset card and the Hub push."""

import json
import os
import subprocess
import sys
import textwrap

import datasets
import numpy as np
import pytest

from hf_ext.amplitudes.config import AmplitudeTableConfig
from hf_ext.amplitudes.field_theory import field_theory_amplitude
from hf_ext.amplitudes.gluons import GluonKinematics, type_i_four_gluon
from hf_ext.amplitudes.stringy import stringy_amplitude
from hf_ext.amplitudes.tables import FEATURES, AmplitudeTable, AmplitudeTableBuilder, dataset_card
from hf_ext.core.registry import REPO_ROOT
from hf_ext.core.testing_hub import MockHub

TINY = dict(theories=("tr_phi3", "field_theory", "superstring", "gluon_super"), points=(4, 5), gluons=(3, 4),
            alphas=(0.5, 1.0), samples=2)


@pytest.fixture(scope="module")
def table():
    return AmplitudeTable(AmplitudeTableConfig(**TINY))


def test_config_roundtrip_and_validation():
    cfg = AmplitudeTableConfig(**TINY)
    again = AmplitudeTableConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg and again.to_dict() == cfg.to_dict()
    bad = [({"theories": ("heterotic",)}, "theories"), ({"points": (7,)}, "points"), ({"gluons": (5,)}, "gluons"),
           ({"alphas": (0.0,)}, "alphas"), ({"samples": 0}, "samples"), ({"x_low": -1.0}, "x_low"),
           ({"x_low": 3.0, "x_high": 2.0}, "x_low"), ({"method": "magic"}, "method"), ({"seed": 1.5}, "seed"),
           ({"theories": "tr_phi3"}, "theories")]
    for kwargs, field in bad:
        with pytest.raises(ValueError, match=f"AmplitudeTableConfig.{field}"):
            AmplitudeTableConfig(**kwargs)
    with pytest.raises(ValueError, match="unknown AmplitudeTableConfig fields: \\['n'\\]"):
        AmplitudeTableConfig.from_dict({"n": 4})


def test_rows_hold_correct_amplitudes(table):
    ds = table.dataset
    assert ds.features == FEATURES
    # per theory: sizes x alphas x samples (superstring only at even N)
    counts = {t: sum(1 for r in ds if r["theory"] == t) for t in TINY["theories"]}
    assert counts == {"tr_phi3": 8, "field_theory": 8, "superstring": 4, "gluon_super": 8}
    for row in ds:
        if row["theory"] == "tr_phi3":
            exact = stringy_amplitude(np.array(row["x"]), row["alpha_prime"], method="closed_form").value
            assert row["amplitude"] == pytest.approx(float(exact), rel=1e-12) and row["error"] < 1e-10
            assert row["polarisation"] == [] and len(row["x_labels"]) == len(row["x"]) == row["n"] * (row["n"] - 3) // 2
        elif row["theory"] == "field_theory":
            assert row["amplitude"] == pytest.approx(float(field_theory_amplitude(np.array(row["x"]))))
        elif row["theory"] == "gluon_super":
            kin = GluonKinematics.from_planar(np.array(row["x"]), row["n"])
            assert row["polygon"] == 2 * row["n"] and len(row["polarisation"]) == row["n"] ** 2 - row["n"] + (
                row["n"] * (row["n"] - 1)) // 2
            if row["n"] == 4:
                assert row["amplitude"] == pytest.approx(type_i_four_gluon(kin, row["alpha_prime"]), rel=1e-10)
    # field-theory rows share the Tr φ³ rows' kinematics, so α′^{N-3} A_N can be compared with them directly
    tr = [r["x"] for r in ds if r["theory"] == "tr_phi3"]
    ft = [r["x"] for r in ds if r["theory"] == "field_theory"]
    assert tr == ft


def test_builder_is_deterministic_and_caches(tmp_path):
    cfg = AmplitudeTableConfig(theories=("tr_phi3",), points=(4,), alphas=(1.0,), samples=3, seed=4)
    builder = AmplitudeTableBuilder(table=cfg.to_dict(), cache_dir=str(tmp_path))
    builder.download_and_prepare()
    a = builder.as_dataset(split="train")
    b = AmplitudeTable(cfg).dataset
    assert a["amplitude"] == b["amplitude"] and len(a) == 3
    other = AmplitudeTableBuilder(table={**cfg.to_dict(), "seed": 5}, cache_dir=str(tmp_path))
    assert other.config_id != builder.config_id
    with pytest.raises(ValueError, match="AmplitudeTableConfig.samples"):
        AmplitudeTableBuilder(table={**cfg.to_dict(), "samples": -1}, cache_dir=str(tmp_path))


def test_save_load_roundtrip_parquet_and_card(table, tmp_path):
    folder = table.save_pretrained(tmp_path / "t")
    assert {p.name for p in folder.iterdir()} == {"config.json", "dataset", "data", "README.md"}
    again = AmplitudeTable.from_pretrained(folder)
    assert again.config == table.config and again.dataset.to_dict() == table.dataset.to_dict()
    reread = datasets.load_from_disk(str(folder / "dataset"))
    assert reread["amplitude"] == table.dataset["amplitude"]
    hub_layout = datasets.load_dataset(str(folder), split="train")  # what `load_dataset(repo_id)` reads
    assert hub_layout["amplitude"] == table.dataset["amplitude"]
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(folder / "README.md")
    assert "arxiv:2504.21676" in card.data.tags and "hf_ext" in card.data.tags
    assert card.data.configs[0]["data_files"][0]["path"] == "data/train-*.parquet"
    assert "## Columns" in card.text and f"{len(table.dataset)} rows" in card.text
    assert dataset_card(table.config, 20000).data.size_categories == ["10K<n<100K"]


def test_load_errors(table, tmp_path):
    with pytest.raises(ValueError, match="not a saved amplitude table"):
        AmplitudeTable.from_pretrained(tmp_path)
    folder = table.save_pretrained(tmp_path / "t")
    (folder / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="corrupt"):
        AmplitudeTable.from_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({"table_type": "something_else"}))
    with pytest.raises(ValueError, match="table_type"):
        AmplitudeTable.from_pretrained(folder)


def test_push_dataset_to_local_hub(tmp_path):
    """`AmplitudeTable.push_to_hub` runs huggingface_hub's real client against a Hub on 127.0.0.1."""
    with MockHub(tmp_path / "store") as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_fake", "HF_HUB_OFFLINE": "0",
               "HF_HOME": str(tmp_path / "hf_home")}
        script = textwrap.dedent("""
            from hf_ext.amplitudes.config import AmplitudeTableConfig
            from hf_ext.amplitudes.tables import AmplitudeTable
            table = AmplitudeTable(AmplitudeTableConfig(samples=1, alphas=(1.0,)))
            print(table.push_to_hub("tester/amplitude-tables"))
            """)
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
                              cwd=REPO_ROOT)
        assert proc.returncode == 0, proc.stderr[-3000:]
        requests = list(hub.requests)
    repo = hub.repo_dir("datasets", "tester/amplitude-tables")
    stored = {str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()}
    assert {"README.md", "config.json", "data/train-00000-of-00001.parquet", "dataset/state.json"} <= stored
    assert ("POST", "/api/repos/create") in requests and "/datasets/tester/amplitude-tables" in proc.stdout
    pushed = datasets.load_dataset(str(repo), split="train")
    assert len(pushed) == 4 and set(pushed["theory"]) == {"tr_phi3", "field_theory"}
