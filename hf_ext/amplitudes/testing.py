"""The shared-contract fixture of `amplitudes` (kind `numerics`): a tiny table config, the table builder, and
outputs compared across a `save_pretrained` / `from_pretrained` round trip.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import numpy as np


def contract_fixture():
    """[`~hf_ext.core.testing.ContractFixture`] for the contract test: a 2-point-per-cell table of Tr(φ³), field
    theory, superstring and 3-gluon rows; outputs are the stored columns plus amplitudes recomputed from the
    stored kinematics (so a load that corrupted X or α′ would show)."""
    from hf_ext.core.testing import ContractFixture

    from .config import AmplitudeTableConfig
    from .stringy import stringy_amplitude
    from .tables import AmplitudeTable

    def make_config():
        return AmplitudeTableConfig(
            theories=("tr_phi3", "field_theory", "superstring", "gluon_super"),
            points=(4, 5),
            gluons=(3,),
            alphas=(0.5, 1.0),
            samples=2,
            seed=1,
        )

    def outputs(table: AmplitudeTable, inputs) -> dict:
        ds = table.dataset.with_format("numpy")
        rows = [r for r in table.dataset if r["theory"] == "tr_phi3" and r["n"] == inputs["n"]]
        X = np.array([r["x"] for r in rows])
        alpha = np.array([r["alpha_prime"] for r in rows])
        return {
            "amplitude": ds["amplitude"],
            "error": ds["error"],
            "alpha_prime": ds["alpha_prime"],
            "recomputed": stringy_amplitude(X, alpha, inputs["n"]).value,
        }

    return ContractFixture(
        make_config=make_config,
        make_artifact=AmplitudeTable.from_config,
        example_inputs=lambda: {"n": 5},
        outputs=outputs,
        save=lambda table, path: table.save_pretrained(path),
        load=AmplitudeTable.from_pretrained,
    )
