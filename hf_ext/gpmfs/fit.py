"""`hf-ext gpmfs fit`: fit a GPMFS selector on your own CSV and save it as a Hub artifact.

```
hf-ext gpmfs fit --csv data.csv --labels tag_a,tag_b,tag_c --budget 20% --output my_selector [--theta 0.5 | --tune]
```

The CSV holds numeric feature columns and 0/1 label columns (named by `--labels`, or the trailing 0/1 columns). The
output folder is a [`GPMFSSelector`] artifact (`config.json` + `model.safetensors`, written in one atomic swap) plus
`selection.json`: the global set and each label's set by column name, the label-specific strength and, with
`--tune`, the tuned weights and theta with their inner-validation average precision.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

# Size caps, checked before the data is parsed: GPMFS builds d x d matrices (redundancy, normal equations) and an
# n x n sparse graph, so a 10^6-column table would exhaust memory long before it finished.
MAX_CSV_BYTES = 2 * 2**30
MAX_COLUMNS = 5_000
MAX_ROWS = 200_000


def parse_budget(text: str) -> int | float:
    """`"20%"` -> 0.2, `"0.2"` -> 0.2 (a fraction of the features), `"15"` -> 15 (a count).

    Raises:
        ValueError: naming `--budget` and the allowed forms.
    """
    t = str(text).strip()
    try:
        if t.endswith("%"):
            value = float(t[:-1]) / 100
            if not 0 < value <= 1:
                raise ValueError
            return value
        if t.isdigit():
            if int(t) < 1:
                raise ValueError
            return int(t)
        value = float(t)
        if not 0 < value <= 1:
            raise ValueError
        return value
    except ValueError:
        raise ValueError(
            f"--budget must be a count >= 1 (e.g. 15), a fraction in (0, 1] (e.g. 0.2) or a percentage "
            f"in (0, 100]% (e.g. 20%), got {text!r}"
        ) from None


def read_table(path: str | os.PathLike, labels: str | None):
    """Reads the CSV with the size caps checked first; returns a [`MultiLabelData`]."""
    import pandas as pd

    from .data import split_frame

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--csv: {path} is not a file")
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"--csv: {path} is empty")
    if size > MAX_CSV_BYTES:
        raise ValueError(f"--csv: {path} is {size / 2**30:.1f} GiB; at most {MAX_CSV_BYTES // 2**30} GiB is read")
    with open(path, encoding="utf-8", errors="replace") as f:
        header = f.readline()
    n_cols = header.count(",") + 1
    if n_cols > MAX_COLUMNS:
        raise ValueError(
            f"--csv: {n_cols} columns; GPMFS supports at most {MAX_COLUMNS} (it builds d x d "
            "matrices): pre-select columns first"
        )
    try:
        df = pd.read_csv(path, nrows=MAX_ROWS + 1)
    except Exception as err:  # noqa: BLE001 - every parse failure becomes one readable error
        raise ValueError(f"--csv: could not parse {path}: {err}") from err
    if len(df) > MAX_ROWS:
        raise ValueError(f"--csv: more than {MAX_ROWS} rows; subsample the table first")
    if len(df) < 2:
        raise ValueError(f"--csv: {path} has {len(df)} data rows; at least 2 are needed")
    names = [c.strip() for c in labels.split(",") if c.strip()] if labels else None
    data = split_frame(df, names, name=path.stem)
    if np.isnan(data.X).any():
        bad = [data.feature_names[i] for i in np.flatnonzero(np.isnan(data.X).any(axis=0))[:5]]
        raise ValueError(f"--csv: feature columns {bad} have missing values (NaN); impute or drop them first")
    return data


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-ext gpmfs fit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", required=True, help="table with numeric feature columns and 0/1 label columns")
    parser.add_argument(
        "--labels",
        default=None,
        help="comma-separated label column names (default: the trailing columns whose values are all 0/1)",
    )
    parser.add_argument(
        "--budget",
        default="20%",
        help="features per label: a count (15), a fraction (0.2) or a percentage (20%%); default 20%%",
    )
    parser.add_argument(
        "--theta",
        type=float,
        default=0.5,
        help="personalisation threshold in [0, 1] (1 = global-only); ignored with --tune",
    )
    parser.add_argument(
        "--tune",
        action="store_true",
        help="tune theta and alpha/beta/gamma/lam on a 75/25 inner "
        "split by ML-kNN average precision (coordinate search over 1e-3..1e3)",
    )
    parser.add_argument("--output", required=True, help="artifact folder to write (replaced atomically)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inner split")
    return parser


def main(argv: list[str] | None = None) -> dict:
    """Runs the command; returns the `selection.json` content."""
    from threadpoolctl import threadpool_limits

    from .artifact import save_pretrained
    from .selector import GPMFSSelector, validate_targets
    from .tuning import HYPER, SPEC_GRID, tune

    args = make_parser().parse_args(argv)
    budget = parse_budget(args.budget)
    if not 0.0 <= args.theta <= 1.0:
        raise ValueError(f"--theta must be in [0, 1], got {args.theta}")
    data = read_table(args.csv, args.labels)
    Y = validate_targets(data.Y, data.X.shape[0])
    import pandas as pd

    X = pd.DataFrame(data.X, columns=data.feature_names)
    report: dict = {"csv": str(args.csv), "n_samples": int(X.shape[0]), "labels": data.label_names}
    with threadpool_limits(limits=1):
        params, theta = {}, args.theta
        if args.tune:
            k = GPMFSSelector(budget=budget).config.budget_for(X.shape[1])
            result = tune(data.X, Y, [k], (0.2, 0.4, 0.6, 0.8, 1.0), {h: SPEC_GRID for h in HYPER}, 1, args.seed)
            params, theta = result.params, result.theta[k]
            report["tuned"] = {
                "params": params,
                "theta": theta,
                "inner_average_precision": result.inner_ap[k],
                "trials": len(result.trials),
            }
        selector = GPMFSSelector(**params, budget=budget, theta=theta, seed=args.seed).fit(X, Y)
    names = data.feature_names
    report.update(
        {
            "budget": int(selector.budget_),
            "theta": float(selector.theta),
            "label_specific_strength": float(selector.label_specific_strength_),
            "global_features": [names[i] for i in selector.global_indices_],
            "label_features": {
                lab: [names[i] for i in idx] for lab, idx in zip(data.label_names, selector.label_indices_)
            },
            "personal_features": {
                lab: [names[i] for i in idx] for lab, idx in zip(data.label_names, selector.personal_indices_)
            },
        }
    )
    save_pretrained(selector, args.output, extra_files={"selection.json": json.dumps(report, indent=2) + "\n"})
    print(
        f"GPMFS on {X.shape[0]} x {X.shape[1]} ({len(data.label_names)} labels): budget {selector.budget_}, theta "
        f"{selector.theta:g}, label-specific strength {selector.label_specific_strength_:.3f}; wrote {args.output}"
    )
    return report


def cli(argv: list[str] | None = None) -> None:
    """The `hf-ext gpmfs fit` entry point: bad input prints one `error:` line and exits with status 2."""
    try:
        main(argv)
    except ValueError as err:
        make_parser().exit(2, f"hf-ext gpmfs fit: error: {err}\n")


if __name__ == "__main__":
    cli()
