"""ORCA model: closed forms (FM term, instance weights, debiased logits, loss assembly), gradient isolation of the
NDE branch, the counterfactual mask, backbones, and bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hf_ext.orca import OrcaConfig, OrcaModel
from hf_ext.orca.testing import TINY_VOCAB, tiny_batch, tiny_config


def test_fm_and_linear_terms_match_brute_force():
    model = OrcaModel(tiny_config()).eval()
    ids = tiny_batch(8)["input_ids"]
    e, s = model.embeddings(ids)
    pairwise = torch.zeros(8)
    for i in range(e.shape[1]):
        for j in range(i + 1, e.shape[1]):
            pairwise += (e[:, i] * e[:, j]).sum(-1)
    torch.testing.assert_close(s[:, 1], pairwise, rtol=1e-5, atol=1e-6)
    idx = ids + model.embeddings.offsets
    torch.testing.assert_close(s[:, 0], model.embeddings.linear.weight[idx].sum((1, 2)) + model.embeddings.linear_bias)


def test_debiased_logits_are_raw_minus_nde_and_baseline_uses_raw():
    torch.manual_seed(0)
    model = OrcaModel(tiny_config()).eval()
    out = model(**tiny_batch())
    torch.testing.assert_close(out.dt_logits, out.dt_logits_raw - out.nde_logits)
    assert torch.equal(out.dt_bins, out.dt_logits.argmax(-1))
    torch.testing.assert_close(out.dt_seconds, torch.tensor(model.config.bin_seconds)[out.dt_bins])
    base = OrcaModel(tiny_config(use_orca=False)).eval()(**tiny_batch())
    assert base.nde_logits is None and base.nde_loss is None
    torch.testing.assert_close(base.dt_logits, base.dt_logits_raw)


def test_instance_weights_closed_form():
    model = OrcaModel(tiny_config())
    p = torch.tensor([0.9, 0.5, 0.1, 0.99])
    ce = torch.tensor([2.0, 0.5, 1.0, 0.01])
    w1 = (-torch.log(p)) ** -0.1
    w2 = ce**0.8
    omega = torch.relu(w1 * w2 - 0.2)
    expected = omega * 4 / omega.sum()
    torch.testing.assert_close(model._instance_weights(p, ce), expected)
    # all weights vanish -> uniform weights
    torch.testing.assert_close(model._instance_weights(torch.full((3,), 0.5), torch.full((3,), 1e-6)), torch.ones(3))


def test_loss_is_l1_plus_alpha_l2_plus_beta_l3_on_clicked_samples():
    torch.manual_seed(0)
    model = OrcaModel(tiny_config(alpha=0.7, beta=1.3, use_inst=False)).eval()
    batch = tiny_batch(32)
    out = model(**batch)
    clicked = batch["click_labels"] > 0
    y = batch["dwell_labels"][clicked]
    l1 = F.binary_cross_entropy(out.click_probs, batch["click_labels"])
    l2 = F.cross_entropy(out.dt_logits_raw[clicked], y)
    l3 = F.cross_entropy(out.dt_logits[clicked], y)  # the debiased logits, as the released code trains them
    torch.testing.assert_close(out.ctr_loss, l1, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.dt_loss, l2)
    torch.testing.assert_close(out.nde_loss, l3)
    torch.testing.assert_close(out.loss, l1 + 0.7 * l2 + 1.3 * l3, rtol=1e-5, atol=1e-6)


def _hand_weights(p: torch.Tensor, ce: torch.Tensor) -> torch.Tensor:
    # ω = ReLU((−log p)^−0.1 · CE_T^0.8 − 0.2), renormalised to sum to the number of clicked samples.
    bce = (-torch.log(p.clamp_min(1e-7))).clamp_min(1e-7)  # the model's guards against log 0 and 0 ** -0.1
    omega = torch.relu(bce**-0.1 * ce.clamp_min(1e-7) ** 0.8 - 0.2)
    return omega * omega.numel() / omega.sum()


@pytest.mark.parametrize("path", ["forward", "counterfactual"])
def test_nde_loss_carries_the_instance_inverse_weights(path):
    """Issue 39: L3 is the ω-weighted CE of the debiased logits, in the training loss and in the counterfactual
    step. Dropping the weights from either loss (or ignoring `use_inst`) makes this fail."""
    torch.manual_seed(0)
    model = OrcaModel(tiny_config(use_inst=True, beta=1.0)).eval()
    with torch.no_grad():  # away from the near-uniform initialisation, so that the weights differ across samples
        for param in model.parameters():
            param.add_(0.3 * torch.randn_like(param))
    batch = tiny_batch(64, seed=3)
    out = model(**batch)
    clicked = batch["click_labels"] > 0
    y = batch["dwell_labels"][clicked]
    ce_t = F.cross_entropy(out.dt_logits_raw[clicked], y, reduction="none")
    ce_debiased = F.cross_entropy(out.dt_logits[clicked], y, reduction="none")
    omega = _hand_weights(out.click_probs[clicked], ce_t)
    weighted, unweighted = (ce_debiased * omega).mean(), ce_debiased.mean()
    # The weights must matter on this batch, or the test could not tell them from uniform weights.
    assert omega.std() > 0.1 and abs(weighted - unweighted) > 1e-3
    loss = out.nde_loss if path == "forward" else model.counterfactual_nde_loss(**batch)
    torch.testing.assert_close(loss, weighted, rtol=1e-5, atol=1e-6)
    # use_inst=False is the unweighted mean (the "−instance weighting" ablation).
    model.config.use_inst = False
    plain = model(**batch).nde_loss if path == "forward" else model.counterfactual_nde_loss(**batch)
    torch.testing.assert_close(plain, unweighted, rtol=1e-5, atol=1e-6)


def test_no_clicked_sample_gives_ctr_loss_only_and_backprops():
    model = OrcaModel(tiny_config())
    batch = tiny_batch(8)
    batch["click_labels"] = torch.zeros(8)
    batch["dwell_labels"] = torch.full((8,), -100)
    out = model(**batch)
    torch.testing.assert_close(out.loss, out.ctr_loss)
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("detach", [True, False])
def test_nde_loss_reaches_only_the_nde_branch_when_detached(detach):
    torch.manual_seed(0)
    model = OrcaModel(tiny_config(detach_nde_input=detach))
    model(**tiny_batch(32)).nde_loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    nde = [n for n in grads if n.startswith(("nde_", "interaction."))]
    assert any(grads[n] is not None and grads[n].abs().sum() > 0 for n in nde)
    assert all(grads[n] is None for n in grads if n.startswith(("dt_", "ctr_")))
    for prefix in ("backbone.", "embeddings."):
        touched = any(grads[n] is not None and grads[n].abs().sum() > 0 for n in grads if n.startswith(prefix))
        assert touched is (not detach)  # released code: h_T is not detached, so L3 trains the experts too


def test_mask_post_click_blocks_only_post_click_fields():
    model = OrcaModel(tiny_config())
    ids = tiny_batch(6)["input_ids"]
    masked = model.mask_post_click(ids)
    assert torch.equal(masked[:, :2], ids[:, :2])
    assert torch.all(masked[:, 2] == TINY_VOCAB[2])  # "category" -> its blocked id
    model.eval()(input_ids=masked)  # the blocked id is a valid input


@pytest.mark.parametrize("backbone", ["mmoe", "ple"])
def test_backbones_give_two_task_features(backbone):
    config = tiny_config(backbone=backbone)
    model = OrcaModel(config).eval()
    e, _ = model.embeddings(tiny_batch(5)["input_ids"])
    feats = model.backbone(e.flatten(1))
    assert len(feats) == 2 and all(f.shape == (5, config.task_feature_dim) for f in feats)


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda b: b.update(input_ids=b["input_ids"].float()), "integer tensor"),
        (lambda b: b.update(input_ids=b["input_ids"][:, :2]), "shape"),
        (lambda b: b["input_ids"].__setitem__((0, 0), -1), "'user_id'"),
        (lambda b: b["dwell_labels"].__setitem__(0, 8), "dwell_labels"),
        (lambda b: b.update(click_labels=b["click_labels"][:3]), "click_labels"),
    ],
)
def test_bad_input_names_the_problem(change, message):
    batch = tiny_batch(8)
    change(batch)
    with pytest.raises(ValueError, match=message):
        OrcaModel(tiny_config())(**batch)


def test_unseen_ids_share_the_oov_bucket_with_zero_embedding():
    torch.manual_seed(0)
    model = OrcaModel(tiny_config()).eval()
    batch = tiny_batch(8)
    vocab = tiny_config().field_vocab_sizes[1]
    a, b = batch["input_ids"].clone(), batch["input_ids"].clone()
    a[0, 1], b[0, 1] = vocab + 1, 10_000  # the OOV id itself and any larger unseen id
    with torch.no_grad():
        out_a, out_b = model(input_ids=a), model(input_ids=b)
        e, _ = model.embeddings(b)
    torch.testing.assert_close(out_a.dt_logits, out_b.dt_logits)
    assert torch.all(e[0, 1] == 0)  # no information, not a random row
    blocked = batch["input_ids"].clone()
    blocked[0, 1] = vocab  # the blocked id keeps its own (trained) row
    with torch.no_grad():
        assert not torch.equal(model.embeddings(blocked)[0][0, 1], e[0, 1])


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(bin_edges=[0.1, 5.0, 3.0, 9.0]), "bin_edges"),
        (dict(field_vocab_sizes=[3]), "field_vocab_sizes"),
        (dict(post_click_fields=["dwell"]), "post_click_fields"),
        (dict(backbone="transformer"), "backbone"),
        (dict(bin_seconds=[1.0, 2.0]), "bin_seconds"),
        (dict(field_vocab_sizes=[3, 0, 2]), "field_vocab_sizes"),
        (dict(dropout=1.5), "dropout"),
    ],
)
def test_bad_config_names_the_field(kwargs, field):
    base = dict(field_names=["a", "b", "c"], field_vocab_sizes=[3, 4, 5])
    base.update(kwargs)
    with pytest.raises(ValueError, match=field):
        OrcaConfig(**base)


@pytest.mark.parametrize("use_inst", [True, False])
def test_counterfactual_nde_loss_has_the_full_loss_gradient_for_the_nde_branch(use_inst):
    torch.manual_seed(0)
    model = OrcaModel(tiny_config(beta=0.7, use_inst=use_inst)).eval()  # eval: no dropout, fixed BN statistics
    batch = tiny_batch(32)
    batch["input_ids"] = model.mask_post_click(batch["input_ids"])
    params = model.nde_parameters()
    full = torch.autograd.grad(model(**batch).loss, params)
    cheap = torch.autograd.grad(model.counterfactual_nde_loss(**batch), params)
    for a, b in zip(full, cheap):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
