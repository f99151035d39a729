"""The amplitude-table config, the `datasets` builder, the saved folder, the dataset card and the Hub push."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import datasets
import numpy as np
import pytest
from helpers.hub_server import MockHub

from hf_ext.amplitudes.config import AmplitudeTableConfig
from hf_ext.amplitudes.field_theory import field_theory_amplitude
from hf_ext.amplitudes.gluons import GluonKinematics, four_gluon_channels, type_i_four_gluon
from hf_ext.amplitudes.stringy import stringy_amplitude
from hf_ext.amplitudes.tables import FEATURES, AmplitudeTable, AmplitudeTableBuilder, dataset_card
from hf_ext.core.integrity import CHECKSUMS_FILE

REPO_ROOT = Path(__file__).resolve().parents[2]

TINY = dict(
    theories=("tr_phi3", "field_theory", "superstring", "gluon_super"),
    points=(4, 5),
    gluons=(3, 4),
    alphas=(0.5, 1.0),
    samples=2,
)


@pytest.fixture(scope="module")
def table():
    return AmplitudeTable(AmplitudeTableConfig(**TINY))


def test_config_roundtrip_and_validation():
    cfg = AmplitudeTableConfig(**TINY)
    again = AmplitudeTableConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg and again.to_dict() == cfg.to_dict()
    bad = [
        ({"theories": ("heterotic",)}, "theories"),
        ({"points": (7,)}, "points"),
        ({"gluons": (6,)}, "gluons"),
        ({"alphas": (0.0,)}, "alphas"),
        ({"samples": 0}, "samples"),
        ({"x_low": -1.0}, "x_low"),
        ({"x_low": 3.0, "x_high": 2.0}, "x_low"),
        ({"method": "magic"}, "method"),
        ({"seed": 1.5}, "seed"),
        ({"theories": "tr_phi3"}, "theories"),
    ]
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
            assert (
                row["polygon"] == 2 * row["n"]
                and len(row["polarisation"]) == row["n"] ** 2 - row["n"] + (row["n"] * (row["n"] - 1)) // 2
            )
            if row["n"] == 4:
                assert row["amplitude"] == pytest.approx(type_i_four_gluon(kin, row["alpha_prime"]), rel=1e-10)
    # field-theory rows share the Tr φ³ rows' kinematics, so α′^{N-3} A_N can be compared with them directly
    tr = [r["x"] for r in ds if r["theory"] == "tr_phi3"]
    ft = [r["x"] for r in ds if r["theory"] == "field_theory"]
    assert tr == ft


def test_determinant_and_continued_rows():
    cfg = AmplitudeTableConfig(
        theories=("gluon_super", "gluon_determinant", "gluon_continued"), gluons=(3, 4), alphas=(0.5, 2.0), samples=2
    )
    ds = AmplitudeTable(cfg).dataset
    rows = {t: [r for r in ds if r["theory"] == t] for t in cfg.theories}
    # the determinant rows share the gluon_super kinematics: the same coefficient from a different integrand
    for sup, det in zip(rows["gluon_super"], rows["gluon_determinant"]):
        assert sup["x"] == det["x"] and det["method"] == "symmetric_determinant"
        assert det["amplitude"] == pytest.approx(sup["amplitude"], rel=1e-11)
    # the continued rows are drawn without the tachyon bound and agree with the type-I closed form
    below = 0
    for row in rows["gluon_continued"]:
        if row["n"] == 4:
            kin = GluonKinematics.from_planar(np.array(row["x"]), 4)
            assert row["amplitude"] == pytest.approx(type_i_four_gluon(kin, row["alpha_prime"]), rel=1e-10)
            below += min(four_gluon_channels(kin)) * row["alpha_prime"] < 1
    assert below > 0  # at least one row outside the region where the residue integral converges


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
    assert {p.name for p in folder.iterdir()} == {"config.json", "dataset", "data", "README.md", CHECKSUMS_FILE}
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
        env = {
            **os.environ,
            "HF_ENDPOINT": hub.url,
            "HF_TOKEN": "hf_fake",
            "HF_HUB_OFFLINE": "0",
            "HF_HOME": str(tmp_path / "hf_home"),
        }
        script = textwrap.dedent("""
            from hf_ext.amplitudes.config import AmplitudeTableConfig
            from hf_ext.amplitudes.tables import AmplitudeTable
            table = AmplitudeTable(AmplitudeTableConfig(samples=1, alphas=(1.0,)))
            print(table.push_to_hub("tester/amplitude-tables"))
            """)
        proc = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300, cwd=REPO_ROOT
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        requests = list(hub.requests)
    repo = hub.repo_dir("datasets", "tester/amplitude-tables")
    stored = {str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()}
    assert {"README.md", "config.json", "data/train-00000-of-00001.parquet", "dataset/state.json"} <= stored
    assert ("POST", "/api/repos/create") in requests and "/datasets/tester/amplitude-tables" in proc.stdout
    pushed = datasets.load_dataset(str(repo), split="train")
    assert len(pushed) == 4 and set(pushed["theory"]) == {"tr_phi3", "field_theory"}


def test_corrupted_or_modified_table_is_a_clear_error_before_rows_are_read(table, tmp_path):
    folder = table.save_pretrained(tmp_path / "t")
    meta = json.loads((folder / "config.json").read_text())
    assert set(meta["sha256"]) >= {"data/train-00000-of-00001.parquet", "dataset/state.json"}
    arrow = sorted((folder / "dataset").glob("*.arrow"))[0]
    raw = bytearray(arrow.read_bytes())
    raw[len(raw) // 2 : len(raw) // 2 + 64] = b"\xff" * 64  # flipped bytes inside the record batches
    arrow.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="corrupted or was modified.*hash mismatch: dataset/.*arrow"):
        AmplitudeTable.from_pretrained(folder)
    folder = table.save_pretrained(tmp_path / "t")  # the save replaces the corrupted copy
    assert AmplitudeTable.from_pretrained(folder).dataset["amplitude"] == table.dataset["amplitude"]
    (folder / "dataset" / "state.json").unlink()
    with pytest.raises(ValueError, match="missing: dataset/state.json"):
        AmplitudeTable.from_pretrained(folder)
    folder = table.save_pretrained(tmp_path / "t")
    (folder / "data" / "extra.parquet").write_bytes(b"x")
    with pytest.raises(ValueError, match="unexpected: data/extra.parquet"):
        AmplitudeTable.from_pretrained(folder)
    meta = json.loads((table.save_pretrained(tmp_path / "t") / "config.json").read_text())
    meta["n_rows"] = 3
    (folder / "config.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="rows, config.json says 3"):
        AmplitudeTable.from_pretrained(folder)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="neither empty nor a saved amplitude table"):
        table.save_pretrained(tmp_path / "other")
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


_KILL = textwrap.dedent("""
    import os, sys
    from hf_ext.amplitudes import tables as T
    from hf_ext.amplitudes.config import AmplitudeTableConfig
    from hf_ext.core import integrity as hub
    cfg = AmplitudeTableConfig(theories=("tr_phi3",), points=(4,), alphas=(1.0,), samples=int(sys.argv[3]))
    table = T.AmplitudeTable(cfg)
    where, folder = sys.argv[1], sys.argv[2]
    if where == "fallback":
        hub._exchange = lambda a, b: False
    real = os.replace
    calls = []
    def replace(a, b):
        real(a, b)
        if str(a).endswith(".tmp"):
            return  # the checksum file's own temp file, not a folder swap
        calls.append((a, b))
        if where == "exchange" or len(calls) == int(sys.argv[4]):
            os._exit(9)  # killed right after this rename
    hub.os.replace = replace
    if where == "exchange":
        real_exchange = hub._exchange
        def exchange(a, b):
            assert real_exchange(a, b)
            os._exit(9)  # killed right after the swap, before the old copy is removed
        hub._exchange = exchange
    table.save_pretrained(folder)
    """)


@pytest.mark.parametrize("where, after", [("exchange", 0), ("fallback", 1), ("fallback", 2)])
def test_kill_during_save_leaves_a_loadable_table(table, tmp_path, where, after):
    folder = table.save_pretrained(tmp_path / "t")  # the previous complete table (the TINY config)
    n_old = len(table.dataset)
    proc = subprocess.run(
        [sys.executable, "-c", _KILL, where, str(folder), "5", str(after)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 9, proc.stderr[-2000:]
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "t"]
    if where == "fallback" and after == 1:  # killed between the two renames: the table path is missing right now
        assert not folder.exists() and len(leftovers) == 2
    else:  # the path always holds a complete table, old or new
        assert len(AmplitudeTable.from_pretrained(folder).dataset) in (n_old, 5)
    table.save_pretrained(tmp_path / "t")  # the next save repairs and removes every leftover
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]
    assert len(AmplitudeTable.from_pretrained(folder).dataset) == n_old


def test_table_command_writes_a_hub_dataset_folder(tmp_path, capsys):
    from hf_ext.amplitudes.table_cli import main

    out = tmp_path / "amp"
    folder = main(["--n", "4", "5", "--alpha", "0.5", "1", "--samples", "2", "--output", str(out)])
    assert folder == out and "16 rows" in capsys.readouterr().out
    ds = datasets.load_dataset(str(out), split="train")
    assert len(ds) == 16 and set(ds["theory"]) == {"tr_phi3", "field_theory"} and set(ds["n"]) == {4, 5}
    with pytest.raises(SystemExit):
        main(["--n", "4", "--alpha", "1", "--output", str(out)])  # exists, no --overwrite
    assert "pass --overwrite" in capsys.readouterr().err
    main(
        ["--theories", "gluon_super", "--n", "3", "--alpha", "1", "--samples", "1", "--output", str(out), "--overwrite"]
    )
    assert AmplitudeTable.from_pretrained(out).dataset["theory"] == ["gluon_super"]
    for bad, message in (
        (["--n", "9", "--alpha", "1"], "--n must hold integers in \\[4, 6\\]"),
        (["--n", "4", "--alpha", "1e-300"], "--alpha must lie in \\[0.001, 100\\]"),
    ):
        with pytest.raises(SystemExit):
            main(bad + ["--output", str(tmp_path / "x")])
        assert __import__("re").search(message, capsys.readouterr().err)
