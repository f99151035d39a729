"""Priors and prototypes: the mixed and global priors, prior validation, EM prior estimation, the EMA update
(prototypes equal class means), and unseen-class discovery."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hf_ext.proto_evfl.prototypes import (
    discover_unseen_prototypes,
    ema_update_prototypes,
    global_prior,
    mixed_prior,
    soft_label_mass,
    validate_prior,
)


def test_mixed_and_global_priors_closed_forms():
    np.testing.assert_allclose(mixed_prior([1, 0, 0], [0, 0.5, 0.5], 0.25), [0.25, 0.375, 0.375])
    np.testing.assert_allclose(mixed_prior([1, 0, 0], [0, 0.5, 0.5], 0.0), [0, 0.5, 0.5])  # unseen classes get mass
    np.testing.assert_allclose(global_prior([[1, 0], [0, 1]], [300, 100]), [0.75, 0.25])


@pytest.mark.parametrize(
    "prior, match",
    [([0.5, 0.4], "sums to 0.900000, not 1"), ([1.2, -0.2], "negative mass"), ([np.nan, 1], "NaN"),
     ([[0.5, 0.5]], "must be a vector")],
    ids=["sum", "negative", "nan", "matrix"],
)  # fmt: skip
def test_bad_priors_are_named(prior, match):
    with pytest.raises(ValueError, match=match):
        validate_prior(prior, what="class prior")
    with pytest.raises(ValueError, match="global prior"):
        mixed_prior([0.5, 0.5], prior if np.ndim(prior) == 1 else [0.1, 0.1], 0.5)


def test_prior_mix_and_counts_are_checked():
    with pytest.raises(ValueError, match=r"λ must be in \[0, 1\]"):
        mixed_prior([0.5, 0.5], [0.5, 0.5], 1.5)
    with pytest.raises(ValueError, match="local prior of party 1 sums to 0.500000"):
        global_prior([[0.5, 0.5], [0.25, 0.25]], [1, 1])
    with pytest.raises(ValueError, match="counts"):
        global_prior([[0.5, 0.5], [0.5, 0.5]], [0, 0])


def test_em_prior_recovers_a_long_tail_that_the_plain_mass_flattens():
    # Calibrated posteriors of a 3-class Gaussian model with a known, long-tailed prior.
    rng = np.random.default_rng(0)
    true = np.array([0.7, 0.2, 0.1])
    labels = rng.choice(3, size=4000, p=true)
    means = np.array([[0.0, 0.0], [1.5, 0.0], [0.0, 1.5]])
    x = means[labels] + rng.normal(size=(4000, 2))
    log_lik = -0.5 * ((x[:, None, :] - means[None]) ** 2).sum(-1)  # uniform-prior logits
    logits = torch.from_numpy(log_lik)
    plain = soft_label_mass(logits, iterations=0)
    em = soft_label_mass(logits, iterations=200)
    np.testing.assert_allclose(plain, torch.from_numpy(log_lik).softmax(-1).mean(0).numpy())
    assert np.abs(em - true).sum() < 0.05 < np.abs(plain - true).sum()


def test_prototypes_equal_class_means_without_momentum_and_move_by_ema_with_it():
    z = F.normalize(torch.randn(12, 4), dim=-1)
    assign = torch.arange(12) % 3
    protos = F.normalize(torch.randn(4, 4), dim=-1)
    untouched = protos[3].clone()
    moved = ema_update_prototypes(protos, z, assign, momentum=0.0)
    assert moved.tolist() == [0, 1, 2]
    for c in range(3):
        torch.testing.assert_close(protos[c], F.normalize(z[assign == c].mean(0), dim=-1))
    assert torch.equal(protos[3], untouched)  # no selected sample: no move
    old = protos[0].clone()
    ema_update_prototypes(protos, z[:1], torch.tensor([0]), momentum=0.9)
    torch.testing.assert_close(protos[0], F.normalize(0.9 * old + 0.1 * z[0], dim=-1))


def test_discovery_finds_the_cluster_no_labelled_prototype_explains():
    centres = F.normalize(torch.eye(3), dim=-1)
    g = torch.Generator().manual_seed(0)
    z = F.normalize(centres.repeat_interleave(30, 0) + 0.1 * torch.randn(90, 3, generator=g), dim=-1)
    protos = torch.stack([centres[0], centres[1], F.normalize(torch.ones(3), dim=-1)])  # class 2 unknown
    found = discover_unseen_prototypes(z, protos, [True, True, False], novel_fraction=1 / 3, generator=g)
    assert found.shape == (1, 3)
    assert F.cosine_similarity(found[0], centres[2], dim=0) > 0.99
    with pytest.raises(ValueError, match="no class has labels"):
        discover_unseen_prototypes(z, protos, [False, False, False], 0.5)
