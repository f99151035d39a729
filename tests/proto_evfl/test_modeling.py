"""The two Proto-EVFL artifacts: closed forms of the gate, projections, prototype logits and EMA, unseen-class
prototypes, input checks, and save/load of the party model (the top model's is in the shared contract)."""

import json

import pytest
import torch
import torch.nn.functional as F

import hf_ext  # noqa: F401  (registers the Auto classes)
from hf_ext.proto_evfl import ProtoEvflForClassification, ProtoEvflPartyConfig, ProtoEvflPartyModel
from hf_ext.proto_evfl.testing import tiny_batch, tiny_config, tiny_party_config


def test_party_model_embeddings_are_normalised_and_logits_are_scaled_cosines():
    model = ProtoEvflPartyModel(tiny_party_config()).eval()
    x = torch.randn(7, 5)
    out = model(features=x, labels=torch.tensor([0, 1, 2, 0, 1, 2, 0]))
    torch.testing.assert_close(out.embeddings.norm(dim=-1), torch.ones(7))
    expected = out.embeddings @ F.normalize(model.prototypes, dim=-1).T / model.config.temperature
    torch.testing.assert_close(out.prototype_logits, expected)
    torch.testing.assert_close(out.loss, F.cross_entropy(expected, torch.tensor([0, 1, 2, 0, 1, 2, 0])))


@pytest.mark.parametrize(
    "features, match",
    [
        (torch.randn(4, 4), r"party 1: feature block has 4 columns; the encoder expects \(batch, 5\)"),
        (torch.randn(4, 5, 1), r"party 1: feature block has shape \(4, 5, 1\)"),
        (torch.full((2, 5), float("nan")), "party 1: feature block contains NaN or inf"),
        (torch.ones(2, 5, dtype=torch.long), "party 1: feature block must be a floating-point tensor"),
    ],
    ids=["width", "rank", "nan", "dtype"],
)
def test_party_model_rejects_bad_feature_blocks(features, match):
    with pytest.raises(ValueError, match=match):
        ProtoEvflPartyModel(tiny_party_config())(features=features)


def test_configs_name_the_bad_field():
    with pytest.raises(ValueError, match="ProtoEvflPartyConfig.input_dim"):
        ProtoEvflPartyConfig(input_dim=0)
    with pytest.raises(ValueError, match="ProtoEvflConfig.aggregation"):
        tiny_config(aggregation="sum")
    with pytest.raises(ValueError, match="party_input_dims has 1 widths for 2 parties"):
        tiny_config(party_input_dims=[3])


def test_party_model_saves_and_loads_through_auto_model(tmp_path):
    from transformers import AutoModel

    model = ProtoEvflPartyModel(tiny_party_config()).eval()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"]["AutoModel"] == "modeling_proto_evfl.ProtoEvflPartyModel"
    assert {"modeling_proto_evfl.py", "configuration_proto_evfl.py"} <= {p.name for p in tmp_path.iterdir()}
    again = AutoModel.from_pretrained(tmp_path)
    assert type(again) is ProtoEvflPartyModel and again.config.party_index == 1
    x = torch.randn(3, 5)
    torch.testing.assert_close(again(features=x).prototype_logits, model(features=x).prototype_logits)


def test_gate_is_a_distribution_and_concat_is_the_linear_map_of_the_concatenation():
    batch = tiny_batch()
    gated = ProtoEvflForClassification(tiny_config()).eval()
    out = gated(party_embeddings=batch["party_embeddings"])
    torch.testing.assert_close(out.gate.sum(-1), torch.ones(len(out.gate)))
    w = gated.aggregation.projection
    expected = sum(out.gate[:, k, None] * batch["party_embeddings"][:, k] @ w[k] for k in range(2))
    torch.testing.assert_close(out.fused, expected)

    concat = ProtoEvflForClassification(tiny_config(aggregation="concat")).eval()
    out = concat(party_embeddings=batch["party_embeddings"])
    flat = batch["party_embeddings"].flatten(1)  # [z^1; z^2]
    torch.testing.assert_close(out.fused, flat @ concat.aggregation.projection.reshape(-1, 4))
    assert torch.equal(out.gate, torch.ones_like(out.gate))


def test_prototype_logits_loss_and_ema_closed_forms():
    model = ProtoEvflForClassification(tiny_config(prototype_momentum=0.5))
    batch = tiny_batch()
    before = model.head.prototypes.clone()
    out = model(**batch)  # training mode: the EMA runs after the logits
    expected = F.normalize(out.fused, dim=-1) @ F.normalize(before, dim=-1).T / 0.1
    torch.testing.assert_close(out.logits, expected)
    local = sum(F.cross_entropy(batch["party_logits"][:, k], batch["labels"]) for k in range(2))
    torch.testing.assert_close(out.loss, F.cross_entropy(expected, batch["labels"]) + local)
    # A class's first labelled batch sets its prototype to the normalised mean of h (the class mean).
    h = out.fused.detach()
    for c in range(3):
        torch.testing.assert_close(model.head.prototypes[c], F.normalize(h[batch["labels"] == c].mean(0), dim=-1))
    assert model.head.class_counts.tolist() == [4, 4, 4]
    # The next batch moves it by EMA with momentum 0.5.
    out2 = model(**tiny_batch(seed=1))
    h2, labels2 = out2.fused.detach(), tiny_batch(seed=1)["labels"]
    first = F.normalize(h[batch["labels"] == 0].mean(0), dim=-1)
    second = F.normalize(h2[labels2 == 0].mean(0), dim=-1)
    torch.testing.assert_close(model.head.prototypes[0], F.normalize(0.5 * first + 0.5 * second, dim=-1))


def test_unseen_prototypes_are_projected_from_the_parties_local_prototypes():
    model = ProtoEvflForClassification(tiny_config())
    batch = tiny_batch()
    keep = batch["labels"] != 2  # class 2 is never labelled
    model(**{k: v[keep] for k, v in batch.items()})
    assert model.unseen_classes.tolist() == [2]
    labelled_before = model.head.prototypes[:2].clone()
    local = F.normalize(torch.randn(2, 3, 4), dim=-1)
    assert model.set_unseen_prototypes(local).tolist() == [2]
    g, w = model.aggregation.gate_mean, model.aggregation.projection
    expected = F.normalize(g[0] * local[0, 2] @ w[0] + g[1] * local[1, 2] @ w[1], dim=-1)
    torch.testing.assert_close(model.head.prototypes[2], expected)
    assert torch.equal(model.head.prototypes[:2], labelled_before)  # labelled classes untouched
    with pytest.raises(ValueError, match=r"local_prototypes must have shape \(2, 3, 4\)"):
        model.set_unseen_prototypes(local[:, :2])


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda b: b.update(party_embeddings=b["party_embeddings"][:, :1]), r"shape \(batch, 2, 4\)"),
        (lambda b: b.update(labels=torch.full((12,), 3)), r"classes in \[0, 3\)"),
        (lambda b: b.update(party_logits=b["party_logits"][..., :2]), r"party_logits must have shape \(12, 2, 3\)"),
        (lambda b: b["party_embeddings"].__setitem__((0, 0, 0), float("inf")), "party_embeddings contains NaN"),
    ],
    ids=["parties", "labels", "party-logits", "inf"],
)
def test_top_model_rejects_bad_inputs(mutate, match):
    batch = tiny_batch()
    mutate(batch)
    with pytest.raises(ValueError, match=match):
        ProtoEvflForClassification(tiny_config())(**batch)


def test_linear_classifier_variant_has_a_softmax_head():
    model = ProtoEvflForClassification(tiny_config(classifier="linear", aggregation="concat")).eval()
    out = model(party_embeddings=tiny_batch()["party_embeddings"])
    torch.testing.assert_close(out.logits, model.classifier(out.fused))
