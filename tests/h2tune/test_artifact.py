"""The released artifact (`--out/artifact`, what `hf-ext push h2tune` pushes by default): base decoder at the root,
H2Tune adapter in `adapter/`; it passes the push checks and loads back with identical logits."""

from __future__ import annotations

import json

import pytest
import torch

from hf_ext.h2tune.artifact import load_release, release_from_client
from hf_ext.h2tune.task import CLIENTS, H2TuneClient, RunConfig


def test_release_folder_pushes_and_loads_back_identically(tmp_path):
    from hf_ext.core.hub import build_push_folder, push_manifest
    from hf_ext.core.records import save_training_record
    from hf_ext.h2tune import SPEC
    from hf_ext.h2tune.data import encode

    client = H2TuneClient(CLIENTS[2], RunConfig(local_steps=1, num_train=8, num_test=2, batch_size=8), 4, index=2)
    client.train_local()
    release = release_from_client(client.save_artifact(tmp_path / "runs"), tmp_path / "artifact")
    assert json.loads((release / "adapter" / "adapter_config.json").read_text())["peft_type"] == "HF_EXT_H2TUNE"
    assert (release / "config.json").is_file() and not (release / "adapter_config.json").exists()
    ids = torch.tensor([encode("print((3+4)%10)>")])
    client.model.eval()
    with torch.no_grad():
        want = client.model(input_ids=ids).logits
        got = load_release(release).eval()(input_ids=ids).logits
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    save_training_record(release, method="h2tune", command="test", metrics=[])
    folder = build_push_folder(SPEC, release, tmp_path / "upload", repo_id="tester/h2tune")
    files = push_manifest(folder, SPEC)["model"]
    assert {
        "config.json",
        "model.safetensors",
        "adapter/adapter_config.json",
        "adapter/adapter_model.safetensors",
        "README.md",
    } <= set(files)
    assert "subfolder='adapter'" in (folder / "README.md").read_text()


def test_release_from_a_folder_that_is_not_a_client_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="base/config.json"):
        release_from_client(tmp_path, tmp_path / "artifact")
