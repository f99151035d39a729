"""Amplitude tables of the user's kinematics: every row of [`~hf_ext.amplitudes.data.read_kinematics`] at every α′
and theory, in the Hub table format of `tables.py`, and the check of such a table against a second, independent
evaluator (what `hf-ext train amplitudes` records and `hf-ext evaluate amplitudes` re-measures).

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import numpy as np

from hf_ext.core.user_data import UserDataError

from .config import SCALAR_THEORIES
from .kinematics import x_labels

USER_THEORIES = SCALAR_THEORIES  # gluon rows need polarisations: not part of the user schema
# the second evaluator of a stringy row, tried in order; the first that differs from the table's and covers the
# point is used (`mpmath_closed_form`: mpmath's Beta, independent of scipy's log-gamma; `worldsheet`: the
# sector-decomposed 5-point worldsheet integral; `continued`: cone-by-cone Gauss-Jacobi; `curve`: the curve rule)
SECOND_EVALUATORS = {4: ("mpmath_closed_form", "curve"), 5: ("worldsheet", "continued", "mpmath_closed_form"),
                     6: ("continued", "curve")}  # fmt: skip


def planned_rows(kin, alphas, theories) -> list[tuple[int, float, str]]:
    """`(user row, α′, theory)` of every table row, in table order (row-major: user row, then α′, then theory);
    odd N is skipped for the scaffolded theories (`bosonic`, `superstring`: 2n scalars)."""
    out = []
    for r in range(len(kin)):
        for alpha in [float(kin.alpha[r])] if kin.alpha is not None else alphas:
            for theory in theories:
                if theory in ("bosonic", "superstring") and kin.n[r] % 2:
                    continue
                out.append((r, float(alpha), theory))
    return out


def _evaluate(theory: str, X: np.ndarray, alpha: float, N: int, method: str):
    from .field_theory import field_theory_amplitude
    from .stringy import Evaluation, stringy_amplitude
    from .superstring import scaffolded_bosonic_amplitude, superstring_amplitude

    if theory == "tr_phi3":
        return stringy_amplitude(X, alpha, N, method=method)
    if theory == "field_theory":
        value = field_theory_amplitude(X, N)
        return Evaluation(value, 4 * np.finfo(np.float64).eps * np.abs(value) * N**2, "triangulations")
    fn = scaffolded_bosonic_amplitude if theory == "bosonic" else superstring_amplitude
    ev = fn(X, alpha, N // 2, method=method)
    return Evaluation(ev.value, ev.error, f"{theory}:{ev.method}")


def compute_rows(kin, alphas, theories, method: str = "auto") -> list[dict]:
    """The table rows (the `tables.FEATURES` columns) of the user's kinematics, vectorised per (N, α′, theory).

    Raises:
        `UserDataError` naming the user rows of a block the evaluator refused (a pole, α′X <= -1, ...).
    """
    plan = planned_rows(kin, alphas, theories)
    groups: dict[tuple, list[int]] = {}
    for k, (r, alpha, theory) in enumerate(plan):
        groups.setdefault((int(kin.n[r]), alpha, theory), []).append(k)
    out: list[dict | None] = [None] * len(plan)
    for (N, alpha, theory), ks in groups.items():
        rows = [plan[k][0] for k in ks]
        X = np.stack([kin.X[r] for r in rows])
        try:
            ev = _evaluate(theory, X, alpha, N, method)
        except ValueError as err:
            raise UserDataError(f"{theory} at α′ = {alpha:g} for rows {rows[:8]} (n = {N}): {err}") from None
        for k, r, v, e in zip(ks, rows, np.atleast_1d(ev.value), np.atleast_1d(ev.error)):
            if not np.isfinite(v):
                raise UserDataError(f"{theory} at α′ = {alpha:g}, row {r} (n = {N}): the amplitude is not finite")
            out[k] = {"n": N, "polygon": N, "alpha_prime": alpha, "theory": theory, "x_labels": x_labels(N),
                      "x": kin.X[r].tolist(), "polarisation": [], "amplitude": float(v), "method": ev.method,
                      "error": float(e)}  # fmt: skip
    return out


def check_table(table, kin, alphas, theories) -> dict:
    """Checks a table against the user's kinematics and a second evaluator.

    Args:
        table (`datasets.Dataset`): the table (`tables.FEATURES`).
        kin ([`~hf_ext.amplitudes.data.UserKinematics`]): the kinematics it should tabulate.
        alphas, theories: as given to [`compute_rows`].

    Returns:
        `dict`: `max_relative_residual` (stringy rows against the second evaluator), `max_relative_error` (the
        table's own error estimates), `checked` / `unchecked` row counts (`unchecked`: field-theory rows, a finite
        sum of rational terms with no second evaluator, and stringy rows no second evaluator covers).

    Raises:
        `UserDataError`: the table does not hold exactly these kinematics (it was computed from other data).
    """
    plan = planned_rows(kin, alphas, theories)
    if len(table) != len(plan):
        raise UserDataError(f"the table has {len(table)} rows; the data and its record give {len(plan)}")
    residual, stated, checked, unchecked = 0.0, 0.0, 0, 0
    blocks: dict[tuple, list[int]] = {}
    for k, (r, alpha, theory) in enumerate(plan):
        row = table[k]
        x = np.asarray(row["x"])
        if (
            (row["n"], row["theory"]) != (int(kin.n[r]), theory)
            or row["alpha_prime"] != alpha
            or not np.allclose(x, kin.X[r], rtol=1e-12, atol=0)
        ):
            raise UserDataError(f"table row {k} is not ({theory}, α′ = {alpha:g}, data row {r}): the table was "
                                "computed from other kinematics")  # fmt: skip
        stated = max(stated, abs(row["error"]) / max(abs(row["amplitude"]), 1e-300))
        blocks.setdefault((row["n"], alpha, theory, row["method"]), []).append(k)
    for (N, alpha, theory, method), ks in blocks.items():
        if theory == "field_theory":
            unchecked += len(ks)
            continue
        X = np.stack([np.asarray(table[k]["x"]) for k in ks])
        value = np.array([table[k]["amplitude"] for k in ks])
        for second in SECOND_EVALUATORS[N]:
            if second in method:
                continue
            try:
                other = np.atleast_1d(_evaluate(theory, X, alpha, N, second).value)
            except ValueError:  # outside that evaluator's region: try the next
                continue
            residual = max(residual, float(np.max(np.abs(value - other) / np.maximum(np.abs(other), 1e-300))))
            checked += len(ks)
            break
        else:
            unchecked += len(ks)
    return {"max_relative_residual": residual, "max_relative_error": stated, "checked": checked,
            "unchecked": unchecked}  # fmt: skip


def check_metrics(checks: dict, dataset: str) -> list[dict]:
    """The record's (and `hf-ext evaluate amplitudes`'s) metrics of [`check_table`]'s result."""
    from hf_ext.core.records import metric

    return [
        metric("max relative residual vs a second evaluator", "max_relative_residual",
               checks["max_relative_residual"], split=None, dataset=dataset, higher_is_better=False),
        metric("max stated relative error", "max_relative_error", checks["max_relative_error"], split=None,
               dataset=dataset, higher_is_better=False),
    ]  # fmt: skip


__all__ = ["SECOND_EVALUATORS", "USER_THEORIES", "check_metrics", "check_table", "compute_rows", "planned_rows"]
