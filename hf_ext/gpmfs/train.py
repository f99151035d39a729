"""`hf-ext train gpmfs`: fit a GPMFS selector on your own CSV and save it as a Hub artifact.

```
hf-ext train gpmfs --csv data.csv --labels tag_a,tag_b --budget 20% --output_dir my_selector [--theta 0.5 | --tune]
```

`hf-ext gpmfs fit` is the same command under its old name, and `--output` the old name of `--output_dir`. Arguments
are a dataclass ([`GPMFSTrainArguments`]) parsed by `transformers.HfArgumentParser` ([`build_parser`]).

The CSV holds numeric feature columns and 0/1 label columns (named by `--labels`, or the trailing 0/1 columns). The
output folder is a [`GPMFSSelector`] artifact (`config.json` + `model.safetensors`, written in one atomic swap) plus
`selection.json`: the global set and each label's set by column name, the label-specific strength and, with
`--tune`, the tuned weights and theta with their inner-validation average precision.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from transformers import HfArgumentParser

from .data import read_table


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

    csv: str = field(metadata={"help": "table with numeric feature columns and 0/1 label columns"})
    output_dir: str = field(
        metadata={"help": "artifact folder to write (replaced atomically)", "aliases": ["--output"]}
    )
    labels: str | None = field(
        default=None,
        metadata={
            "help": "comma-separated label column names (default: the trailing columns whose values are all 0/1)"
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
    seed: int = field(default=0, metadata={"help": "seed of the inner split (>= 0)"})

    def __post_init__(self):
        # Every number by range, naming the flag (the budget's forms are checked by parse_budget).
        if isinstance(self.theta, bool) or not isinstance(self.theta, (int, float)) or not 0.0 <= self.theta <= 1.0:
            raise ValueError(f"--theta must be in [0, 1], got {self.theta}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise ValueError(f"--seed must be an integer in [0, 2**32), got {self.seed}")
        self.budget_value = parse_budget(self.budget)


def build_parser() -> HfArgumentParser:
    """The `hf-ext train gpmfs` parser (`transformers.HfArgumentParser` over [`GPMFSTrainArguments`])."""
    return HfArgumentParser(GPMFSTrainArguments, prog="hf-ext train gpmfs", description=__doc__.split("\n\n")[0])


make_parser = build_parser  # the name before the layout change (issue 35)


def main(argv: list[str] | None = None) -> dict:
    """Runs the command; returns the `selection.json` content."""
    from threadpoolctl import threadpool_limits

    from .artifact import save_pretrained
    from .selector import GPMFSSelector, validate_targets
    from .tuning import HYPER, SPEC_GRID, tune

    (args,) = build_parser().parse_args_into_dataclasses(args=argv)
    budget = args.budget_value
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
    save_pretrained(selector, args.output_dir, extra_files={"selection.json": json.dumps(report, indent=2) + "\n"})
    print(
        f"GPMFS on {X.shape[0]} x {X.shape[1]} ({len(data.label_names)} labels): budget {selector.budget_}, theta "
        f"{selector.theta:g}, label-specific strength {selector.label_specific_strength_:.3f}; wrote {args.output_dir}"
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
