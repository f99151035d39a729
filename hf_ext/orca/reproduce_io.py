"""What `hf-ext reproduce orca` reads and writes besides its tables: the rows of earlier runs (`--join`: rows trained
with the same settings are read back and paired by seed with this run's, since the same seed means the same data, so
that an arm added later or a sweep split over processes by strength ends in one table and one verdict), the heatmaps
those runs drew, and the training record of the ORCA artifact."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hf_ext.core.reporting import nan_for_none

from .families import get_family

# Settings that must agree for rows of two runs to be paired (same data, same budget, same tuning grid).
JOIN_KEYS = (
    "family",
    "num_impressions",
    "num_users",
    "num_items",
    "test_impressions",
    "test_strength",
    "epochs",
    "batch_size",
    "grid_lr",
    "ctr_own_stopping",
)


def full_subset(run) -> dict:
    """With `--full`: every data or sweep setting run away from the full scale, `{key: {"full": v, "run": v}}` (what
    the docs heading labels as a subset of the full scale)."""
    from .reproduce import OrcaReproduceArguments

    full = OrcaReproduceArguments(full=True)
    keys = ("strengths", "seeds", "num_impressions", "num_users", "num_items", "test_impressions", "epochs")
    return {k: {"full": getattr(full, k), "run": getattr(run, k)} for k in keys if getattr(run, k) != getattr(full, k)}


def load_joined(paths: list[str], run) -> dict:
    """The cells of earlier runs (`results.json` files of `hf-ext reproduce orca`), keyed like
    [`run_synthetic`]'s: `{backbone: {(s, seed, row): {"iid": metrics, "shifted": metrics}}}`. Every run must have
    the settings [`JOIN_KEYS`] of `run` (a `ValueError` names the first that differs): the same seed then means the
    same data, so their rows pair with this run's. Missing values (written as null) come back as NaN."""
    cells: dict = {}
    for path in paths:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
        settings = record.get("settings", {})
        for key in JOIN_KEYS:
            if settings.get(key) != getattr(run, key):
                raise ValueError(f"--join {path}: {key} is {settings.get(key)!r}, this run has {getattr(run, key)!r}")
        for b, block in record.get("backbones", {}).items():
            for c in block["cells"]:
                row = {t: nan_for_none(c[t]) for t in ("iid", "shifted") if t in c}
                cells.setdefault(b, {}).setdefault((float(c["strength"]), int(c["seed"]), c["row"]), {}).update(row)
    return cells


def copy_joined_heatmaps(paths: list[str], out: Path, top: float) -> bool:
    """Copies the CTR × DT heatmaps drawn by the last joined run that trained at the top strength `top` into
    `out` (the trained panels come from the run that trained them); returns whether one was copied."""
    for path in reversed([Path(p) for p in paths]):
        png = path.parent / "heatmaps.png"
        if not png.exists() or png.parent.resolve() == Path(out).resolve():
            continue
        if top in json.loads(path.read_text(encoding="utf-8"))["settings"]["strengths"]:
            shutil.copy2(png, Path(out) / "heatmaps.png")
            return True
    return False


def save_record(run, strength: float, seed: int, backbone: str, scores: dict) -> None:
    """The artifact's training record (what `hf-ext push orca` renders the card from): this model's own test
    numbers on both test sets of its cell."""
    from hf_ext.core.records import metric, save_training_record

    data = f"synthetic-{run.family}-dwell (s = {strength:g})"
    metrics = []
    for test in ("iid", "shifted"):
        m = scores[("orca", test)]
        metrics += [
            metric(
                f"DT cross-entropy ({test} test)", "cross_entropy", m["dt_ce"], dataset=data, higher_is_better=False
            ),
            metric(f"DT macro-F1 ({test} test)", "f1", m["dt_macro_f1"], dataset=data, higher_is_better=True),
            metric(f"CTR AUC ({test} test)", "roc_auc", m["ctr_auc"], dataset=data, higher_is_better=True),
        ]
    save_training_record(
        Path(run.out) / "artifact",
        method="orca",
        command="hf-ext reproduce orca" + (" --full" if run.full else ""),
        datasets=[
            {
                "name": f"synthetic-{run.family}-dwell",
                "hub_id": None,
                "description": get_family(run.family).description + "; the shifted test has the shortcut absent",
            }
        ],
        metrics=metrics,
        config={
            "strength": strength,
            "seed": seed,
            "backbone": backbone,
            "num_impressions": run.num_impressions,
            "epochs": run.epochs,
        },
        notes=f"ORCA ({backbone}) trained at shortcut strength {strength:g}, seed {seed}",
        skip_nonfinite=True,
    )


__all__ = ["JOIN_KEYS", "copy_joined_heatmaps", "full_subset", "load_joined", "save_record"]
