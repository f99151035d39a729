"""Fit time of GPMFS against n and d, and against a plain l2,1-regression (RFS-like) baseline timed in the same run.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740). Both solvers run a fixed number of iterations (`tol` tiny) on the
same Gaussian data with 8 labels, single-threaded BLAS, best of `--repeats` runs.

Complexity of one GPMFS fit (T iterations, q labels, k graph neighbours):
- set-up: kNN graph O(n^2 d) (brute-force search), `X^T X` and the redundancy matrix A O(n d^2), smallest
  eigenvalue of `X^T X + gamma A` O(d^3);
- per iteration: W-step Cholesky O(d^3 + d^2 q), products `X W`, `X^T V` O(n d q), V-step conjugate gradients
  O(t_cg n k q) with t_cg ~ 10-30 sweeps (the system is well conditioned);
so O(n^2 d + n d^2 + T (d^3 + t_cg n k q)). The l2,1 baseline costs O(n d^2 + T (d^3 + n d q)). The linear solves
dominate: for n >> d GPMFS's extra cost is the n x n V-system (CG, linear in n) plus the graph (quadratic in n, about
40 % of the fit at n = 8000), so the ratio to the baseline grows with n (measured: ~10x at n = 500, ~50x at n = 8000,
d = 128); as d approaches n both fits are dominated by the d x d W-solves and the ratio falls towards 1 (1.5x at
d = 1024, n = 1000).

Usage: `python benchmarks/gpmfs_scaling.py [--quick]`.
"""

from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits
from timing import best_of

from hf_ext.gpmfs.baselines import l21_regression
from hf_ext.gpmfs.planted import make_planted
from hf_ext.gpmfs.selector import GPMFSSelector, knn_laplacian, minmax_scale

ITERS = 20


def measure(n: int, d: int, repeats: int) -> dict:
    data = make_planted(
        n_samples=n, n_features=d, n_shared=min(10, d // 4), n_labels=8, n_private=max(1, min(5, d // 32)), seed=0
    )
    X, Y = data.X, data.Y
    gp = best_of(lambda: GPMFSSelector(max_iter=ITERS, tol=1e-300).fit(X, Y), repeats)
    rfs = best_of(lambda: l21_regression(X, Y, lam=1.0, max_iter=ITERS, tol=1e-300), repeats)
    graph = best_of(lambda: knn_laplacian(minmax_scale(X)[0], 5), repeats)
    return {"n": n, "d": d, "gpmfs_s": gp, "rfs_s": rfs, "graph_s": graph, "ratio": gp / rfs}


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller grid (~10 s)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    ns = (250, 500, 1000, 2000) if args.quick else (500, 1000, 2000, 4000, 8000)
    ds = (64, 128, 256) if args.quick else (64, 128, 256, 512, 1024)
    rows = []
    with threadpool_limits(limits=1):
        print(f"GPMFS vs l2,1-regression, {ITERS} iterations each, q=8, best of {args.repeats} (1 BLAS thread)")
        print(f"{'n':>6} {'d':>6} {'gpmfs s':>9} {'l21 s':>9} {'ratio':>7} {'graph s':>9}")
        for n, d in [(n, 128) for n in ns] + [(1000, d) for d in ds if d != 128]:
            r = measure(n, d, args.repeats)
            rows.append(r)
            print(
                f"{r['n']:>6} {r['d']:>6} {r['gpmfs_s']:>9.3f} {r['rfs_s']:>9.3f} {r['ratio']:>7.2f} "
                f"{r['graph_s']:>9.3f}"
            )
    by_n = [r for r in rows if r["d"] == 128]
    if len(by_n) >= 2:
        slope = np.polyfit(np.log([r["n"] for r in by_n]), np.log([r["gpmfs_s"] for r in by_n]), 1)[0]
        print(f"empirical exponent of GPMFS fit time in n (d=128): {slope:.2f}")
    by_d = sorted([r for r in rows if r["n"] == 1000], key=lambda r: r["d"])
    if len(by_d) >= 2:
        slope = np.polyfit(np.log([r["d"] for r in by_d]), np.log([r["gpmfs_s"] for r in by_d]), 1)[0]
        print(f"empirical exponent of GPMFS fit time in d (n=1000): {slope:.2f}")
    return rows


if __name__ == "__main__":
    main()
