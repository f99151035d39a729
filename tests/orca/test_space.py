"""The ORCA Space launched on 127.0.0.1 and driven with gradio_client, including a bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

import hf_ext
from hf_ext.core.cli import load_space_app


@pytest.fixture(scope="module")
def space_url():
    demo = load_space_app(hf_ext.get_method("orca")).build_demo()
    _, url, _ = demo.launch(
        server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True, share=False
    )
    yield url
    demo.close()


def test_space_compares_baseline_and_orca(space_url):
    from gradio_client import Client

    client = Client(space_url, verbose=False)
    table, image, reading = client.predict(3.0, 4000, "mmoe", 1, 0, None, api_name="/compare")
    assert reading.startswith("**Reading:**") and "baseline" in reading
    rows = {r[0]: r[1:] for r in table["data"]}
    assert "DT macro-F1 ↑" in rows and "CTR AUC ↑" in rows  # headers say whether higher is better
    assert all(isinstance(v, (int, float)) for v in rows["CTR AUC ↑"])
    assert 0.0 <= rows["true share in moderate bins 2–5"][0] <= 1.0
    assert Path(image).is_file() and Path(image).stat().st_size > 1000


def test_space_reports_bad_input_readably(space_url, tmp_path):
    from gradio_client import Client, handle_file

    client = Client(space_url, verbose=False)
    bad_csv = tmp_path / "qk.csv"
    bad_csv.write_text("user_id,item_id,click\n1,2,1\n")  # no read_time, gender, ... columns
    with pytest.raises(Exception, match="read_time|missing"):
        client.predict(3.0, 4000, "mmoe", 1, 0, handle_file(str(bad_csv)), api_name="/compare")
    with pytest.raises(Exception, match="less than minimum value 2000"):  # the slider's own bound, also readable
        client.predict(3.0, 100, "mmoe", 1, 0, None, api_name="/compare")


# ---- the published-model tab: the linked repo by id through the test Hub, and the visible fallback -------------


@pytest.fixture
def orca_demo(monkeypatch):
    """The demo module with its caches cleared (each test links its own repo) and a quicker in-code fallback
    (the same training code on a smaller log), cleared again afterwards so no other test sees it."""
    from hf_ext.orca import demo

    monkeypatch.setattr(demo, "SMALL_IMPRESSIONS", 4_000)
    monkeypatch.setattr(demo, "SMALL_EPOCHS", 1.0)
    demo._linked.cache_clear()
    demo.small_model.cache_clear()
    yield demo
    demo._linked.cache_clear()
    demo.small_model.cache_clear()


def _spurious_orca():
    """A tiny ORCA over the spurious-shortcut generator's fields (40 users), as `hf-ext reproduce orca` publishes."""
    import torch

    from hf_ext.orca.modeling_orca import OrcaModel
    from hf_ext.orca.spurious_generator import (
        SPURIOUS_FIELD_NAMES,
        SPURIOUS_POST_CLICK_FIELDS,
        SpuriousOrcaConfig,
        spurious_vocab_sizes,
    )  # fmt: skip
    from hf_ext.orca.testing import tiny_config

    torch.manual_seed(0)
    return OrcaModel(
        tiny_config(
            field_names=list(SPURIOUS_FIELD_NAMES),
            post_click_fields=list(SPURIOUS_POST_CLICK_FIELDS),
            field_vocab_sizes=spurious_vocab_sizes(SpuriousOrcaConfig(num_users=40)),
        )
    )


def _push(model, tmp_path: Path, repo_id: str) -> tuple[Path, Path]:
    """Saves and pushes `model` as `hf-ext push orca --space-repo-id` would; returns (artifact, Space folder)."""
    from hf_ext.core.hub import build_push_folder, push_folder, save_artifact

    spec = hf_ext.get_method("orca")
    folder = save_artifact(model, tmp_path / repo_id.replace("/", "_"), spec)
    upload = build_push_folder(spec, folder, tmp_path / "upload", repo_id=repo_id, allow_untrained=True)
    push_folder(spec, upload, repo_id)
    return folder, upload / "spaces" / "orca"


def _scored_directly(model, strength: float, impressions: int, seed: int) -> dict[str, float]:
    from hf_ext.orca.data import to_model_features
    from hf_ext.orca.demo import TEST_SEED, _generator
    from hf_ext.orca.reproduce import evaluate
    from hf_ext.orca.spurious_generator import generate_spurious

    cfg = _generator(model.config, strength, impressions, TEST_SEED + seed)
    features = to_model_features(generate_spurious(cfg), model.config.field_names, model.config.field_vocab_sizes)
    return evaluate(model, features)[0]


def test_published_tab_loads_the_repo_its_space_readme_links(orca_demo, tmp_path, monkeypatch):
    from helpers.hub_server import serving

    from hf_ext.core.demo import MODEL_REPO_ENV
    from hf_ext.orca.modeling_orca import OrcaModel

    with serving(tmp_path / "hub") as hub:
        folder, space = _push(_spurious_orca(), tmp_path, "tester/orca-space")
        monkeypatch.delenv(MODEL_REPO_ENV, raising=False)
        monkeypatch.chdir(space)  # the deployed Space: app.py beside the README whose `models:` the push set
        note, rows, png, reading = orca_demo.score_linked(1.0, 2_000, 3)
        assert any("/tester/orca-space/resolve/" in path for _, path in hub.requests)  # fetched by repo id
    assert note == "model: `tester/orca-space` (loaded with `from_pretrained`)"
    # the page's numbers are the pushed model's own, computed here from the local artifact
    want = _scored_directly(OrcaModel.from_pretrained(folder), 1.0, 2_000, 3)
    assert [r[0] for r in rows] == [label for _, label in orca_demo.METRIC_ROWS]
    assert [r[1] for r in rows] == [round(want[k], 4) for k, _ in orca_demo.METRIC_ROWS]
    assert [r[2] for r in rows] == [round(want[f"raw_{k}"], 4) for k, _ in orca_demo.METRIC_ROWS]
    assert all(isinstance(r[3], float) for r in rows)  # the exact posterior's column
    assert Path(png).is_file() and reading.startswith("**Reading:**") and "s = 1" in reading


def test_published_tab_falls_back_with_a_visible_note(orca_demo, monkeypatch):
    from hf_ext.core.demo import MODEL_REPO_ENV

    monkeypatch.setenv(MODEL_REPO_ENV, "tester/orca-never-pushed")  # and the tests run with HF_HUB_OFFLINE=1
    note, rows, _, reading = orca_demo.score_linked(0.0, 2_000, 0)
    assert note.startswith("**Note:** could not load the linked model repo `tester/orca-never-pushed`")
    assert "trained here in code" in note
    want = _scored_directly(orca_demo.small_model(), 0.0, 2_000, 0)
    assert [r[1] for r in rows] == [round(want[k], 4) for k, _ in orca_demo.METRIC_ROWS]
    assert "Reading:" in reading


def test_published_tab_refuses_a_model_of_other_fields_with_a_note(orca_demo, tmp_path, monkeypatch):
    import torch
    from helpers.hub_server import serving

    from hf_ext.core.demo import MODEL_REPO_ENV
    from hf_ext.orca.modeling_orca import OrcaModel
    from hf_ext.orca.testing import tiny_config

    torch.manual_seed(0)
    with serving(tmp_path / "hub"):
        _push(OrcaModel(tiny_config()), tmp_path, "tester/orca-other-fields")
        monkeypatch.setenv(MODEL_REPO_ENV, "tester/orca-other-fields")
        note, *_ = orca_demo.score_linked(0.0, 2_000, 0)
    assert (
        note.startswith(
            "**Note:** the linked model repo `tester/orca-other-fields` loaded, but the model takes "
            "the fields ['user_id', 'item_id', 'category']"
        )
        and "trained here in code" in note
    )


def test_published_tab_reports_bad_input_readably(orca_demo):
    with pytest.raises(ValueError, match="test impressions must be between 2,000 and 60,000"):
        orca_demo.score_linked(0.0, 100, 0)
    with pytest.raises(ValueError, match=r"test shortcut strength s must be in \[0, 3\]"):
        orca_demo.score_linked(5.0, 2_000, 0)
