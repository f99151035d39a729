"""The Space's logic: a short comparison returns the metric table and both figures; bad input is a readable
`gr.Error`."""

import re

import gradio as gr
import pytest

from hf_ext.proto_evfl.demo import build_demo, compare


def test_compare_trains_both_models_and_draws_the_figures():
    rows, per_class, prototypes = compare(imbalance_ratio=20, unseen_class="5", rounds=3, seed=0)
    assert [r[0] for r in rows] == ["accuracy", "macro-F1", "unseen-class acc"]
    assert rows[2][1] == 0.0  # vanilla VFL on the unseen class
    bars = per_class.axes[0].containers
    assert [len(b) for b in bars] == [10, 10]  # per-class accuracy of both models
    assert len(prototypes.axes[0].texts) == 10  # one labelled star per global prototype


@pytest.mark.parametrize(
    "args, match",
    [((0.5, "3", 10, 0), "imbalance ratio must be between 1 and 100"), ((50, "12", 10, 0), "unseen class must be a "
     "digit 0-9"), ((50, "x", 10, 0), "unseen class must be a digit"), ((50, "none", 500, 0), "rounds must be")],
)  # fmt: skip
def test_bad_input_is_a_readable_error(args, match):
    with pytest.raises(ValueError, match=match):
        compare(*args)
    demo = build_demo()
    run = next(fn for fn in demo.fns.values() if fn.api_name == "compare").fn
    with pytest.raises(gr.Error, match=match):
        run(*args)


# ---- the published-model tab: the linked repo by id through the test Hub, and the visible fallback -------------


@pytest.fixture
def proto_demo(monkeypatch):
    """The demo module with its caches cleared (each test links its own repo) and a shorter in-code fallback
    (the same federation with fewer rounds), cleared again afterwards so no other test sees it."""
    from hf_ext.proto_evfl import demo

    monkeypatch.setattr(demo, "SMALL_ROUNDS", 2)
    demo._linked.cache_clear()
    demo.small_federation.cache_clear()
    yield demo
    demo._linked.cache_clear()
    demo.small_federation.cache_clear()


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A short zero-shot federation saved as `hf-ext reproduce proto_evfl` publishes it (seed 1: class 1 never
    labelled), with its training record: `(artifact folder, federation result)`."""
    from hf_ext.proto_evfl import SPEC
    from hf_ext.proto_evfl.inference import save_federation
    from hf_ext.proto_evfl.reproduce import _save_record, run_settings
    from hf_ext.proto_evfl.training import run_federation

    result = run_federation(run_settings("proto_evfl", "zero_shot", 1, 50.0, 3))
    folder = save_federation(result.top_model, result.party_models, tmp_path_factory.mktemp("fed") / "artifact", SPEC)
    _save_record(folder, ("digits", "proto_evfl", "zero_shot", 1, 50.0), result.metrics)
    return folder, result


def _push(folder, tmp_path, repo_id):
    """Pushes an artifact folder as `hf-ext push proto_evfl --space-repo-id` would; returns the Space folder."""
    from hf_ext.core.hub import build_push_folder, push_folder
    from hf_ext.proto_evfl import SPEC

    upload = build_push_folder(
        SPEC, folder, tmp_path / f"upload-{repo_id.replace('/', '_')}", repo_id=repo_id, allow_untrained=True
    )
    push_folder(SPEC, upload, repo_id)
    return upload / "spaces" / "proto_evfl"


def test_published_tab_loads_the_federation_its_space_readme_links(proto_demo, published, tmp_path, monkeypatch):
    from helpers.hub_server import serving

    from hf_ext.core.demo import MODEL_REPO_ENV
    from hf_ext.proto_evfl.data import VerticalDataConfig, build_vertical_split
    from hf_ext.proto_evfl.inference import load_federation, predict_entities

    folder, result = published
    with serving(tmp_path / "hub") as hub:
        space = _push(folder, tmp_path, "tester/proto-evfl-space")
        monkeypatch.delenv(MODEL_REPO_ENV, raising=False)
        monkeypatch.chdir(space)  # the deployed Space: app.py beside the README whose `models:` the push set
        note, rows, predictions, digits, per_class, line = proto_demo.predict_linked("all", 24)
        fetched = {
            re.sub(r"^/tester/proto-evfl-space/resolve/[^/]+/", "", path)
            for _, path in hub.requests
            if path.startswith("/tester/proto-evfl-space/resolve/")
        }
    assert note == "model: `tester/proto-evfl-space` (loaded with `from_pretrained`)"
    assert {"config.json", "parties/party-0/config.json", "parties/party-1/config.json"} <= fetched
    # the loaded federation reproduces its own training run's test metrics (seed 1's held-out split, class 1 unseen)
    assert rows == [
        ["accuracy", round(100 * result.metrics["accuracy"], 1)],
        ["macro-F1", round(100 * result.metrics["macro_f1"], 1)],
        ["unseen-class acc (class 1)", round(100 * result.metrics["unseen_accuracy"], 1)],
    ]
    # and its predictions are those of the artifact loaded here (a local folder: parties/ through `subfolder`)
    top, parties = load_federation(folder)
    split = build_vertical_split(VerticalDataConfig(unseen_class=1, seed=1, max_unaligned_per_class=120))
    want = predict_entities(top, parties, [split.party(k).test_features for k in range(2)])
    assert [r[0] for r in predictions] == split.test_ids[:24].tolist()
    assert [r[2] for r in predictions] == want["predictions"][:24].tolist()
    assert [r[3] for r in predictions] == [round(100 * float(p.max()), 1) for p in want["probabilities"][:24]]
    assert len(digits.axes) == 24 and line.startswith("**Reading:** this federation labels")


def test_published_tab_shows_one_class_and_falls_back_offline(proto_demo, monkeypatch):
    from hf_ext.core.demo import MODEL_REPO_ENV

    monkeypatch.setenv(MODEL_REPO_ENV, "tester/proto-evfl-never-pushed")  # and the tests run with HF_HUB_OFFLINE=1
    note, rows, predictions, *_ = proto_demo.predict_linked("0", 5)
    assert note.startswith("**Note:** could not load the linked model repo `tester/proto-evfl-never-pushed`")
    assert "trained here in code" in note
    assert [r[1] for r in predictions] == [0] * 5  # the class asked for
    assert rows[2][0] == "unseen-class acc (class 0)"  # the fallback is the published run's setting


def test_published_tab_needs_the_parties_and_says_when_the_split_is_unknown(
    proto_demo, published, tmp_path, monkeypatch
):
    """A repo holding the top model alone (pushed before the parties were published) falls back, saying so; one
    without a training record loads with a note that its test split may overlap its training data."""
    from helpers.hub_server import serving

    from hf_ext.core.demo import MODEL_REPO_ENV
    from hf_ext.core.hub import save_artifact
    from hf_ext.proto_evfl import SPEC
    from hf_ext.proto_evfl.inference import save_federation

    top_only = save_artifact(published[1].top_model, tmp_path / "top-only", SPEC)
    no_record = save_federation(published[1].top_model, published[1].party_models, tmp_path / "no-record", SPEC)
    with serving(tmp_path / "hub"):
        _push(top_only, tmp_path, "tester/proto-evfl-top-only")
        _push(no_record, tmp_path, "tester/proto-evfl-no-record")
        monkeypatch.setenv(MODEL_REPO_ENV, "tester/proto-evfl-top-only")
        note, *_ = proto_demo.predict_linked("all", 4)
        monkeypatch.setenv(MODEL_REPO_ENV, "tester/proto-evfl-no-record")
        note_no_record, *_ = proto_demo.predict_linked("all", 4)
    assert note.startswith("**Note:** could not load the linked model repo `tester/proto-evfl-top-only`")
    # loaded, but without a record the page cannot know the training split, and says so
    assert (
        note_no_record.startswith(
            "model: `tester/proto-evfl-no-record` (loaded with `from_pretrained`). It has no training record"
        )
        and "may hold entities" in note_no_record
    )


@pytest.mark.parametrize(
    "args, match",
    [
        (("11", 4), "must be a digit 0-9"),
        (("x", 4), "must be a digit"),
        (("all", 40), "digits shown must be between 1 and 24"),
    ],
)
def test_published_tab_reports_bad_input_readably(args, match):
    from hf_ext.proto_evfl.demo import predict_linked

    with pytest.raises(ValueError, match=match):
        predict_linked(*args)
