"""`hf-ext evaluate proto_evfl`: a trained federation's test metrics on the user's files, and with `--baseline` the
paired comparison with another federation (e.g. vanilla VFL: `hf-ext train proto_evfl ... --selection none`).

The data is named as for `hf-ext train proto_evfl` (`--data` a manifest or folder, or `--party_data` + `--labels`);
the id and label columns, the class names, `--test_size` and `--seed` come from the artifact's
`training_record.json`, so the same test entities are scored. Each party's encoder embeds its own block of the test
entities and the top model scores them ([`~hf_ext.proto_evfl.inference.predict_entities`]).

Example: `hf-ext evaluate proto_evfl --model out/artifact --data parties/ --baseline vanilla/artifact`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser


@dataclass
class ProtoEvflEvaluateArguments:
    """The arguments of `hf-ext evaluate proto_evfl`."""

    model: str = field(metadata={"help": "the trained federation (hf-ext train's OUTPUT_DIR/artifact, or OUTPUT_DIR)"})
    data: str = field(default="", metadata={"help": "a manifest or folder naming the party files and labels"})
    party_data: list[str] = field(default_factory=list, metadata={"help": "one feature file per party"})
    labels: str = field(default="", metadata={"help": "the labels file"})
    output: str = field(default="", metadata={"help": "write the metrics (and comparison) as JSON here"})
    baseline: str = field(default="", metadata={"help": "another trained federation, paired over test entities"})
    test_size: float | None = field(default=None, metadata={"help": "default: the training record's"})
    seed: int | None = field(default=None, metadata={"help": "seed of the split; default: the training record's"})


def build_parser() -> HfArgumentParser:
    """The `hf-ext evaluate proto_evfl` parser."""
    return HfArgumentParser(ProtoEvflEvaluateArguments, prog="hf-ext evaluate proto_evfl", description=__doc__)


def resolve_artifact(path: str) -> Path:
    """The federation folder: `path` itself, or `path/artifact` when `path` is a train `--output_dir`."""
    from hf_ext.core.user_data import UserDataError

    folder = Path(path).expanduser()
    if (folder / "config.json").is_file():
        return folder
    if (folder / "artifact" / "config.json").is_file():
        return folder / "artifact"
    raise UserDataError(f"--model {path}: no trained federation there (no config.json, nor artifact/config.json)")


def _predict(artifact: Path, aligned, ids) -> tuple:
    from hf_ext.core.user_data import UserDataError

    from .inference import load_federation, predict_entities

    top, parties = load_federation(artifact)
    widths = list(top.config.party_input_dims or [])
    if widths and widths != aligned.widths:
        raise UserDataError(f"{artifact} was trained on party widths {widths}; the data has {aligned.widths}")
    if top.config.num_classes != len(aligned.class_names):
        raise UserDataError(f"{artifact} has {top.config.num_classes} classes; the data has {len(aligned.class_names)}")
    return predict_entities(top, parties, [aligned.features_of(k, ids) for k in range(len(parties))])["predictions"]


def main(argv: list[str] | None = None) -> dict:
    """Scores the test entities of the user's files with the trained federation (and the baseline)."""
    import datasets
    import numpy as np

    from hf_ext.core.records import load_training_record, report_evaluation
    from hf_ext.core.reporting import paired_bootstrap
    from hf_ext.core.user_data import UserDataError

    from .metrics import classification_metrics
    from .party_data import align_party_files, resolve_party_files
    from .train import record_metrics

    datasets.disable_progress_bars()
    (args,) = build_parser().parse_args_into_dataclasses(args=argv, look_for_args_file=False)
    artifact = resolve_artifact(args.model)
    record = load_training_record(artifact) or {}
    config = record.get("config", {})
    if "class_names" not in config:
        raise UserDataError(
            f"{artifact}: its training record does not describe a run on party files (train it with "
            "`hf-ext train proto_evfl --data ...` or --party_data/--labels)"
        )
    files = resolve_party_files(args.data, args.party_data, args.labels, config["id_column"], config["label_column"])
    aligned = align_party_files(
        files,
        test_size=args.test_size if args.test_size is not None else config.get("test_size", 0.2),
        seed=args.seed if args.seed is not None else config.get("seed", 0),
        class_names=config["class_names"],
    )
    ids = aligned.test_ids
    y = np.array([aligned.labels[i] for i in ids])
    unseen = (config.get("settings", {}).get("data") or {}).get("unseen_class")
    num_classes = len(aligned.class_names)
    pred = _predict(artifact, aligned, ids)
    measured = classification_metrics(y, pred, num_classes, unseen)
    metrics = record_metrics(measured, aligned.dataset_entry()["name"])
    comparison = None
    if args.baseline:
        base_pred = _predict(resolve_artifact(args.baseline), aligned, ids)
        diff = paired_bootstrap((pred == y).astype(float), (base_pred == y).astype(float))
        summary = {k: v for k, v in diff.to_dict().items() if k not in ("values", "per_pair")}  # per-entity 0/±1
        summary["baseline_accuracy"] = classification_metrics(y, base_pred, num_classes, unseen)["accuracy"]
        comparison = {"accuracy": summary}
    return report_evaluation(
        metrics,
        output=args.output or None,
        comparison=comparison,
        header=f"proto_evfl {artifact} on {len(ids)} test entities of {files.source or ', '.join(files.parties)}",
    )


__all__ = ["ProtoEvflEvaluateArguments", "build_parser", "main", "resolve_artifact"]


if __name__ == "__main__":
    main()
