"""Hub artifacts: atomic saves, corrupt checkpoints, remote code without hf_ext, dry-run push folder, and real
pushes (create_repo, upload_folder, push_to_hub, card validation) against a Hub server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from helpers.hub_server import MockHub

import hf_ext
from hf_ext.core.cards import CardError, render_card, validate_card
from hf_ext.core.cli import main as cli_main
from hf_ext.core.hub import CheckpointError, atomic_write_dir, save_artifact, verify_checkpoint
from hf_ext.orca import OrcaModel
from hf_ext.orca.testing import tiny_batch, tiny_config

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    model = OrcaModel(tiny_config()).eval()
    return save_artifact(model, tmp_path_factory.mktemp("art") / "orca", hf_ext.get_method("orca"))


def _env(**extra) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def test_artifact_files(artifact):
    names = {p.name for p in artifact.iterdir()}
    assert {"config.json", "model.safetensors", "modeling_orca.py", "configuration_orca.py", "README.md"} <= names
    config = json.loads((artifact / "config.json").read_text())
    assert config["model_type"] == "hf_ext_orca"
    assert config["auto_map"] == {"AutoConfig": "configuration_orca.OrcaConfig", "AutoModel": "modeling_orca.OrcaModel"}
    # the shipped modeling code must not need hf_ext
    for name in ("modeling_orca.py", "configuration_orca.py"):
        assert "hf_ext" not in "".join(
            line for line in (artifact / name).read_text().splitlines(True) if line.startswith(("import", "from"))
        )


def test_atomic_write_keeps_previous_artifact_on_failure(tmp_path):
    target = tmp_path / "a"
    atomic_write_dir(target, lambda d: (d / "ok.txt").write_text("v1"))

    def broken(d: Path):
        (d / "ok.txt").write_text("half-written")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write_dir(target, broken)
    assert (target / "ok.txt").read_text() == "v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"], "temporary folders were left behind"


@pytest.mark.parametrize(
    "damage,message",
    [
        ("truncate", "truncated"),
        ("header", "truncated or not a safetensors file"),
        ("config", "not valid JSON"),
        ("no_config", "no config.json"),
        ("pickle", "pickle"),
    ],
)
def test_corrupt_checkpoint_gives_clear_error(artifact, tmp_path, damage, message):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(artifact, bad)
    weights = bad / "model.safetensors"
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif damage == "header":
        weights.write_bytes(b"\xff" * 64)
    elif damage == "config":
        (bad / "config.json").write_text("{not json")
    elif damage == "no_config":
        (bad / "config.json").unlink()
    elif damage == "pickle":
        weights.unlink()
        (bad / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    with pytest.raises(CheckpointError, match=message):
        verify_checkpoint(bad)
    from transformers import AutoModel

    if damage in ("truncate", "header", "pickle"):
        with pytest.raises(CheckpointError, match=message):
            AutoModel.from_pretrained(bad)  # the registered class is guarded: one clear error, no torch trace
    elif damage == "config":  # AutoConfig reads config.json first; transformers' own message is already clear
        with pytest.raises(OSError, match="not a valid JSON file"):
            AutoModel.from_pretrained(bad)


def test_loads_with_trust_remote_code_without_hf_ext(artifact, tmp_path):
    """A clean interpreter where `import hf_ext` fails still loads the artifact from its own code."""
    inputs = tiny_batch()
    torch.save(inputs, tmp_path / "inputs.pt")
    expected = OrcaModel.from_pretrained(artifact).eval()(**inputs)
    script = textwrap.dedent(
        f"""
        import sys, json, torch
        sys.modules["hf_ext"] = None  # hf_ext is not installed here
        try:
            import hf_ext
            raise SystemExit("hf_ext should not be importable")
        except ImportError:
            pass
        from transformers import AutoModel
        model = AutoModel.from_pretrained({str(artifact)!r}, trust_remote_code=True).eval()
        out = model(**torch.load({str(tmp_path / "inputs.pt")!r}))
        print(json.dumps({{"module": type(model).__module__, "dt": out.dt_logits.tolist(),
                           "p": out.click_probs.tolist()}}))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(HF_HOME=str(tmp_path / "hf_home")),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["module"].startswith("transformers_modules.")
    torch.testing.assert_close(torch.tensor(got["dt"]), expected.dt_logits.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(torch.tensor(got["p"]), expected.click_probs.detach(), rtol=1e-6, atol=1e-6)


def test_card_validates_and_rejects_bad_metadata():
    card = render_card(hf_ext.get_method("orca"), repo_id="someone/orca-mmoe")
    meta = card.data.to_dict()
    assert meta["library_name"] == "transformers" and "arxiv:2508.16573" in meta["tags"]
    assert 'AutoModel.from_pretrained("someone/orca-mmoe", trust_remote_code=True)' in card.text
    with pytest.raises(CardError, match="does not parse"):
        validate_card("---\nlicense: [unclosed\n---\n# x")
    with pytest.raises(CardError, match="missing"):
        validate_card("---\nlicense: mit\n---\n# x")


def test_push_dry_run_writes_the_upload_folder(artifact, tmp_path, capsys):
    out = tmp_path / "upload"
    assert (
        cli_main(
            [
                "push",
                "orca",
                "--repo-id",
                "someone/orca-mmoe",
                "--from",
                str(artifact),
                "--dry-run",
                "--out",
                str(out),
                "--allow-untrained",
            ]
        )
        == 0
    )
    files = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert {
        "config.json",
        "model.safetensors",
        "modeling_orca.py",
        "configuration_orca.py",
        "README.md",
        "spaces/orca/app.py",
        "spaces/orca/README.md",
        "spaces/orca/requirements.txt",
    } <= files
    from huggingface_hub import ModelCard, SpaceCard

    validate_card(ModelCard.load(out / "README.md"))
    space = SpaceCard.load(out / "spaces/orca/README.md").data
    assert space.models == ["someone/orca-mmoe"] and space.sdk == "gradio"
    assert "nothing uploaded" in capsys.readouterr().out


def test_push_to_local_hub(artifact, tmp_path):
    """`hf-ext push` and `push_to_hub` run huggingface_hub's real client code against a Hub on 127.0.0.1."""
    with MockHub(tmp_path / "store") as hub:
        env = _env(HF_ENDPOINT=hub.url, HF_TOKEN="hf_fake", HF_HUB_OFFLINE="0", HF_HOME=str(tmp_path / "hf_home"))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "hf_ext.core.cli",
                "push",
                "orca",
                "--repo-id",
                "tester/orca-mmoe",
                "--from",
                str(artifact),
                "--space-repo-id",
                "tester/orca-space",
                "--allow-untrained",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=REPO_ROOT,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        script = textwrap.dedent(
            f"""
            import hf_ext
            from huggingface_hub import ModelCard
            from transformers import AutoModel
            model = AutoModel.from_pretrained({str(artifact)!r})
            model.push_to_hub("tester/orca-direct")
            card = ModelCard.load({str(artifact / "README.md")!r})
            card.validate()
            card.push_to_hub("tester/orca-direct")
            """
        )
        proc2 = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
        assert proc2.returncode == 0, proc2.stderr[-3000:]
        requests = list(hub.requests)
    model_repo = hub.repo_dir("models", "tester/orca-mmoe")
    stored = {str(p.relative_to(model_repo)) for p in model_repo.rglob("*") if p.is_file()}
    assert {"config.json", "model.safetensors", "modeling_orca.py", "README.md"} <= stored
    assert not any(s.startswith("spaces/") for s in stored), "the Space must not be uploaded into the model repo"
    assert (model_repo / "model.safetensors").read_bytes() == (artifact / "model.safetensors").read_bytes()
    space_repo = hub.repo_dir("spaces", "tester/orca-space")
    assert {p.name for p in space_repo.iterdir()} == {"app.py", "README.md", "requirements.txt", "wheels"}
    (wheel,) = (space_repo / "wheels").iterdir()  # built by the push itself: the Space can install what it names
    assert f"./wheels/{wheel.name}[orca]" in (space_repo / "requirements.txt").read_text()
    import zipfile

    assert "hf_ext/orca/modeling_orca.py" in zipfile.ZipFile(wheel).namelist()
    direct = hub.repo_dir("models", "tester/orca-direct")
    assert {"config.json", "model.safetensors", "README.md"} <= {p.name for p in direct.iterdir()}
    assert ("POST", "/api/validate-yaml") in requests
    assert ("POST", "/api/repos/create") in requests


def test_space_push_refuses_without_a_checkout_or_a_matching_wheel(artifact, tmp_path, monkeypatch, capsys):
    """Installed from a wheel there is no source to build the Space's wheel from: push stops before uploading and
    says to pass --wheel; a wheel the Space's requirements.txt does not name is refused too."""
    from hf_ext.core import wheel as wheel_module
    from hf_ext.core.cli import main

    monkeypatch.setattr(wheel_module, "checkout_root", lambda: None)
    argv = ["push", "orca", "--repo-id", "a/b", "--from", str(artifact), "--space-repo-id", "a/c", "--allow-untrained"]
    with pytest.raises(SystemExit, match="pass --wheel PATH"):
        main(argv)
    other = tmp_path / "hf_ext-9.9.9-py3-none-any.whl"
    other.write_bytes(b"PK")
    with pytest.raises(SystemExit, match="installs a different hf_ext wheel"):
        main([*argv, "--wheel", str(other)])
