"""Which model `hf-ext reproduce tinyalign` saves as `artifact/` (what `hf-ext push` publishes): the honest TinyAlign
cell with the best validation score, never a fixed cell and never a score on test."""

import pytest

from hf_ext.tinyalign.reproduce import TinyAlignReproduceArguments, artifact_candidates, select_artifact


def test_the_artifact_is_the_candidate_with_the_lowest_validation_ce():
    scored = {
        ("small", "k4", 0, 1.0): {"loss": 0.56, "token_accuracy": 0.73},  # the weakest cell, saved before
        ("large", "k4", 0, 1.0): {"loss": 0.43, "token_accuracy": 0.81},
        ("large", "k1", 0, 1.0): {"loss": 0.38, "token_accuracy": 0.82},
    }
    assert select_artifact(scored) == ("large", "k1", 0, 1.0)
    # ties on CE: the higher validation token accuracy, then sorted order
    tied = {
        ("a", "k1", 0, 1.0): {"loss": 0.4, "token_accuracy": 0.7},
        ("b", "k1", 0, 1.0): {"loss": 0.4, "token_accuracy": 0.8},
    }
    assert select_artifact(tied) == ("b", "k1", 0, 1.0)
    tied[("b", "k1", 0, 1.0)]["token_accuracy"] = 0.7
    assert select_artifact(tied) == ("a", "k1", 0, 1.0)
    with pytest.raises(ValueError, match="at least one candidate"):
        select_artifact({})


def test_candidates_are_honest_tinyalign_cells_on_the_whole_train_split():
    run = TinyAlignReproduceArguments(full=True)
    cells = artifact_candidates(run)
    assert len(cells) == len(run.lm_sizes) * len(run.ks) * len(run.seeds) == 12
    assert all(v.startswith("k") and f == 1.0 for _, v, _, f in cells)  # no baseline, no released-k4


def test_frozen_lms_pretrain_each_size_on_first_use_only(monkeypatch):
    """The Space's fallback trains small-LM cells only: `setup()`'s LMs are pretrained when first asked for, once
    each, so it no longer pretrains the large LM it never uses; an unknown size is refused by name."""
    from hf_ext.tinyalign import reproduce

    calls = []
    monkeypatch.setattr(reproduce, "pretrain_lm", lambda size, tok, caps: calls.append(size) or (f"{size}-state", {}))
    lms = reproduce.FrozenLMs(tokenizer=None, captions=["a caption"])
    assert calls == [] and dict(lms) == {}
    assert lms["small"] == ("small-state", {}) and lms["small"] == ("small-state", {})
    assert calls == ["small"]  # once, and the large LM untouched
    lms["large"]
    assert calls == ["small", "large"] and list(lms) == ["small", "large"]
    with pytest.raises(KeyError, match="no LM size 'huge'"):
        lms["huge"]
