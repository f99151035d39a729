"""The method contract's checks, one function shared by tests/test_method_contract.py (every registered method) and
tests/core/test_new_method_template.py (a method scaffolded from the template in a temporary folder)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from hf_ext.core.cards import render_card
from hf_ext.core.cli import load_space_app
from hf_ext.core.cli import main as cli_main
from hf_ext.core.testing import comparable_config_dict, to_numpy


def _assert_same_outputs(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a:
        if a[key] is None:
            assert b[key] is None, key
            continue
        np.testing.assert_allclose(to_numpy(a[key]), to_numpy(b[key]), rtol=1e-6, atol=1e-7, err_msg=key)


def run_contract_check(spec, fx, check: str, tmp_path, capsys) -> None:
    """Runs one contract `check` of `spec`'s kind against its contract fixture `fx`."""
    method = spec.name
    if check == "config_roundtrip":
        config = fx.make_config()
        again = fx.config_roundtrip(config)
        assert comparable_config_dict(again) == comparable_config_dict(config)
        if hasattr(config, "save_pretrained"):
            config.save_pretrained(tmp_path)
            reloaded = type(config).from_pretrained(tmp_path)
            assert comparable_config_dict(reloaded) == comparable_config_dict(config)
    elif check == "save_load_outputs":
        artifact = fx.make_artifact(fx.make_config())
        if spec.kind == "estimator":  # an estimator's artifact is its fitted state
            artifact = fx.fit(artifact)
        inputs = fx.example_inputs()
        before = fx.outputs(artifact, inputs)
        fx.save_artifact(artifact, tmp_path / "a")
        written = {p.name for p in (tmp_path / "a").iterdir()}
        assert "config.json" in written
        assert not {n for n in written if n.endswith((".bin", ".pt", ".pkl", ".pickle"))}, written
        if spec.kind in ("model", "adapter", "estimator"):
            assert any(n.endswith(".safetensors") for n in written), written
        if spec.kind == "model":
            auto_map = json.loads((tmp_path / "a" / "config.json").read_text())["auto_map"]
            assert set(spec.auto_classes) <= set(auto_map)
        reloaded = fx.load_artifact(tmp_path / "a")
        assert type(reloaded) is type(artifact)
        _assert_same_outputs(before, fx.outputs(reloaded, inputs))
    elif check == "integrity":
        _check_integrity(spec, fx, tmp_path)
    elif check == "trainer_step":
        assert fx.make_trainer is not None, f"{method}: kind {spec.kind} needs make_trainer in its contract fixture"
        artifact = fx.make_artifact(fx.make_config())
        before = fx.trainable(artifact)
        assert before, "no trainable parameters"
        trainer = fx.make_trainer(artifact, tmp_path)
        trainer.train()
        assert trainer.state.global_step >= 1
        after = fx.trainable(artifact)
        unchanged = [k for k in before if np.array_equal(before[k], after[k])]
        assert not unchanged, f"one Trainer step left these trainable tensors unchanged: {unchanged}"
    elif check == "fit_changes_state":
        assert fx.fit is not None and fx.fitted_state is not None, f"{method}: estimators need fit and fitted_state"
        est = fx.make_artifact(fx.make_config())
        fitted = fx.fit(est)
        state = fx.fitted_state(fitted)
        assert state and all(np.size(to_numpy(v)) > 0 for v in state.values())
    elif check == "card":
        card = render_card(spec, repo_id=f"tester/{method}")
        meta = card.data.to_dict()
        assert meta["library_name"] == spec.library_name
        assert "hf_ext" in meta["tags"]
        if spec.arxiv_id:
            assert f"arxiv:{spec.arxiv_id}" in meta["tags"]
            assert spec.arxiv_url in card.content
        assert "## " in card.text, "hand-written sections are missing from the card"
    elif check == "space":
        import gradio as gr
        from huggingface_hub import SpaceCard

        app_source = (spec.space_dir / "app.py").read_text()
        assert 'if __name__ == "__main__":' in app_source and "build_demo" in app_source
        demo = load_space_app(spec).build_demo()
        assert isinstance(demo, gr.Blocks)
        front = SpaceCard.load(spec.space_dir / "README.md").data
        assert front.sdk == "gradio" and front.app_file == "app.py"
        assert front.sdk_version == gr.__version__
        assert "hf_ext" in (spec.space_dir / "requirements.txt").read_text()
    elif check == "cli_help":
        for argv in ([method, "--help"], [method, "reproduce", "--help"]):
            with pytest.raises(SystemExit) as exit_info:
                cli_main(argv)
            assert exit_info.value.code == 0, argv
        out = capsys.readouterr().out
        assert spec.title.split(":")[0] in out and "--full" in out
    else:
        pytest.fail(f"unknown contract check {check!r}")


def _check_integrity(spec, fx, tmp_path) -> None:
    """Checksums are mandatory for every artifact kind: a flipped byte in any weight/table file and a deleted
    checksum file are both refused on load (each with an error naming the problem), and a save leaves no
    temporary folder behind."""
    from hf_ext.core.integrity import CHECKSUMS_FILE, CheckpointError, MissingChecksumsError

    artifact = fx.make_artifact(fx.make_config())
    if spec.kind == "estimator":
        artifact = fx.fit(artifact)
    good = tmp_path / "good"
    fx.save_artifact(artifact, good)
    manifests = sorted(good.rglob(CHECKSUMS_FILE))
    assert manifests, f"{spec.name}: the saved artifact has no {CHECKSUMS_FILE}"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")], "a save left a temporary folder"
    listed = [m.parent / rel for m in manifests for rel in json.loads(m.read_text())["files"]]
    assert listed, f"{spec.name}: {CHECKSUMS_FILE} lists no weight or table file"
    for target in listed:  # one flipped byte in the middle of any listed file
        bad = tmp_path / f"flip-{target.relative_to(good).as_posix().replace('/', '_')}"
        shutil.copytree(good, bad)
        victim = bad / target.relative_to(good)
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0xFF
        victim.write_bytes(bytes(data))
        with pytest.raises(CheckpointError, match="corrupt|truncated|sha256"):
            fx.load_artifact(bad)
    for manifest in manifests:  # each checksum file deleted
        gone = tmp_path / f"nosum-{manifest.parent.relative_to(good).as_posix().replace('/', '_') or 'root'}"
        shutil.copytree(good, gone)
        (gone / manifest.relative_to(good)).unlink()
        with pytest.raises(MissingChecksumsError):
            fx.load_artifact(gone)
