"""Mandatory integrity of H2Tune adapters (issue 38): `save_pretrained` writes `hf_ext_checksums.json`, and every
load path (`PeftModel.from_pretrained`, `load_adapter`, `load_release`) refuses an adapter whose weights were
corrupted, truncated or lost a tensor, and one without a checksum file unless the caller opts out explicitly."""

from __future__ import annotations

import json

import pytest
import torch
from peft import PeftModel
from safetensors.torch import load_file, save_file

from hf_ext.core.hub import CHECKSUMS_FILE, CheckpointError
from hf_ext.h2tune.config import ADAPTER_WEIGHTS, H2TuneConfig
from hf_ext.h2tune.testing import make_adapter, tiny_base, tiny_config, tiny_inputs


def _saved(tmp_path):
    model = make_adapter(tiny_config()).eval()
    with torch.no_grad():
        logits = model(**tiny_inputs()).logits
    model.save_pretrained(tmp_path / "adapter")
    return tmp_path / "adapter", logits


def _logits(model):
    with torch.no_grad():
        return model.eval()(**tiny_inputs()).logits


def test_save_writes_checksums_of_the_adapter_weights_and_a_clean_adapter_loads_identically(tmp_path):
    folder, want = _saved(tmp_path)
    manifest = json.loads((folder / CHECKSUMS_FILE).read_text())
    assert list(manifest["files"]) == [ADAPTER_WEIGHTS]
    torch.testing.assert_close(_logits(PeftModel.from_pretrained(tiny_base(), folder)), want, rtol=0, atol=0)


def test_an_adapter_with_a_tensor_removed_is_refused_and_would_have_loaded_with_other_logits(tmp_path):
    folder, want = _saved(tmp_path)
    state = load_file(folder / ADAPTER_WEIGHTS)
    removed = next(k for k in state if "lora_B" in k)
    del state[removed]
    save_file(state, folder / ADAPTER_WEIGHTS, metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=rf"{ADAPTER_WEIGHTS} is corrupt: sha256"):
        PeftModel.from_pretrained(tiny_base(), folder)
    # what the check prevents: PEFT alone loads it with a warning and other logits (the tensor stays at its init,
    # drawn here from another seed than the saved adapter's)
    torch.manual_seed(123)
    with pytest.warns(UserWarning, match="missing adapter keys"):
        unchecked = PeftModel.from_pretrained(tiny_base(), folder, verify_checksums=False)
    assert (_logits(unchecked) - want).abs().max() > 1e-3


def test_corrupted_or_truncated_weights_and_a_deleted_weights_file_are_refused(tmp_path):
    folder, _ = _saved(tmp_path)
    raw = bytearray((folder / ADAPTER_WEIGHTS).read_bytes())
    raw[-5] ^= 0xFF  # one flipped byte inside the last tensor's data
    (folder / ADAPTER_WEIGHTS).write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="is corrupt"):
        PeftModel.from_pretrained(tiny_base(), folder)
    (folder / ADAPTER_WEIGHTS).write_bytes(bytes(raw[: len(raw) // 2]))
    with pytest.raises(CheckpointError, match="is corrupt"):
        PeftModel.from_pretrained(tiny_base(), folder)
    (folder / ADAPTER_WEIGHTS).unlink()
    with pytest.raises(CheckpointError, match="missing"):
        PeftModel.from_pretrained(tiny_base(), folder)


def test_a_missing_checksum_file_is_an_error_unless_the_caller_opts_out(tmp_path):
    folder, want = _saved(tmp_path)
    (folder / CHECKSUMS_FILE).unlink()
    with pytest.raises(CheckpointError, match=f"no {CHECKSUMS_FILE}.*verify_checksums=False"):
        PeftModel.from_pretrained(tiny_base(), folder)
    with pytest.raises(CheckpointError, match=f"no {CHECKSUMS_FILE}"):
        H2TuneConfig.from_pretrained(str(folder))
    loaded = PeftModel.from_pretrained(tiny_base(), folder, verify_checksums=False)
    torch.testing.assert_close(_logits(loaded), want, rtol=0, atol=0)
    assert type(H2TuneConfig.from_pretrained(str(folder), verify_checksums=False)) is H2TuneConfig


def test_load_adapter_verifies_too_and_a_manifest_that_does_not_list_the_weights_is_refused(tmp_path):
    folder, _ = _saved(tmp_path)
    model = PeftModel.from_pretrained(tiny_base(), folder)
    model.load_adapter(folder, "second")  # a clean second adapter loads
    (folder / CHECKSUMS_FILE).write_text(json.dumps({"algorithm": "sha256", "files": {}}))
    with pytest.raises(CheckpointError, match=f"does not list {ADAPTER_WEIGHTS}"):
        model.load_adapter(folder, "third")


def test_release_folder_is_verified_at_its_root_and_saved_atomically(tmp_path):
    from hf_ext.h2tune.artifact import load_release, save_adapter, save_release

    model = make_adapter(tiny_config())
    release = save_release(model, tmp_path / "release")
    assert {"model.safetensors", f"adapter/{ADAPTER_WEIGHTS}"} <= set(
        json.loads((release / CHECKSUMS_FILE).read_text())["files"]
    )
    load_release(release)
    raw = bytearray((release / "model.safetensors").read_bytes())
    raw[-3] ^= 0x01  # the base decoder's weights: the adapter's own checksums cannot see this
    (release / "model.safetensors").write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="model.safetensors is corrupt"):
        load_release(release)
    (release / CHECKSUMS_FILE).unlink()
    with pytest.raises(CheckpointError, match="verify_checksums=False"):
        load_release(release)
    load_release(release, verify_checksums=False)
    # save_adapter replaces a folder as a whole; a failing save leaves the previous adapter intact
    out = save_adapter(model, tmp_path / "atomic")
    before = (out / ADAPTER_WEIGHTS).read_bytes()

    class Broken:
        def save_pretrained(self, path):
            (path / ADAPTER_WEIGHTS).write_bytes(b"half")
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_adapter(Broken(), out)
    assert (out / ADAPTER_WEIGHTS).read_bytes() == before
    PeftModel.from_pretrained(tiny_base(), out)
