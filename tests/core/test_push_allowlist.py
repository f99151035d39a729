"""`hf-ext push` uploads an allow-list only: planted secrets, pickles, an escaping symlink and a stray CSV are
refused and listed, `--dry-run` prints the exact upload list, and a real push leaves no temporary copy behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from helpers.hub_server import MockHub

import hf_ext
from hf_ext.core.cli import main as cli_main
from hf_ext.core.hub import push_manifest, save_artifact, select_push_files
from hf_ext.orca import OrcaModel
from hf_ext.orca.testing import tiny_config

REPO_ROOT = Path(__file__).resolve().parents[2]
PLANTED = {
    "token": "hf_secret_token",
    "secrets.json": '{"aws": "AKIA..."}',
    "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----",
    "logs/.env": "HF_TOKEN=hf_leak",
    "logs/run.log": "step 1",
    ".env": "HF_TOKEN=hf_leak",
    "pytorch_model.bin": "\x80\x04pickle",
    "training_args.bin": "\x80\x04pickle",
    "optimizer.pt": "\x80\x04pickle",
    "scaler.pkl": "\x80\x04pickle",
    "stray.csv": "a,b\n1,2\n",
}
SECRET_MARKERS = ("hf_secret_token", "AKIA", "PRIVATE KEY", "hf_leak", "pickle", "a,b", "outside secret")


@pytest.fixture()
def planted(tmp_path) -> Path:
    torch.manual_seed(0)
    art = save_artifact(OrcaModel(tiny_config()).eval(), tmp_path / "art", hf_ext.get_method("orca"))
    for rel, text in PLANTED.items():
        (art / rel).parent.mkdir(parents=True, exist_ok=True)
        (art / rel).write_text(text)
    outside = tmp_path / "outside.txt"
    outside.write_text("outside secret")
    os.symlink(outside, art / "linked_config.json")  # escapes the folder
    os.symlink(tmp_path, art / "escape_dir")
    os.symlink(art / "config.json", art / "generation_config.json")  # stays inside: uploaded as a file
    os.symlink(art, art / "loop")  # a folder link back into the artifact: not followed
    return art


def test_select_push_files_refuses_everything_planted(planted):
    allowed, refused = select_push_files(planted)
    reasons = dict(refused)
    assert set(allowed) == {
        "config.json",
        "model.safetensors",
        "configuration_orca.py",
        "modeling_orca.py",
        "README.md",
        "hf_ext_checksums.json",
        "generation_config.json",
    }
    for rel in ("token", "secrets.json", "id_rsa", "logs/run.log", "stray.csv"):
        assert "not a weights/config" in reasons[rel], rel
    for rel in ("logs/.env", ".env"):
        assert reasons[rel] == "hidden file or folder"
    for rel in ("pytorch_model.bin", "training_args.bin", "optimizer.pt", "scaler.pkl"):
        assert "pickle" in reasons[rel], rel
    assert "symlink leaving" in reasons["linked_config.json"] and "symlink leaving" in reasons["escape_dir"]
    assert reasons["loop"] == "symlinked folder (not followed)"


def test_dry_run_prints_the_exact_list(planted, tmp_path, capsys):
    out = tmp_path / "upload"
    assert (
        cli_main(
            [
                "push",
                "orca",
                "--repo-id",
                "someone/orca",
                "--from",
                str(planted),
                "--dry-run",
                "--out",
                str(out),
                "--allow-untrained",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    files = push_manifest(out, hf_ext.get_method("orca"))
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert sorted(files["model"] + [f"spaces/orca/{f}" for f in files["space"]]) == on_disk
    listed = printed.split("model repo someone/orca gets", 1)[1].split("Space", 1)[0]
    assert sorted(line.strip() for line in listed.splitlines()[1:] if line.strip()) == files["model"]
    for rel in PLANTED:
        assert f"{rel}: " in printed, f"{rel} is not listed as refused"
    for path in out.rglob("*"):
        if path.is_file():
            assert not path.is_symlink()
            assert not any(m in path.read_text(errors="ignore") for m in SECRET_MARKERS), path


def test_real_push_uploads_only_the_list_and_leaves_no_temp(planted, tmp_path):
    scratch = tmp_path / "scratch_tmp"
    scratch.mkdir()
    from hf_ext._version import __version__

    # the allow-list is what this test checks, so a stand-in wheel (test_hub.py pushes a real, freshly built one)
    fake_wheel = tmp_path / f"hf_ext-{__version__}-py3-none-any.whl"
    fake_wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    with MockHub(tmp_path / "store") as hub:
        env = dict(
            os.environ,
            HF_ENDPOINT=hub.url,
            HF_TOKEN="hf_fake",
            HF_HUB_OFFLINE="0",
            HF_HOME=str(tmp_path / "hf_home"),
            TMPDIR=str(scratch),
        )
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "hf_ext.core.cli",
                "push",
                "orca",
                "--repo-id",
                "t/orca",
                "--from",
                str(planted),
                "--space-repo-id",
                "t/orca-space",
                "--wheel",
                str(fake_wheel),
                "--allow-untrained",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=REPO_ROOT,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    repo = hub.repo_dir("models", "t/orca")
    stored = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file())
    allowed, _ = select_push_files(planted)
    assert stored == sorted(allowed)
    for path in repo.rglob("*"):
        if path.is_file():
            assert not any(m in path.read_text(errors="ignore") for m in SECRET_MARKERS), path
    space = hub.repo_dir("spaces", "t/orca-space")
    assert sorted(p.name for p in space.iterdir()) == ["README.md", "app.py", "requirements.txt", "wheels"]
    assert [p.name for p in scratch.iterdir() if p.name.startswith("hf_ext_push_")] == [], (
        "a real push must not leave its upload copy in the temp dir"
    )


def test_push_refuses_an_artifact_with_nothing_loadable(tmp_path):
    from hf_ext.core.hub import PushRefusedError, build_push_folder

    art = tmp_path / "only_pickles"
    art.mkdir()
    (art / "pytorch_model.bin").write_bytes(b"\x80\x04")
    with pytest.raises(Exception, match="config.json|pickle"):
        build_push_folder(hf_ext.get_method("orca"), art, tmp_path / "up", repo_id="a/b")
    with pytest.raises(PushRefusedError, match="not an artifact folder"):
        select_push_files(tmp_path / "nope")
    assert not tempfile.gettempdir().startswith(str(tmp_path))
    shutil.rmtree(art)
