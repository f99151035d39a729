"""The GPMFS contract fixture for the shared contract test (tiny config, small planted data; no downloads).

Production code never imports this module.
"""

from __future__ import annotations

from .artifact import _pad
from .config import GPMFSConfig


def contract_fixture():
    """The [`~hf_ext.core.testing.ContractFixture`] for the shared contract test (kind `estimator`): a tiny config,
    an unfitted selector, `fit` on small planted data, and outputs compared across a save/load round trip."""
    from hf_ext.core.testing import ContractFixture

    from .planted import make_planted
    from .selector import GPMFSSelector

    data = make_planted(n_samples=80, n_features=30, n_shared=3, n_labels=3, n_private=2, seed=0)

    def fit(sel):
        return sel.fit(data.X, data.Y)

    def outputs(sel, X):
        return {
            "global": sel.transform(X),
            "label0": sel.transform(X, label=0),
            "W": sel.W_,
            "label_sets": _pad(sel.label_indices_),
        }

    return ContractFixture(
        make_config=lambda: GPMFSConfig(budget=6, theta=0.5, max_iter=10),
        make_artifact=GPMFSSelector.from_config,
        example_inputs=lambda: data.X[:10],
        outputs=outputs,
        save=lambda sel, path: sel.save_pretrained(path),
        load=GPMFSSelector.from_pretrained,
        fit=fit,
        fitted_state=lambda sel: {"W_": sel.W_},
    )
