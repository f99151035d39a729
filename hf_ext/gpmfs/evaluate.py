"""`hf-ext evaluate gpmfs`: how good a saved GPMFS selection is on the test split of the user's data, measured as the
paper measures it: ML-kNN (k = 10, s = 1) trained on the training rows, each label searching its neighbours in its own
selected features (global + personal), scored on the test rows.

```
hf-ext evaluate gpmfs --model my_selector --data data.csv [--baseline other_selector | --baseline all] [--output e.json]
```

The split and the label columns are read from the artifact's `training_record.json`, so the test rows are the ones
`hf-ext train gpmfs` held out. Metrics (Zhang & Zhou 2014, see [`~hf_ext.gpmfs.metrics`]): Hamming loss, ranking
loss, one-error, coverage, average precision, macro-F1, micro-F1.

`--baseline` compares with another selection over the same test samples: another GPMFS artifact trained on the same
data (e.g. `hf-ext train gpmfs --theta 1`, the global foundation alone, or another budget), or `all`, ML-kNN on every
feature (no selection). The per-sample metrics (Hamming loss, ranking loss, one-error, coverage, average precision)
are compared with a paired bootstrap over test samples (`hf_ext.core.reporting.paired_bootstrap`); macro- and
micro-F1 are not means over samples, so their difference is a point value.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from transformers import HfArgumentParser

from hf_ext.core.records import Comparison

from .metrics import evaluate_all

METRIC_NAMES = {
    "hamming_loss": ("Hamming loss", "hamming_loss", False),
    "ranking_loss": ("ranking loss", "ranking_loss", False),
    "one_error": ("one-error", "one_error", False),
    "coverage": ("coverage", "coverage", False),
    "average_precision": ("average precision", "average_precision", True),
    "macro_f1": ("macro-F1", "f1", True),
    "micro_f1": ("micro-F1", "f1", True),
}


@dataclass
class GPMFSEvaluateArguments:
    """Arguments of `hf-ext evaluate gpmfs` (each flag also has its dashed spelling)."""

    model: str = field(metadata={"help": "the saved selector (the --output_dir of hf-ext train gpmfs)"})
    data: str = field(metadata={"help": "the data it was trained on (same forms as train --data)"})
    output: str | None = field(default=None, metadata={"help": "write the metrics (and comparison) as JSON here"})
    baseline: str | None = field(
        default=None,
        metadata={"help": "another GPMFS selector trained on the same data, or 'all' (ML-kNN on every feature)"},
    )
    k: int | None = field(default=None, metadata={"help": "ML-kNN neighbours (default: the training record's, 10)"})
    n_resamples: int = field(default=2000, metadata={"help": "bootstrap resamples of the paired comparison"})
    bootstrap_seed: int = field(default=0, metadata={"help": "seed of the bootstrap"})

    def __post_init__(self):
        for name in ("k", "n_resamples"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"--{name} must be an integer >= 1, got {value!r}")


def build_parser() -> HfArgumentParser:
    """The `hf-ext evaluate gpmfs` parser (`HfArgumentParser` over [`GPMFSEvaluateArguments`])."""
    return HfArgumentParser(GPMFSEvaluateArguments, prog="hf-ext evaluate gpmfs")


def _aligned(selector, data, flag: str) -> np.ndarray:
    """`data.X` with its columns in the order the selector was fitted on."""
    names = getattr(selector, "feature_names_in_", None)
    if names is None:
        if data.X.shape[1] != selector.n_features_in_:
            raise ValueError(f"{flag}: fitted on {selector.n_features_in_} features, the data has {data.X.shape[1]}")
        return data.X
    index = {n: i for i, n in enumerate(data.feature_names)}
    missing = [str(n) for n in names if str(n) not in index]
    if missing:
        raise ValueError(f"{flag}: the data has no feature column {missing[:5]} the selector was fitted on")
    return data.X[:, [index[str(n)] for n in names]]


def label_scores(selector, train, test, k: int = 10, flag: str = "--model") -> np.ndarray:
    """ML-kNN posteriors `(m, q)` of the test rows, label j searching its neighbours among the training rows in its
    own selected features (`selector=None`: every feature)."""
    from .mlknn import SplitScorer

    if selector is None:
        return SplitScorer(train.X, train.Y, test.X, k=k).predict_proba(None)
    if selector.n_labels_ != train.Y.shape[1]:
        raise ValueError(f"{flag}: fitted on {selector.n_labels_} labels, the data has {train.Y.shape[1]}")
    Xtr, Xte = _aligned(selector, train, flag), _aligned(selector, test, flag)
    return SplitScorer(Xtr, train.Y, Xte, k=k).predict_proba(selector.label_feature_sets())


def score_selection(selector, train, test, k: int = 10) -> dict[str, float]:
    """The seven metrics of `selector`'s selection on `test` (ML-kNN trained on `train`)."""
    S = label_scores(selector, train, test, k)
    return evaluate_all(test.Y, (S > 0.5).astype(np.int64), S)


def per_sample(Y, S) -> dict[str, np.ndarray]:
    """Per-sample Hamming loss, ranking loss, one-error, coverage and average precision (NaN where a sample's value
    is undefined: ranking loss without both relevant and irrelevant labels, average precision without relevant
    ones); their means over the defined samples are [`~hf_ext.gpmfs.metrics.evaluate_all`]'s values."""
    Y = np.asarray(Y) > 0
    S = np.asarray(S, dtype=np.float64)
    P = S > 0.5
    R = (S[:, None, :] >= S[:, :, None]).sum(axis=2)
    n = Y.shape[0]
    rl, ap, cov = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)
    for i in range(n):
        rel, irr = S[i][Y[i]], S[i][~Y[i]]
        if rel.size and irr.size:
            rl[i] = np.mean(rel[:, None] <= irr[None, :])
        if Y[i].any():
            r = R[i][Y[i]]
            ap[i] = np.mean([(r <= x).sum() / x for x in r])
            cov[i] = r.max() - 1
    return {
        "hamming_loss": np.mean(Y != P, axis=1),
        "ranking_loss": rl,
        "one_error": (~Y[np.arange(n), np.argmax(S, axis=1)]).astype(np.float64),
        "coverage": cov,
        "average_precision": ap,
    }


def record_metrics(scores: dict[str, float], dataset: str | None, split: str = "test") -> list[dict]:
    """The seven metrics as training-record / evaluation entries."""
    from hf_ext.core.records import metric

    return [
        metric(name, kind, scores[key], split=split, dataset=dataset, higher_is_better=higher)
        for key, (name, kind, higher) in METRIC_NAMES.items()
    ]


def paired_comparison(Y, S, S_base, n_resamples: int = 2000, seed: int = 0) -> dict:
    """`selection − baseline` over the same test samples (bootstrap of the per-sample metrics; point differences of
    macro- and micro-F1)."""
    from hf_ext.core.reporting import paired_bootstrap

    a, b = per_sample(Y, S), per_sample(Y, S_base)
    out: dict = {}
    for key, values in a.items():
        keep = ~np.isnan(values)
        if keep.sum() == 0:
            continue
        d = paired_bootstrap(values[keep].tolist(), b[key][keep].tolist(), n_resamples=n_resamples, seed=seed)
        out[METRIC_NAMES[key][0]] = Comparison(
            difference=d.cell(4), **{k: v for k, v in d.to_dict().items() if k != "per_pair"}
        )
    mine = evaluate_all(Y, (S > 0.5).astype(np.int64), S)
    theirs = evaluate_all(Y, (S_base > 0.5).astype(np.int64), S_base)
    for key in ("macro_f1", "micro_f1"):
        diff = mine[key] - theirs[key]
        out[METRIC_NAMES[key][0]] = Comparison(
            difference=f"{diff:+.4f} (point difference; not a mean over samples)", mean=diff, method="point"
        )
    return out


def main(argv: list[str] | None = None) -> dict:
    """Scores the saved selection (and the baseline) on the test split; returns `{"metrics", "comparison"}`."""
    from threadpoolctl import threadpool_limits

    from hf_ext.core.records import load_training_record, report_evaluation

    from .data import load_multilabel
    from .selector import GPMFSSelector

    (args,) = build_parser().parse_args_into_dataclasses(args=argv)
    if not (Path(args.model) / "config.json").is_file():
        raise ValueError(f"--model {args.model}: no saved GPMFS selector there (no config.json)")
    selector = GPMFSSelector.from_pretrained(args.model)
    record = load_training_record(args.model) or {}
    config = record.get("config", {})
    split = config.get("data_split") or {}
    k = args.k or int(config.get("k", 10))
    labels = ",".join(split["labels"]) if split.get("labels") else None
    user = load_multilabel(args.data, labels, test=split.get("test", 0.2), seed=split.get("seed", 0))
    with threadpool_limits(limits=1):
        S = label_scores(selector, user.train, user.test, k)
        scores = evaluate_all(user.test.Y, (S > 0.5).astype(np.int64), S)
        comparison = None
        if args.baseline:
            base = None
            if args.baseline != "all":
                base = GPMFSSelector.from_pretrained(args.baseline)
                theirs = (load_training_record(args.baseline) or {}).get("config", {}).get("data_split")
                if theirs != split:
                    raise ValueError(
                        f"--baseline {args.baseline}: trained on another split or labels ({theirs}) than --model "
                        f"({split}); a paired comparison needs both trained with the same --seed, --test_fraction "
                        "and labels on the same data"
                    )
            S_base = label_scores(base, user.train, user.test, k, flag="--baseline")
            comparison = paired_comparison(
                user.test.Y, S, S_base, n_resamples=args.n_resamples, seed=args.bootstrap_seed
            )
    header = (
        f"GPMFS selection {args.model} (budget {selector.budget_}, theta {selector.theta:g}) on the test split of "
        f"{args.data} ({user.test.X.shape[0]} samples, {user.test.Y.shape[1]} labels; ML-kNN k = {k})"
    )
    metrics = record_metrics(scores, user.entry["name"])
    return report_evaluation(metrics, output=args.output, comparison=comparison, header=header)


if __name__ == "__main__":
    main()
