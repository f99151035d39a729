"""The training record: what an artifact was trained on and what it measured, saved beside its weights.

`hf-ext push` renders the model card from this file (config, data, `model-index` results, `base_model`), so a card
can never claim results its artifact did not produce. An artifact without a record is published as untrained.

The file is `training_record.json` in the artifact folder:

```json
{"method": "orca", "trained": true, "command": "hf-ext reproduce orca", "base_model": null,
 "datasets": [{"name": "synthetic-causal-dwell", "hub_id": null}],
 "metrics": [{"name": "DT macro-F1", "type": "f1", "value": 0.41, "split": "test", "dataset": "synthetic-causal-dwell"}],
 "config": {...}, "hf_ext_version": "0.1.0"}
```
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

RECORD_FILE = "training_record.json"


class TrainingRecordError(ValueError):
    """A training record is malformed (unknown field, non-finite metric, missing name)."""


def save_training_record(
    artifact_dir: str | os.PathLike,
    *,
    method: str,
    trained: bool = True,
    command: str | None = None,
    base_model: str | Sequence[str] | None = None,
    datasets: Sequence[Mapping[str, Any] | str] = (),
    metrics: Sequence[Mapping[str, Any]] = (),
    config: Mapping[str, Any] | None = None,
    notes: str | None = None,
    skip_nonfinite: bool = False,
) -> Path:
    """Writes `training_record.json` into `artifact_dir` atomically (temp file + `os.replace`).

    Args:
        artifact_dir (`str` or `os.PathLike`): the saved artifact's folder.
        method (`str`): the registered method name.
        trained (`bool`): `False` for a random-init / untrained artifact.
        command (`str`, *optional*): the command that produced it (e.g. `"hf-ext reproduce orca --full"`).
        base_model (`str` or list, *optional*): Hub id(s) of the base model for adapters and split parts.
        datasets (sequence): `{"name": ..., "hub_id": <Hub dataset id or None>}` (a bare string is a name).
        metrics (sequence): `{"name", "type", "value", "split"?, "dataset"?}`; values must be finite numbers.
        config (mapping, *optional*): the run's config (JSON-serialisable).
        notes (`str`, *optional*): one line a card reader should see (e.g. "quick scale, 2 seeds").
        skip_nonfinite (`bool`, defaults to `False`): drop NaN/inf metrics (named in `notes`) instead of raising;
            for reproduce scripts, whose last step must not fail on one metric that was not computable.
    """
    folder = Path(artifact_dir)
    if not folder.is_dir():
        raise TrainingRecordError(f"artifact folder {folder} does not exist")
    ds = [{"name": d, "hub_id": None} if isinstance(d, str) else dict(d) for d in datasets]
    ms = []
    for m in metrics:
        m = dict(m)
        for key in ("name", "type", "value"):
            if key not in m:
                raise TrainingRecordError(f"metric {m} has no {key!r}")
        value = float(m["value"])
        if not math.isfinite(value) and skip_nonfinite:
            notes = f"{notes + '; ' if notes else ''}{m['name']} not computable ({value})"
            continue
        if not math.isfinite(value):
            raise TrainingRecordError(f"metric {m['name']!r} is not finite ({value})")
        m["value"] = value
        ms.append(m)
    from hf_ext._version import __version__

    record = {
        "method": method,
        "trained": bool(trained),
        "command": command,
        "base_model": base_model,
        "datasets": ds,
        "metrics": ms,
        "config": dict(config or {}),
        "notes": notes,
        "hf_ext_version": __version__,
    }
    text = json.dumps(record, indent=2, sort_keys=True, default=str)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{RECORD_FILE}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, folder / RECORD_FILE)
    return folder / RECORD_FILE


def metric(
    name: str,
    type: str,
    value: float,
    *,
    split: str | None = "test",
    dataset: str | None = None,
    higher_is_better: bool | None = None,
) -> dict[str, Any]:
    """One entry of a record's `metrics` (`type` is the Hub metric id, e.g. `"accuracy"`, `"bleu"`, `"mae"`)."""
    out = {"name": name, "type": type, "value": float(value), "split": split, "dataset": dataset}
    if higher_is_better is not None:
        out["higher_is_better"] = higher_is_better
    return out


def load_training_record(artifact_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The artifact's training record, or `None` when it has none (an untrained or hand-made artifact)."""
    path = Path(artifact_dir) / RECORD_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise TrainingRecordError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(record, dict) or "method" not in record:
        raise TrainingRecordError(f"{path} is not a training record (no 'method')")
    return record


def report_evaluation(
    metrics: Sequence[Mapping[str, Any]],
    *,
    output: str | os.PathLike | None = None,
    comparison: Mapping[str, Any] | None = None,
    header: str | None = None,
) -> dict[str, Any]:
    """What every `hf-ext evaluate <method>` ends with: the metrics as a table on stdout and, with `output`, the same
    as JSON (`{"metrics": [...], "comparison": {...}}`, written atomically).

    Args:
        metrics (sequence): [`metric`] entries measured on the user's test split.
        output (`str` or `os.PathLike`, *optional*): a JSON file to write.
        comparison (mapping, *optional*): the paired comparison with `--baseline` (metric name to a
            JSON-serialisable summary, e.g. `PairedDifference.to_dict()`).
        header (`str`, *optional*): one line printed above the table (what was evaluated on what).
    """
    if header:
        print(header)
    width = max([len(m["name"]) for m in metrics] + [6])
    for m in metrics:
        split = f"  ({m.get('split')})" if m.get("split") else ""
        print(f"  {m['name']:<{width}}  {float(m['value']):.6g}{split}")
    if comparison:
        print("paired with the baseline (method - baseline):")
        for name, summary in comparison.items():
            print(f"  {name:<{width}}  {summary if isinstance(summary, Comparison) else _difference_cell(summary)}")
    result = {"metrics": [dict(m) for m in metrics], "comparison": dict(comparison or {})}
    if output is not None:
        path = Path(output)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(result, f, indent=2, sort_keys=True, default=str)
        os.replace(tmp, path)
        print(f"wrote {path}")
    return result


class Comparison(dict):
    """One entry of an evaluation's `comparison` ([`report_evaluation`]): every number as JSON (it is a `dict`) and
    one line in the printed table — its `line`, else its `difference` or `cell` text, else `mean ± SD [interval]
    (n)` from a `PairedDifference.to_dict()`."""

    def __str__(self) -> str:
        for key in ("line", "difference", "cell"):
            if isinstance(self.get(key), str):
                return self[key]
        return _difference_cell(dict(self))

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    @classmethod
    def paired(cls, items: str, **numbers: Any) -> Comparison:
        """A paired-bootstrap entry whose line is its `cell`, the model's and the baseline's means (when given) and
        the number of paired items, counted under the key `items` (e.g. `"documents"`)."""
        versus = f", model {numbers['model']:.4f} vs baseline {numbers['baseline']:.4f}" if "model" in numbers else ""
        line = f"{numbers['cell']}{versus} (n = {numbers[items]} {items}, paired bootstrap)"
        return cls(line=line, **numbers)


def _difference_cell(summary: Any) -> str:
    """`+0.0123 ± 0.0040 [+0.0045, +0.0201] (n = 200)` for a `PairedDifference.to_dict()`; anything else as is."""
    if isinstance(summary, Mapping) and {"mean", "ci_low", "ci_high"} <= set(summary):
        sd = f" ± {summary['sd']:.4g}" if summary.get("sd") is not None else ""
        n = f" (n = {summary['n']})" if summary.get("n") is not None else ""
        return f"{summary['mean']:+.4g}{sd} [{summary['ci_low']:+.4g}, {summary['ci_high']:+.4g}]{n}"
    return str(summary)
