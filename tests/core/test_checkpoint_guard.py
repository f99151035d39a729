"""Loading refuses what would otherwise give a silently wrong model: flipped weight bytes, a missing or extra
tensor, another method's config.json, a deleted TinyAlign bank; and unknown config keys raise in code but only warn
when a saved config.json is loaded (forward compatibility)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import hf_ext
from hf_ext.core.hub import CHECKSUMS_FILE, CheckpointError, save_artifact
from hf_ext.core.validation import UnknownConfigKeyError, UnknownConfigKeyWarning
from hf_ext.orca import OrcaConfig, OrcaModel
from hf_ext.orca.testing import tiny_config


@pytest.fixture(scope="module")
def orca_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    return save_artifact(OrcaModel(tiny_config()).eval(), tmp_path_factory.mktemp("g") / "orca")


@pytest.fixture(scope="module")
def tinyalign_dir(tmp_path_factory) -> Path:
    from hf_ext.tinyalign.testing import tiny_model

    return save_artifact(tiny_model(), tmp_path_factory.mktemp("t") / "tinyalign", hf_ext.get_method("tinyalign"))


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    return dst


def _rewrite_weights(folder: Path, edit) -> None:
    """Edits the tensors and re-records the checksums, so only the strict-load check can catch the edit."""
    state = load_file(folder / "model.safetensors")
    edit(state)
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    from hf_ext.core.hub import write_checksums

    write_checksums(folder)


def test_plain_save_pretrained_records_checksums(orca_dir, tmp_path):
    OrcaModel.from_pretrained(orca_dir).save_pretrained(tmp_path / "plain")
    files = json.loads((tmp_path / "plain" / CHECKSUMS_FILE).read_text())["files"]
    assert list(files) == ["model.safetensors"]


def test_flipped_byte_is_an_error(orca_dir, tmp_path):
    bad = _copy(orca_dir, tmp_path)
    data = bytearray((bad / "model.safetensors").read_bytes())
    data[-5] ^= 0x10
    (bad / "model.safetensors").write_bytes(bytes(data))
    from transformers import AutoModel

    with pytest.raises(CheckpointError, match="model.safetensors is corrupt: sha256"):
        AutoModel.from_pretrained(bad)


def test_missing_tensor_is_an_error(orca_dir, tmp_path):
    bad = _copy(orca_dir, tmp_path)
    _rewrite_weights(bad, lambda s: s.pop(sorted(s)[0]))
    with pytest.raises(CheckpointError, match="missing keys"):
        OrcaModel.from_pretrained(bad)
    model = OrcaModel.from_pretrained(bad, hf_ext_strict=False)  # the documented escape hatch
    assert isinstance(model, OrcaModel)


def test_unexpected_tensor_is_an_error(orca_dir, tmp_path):
    bad = _copy(orca_dir, tmp_path)
    _rewrite_weights(bad, lambda s: s.__setitem__("stowaway.weight", torch.zeros(3)))
    with pytest.raises(CheckpointError, match=r"unexpected keys: \['stowaway.weight'\]"):
        OrcaModel.from_pretrained(bad)


def test_output_loading_info_still_works(orca_dir):
    model, info = OrcaModel.from_pretrained(orca_dir, output_loading_info=True)
    assert isinstance(model, OrcaModel) and not info["missing_keys"] and not info["unexpected_keys"]


def test_foreign_model_type_is_an_error(orca_dir, tinyalign_dir):
    from hf_ext.tinyalign import TinyAlignForConditionalGeneration

    with pytest.raises(CheckpointError, match=r"model_type='hf_ext_orca'.*loads model_type='hf_ext_tinyalign'"):
        TinyAlignForConditionalGeneration.from_pretrained(orca_dir)
    with pytest.raises(CheckpointError, match="another model's artifact"):
        OrcaModel.from_pretrained(tinyalign_dir)


def test_a_part_in_a_subfolder_is_checked_there(orca_dir, tmp_path):
    """`from_pretrained(folder, subfolder=...)` checks the part, not the root: a federation artifact holds another
    model type at its root (Proto-EVFL's top model, its parties in `parties/party-<k>/`)."""
    folder = _copy(orca_dir, tmp_path)
    shutil.copytree(orca_dir, folder / "parts" / "orca")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "hf_ext_other"}))
    assert isinstance(OrcaModel.from_pretrained(folder, subfolder="parts/orca"), OrcaModel)
    with pytest.raises(CheckpointError, match="another model's artifact"):  # the root is still refused as before
        OrcaModel.from_pretrained(folder)
    (folder / "parts" / "orca" / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match="truncated"):  # and the part's own files are verified
        OrcaModel.from_pretrained(folder, subfolder="parts/orca")


def test_tinyalign_bank_is_inside_the_artifact_and_checked(tinyalign_dir, tmp_path):
    files = json.loads((tinyalign_dir / CHECKSUMS_FILE).read_text())["files"]
    assert {"model.safetensors", "memory_bank.safetensors"} <= set(files)
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tinyalign_dir)
    assert model.memory_bank is not None and len(model.memory_bank) == 24
    bad = _copy(tinyalign_dir, tmp_path)
    (bad / "memory_bank.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"missing \['memory_bank.safetensors'\]"):
        AutoModelForImageTextToText.from_pretrained(bad)


def test_tinyalign_bank_swapped_with_weights_in_one_save(tmp_path, monkeypatch):
    """A save that fails after the weights but before the bank leaves the previous artifact (weights and bank)."""
    from hf_ext.tinyalign.memory import MemoryBank
    from hf_ext.tinyalign.testing import tiny_model

    out = save_artifact(tiny_model(seed=0), tmp_path / "art")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    monkeypatch.setattr(MemoryBank, "save", lambda self, folder: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        save_artifact(tiny_model(seed=1), out)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_unknown_config_key_raises_in_code():
    with pytest.raises(UnknownConfigKeyError, match=r"'embed_dimm' \(did you mean 'embed_dim'\?\)"):
        OrcaConfig(**{**tiny_config().to_dict(), "embed_dimm": 8})
    with pytest.raises(TypeError):  # also a TypeError, like any unexpected keyword argument
        OrcaConfig(embed_dimm=8)


def test_unknown_config_key_warns_when_loading(orca_dir, tmp_path):
    newer = _copy(orca_dir, tmp_path)
    config = json.loads((newer / "config.json").read_text())
    config["future_field"] = 3
    (newer / "config.json").write_text(json.dumps(config))
    with pytest.warns(UnknownConfigKeyWarning, match="future_field"):
        model = OrcaModel.from_pretrained(newer)
    assert model.config.future_field == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownConfigKeyWarning)
        OrcaModel.from_pretrained(orca_dir)  # a config this version wrote has no unknown keys
        OrcaConfig.from_dict(tiny_config().to_dict())


def test_legacy_hub_keys_warn_and_saved_rebuilds_can_say_so():
    from hf_ext.core.validation import loading_saved_config

    with pytest.warns(UnknownConfigKeyWarning, match="gradient_checkpointing"):
        config = OrcaConfig(**{**tiny_config().to_dict(), "gradient_checkpointing": False})
    assert config.gradient_checkpointing is False
    with pytest.raises(UnknownConfigKeyError):  # one legacy key does not excuse a typo beside it
        OrcaConfig(**{**tiny_config().to_dict(), "gradient_checkpointing": False, "embed_dimm": 8})
    with loading_saved_config(), pytest.warns(UnknownConfigKeyWarning, match="from_a_newer_version"):
        OrcaConfig(**{**tiny_config().to_dict(), "from_a_newer_version": 1})
