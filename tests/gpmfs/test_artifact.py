"""Hub artifact round trip, corrupt/missing files, and application to datasets.Dataset."""

import json
import os

import numpy as np
import pandas as pd
import pytest
from safetensors.numpy import load_file
from sklearn.exceptions import NotFittedError

from hf_ext.gpmfs.artifact import dataset_transform, select_dataset_columns
from hf_ext.gpmfs.data import to_hf_dataset
from hf_ext.gpmfs.selector import GPMFSSelector
from hf_ext.gpmfs.testing import contract_fixture


@pytest.fixture(scope="module")
def fitted(small):
    df = pd.DataFrame(small.X, columns=small.feature_names)
    return GPMFSSelector(budget=5, theta=0.2, k_personal=2).fit(df, small.Y)


def test_round_trip_selects_the_same_columns(fitted, small, tmp_path):
    fitted.save_pretrained(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [
        "config.json",
        "hf_ext_checksums.json",
        "model.safetensors",
    ]  # no temp files
    tensors = load_file(str(tmp_path / "model.safetensors"))
    assert {"W", "global_indices", "label_indices", "personal_indices"} <= set(tensors)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "hf_ext_gpmfs" and config["fitted"]["n_features_in"] == small.X.shape[1]
    loaded = GPMFSSelector.from_pretrained(tmp_path)
    assert loaded.get_params() == fitted.get_params()
    np.testing.assert_array_equal(loaded.W_, fitted.W_)
    np.testing.assert_array_equal(loaded.global_indices_, fitted.global_indices_)
    df = pd.DataFrame(small.X, columns=small.feature_names)
    pd.testing.assert_frame_equal(pd.DataFrame(loaded.transform(df)), pd.DataFrame(fitted.transform(df)))
    for j in range(small.Y.shape[1]):
        np.testing.assert_array_equal(
            loaded.get_support(indices=True, label=j), fitted.get_support(indices=True, label=j)
        )
        np.testing.assert_array_equal(loaded.personal_indices_[j], fitted.personal_indices_[j])
    assert list(loaded.get_feature_names_out()) == list(fitted.get_feature_names_out())
    assert loaded.label_specific_strength_ == fitted.label_specific_strength_


def test_dataset_map_and_column_selection(fitted, small, tmp_path):
    fitted.save_pretrained(tmp_path)
    sel = GPMFSSelector.from_pretrained(tmp_path)
    ds = to_hf_dataset(small).map(dataset_transform(sel, output_column="selected"), batched=True)
    np.testing.assert_allclose(np.array(ds["selected"]), small.X[:, fitted.global_indices_])
    ds1 = to_hf_dataset(small).map(dataset_transform(sel, label=1), batched=True, batch_size=7)
    np.testing.assert_allclose(np.array(ds1["features"]), small.X[:, fitted.label_indices_[1]])
    cols = select_dataset_columns(to_hf_dataset(small, "columns"), sel, keep=tuple(small.label_names))
    assert cols.column_names == list(fitted.get_feature_names_out()) + small.label_names
    with pytest.raises(ValueError, match="features"):
        dataset_transform(sel)({"features": [[1.0, 2.0]]})


def test_missing_and_corrupt_files(fitted, tmp_path):
    with pytest.raises(NotFittedError):
        GPMFSSelector().save_pretrained(tmp_path / "x")
    fitted.save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="content hash differs"):  # the config's weights_sha256 catches it first
        GPMFSSelector.from_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["fitted"]["weights_sha256"]  # an artifact without the hash (older saves) still gets a clear error
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="corrupt model.safetensors"):
        GPMFSSelector.from_pretrained(tmp_path)
    fitted.save_pretrained(tmp_path)
    raw = bytearray((tmp_path / "model.safetensors").read_bytes())
    raw[-3] ^= 0xFF  # one flipped weight byte: safetensors itself would load it silently
    (tmp_path / "model.safetensors").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="content hash differs"):
        GPMFSSelector.from_pretrained(tmp_path)
    fitted.save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("{ truncated")
    with pytest.raises(ValueError, match="corrupt config.json"):
        GPMFSSelector.from_pretrained(tmp_path)
    fitted.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["fitted"]["n_features_in"] += 1
    del cfg["fitted"]["weights_sha256"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="shapes"):
        GPMFSSelector.from_pretrained(tmp_path)
    os.remove(tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="missing model.safetensors"):
        GPMFSSelector.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="Hub download failed"):
        # local_files_only: never touch the network, whatever HF_HUB_OFFLINE was when huggingface_hub was imported
        GPMFSSelector.from_pretrained("someone/not-a-local-folder", local_files_only=True)


def test_contract_fixture_round_trip(tmp_path):
    fx = contract_fixture()
    cfg = fx.make_config()
    assert fx.config_roundtrip(cfg) == cfg
    sel = fx.fit(fx.make_artifact(cfg))
    fx.save_artifact(sel, tmp_path)
    again = fx.load_artifact(tmp_path)
    X = fx.example_inputs()
    for key, value in fx.outputs(sel, X).items():
        np.testing.assert_array_equal(fx.outputs(again, X)[key], value)
