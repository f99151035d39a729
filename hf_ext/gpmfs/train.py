"""`hf-ext train gpmfs`: fit a GPMFS selector on your own feature and label matrices and save it as a Hub artifact,
with its `training_record.json` (the test-split ML-kNN metrics).

```
hf-ext train gpmfs --data data.csv --labels tag_a,tag_b --budget 20% --output_dir my_selector [--theta 0.5 | --tune]
hf-ext train gpmfs --data yeast.arff --labels 14 --output_dir yeast_selector      # MULAN ARFF, the last 14 labels
hf-ext train gpmfs --data matrices.npz --output_dir sel                          # arrays X and Y
```

`hf-ext gpmfs fit` is the same command under its old name, `--csv` the old name of `--data` and `--output` the old
name of `--output_dir`. Arguments are a dataclass ([`GPMFSTrainArguments`]) parsed by `transformers.HfArgumentParser`
([`build_parser`]).

The data ([`~hf_ext.gpmfs.data.SCHEMA`], read by [`~hf_ext.gpmfs.data.load_multilabel`]): a table (CSV, TSV,
JSON(L), Parquet, a train/test folder or a Hub id) of numeric feature columns and 0/1 label columns (named by
`--labels a,b`, counted from the end by `--labels N`, listed in a MULAN XML file, or the `label_*` columns, or the
trailing 0/1 columns), a NumPy `.npz` with `X` and `Y`, or a MULAN / MEKA `.arff` file. A seeded share
(`--test_fraction`, 0.2) is held out unless the data has a `test` split; the selector is fitted on the rest and
scored on the held-out rows with ML-kNN (k = 10, s = 1) on each label's own features, as the paper evaluates. The
output folder is a [`GPMFSSelector`] artifact (`config.json` + `model.safetensors`, written in one atomic swap),
`training_record.json` and `selection.json`: the global set and each label's set by column name, the label-specific
strength and, with `--tune`, the tuned weights and theta with their inner-validation average precision.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from transformers import HfArgumentParser


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


@dataclass
class GPMFSTrainArguments:
    """Arguments of `hf-ext train gpmfs` (alias `hf-ext gpmfs fit`); each flag also has its dashed spelling."""

    data: str = field(
        metadata={
            "help": "feature + label matrices: a CSV/TSV/JSON(L)/Parquet table, a train/test folder, a Hub id, an "
            ".npz with X and Y, or a MULAN .arff",
            "aliases": ["--csv"],
        }
    )
    output_dir: str = field(
        metadata={"help": "artifact folder to write (replaced atomically)", "aliases": ["--output"]}
    )
    labels: str | None = field(
        default=None,
        metadata={
            "help": "label columns: comma-separated names, a count N (the last N columns) or a MULAN XML label "
            "file (default: MEKA's -C N in an ARFF relation, the label_* columns, or the trailing 0/1 columns)",
            "aliases": ["--label_columns"],
        },
    )
    budget: str = field(
        default="20%",
        metadata={"help": "features per label: a count (15), a fraction (0.2) or a percentage (20%%); default 20%%"},
    )
    theta: float = field(
        default=0.5, metadata={"help": "personalisation threshold in [0, 1] (1 = global-only); ignored with --tune"}
    )
    tune: bool = field(
        default=False,
        metadata={
            "help": "tune theta and alpha/beta/gamma/lam on a 75/25 inner split by ML-kNN average precision "
            "(coordinate search over 1e-3..1e3)"
        },
    )
    seed: int = field(default=0, metadata={"help": "seed of the test split and the inner split (>= 0)"})
    test_fraction: float = field(
        default=0.2, metadata={"help": "share held out for the test metrics when the data has no test split"}
    )
    k: int = field(default=10, metadata={"help": "neighbours of the ML-kNN that scores the selection (>= 1)"})

    def __post_init__(self):
        # Every number by range, naming the flag (the budget's forms are checked by parse_budget).
        if isinstance(self.theta, bool) or not isinstance(self.theta, (int, float)) or not 0.0 <= self.theta <= 1.0:
            raise ValueError(f"--theta must be in [0, 1], got {self.theta}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise ValueError(f"--seed must be an integer in [0, 2**32), got {self.seed}")
        if isinstance(self.test_fraction, bool) or not 0.0 < float(self.test_fraction) <= 0.5:
            raise ValueError(f"--test_fraction must be in (0, 0.5], got {self.test_fraction}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"--k must be an integer >= 1, got {self.k}")
        self.budget_value = parse_budget(self.budget)


def build_parser() -> HfArgumentParser:
    """The `hf-ext train gpmfs` parser (`transformers.HfArgumentParser` over [`GPMFSTrainArguments`])."""
    return HfArgumentParser(GPMFSTrainArguments, prog="hf-ext train gpmfs", description=__doc__.split("\n\n")[0])


make_parser = build_parser  # the name before the layout change (issue 35)


def main(argv: list[str] | None = None) -> dict:
    """Runs the command; returns the `selection.json` content."""
    import shlex
    import sys

    from threadpoolctl import threadpool_limits

    from hf_ext.core.records import save_training_record

    from .artifact import save_pretrained
    from .data import load_multilabel
    from .evaluate import record_metrics, score_selection
    from .selector import GPMFSSelector, validate_targets
    from .tuning import HYPER, SPEC_GRID, tune

    (args,) = build_parser().parse_args_into_dataclasses(args=argv)
    command = "hf-ext train gpmfs " + shlex.join(sys.argv[1:] if argv is None else [str(a) for a in argv])
    budget = args.budget_value
    user = load_multilabel(args.data, args.labels, test=args.test_fraction, seed=args.seed)
    data = user.train
    Y = validate_targets(data.Y, data.X.shape[0])
    import pandas as pd

    X = pd.DataFrame(data.X, columns=data.feature_names)
    report: dict = {"data": str(args.data), "n_samples": int(X.shape[0]), "labels": data.label_names}
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
        scores = score_selection(selector, data, user.test, k=args.k)
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
    save_pretrained(selector, args.output_dir, extra_files={"selection.json": json.dumps(report, indent=2) + "\n"})
    config = {
        "budget": args.budget,
        "theta": float(selector.theta),
        "tune": args.tune,
        **{h: float(getattr(selector, h)) for h in HYPER},
        "k": args.k,
        "data_split": user.split,
        "n_train": int(X.shape[0]),
        "n_test": int(user.test.X.shape[0]),
    }
    save_training_record(
        args.output_dir,
        method="gpmfs",
        command=command,
        datasets=[user.entry],
        metrics=record_metrics(scores, user.entry["name"]),
        config=config,
        notes=f"ML-kNN (k = {args.k}, s = 1) on each label's selected features, {user.test.X.shape[0]} test rows",
    )
    print(
        f"GPMFS on {X.shape[0]} x {X.shape[1]} ({len(data.label_names)} labels): budget {selector.budget_}, theta "
        f"{selector.theta:g}, label-specific strength {selector.label_specific_strength_:.3f}; test average "
        f"precision {scores['average_precision']:.4f} on {user.test.X.shape[0]} rows; wrote {args.output_dir}"
    )
    return report


def cli(argv: list[str] | None = None) -> None:
    """The `hf-ext gpmfs fit` entry point (the old name of `hf-ext train gpmfs`): bad input prints one `error:`
    line and exits with status 2."""
    try:
        main(argv)
    except ValueError as err:
        build_parser().exit(2, f"hf-ext gpmfs fit: error: {err}\n")


if __name__ == "__main__":
    cli()
