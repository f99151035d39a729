"""`hf_ext.core.user_data`: the user's data read through `datasets`, checked against a method's schema (every
problem named at once), split reproducibly and fingerprinted for the training record."""

from __future__ import annotations

import json

import pytest

from hf_ext.core.user_data import (
    Column,
    DataSchema,
    UserDataError,
    dataset_entry,
    fingerprint,
    load_user_data,
    split_data,
)

SCHEMA = DataSchema(
    (Column("x", "int", "a count"), Column("y", "float", "a value"), Column("label", "str", "a class")),
    description="one row per item",
)


def write_csv(path, rows=6):
    path.write_text("x,y,label\n" + "".join(f"{i},{i / 2},c{i % 2}\n" for i in range(rows)))
    return path


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".json", ".parquet", ".tsv"])
def test_every_file_format_reads_the_same_table(tmp_path, suffix):
    rows = [{"x": i, "y": i / 2, "label": f"c{i % 2}"} for i in range(6)]
    path = tmp_path / f"data{suffix}"
    if suffix == ".csv":
        write_csv(path)
    elif suffix == ".tsv":
        path.write_text("x\ty\tlabel\n" + "".join(f"{r['x']}\t{r['y']}\t{r['label']}\n" for r in rows))
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif suffix == ".json":
        path.write_text(json.dumps(rows))
    else:
        import pandas as pd

        pd.DataFrame(rows).to_parquet(path)
    data = load_user_data(path, schema=SCHEMA, split="train")
    assert list(data["x"]) == [r["x"] for r in rows]
    assert list(data["label"]) == [r["label"] for r in rows]


def test_a_folder_of_split_files_keeps_the_users_splits(tmp_path):
    write_csv(tmp_path / "train.csv", 8)
    write_csv(tmp_path / "test.csv", 3)
    data = load_user_data(tmp_path, schema=SCHEMA)
    assert sorted(data) == ["test", "train"] and len(data["test"]) == 3
    splits = split_data(data, validation=0.25, test=0.5, seed=0)
    assert len(splits["test"]) == 3, "the user's own test split is kept, never re-split"
    assert len(splits["validation"]) == 2 and len(splits["train"]) == 6


def test_an_image_folder_is_read_with_imagefolder(tmp_path):
    from PIL import Image

    for label in ("cat", "dog"):
        (tmp_path / label).mkdir()
        for i in range(2):
            Image.new("RGB", (4, 4), (i * 40, 0, 0)).save(tmp_path / label / f"{i}.png")
    data = load_user_data(tmp_path, schema=DataSchema((Column("image", "image"), Column("label", "int"))))
    assert len(data["train"]) == 4 and data["train"].features["label"].names == ["cat", "dog"]


def test_every_missing_and_ill_typed_column_is_named_at_once(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("x,y\n1,a\n2,b\n")
    with pytest.raises(UserDataError) as err:
        load_user_data(path, schema=SCHEMA)
    text = str(err.value)
    assert "'label'" in text and "no column" in text
    assert "column 'y' should be float" in text
    assert "x (int)" in text, "the message lists what the method reads"


def test_prefix_groups_need_at_least_one_column(tmp_path):
    schema = DataSchema((Column("id", "int"),), prefixes=(Column("f_", "float", "features"),))
    path = tmp_path / "d.csv"
    path.write_text("id,g_1\n1,0.5\n")
    with pytest.raises(UserDataError, match=r"'f_\* \(features\)'"):
        load_user_data(path, schema=schema)
    path.write_text("id,f_1,f_2\n1,0.5,x\n")
    with pytest.raises(UserDataError, match="column 'f_2' should be float"):
        load_user_data(path, schema=schema)


def test_missing_sources_and_unknown_formats_say_what_is_accepted(tmp_path):
    with pytest.raises(UserDataError, match="neither a file, a folder nor a Hub dataset id"):
        load_user_data(tmp_path / "nope.csv")
    (tmp_path / "data.xlsx").write_bytes(b"PK")
    with pytest.raises(UserDataError, match=r"cannot read a \.xlsx file"):
        load_user_data(tmp_path / "data.xlsx")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserDataError, match="train/validation/test files"):
        load_user_data(empty)
    with pytest.raises(UserDataError, match="no split 'test'"):
        load_user_data(write_csv(tmp_path / "d.csv"), split="test")


def test_a_hub_id_goes_to_load_dataset_and_fails_offline_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(UserDataError, match="someone/not-cached"):
        load_user_data("someone/not-cached")


def test_split_is_seeded_disjoint_and_complete(tmp_path):
    data = load_user_data(write_csv(tmp_path / "d.csv", 20))
    a, b = split_data(data, seed=3), split_data(data, seed=3)
    assert list(a["test"]["x"]) == list(b["test"]["x"]), (
        "the same seed gives the same test rows (evaluate relies on it)"
    )
    assert list(split_data(data, seed=4)["test"]["x"]) != list(a["test"]["x"])
    seen = list(a["train"]["x"]) + list(a["validation"]["x"]) + list(a["test"]["x"])
    assert sorted(seen) == list(range(20)), "every row lands in exactly one split"
    with pytest.raises(UserDataError, match="leaves none to train on"):
        split_data(load_user_data(write_csv(tmp_path / "tiny.csv", 2)))


def test_fingerprint_follows_the_content_and_the_entry_records_it(tmp_path):
    path = write_csv(tmp_path / "d.csv")
    before = fingerprint(path)
    entry = dataset_entry(path, load_user_data(path))
    assert entry["fingerprint"] == before and entry["hub_id"] is None and entry["rows"] == {"train": 6}
    path.write_text(path.read_text() + "9,1.0,c1\n")
    assert fingerprint(path) != before
    assert dataset_entry("someone/data:cfg")["hub_id"] == "someone/data"


def test_to_markdown_lists_every_column():
    table = SCHEMA.to_markdown()
    assert table.splitlines()[0].startswith("column | type")
    assert all(f"`{c.name}`" in table for c in SCHEMA.columns)


def test_images_beside_a_metadata_file_keep_their_columns(tmp_path):
    from PIL import Image

    for i in range(3):
        Image.new("RGB", (4, 4), (i * 60, 0, 0)).save(tmp_path / f"{i}.png")
    (tmp_path / "metadata.csv").write_text("file_name,caption\n0.png,a red square\n1.png,b\n2.png,c\n")
    data = load_user_data(tmp_path, schema=DataSchema((Column("image", "image"), Column("caption", "str"))))
    assert sorted(data["train"]["caption"]) == ["a red square", "b", "c"]


def test_report_evaluation_prints_the_interval_and_writes_json(tmp_path, capsys):
    from hf_ext.core.records import metric, report_evaluation
    from hf_ext.core.reporting import paired_difference

    d = paired_difference([0.5, 0.7, 0.6], [0.4, 0.5, 0.5])
    out = report_evaluation([metric("accuracy", "accuracy", 0.61)], output=tmp_path / "e.json",
                            comparison={"accuracy": d.to_dict()})  # fmt: skip
    printed = capsys.readouterr().out
    assert f"[{d.ci_low:+.4g}, {d.ci_high:+.4g}] (n = 3)" in printed and "0.61" in printed
    assert json.loads((tmp_path / "e.json").read_text()) == json.loads(json.dumps(out))


def test_a_comparison_prints_its_line_and_serialises_every_number(capsys):
    from hf_ext.core.records import Comparison, metric, report_evaluation

    entry = Comparison(line="+0.1 (n = 3)", mean=0.1, ci_low=0.0, ci_high=0.2, n=3)
    bare = Comparison(mean=0.1, sd=0.05, ci_low=0.0, ci_high=0.2, n=3)
    out = report_evaluation(
        [metric("loss", "loss", 1.0)], comparison={"a": entry, "b": bare, "c": Comparison(cell="x")}
    )
    printed = capsys.readouterr().out
    assert "+0.1 (n = 3)" in printed
    assert "+0.1 ± 0.05 [+0, +0.2] (n = 3)" in printed and printed.rstrip().endswith("x")
    assert json.loads(json.dumps(out))["comparison"]["a"] == {"line": "+0.1 (n = 3)", "mean": 0.1, "ci_low": 0.0,
                                                               "ci_high": 0.2, "n": 3}  # fmt: skip


def test_paired_comparison_line_and_difference_round_trip():
    from hf_ext.core.records import Comparison
    from hf_ext.core.reporting import PairedDifference, paired_bootstrap, paired_difference

    entry = Comparison.paired("documents", cell="+0.1000", model=2.0, baseline=1.9, documents=7)
    assert str(entry) == "+0.1000, model 2.0000 vs baseline 1.9000 (n = 7 documents, paired bootstrap)"
    assert entry["documents"] == 7 and "line" in entry
    for d in (paired_difference([1.0, 2.0, 4.0], [0.5, 1.0, 1.0]), paired_difference([1.0], [0.0]),
              paired_bootstrap([0.1, 0.5, 0.9], [0.0, 0.2, 0.4])):  # fmt: skip
        again = PairedDifference.from_dict(json.loads(json.dumps(d.to_dict())))
        assert again.cell(4) == d.cell(4) and again.method == d.method and again.per_pair == d.per_pair
