"""Configuration of GPMFS (Global foundation and Personalized optimization for Multi-label Feature Selection).

Paper: [GPMFS](https://arxiv.org/abs/2504.12740). The objective and the selection rule are assembled from a
third-party summary; every choice the paper does not fix is marked [INF] (see `/work/shared/specs/gpmfs.md`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields
from typing import Any

MODEL_TYPE = "hf_ext_gpmfs"


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass
class GPMFSConfig:
    """Hyper-parameters of the GPMFS objective, its solver and its selection rule.

    The objective ([INF] assembly of the components the summary names) is

        min_{W, V, U >= 0}  ||X W + 1 b^T - V||^2 + alpha ||V - (Y + B * U)||^2 + beta Tr(V^T L V)
                            + gamma Tr(W^T A W) + lam ||W||_{2,1} + rho Tr(W L_C W^T)

    with `L` the Laplacian of a heat-kernel kNN graph over samples, `A` the absolute cosine similarity between
    features (zero diagonal) and `L_C` the normalised Laplacian of the label co-occurrence graph (the paper's
    "exploiting label correlations", explicit; `rho = 0`, the default, leaves it out).

    Args:
        alpha (`float`, defaults to 1.0): weight of the label-relaxation term tying the pseudo-labels `V` to
            `Y + B * U`.
        beta (`float`, defaults to 1.0): weight of the manifold term `Tr(V^T L V)`.
        gamma (`float`, defaults to 0.1): weight of the feature-redundancy term `Tr(W^T A W)`.
        lam (`float`, defaults to 1.0): weight of the row-sparsity penalty `||W||_{2,1}`.
        rho (`float`, defaults to 0.0): weight of the explicit label-correlation term `Tr(W L_C W^T)` =
            `1/2 sum_jk C_jk ||w_j / sqrt(c_j) - w_k / sqrt(c_k)||^2`, with `C_jk` the cosine similarity of label
            columns j and k of `Y` (zero diagonal) and `c_j = sum_k C_jk`: labels that co-occur are pulled to similar
            weight columns, i.e. to shared (global) features [INF: the abstract says GPMFS "identifies global features
            by exploiting label correlations"; the summary names no term]. `0` (default) is the objective without it.
        k_neighbors (`int`, defaults to 5): neighbours per sample in the kNN graph (the spec's k = 5).
        sigma (`float`, *optional*): heat-kernel width; `None` uses the root mean squared kNN distance [INF].
        fit_intercept (`bool`, defaults to `True`): fit an unpenalised bias `b` [INF: min-max scaled inputs have no
            zero mean, and without a bias the l2,1 penalty would favour features that act as an intercept].
        max_iter (`int`, defaults to 50): maximum alternating iterations (the spec says 30-50).
        tol (`float`, defaults to 1e-4): stop when the relative change of the objective is below `tol`.
        eps (`float`, defaults to 1e-8): smoothing of the l2,1 re-weighting and ridge of the linear systems.
        budget (`int` or `float`, defaults to 0.2): features each label may use. An `int` is a count; a `float` in
            (0, 1] is a fraction of the number of features `d` (rounded, at least 1).
        theta (`float`, defaults to 0.5): personalisation threshold in [0, 1] on the normalised label-specific
            importance `|W_ij| / max_i |W_ij|`. `theta = 1` is global-only.
        k_personal (`int` or `float`, defaults to 0.25): cap on personal features per label. An `int` is a count; a
            `float` in [0, 1] is a fraction of the budget. The global core is `budget - k_personal` features [INF:
            keeps every label at exactly `budget` features, so personalisation is compared at equal budget].
        equal_budget (`bool`, defaults to `True`): personal features displace the global features label `j`
            values least, so every label uses exactly `budget` features [INF: the fair comparison with global-only].
            `False` is the spec's literal `G ∪ P_j` (up to `budget + k_personal` features per label).
        seed (`int`, defaults to 0): the solver is deterministic; the seed is carried for the experiments (splits,
            random-subset baseline) that read it from the config.
    """

    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 0.1
    lam: float = 1.0
    rho: float = 0.0
    k_neighbors: int = 5
    sigma: float | None = None
    fit_intercept: bool = True
    max_iter: int = 50
    tol: float = 1e-4
    eps: float = 1e-8
    budget: int | float = 0.2
    theta: float = 0.5
    k_personal: int | float = 0.25
    equal_budget: bool = True
    seed: int = 0

    model_type = MODEL_TYPE  # class attribute, not a field: identifies the artifact in config.json

    def __post_init__(self):
        for name in ("alpha", "beta", "gamma", "lam", "rho"):
            value = getattr(self, name)
            if not _is_real(value) or not math.isfinite(value) or value < 0:
                raise ValueError(f"GPMFSConfig.{name} must be a finite number >= 0, got {value!r}")
        if not _is_int(self.k_neighbors) or self.k_neighbors < 1:
            raise ValueError(f"GPMFSConfig.k_neighbors must be an integer >= 1, got {self.k_neighbors!r}")
        if self.sigma is not None and (not _is_real(self.sigma) or not math.isfinite(self.sigma) or self.sigma <= 0):
            raise ValueError(f"GPMFSConfig.sigma must be None or a finite number > 0, got {self.sigma!r}")
        if not isinstance(self.fit_intercept, bool):
            raise ValueError(f"GPMFSConfig.fit_intercept must be a bool, got {self.fit_intercept!r}")
        if not _is_int(self.max_iter) or self.max_iter < 1:
            raise ValueError(f"GPMFSConfig.max_iter must be an integer >= 1, got {self.max_iter!r}")
        for name in ("tol", "eps"):
            value = getattr(self, name)
            if not _is_real(value) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"GPMFSConfig.{name} must be a finite number > 0, got {value!r}")
        if _is_int(self.budget):
            if self.budget < 1:
                raise ValueError(f"GPMFSConfig.budget must be an int >= 1 or a float in (0, 1], got {self.budget!r}")
        elif not _is_real(self.budget) or not (0.0 < self.budget <= 1.0):
            raise ValueError(f"GPMFSConfig.budget must be an int >= 1 or a float in (0, 1], got {self.budget!r}")
        if not _is_real(self.theta) or not (0.0 <= self.theta <= 1.0):
            raise ValueError(f"GPMFSConfig.theta must be a number in [0, 1], got {self.theta!r}")
        if _is_int(self.k_personal):
            if self.k_personal < 0:
                raise ValueError(
                    f"GPMFSConfig.k_personal must be an int >= 0 or a float in [0, 1], got {self.k_personal!r}"
                )
        elif not _is_real(self.k_personal) or not (0.0 <= self.k_personal <= 1.0):
            raise ValueError(
                f"GPMFSConfig.k_personal must be an int >= 0 or a float in [0, 1], got {self.k_personal!r}"
            )
        if not isinstance(self.equal_budget, bool):
            raise ValueError(f"GPMFSConfig.equal_budget must be a bool, got {self.equal_budget!r}")
        if not _is_int(self.seed) or not 0 <= self.seed < 2**32:  # NumPy's seed range
            raise ValueError(f"GPMFSConfig.seed must be an integer in [0, 2**32), got {self.seed!r}")

    def budget_for(self, n_features: int) -> int:
        """Number of features per label for data with `n_features` columns.

        Raises:
            ValueError: naming `budget` when an integer budget exceeds `n_features`.
        """
        if _is_int(self.budget):
            if self.budget > n_features:
                raise ValueError(
                    f"GPMFSConfig.budget={self.budget} is larger than the number of features d={n_features}"
                )
            return int(self.budget)
        return max(1, min(n_features, int(round(self.budget * n_features))))

    def personal_cap_for(self, budget: int) -> int:
        """Cap on personal features per label at a budget of `budget` features (always < budget: the global core
        keeps at least one feature)."""
        cap = int(self.k_personal) if _is_int(self.k_personal) else int(round(self.k_personal * budget))
        return max(0, min(cap, budget - 1))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict of the fields (plus `model_type`)."""
        d = asdict(self)
        d["model_type"] = self.model_type
        return d

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any]) -> GPMFSConfig:
        """Inverse of [`to_dict`]; unknown keys raise so a typo in a saved config is not silently dropped."""
        d = dict(config_dict)
        model_type = d.pop("model_type", MODEL_TYPE)
        if model_type != MODEL_TYPE:
            raise ValueError(f"GPMFSConfig.model_type must be {MODEL_TYPE!r}, got {model_type!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"GPMFSConfig got unknown fields {unknown}")
        return cls(**d)
