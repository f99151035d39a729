"""`hf-ext evaluate orca`: a trained ORCA model's metrics on the test split of the user's click log, and with
`--baseline` the paired comparison with a plain multi-task model (`hf-ext train orca --use_orca false`) over the
same test impressions.

```
hf-ext evaluate orca --model out/artifact --data clicks.csv [--baseline base/artifact] [--output eval.json]
```

The test rows are the ones `hf-ext train orca` held out: the split (the data's own `test` file, else the seeded
split) is read from the artifact's `training_record.json`, and each model encodes the rows with its own field
vocabulary (`config.field_values`). Metrics ([`click_log_metrics`]): DT cross-entropy, DT macro-F1, moderate-bin
recall and DT MAE on clicked rows, CTR AUC on all rows. The paired comparison ([`paired_comparison`]) bootstraps
over test items the per-item DT cross-entropy (clicked rows), the moderate-bin hit (truly moderate rows) and the CTR
log-loss (all rows), with `hf_ext.core.reporting.paired_bootstrap`; macro-F1 and AUC are not means over items, so
their difference is reported as a point value.

Paper: [ORCA](https://arxiv.org/abs/2508.16573).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import HfArgumentParser

from hf_ext.core.records import Comparison, load_training_record, metric, report_evaluation
from hf_ext.core.reporting import paired_bootstrap

MODERATE_BINS = (2, 3, 4, 5)


@dataclass
class OrcaEvaluateArguments:
    """Arguments of `hf-ext evaluate orca` (each flag also has its dashed spelling)."""

    model: str = field(metadata={"help": "the trained artifact (or the train --output_dir holding artifact/)"})
    data: str = field(metadata={"help": "the click log the model was trained on (same forms as train --data)"})
    output: str | None = field(default=None, metadata={"help": "write the metrics (and comparison) as JSON here"})
    baseline: str | None = field(
        default=None,
        metadata={"help": "a plain multi-task model trained on the same data (hf-ext train orca --use_orca false)"},
    )
    split: str = field(default="test", metadata={"help": "the split to evaluate (test, validation or train)"})
    batch_size: int = field(default=2048, metadata={"help": "rows per forward pass"})
    n_resamples: int = field(default=2000, metadata={"help": "bootstrap resamples of the paired comparison"})
    bootstrap_seed: int = field(default=0, metadata={"help": "seed of the bootstrap"})

    def __post_init__(self):
        for name in ("batch_size", "n_resamples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{name} must be an integer >= 1, got {value!r}")
        if self.split not in ("train", "validation", "test"):
            raise ValueError(f"--split must be train, validation or test, got {self.split!r}")


def build_parser() -> HfArgumentParser:
    """The `hf-ext evaluate orca` parser (`HfArgumentParser` over [`OrcaEvaluateArguments`])."""
    return HfArgumentParser(OrcaEvaluateArguments, prog="hf-ext evaluate orca")


def resolve_artifact(path: str | Path, flag: str = "--model") -> Path:
    """The artifact folder: `path` itself, or `path/artifact` (what `hf-ext train orca --output_dir path` writes)."""
    path = Path(path)
    for candidate in (path, path / "artifact"):
        if (candidate / "config.json").is_file():
            return candidate
    raise ValueError(f"{flag} {path}: no saved ORCA model there (no config.json in it or in {path / 'artifact'})")


@torch.no_grad()
def predict(model, input_ids: np.ndarray, batch_size: int = 2048) -> dict[str, np.ndarray]:
    """`click_probs` `[N]` and the prediction head's `dt_probs` `[N, K]` (float64) of `model` on `input_ids`
    `[N, F]`."""
    model.eval()
    device = next(model.parameters()).device
    clicks, dts = [], []
    for start in range(0, len(input_ids), batch_size):
        ids = torch.as_tensor(input_ids[start : start + batch_size], dtype=torch.long, device=device)
        out = model(input_ids=ids)
        clicks.append(out.click_probs.double().cpu().numpy())
        dts.append(out.dt_logits.double().softmax(-1).cpu().numpy())
    return {"click_probs": np.concatenate(clicks), "dt_probs": np.concatenate(dts)}


def item_scores(features, pred: dict[str, np.ndarray], moderate_bins=MODERATE_BINS) -> dict[str, np.ndarray]:
    """Per-item values of the paired comparison: `dt_nll` (clicked rows), `moderate_hit` (clicked rows whose true
    bin is moderate: 1 if predicted moderate) and `ctr_logloss` (all rows), in row order."""
    click = np.asarray(features["click_labels"], dtype=np.float64)
    dwell = np.asarray(features["dwell_labels"], dtype=np.int64)
    clicked = click > 0.5
    p = np.clip(pred["click_probs"], 1e-7, 1 - 1e-7)
    y = dwell[clicked]
    probs = pred["dt_probs"][clicked]
    moderate = np.isin(y, moderate_bins)
    return {
        "dt_nll": -np.log(np.clip(probs[np.arange(y.size), y], 1e-12, None)),
        "moderate_hit": np.isin(probs.argmax(1), moderate_bins)[moderate].astype(np.float64),
        "ctr_logloss": -(click * np.log(p) + (1 - click) * np.log(1 - p)),
    }


def click_log_metrics(features, pred: dict[str, np.ndarray], bin_seconds, dataset: str | None, split: str = "test"):
    """The record's / evaluation's metric entries ([`~hf_ext.core.records.metric`]) on one split: DT cross-entropy,
    DT macro-F1, moderate-bin recall, DT MAE (s) on clicked rows, CTR AUC on all rows (NaN where undefined)."""
    from .metrics import ctr_metrics, dt_metrics

    click = np.asarray(features["click_labels"], dtype=np.float64)
    dwell = np.asarray(features["dwell_labels"], dtype=np.int64)
    clicked = click > 0.5
    seconds_of_bin = np.asarray(bin_seconds, dtype=np.float64)
    moderate = tuple(b for b in MODERATE_BINS if b < seconds_of_bin.size)
    nan = float("nan")
    ce = f1 = recall = mae = nan
    if clicked.any():
        y = dwell[clicked]
        probs = pred["dt_probs"][clicked]
        true_seconds = (
            np.asarray(features["dwell_seconds"], dtype=np.float64)[clicked]
            if "dwell_seconds" in features
            else seconds_of_bin[y]
        )
        dt = dt_metrics(y, probs, dwell_seconds_true=true_seconds, bin_seconds=seconds_of_bin, moderate_bins=moderate)
        ce = float(item_scores(features, pred, moderate)["dt_nll"].mean())
        f1, recall, mae = dt["dt_macro_f1"], dt["moderate_recall"], dt["dt_mae_s"]
    auc = ctr_metrics(click, pred["click_probs"])["ctr_auc"]
    return [
        metric("DT cross-entropy", "cross_entropy", ce, split=split, dataset=dataset, higher_is_better=False),
        metric("DT macro-F1", "f1", f1, split=split, dataset=dataset, higher_is_better=True),
        metric("moderate-bin recall", "recall", recall, split=split, dataset=dataset, higher_is_better=True),
        metric("DT MAE (s)", "mae", mae, split=split, dataset=dataset, higher_is_better=False),
        metric("CTR AUC", "roc_auc", auc, split=split, dataset=dataset, higher_is_better=True),
    ]


def _columns(features) -> dict[str, np.ndarray]:
    names = [c for c in ("input_ids", "click_labels", "dwell_labels", "dwell_seconds") if c in features.column_names]
    return {k: np.asarray(v) for k, v in features.with_format("numpy", columns=names)[:].items()}


def paired_comparison(features, pred, base_pred, metrics, base_metrics, *, n_resamples=2000, seed=0) -> dict:
    """`model − baseline` over the same items: a paired bootstrap of the per-item means, point differences of the
    metrics that are not means over items."""
    a, b = item_scores(features, pred), item_scores(features, base_pred)
    out: dict[str, Any] = {}
    for name, key in (
        ("DT cross-entropy", "dt_nll"),
        ("moderate-bin recall", "moderate_hit"),
        ("CTR log-loss", "ctr_logloss"),
    ):
        if a[key].size == 0:
            continue
        d = paired_bootstrap(a[key].tolist(), b[key].tolist(), n_resamples=n_resamples, seed=seed)
        summary = {k: v for k, v in d.to_dict().items() if k != "per_pair"}
        out[name] = Comparison(difference=d.cell(4), items=key, **summary)
    base = {m["name"]: m["value"] for m in base_metrics}
    for m in metrics:
        if m["name"] in ("DT macro-F1", "CTR AUC", "DT MAE (s)"):
            diff = m["value"] - base[m["name"]]
            out[m["name"]] = Comparison(
                difference=f"{diff:+.4f} (point difference; not a mean over items)",
                mean=None if math.isnan(diff) else diff,
                method="point",
            )
    return out


def load_split(model, record: dict | None, source: str, split: str, flag: str = "--model"):
    """The `split` rows of `source`, encoded with `model`'s field vocabulary, split as the training record says."""
    from .data import encode_click_log, load_click_log, to_model_features

    values = getattr(model.config, "field_values", None)
    if not values:
        raise ValueError(
            f"{flag}: this ORCA model was not trained on a click log (its config has no field_values; train it with "
            "`hf-ext train orca --data ...`)"
        )
    data_cfg = (record or {}).get("config", {}).get("data_split") or {}
    log = load_click_log(
        source,
        field_columns=list(model.config.field_names),
        validation=data_cfg.get("validation", 0.1),
        test=data_cfg.get("test", 0.1),
        seed=data_cfg.get("seed", 0),
    )
    if split not in log.splits:
        raise ValueError(f"--split: the data has no {split!r} split (it has {sorted(log.splits)})")
    names = list(model.config.field_names)
    return to_model_features(encode_click_log(log.splits[split], names, values), names)


def main(argv: list[str] | None = None) -> dict:
    """Evaluates the model (and the baseline) on the test split; returns `{"metrics": [...], "comparison": {...}}`."""
    from .modeling_orca import OrcaModel

    (args,) = build_parser().parse_args_into_dataclasses(args=argv)
    path = resolve_artifact(args.model)
    model = OrcaModel.from_pretrained(path)
    record = load_training_record(path)
    features = load_split(model, record, args.data, args.split)
    cols = _columns(features)
    name = Path(args.data).name if Path(args.data).exists() else args.data
    pred = predict(model, cols["input_ids"], args.batch_size)
    metrics = click_log_metrics(cols, pred, model.config.bin_seconds, name, args.split)
    comparison = None
    if args.baseline:
        base_path = resolve_artifact(args.baseline, "--baseline")
        base = OrcaModel.from_pretrained(base_path)
        base_record = load_training_record(base_path)
        mine = (record or {}).get("config", {}).get("data_split")
        theirs = (base_record or {}).get("config", {}).get("data_split")
        if mine != theirs:
            raise ValueError(
                f"--baseline {args.baseline}: trained on another split ({theirs}) than --model ({mine}); a paired "
                "comparison needs both trained with the same --split_seed and fractions on the same data"
            )
        base_cols = _columns(load_split(base, base_record, args.data, args.split, "--baseline"))
        base_pred = predict(base, base_cols["input_ids"], args.batch_size)
        base_metrics = click_log_metrics(base_cols, base_pred, base.config.bin_seconds, name, args.split)
        comparison = paired_comparison(
            cols, pred, base_pred, metrics, base_metrics, n_resamples=args.n_resamples, seed=args.bootstrap_seed
        )
    kind = "ORCA" if model.config.use_orca else "plain multi-task"
    header = f"{kind} model {path} on {args.split} split of {args.data} ({len(cols['click_labels'])} impressions)"
    return report_evaluation(metrics, output=args.output, comparison=comparison, header=header)


if __name__ == "__main__":
    main()
