"""The planted synthetic multi-label generator of GPMFS ([GPMFS](https://arxiv.org/abs/2504.12740)): shared and
per-label (private) informative features with known indices, labels from logistic models in correlated blocks.

**Which experiment it serves:** the `planted` data set of `hf-ext reproduce gpmfs` (the recall of each label's
planted private features, the paper's "personalised" claim measured against a known truth), the contract fixture
and the solver / selector tests. It is the test bed for the personalised selection (theta); the real-data null
results come from the loaders in `data.py`. Everything it returns is simulated.
"""

from __future__ import annotations

import numpy as np

from .data import MultiLabelData


def make_planted(
    n_samples: int = 600,
    n_features: int = 200,
    n_shared: int = 10,
    n_labels: int = 8,
    n_private: int = 5,
    n_blocks: int = 4,
    shared_strength: float = 1.5,
    private_strength: float = 1.5,
    block_noise: float = 0.5,
    prevalence: float = 0.35,
    seed: int = 0,
) -> MultiLabelData:
    """Synthetic multi-label data with planted shared and per-label (private) informative features.

    Labels come from logistic models. Labels in the same block share one direction over the shared features and a
    latent block factor (correlated label blocks); each label also depends on its own `n_private` features.
    Everything else is Gaussian noise. Defaults follow the spec: d = 200, 10 shared, q = 8 labels, 5 private each.

    Args:
        n_samples (`int`), n_features (`int`), n_shared (`int`), n_labels (`int`), n_private (`int`): sizes.
        n_blocks (`int`): number of correlated label blocks.
        shared_strength (`float`), private_strength (`float`): standard deviation of each part of the logit.
        block_noise (`float`): standard deviation of the latent block factor (shared by a block's labels).
        prevalence (`float`): target fraction of positives per label (sets each intercept).
        seed (`int`): random seed.

    Returns:
        [`MultiLabelData`] with `shared_features` and `private_features` set.
    """
    n_inf = n_shared + n_labels * n_private
    if n_inf > n_features:
        raise ValueError(f"n_features={n_features} is smaller than the {n_inf} planted informative features")
    if not 0 < prevalence < 1:
        raise ValueError(f"prevalence must be in (0, 1), got {prevalence}")
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, n_features))
    perm = rng.permutation(n_features)
    shared = np.sort(perm[:n_shared])
    private = [np.sort(perm[n_shared + j * n_private : n_shared + (j + 1) * n_private]) for j in range(n_labels)]
    block_of = np.arange(n_labels) % n_blocks
    directions = rng.standard_normal((n_blocks, n_shared))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    latent = rng.standard_normal((n_samples, n_blocks)) * block_noise
    Y = np.zeros((n_samples, n_labels), dtype=np.int64)
    for j in range(n_labels):
        signs = rng.choice([-1.0, 1.0], size=n_private)
        logit = (
            shared_strength * X[:, shared] @ directions[block_of[j]]
            + private_strength * X[:, private[j]] @ signs / np.sqrt(n_private)
            + latent[:, block_of[j]]
        )
        logit = 2.0 * (logit - np.quantile(logit, 1 - prevalence))  # sharpened so the planted signal is learnable
        Y[:, j] = rng.random(n_samples) < 1.0 / (1.0 + np.exp(-logit))
    return MultiLabelData(
        X=X,
        Y=Y,
        feature_names=[f"f{i}" for i in range(n_features)],
        label_names=[f"label{j}" for j in range(n_labels)],
        name="planted",
        shared_features=shared,
        private_features=private,
    )
