"""Cost of GPMFS's inner-split tuning: the cached `SplitScorer` against re-fitting `MLkNN` for every selection.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740). Tuning theta (and the weights) scores many per-label subsets on the
same split; most repeat (the global set at theta = 1, a label's top features at nearby thetas), and the neighbour
search is what costs. Scores one fitted selector on one Yeast inner split at every (budget, theta) of the quick and
the full grids, both ways, single-threaded BLAS, best of `--repeats`; prints the seconds and the ratio, and checks
that both give the same average precision.

Usage: `python benchmarks/gpmfs_tuning.py [--repeats 3]`.
"""

from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits
from timing import best_of

from hf_ext.gpmfs.data import load_yeast
from hf_ext.gpmfs.metrics import average_precision
from hf_ext.gpmfs.mlknn import MLkNN, SplitScorer
from hf_ext.gpmfs.selector import GPMFSSelector
from hf_ext.gpmfs.tuning import inner_split


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    data = load_yeast()
    with threadpool_limits(limits=1):
        Xa, Xv, Ya, Yv = inner_split(data.X, data.Y, seed=0)
        sel = GPMFSSelector(budget=1, theta=1.0).fit(Xa, Ya)
        lo, span = Xa.min(axis=0), np.ptp(Xa, axis=0)
        span = np.where(span > 0, span, 1.0)
        for name, budgets, thetas in (
            ("quick", (10, 31, 52), (0.2, 0.4, 0.6, 0.8, 1.0)),
            ("full", (10, 21, 31, 41, 52), tuple(np.round(np.arange(1, 11) / 10, 1))),
        ):
            subsets = [sel.with_selection(budget=k, theta=t).label_feature_sets() for k in budgets for t in thetas]

            def cached():
                scorer = SplitScorer(Xa, Ya, Xv)
                return [average_precision(Yv, scorer.predict_proba(s)) for s in subsets]

            def plain():
                return [
                    average_precision(
                        Yv, MLkNN(10, algorithm="brute").fit((Xa - lo) / span, Ya, s).predict_proba((Xv - lo) / span)
                    )
                    for s in subsets
                ]

            assert np.allclose(cached(), plain())
            t_cached, t_plain = best_of(cached, args.repeats), best_of(plain, args.repeats)
            print(
                f"{name}: {len(subsets)} selections; cached {t_cached:.2f} s, MLkNN refit {t_plain:.2f} s, "
                f"ratio {t_plain / t_cached:.1f}x"
            )


if __name__ == "__main__":
    main()
