"""Which model repo a Space loads (`$HF_EXT_MODEL_REPO`, the deployed README's `models:`, the packaged template) and
the visible fallback when it cannot be loaded."""

from __future__ import annotations

import pytest

from hf_ext.core import demo


@pytest.fixture
def no_link(monkeypatch, tmp_path):
    monkeypatch.delenv(demo.MODEL_REPO_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # no app.py here: not a deployed Space folder
    return tmp_path


def test_env_wins_and_lists_split_at_commas(no_link, monkeypatch):
    monkeypatch.setenv(demo.MODEL_REPO_ENV, "someone/victim, someone/dhng")
    assert demo.space_model_repos("tba") == ["someone/victim", "someone/dhng"]
    assert demo.space_model_repo("tba") == "someone/victim"


def test_deployed_readme_front_matter_is_read(no_link):
    (no_link / "app.py").write_text("")
    (no_link / "README.md").write_text("---\ntitle: x\nmodels:\n- me/orca-tenrec\n- me/other\n---\n# Space\n")
    assert demo.space_model_repos("orca") == ["me/orca-tenrec", "me/other"]
    (no_link / "README.md").write_text("---\ntitle: x\nmodels: me/single\n---\n")
    assert demo.space_model_repo("orca") == "me/single"


def test_templates_in_the_checkout_link_no_repo(no_link):
    # spaces/<method>/README.md carries no `models:` until `hf-ext push --space-repo-id` writes it
    assert demo.space_model_repo("gpmfs") is None


def test_load_linked_loads_or_falls_back_with_a_note(no_link, monkeypatch):
    model, note = demo.load_linked("orca", lambda repo: f"loaded {repo}", lambda: "small", "a tiny ORCA")
    assert model == "small" and note.startswith("**Note:** no model repo is linked") and "a tiny ORCA" in note

    monkeypatch.setenv(demo.MODEL_REPO_ENV, "me/orca")
    model, note = demo.load_linked("orca", lambda repo: f"loaded {repo}", lambda: "small", "a tiny ORCA")
    assert model == "loaded me/orca" and note == "model: `me/orca` (loaded with `from_pretrained`)"

    def offline(repo):
        raise OSError("couldn't connect to the Hub")

    model, note = demo.load_linked("orca", offline, lambda: "small", "a tiny ORCA")
    assert model == "small"
    assert note == "**Note:** could not load the linked model repo `me/orca` (OSError); showing a tiny ORCA instead."
