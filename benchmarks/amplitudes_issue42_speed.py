"""Speed of the issue-42 evaluators against mpmath references, as ratios (no timed assertions anywhere):

- the n x n symmetric-determinant integrand (n = 4, 5; numpy, vectorised over worldsheet nodes) against the sum of
  the (2n-3)!! Pfaffian terms evaluated in mpmath at 20 digits (object arrays, one node at a time), and against the
  same float64 term sum;
- the continued 5-gluon residue (bosonic, α′ = 1.25, inside the convergent region) against a 2-dimensional mpmath
  tanh-sinh quadrature of the same integrand over the six sector squares (15 digits), and against the convergent
  Gauss-Jacobi residue.

Accuracy is the relative difference to the mpmath reference; speed is evaluations per second (best of `--repeats`,
single-threaded BLAS) and its ratio to the mpmath one.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
Usage: `python benchmarks/amplitudes_issue42_speed.py [--quick]`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits
from timing import best_of

from hf_ext.amplitudes.five_gluons_continued import SECTORS, continued_five_gluon
from hf_ext.amplitudes.gluons import GluonKinematics
from hf_ext.amplitudes.residues import FADDEEV_POPOV, _term_values, laurent_coefficient, residue_terms
from hf_ext.amplitudes.symmetric_determinant import symmetric_determinant_integrand


def determinant_rows(n: int, nodes: int, n_mp: int, repeats: int) -> list[dict]:
    import mpmath as mp

    rng = np.random.default_rng(n)
    kin = GluonKinematics.random(n, rng, -2.0, 2.0, min_channel=1.1)
    gaps = np.concatenate([np.ones((nodes, 1)), rng.uniform(0.2, 1.0, (nodes, n - 2))], axis=1)
    terms = residue_terms(n, "super")
    log, exp = np.frompyfunc(mp.log, 1, 1), np.frompyfunc(mp.exp, 1, 1)
    start = time.perf_counter()
    with mp.workdps(20):
        ref = np.array(
            [
                float(
                    mp.fsum(
                        _term_values(
                            kin, mp.mpf(0.9), terms, np.array([[mp.mpf(float(g)) for g in row]], dtype=object), log, exp
                        )[:, 0]
                    )
                )
                for row in gaps[:n_mp]
            ]
        )
    mp_rate = n_mp / (time.perf_counter() - start)
    rows = [{"what": f"n = {n}: mpmath term sum (20 digits)", "evals_per_s": mp_rate, "rel_err": 0.0, "base": mp_rate}]
    for name, fn in (
        ("symmetric determinant (numpy)", lambda: symmetric_determinant_integrand(kin, 0.9, gaps)),
        ("float64 term sum", lambda: _term_values(kin, 0.9, terms, gaps).sum(axis=0)),
    ):
        seconds = best_of(fn, repeats)
        err = float(np.max(np.abs(fn()[:n_mp] / ref - 1)))
        rows.append({"what": f"n = {n}: {name}", "evals_per_s": nodes / seconds, "rel_err": err, "base": mp_rate})
    return rows


def continued_rows(maxdegree: int, repeats: int) -> list[dict]:
    import mpmath as mp

    kin = GluonKinematics.random(5, np.random.default_rng(1), -2.0, 2.0, min_channel=1.1)
    terms = residue_terms(5, "bosonic")
    alpha = 1.25
    log, exp = np.frompyfunc(mp.log, 1, 1), np.frompyfunc(mp.exp, 1, 1)

    def integrand(sector, T, R):
        k, small, other = sector
        G = 2 / (1 + R + R * T)
        g = [None] * 3
        g[k], g[other], g[small] = G, G * R, G * R * T
        gaps = np.array([[mp.mpf(1), g[0], g[1], g[2]]], dtype=object)
        jac = 4 / (1 + R + R * T) ** 3 * R
        return FADDEEV_POPOV[5] * _term_values(kin, mp.mpf(alpha), terms, gaps, log, exp, "bosonic")[0, 0] * jac

    start = time.perf_counter()
    with mp.workdps(15):
        ref = float(
            mp.fsum(mp.quad(lambda T, R, s=s: integrand(s, T, R), [0, 1], [0, 1], maxdegree=maxdegree) for s in SECTORS)
        )
    mp_rate = 1 / (time.perf_counter() - start)
    rows = [
        {"what": "5 gluons: mpmath 2-d tanh-sinh (15 digits)", "evals_per_s": mp_rate, "rel_err": 0.0, "base": mp_rate}
    ]
    for name, fn in (
        ("continued residue (Laurent subtraction)", lambda: continued_five_gluon(kin, alpha, "bosonic").real),
        ("convergent Gauss-Jacobi residue", lambda: float(laurent_coefficient(kin, alpha, "bosonic").value)),
    ):
        seconds = best_of(fn, repeats)
        rows.append(
            {"what": f"5 gluons: {name}", "evals_per_s": 1 / seconds, "rel_err": abs(fn() / ref - 1), "base": mp_rate}
        )
    return rows


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer nodes, a coarser mpmath quadrature")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    nodes, n_mp, maxdegree = (200, 3, 4) if args.quick else (2000, 10, 6)
    rows = []
    with threadpool_limits(limits=1):
        for n in (4, 5):
            rows += determinant_rows(n, nodes, n_mp, args.repeats)
        rows += continued_rows(maxdegree, args.repeats)
    print(f"{'evaluator':<52} {'evals/s':>10}  {'rel err vs mpmath':>17}  {'speed-up vs mpmath':>18}")
    for r in rows:
        print(f"{r['what']:<52} {r['evals_per_s']:10.4g}  {r['rel_err']:17.2e}  {r['evals_per_s'] / r['base']:17.3g}x")
    return rows


if __name__ == "__main__":
    main()
