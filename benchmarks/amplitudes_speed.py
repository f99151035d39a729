"""Evaluations per second of the stringy Tr(φ³) amplitude at N = 4 and 5: the vectorised paths (closed form, fan
curve quadrature, worldsheet Gauss-Jacobi) against mpmath quadrature, with the accuracy of each.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).

Kinematics: α′X uniform in [0.3, 3] (the Euclidean region). Reference values: mpmath closed forms at 30 digits
(Beta; B B 3F2 at unit argument), on the first `--ref` points. Accuracy is the maximum relative error against them.
Speed is points per second for one batch call (vectorised) or one call per point (mpmath), best of `--repeats`,
single-threaded BLAS; the curve rule's one-off table of log u on its nodes is built before timing (it is cached).

Then (unless `--skip-issue42`) the issue-42 evaluators against their mpmath references, as ratios: the n x n
symmetric-determinant integrand and the continued 5-gluon residue (`amplitudes_issue42_speed.py`).

Usage: `python benchmarks/amplitudes_speed.py [--quick] [--skip-issue42]`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits
from timing import best_of

from hf_ext.amplitudes import closed_forms as C
from hf_ext.amplitudes.kinematics import random_planar_kinematics
from hf_ext.amplitudes.stringy import stringy_amplitude


def _reference(aX: np.ndarray) -> np.ndarray:
    import mpmath as mp

    if aX.shape[-1] == 2:
        with mp.workdps(30):
            return np.array([float(mp.beta(mp.mpf(float(a)), mp.mpf(float(b)))) for a, b in aX])
    return np.array([float(C.five_point_closed_form_mp(r, dps=30)) for r in aX])


def measure(N: int, batch: int, n_ref: int, n_mp: int, repeats: int, seed: int = 0) -> list[dict]:
    aX = random_planar_kinematics(N, batch, rng=np.random.default_rng(seed), low=0.3, high=3.0)
    ref = _reference(aX[:n_ref])
    rows = []
    methods = ["closed_form", "curve"] + (["worldsheet"] if N == 5 else [])
    for method in methods:
        stringy_amplitude(aX[:2], 1.0, N, method=method)  # warm the caches (rule tables)
        seconds = best_of(lambda m=method: stringy_amplitude(aX, 1.0, N, method=m), repeats)
        value = stringy_amplitude(aX[:n_ref], 1.0, N, method=method).value
        rows.append(
            {
                "N": N,
                "method": method,
                "points": batch,
                "evals_per_s": batch / seconds,
                "max_rel_error": float(np.max(np.abs(value / ref - 1))),
            }
        )
    for method in ("mpmath_closed_form", "mpmath_curve"):
        m = n_mp if method == "mpmath_curve" else n_ref
        start = time.perf_counter()
        value = stringy_amplitude(aX[:m], 1.0, N, method=method).value
        seconds = time.perf_counter() - start
        rows.append(
            {
                "N": N,
                "method": method,
                "points": m,
                "evals_per_s": m / seconds,
                "max_rel_error": float(np.max(np.abs(value / ref[:m] - 1))),
            }
        )
    return rows


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer points (~1 minute)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-issue42", action="store_true", help="skip the determinant / continued-residue timings")
    args = parser.parse_args(argv)
    batch, n_ref, n_mp = (500, 10, 2) if args.quick else (5000, 30, 4)
    rows = []
    with threadpool_limits(limits=1):
        for N in (4, 5):
            rows += measure(N, batch, n_ref, n_mp if N == 5 else n_ref, args.repeats)
    print(
        f"{'N':>2}  {'method':<20} {'points':>6}  {'evals/s':>10}  {'max rel err':>11}  {'speed-up vs mpmath quad':>23}"
    )
    for r in rows:
        base = next(x for x in rows if x["N"] == r["N"] and x["method"] == "mpmath_curve")["evals_per_s"]
        print(
            f"{r['N']:>2}  {r['method']:<20} {r['points']:>6}  {r['evals_per_s']:10.4g}  {r['max_rel_error']:11.2e}  "
            f"{r['evals_per_s'] / base:22.3g}x"
        )
    if not args.skip_issue42:
        import amplitudes_issue42_speed

        print()
        rows += amplitudes_issue42_speed.main((["--quick"] if args.quick else []) + ["--repeats", str(args.repeats)])
    return rows


if __name__ == "__main__":
    main()
