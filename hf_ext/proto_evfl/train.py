"""`hf-ext train proto_evfl`: trains one Proto-EVFL federation in-process (Flower `ServerApp` + one `ClientApp` per
party on an in-process grid) and saves the top model and every party's model as Hub artifacts.

The flags are parsed by `transformers.HfArgumentParser` from [`ProtoEvflTrainArguments`] (underscore spelling, with
the dashed one as an alias). The data is one of:

- the user's files: one feature file per party keyed by entity id, plus the active party's labels
  (`--party_data a.csv b.csv --labels labels.csv [--id_column id --label_column label]`, or `--data` naming a
  manifest or a folder; schema in `data.PARTY_SCHEMA` / `data.LABELS_SCHEMA`, alignment in `party_data.py`), split
  by `--test_size` / `--seed` into aligned training and test entities;
- the parties' saved datasets (`--party_data_dir`, `--labels_path`, `--feature_widths`; see `party_data.py`);
- else a simulated vertical split of a public data set (`--dataset`).

The artifact (top model at the root, party encoders in `parties/party-<k>/`, `training_record.json` with the test
split's accuracy and macro-F1) goes to `OUTPUT_DIR/artifact` (or `--artifact_dir`): what `hf-ext evaluate` and
`hf-ext push proto_evfl --from` take.

Example: `hf-ext train proto_evfl --dataset digits --unseen_class 3 --rounds 40 --output_dir runs/proto_evfl_train`.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from transformers import HfArgumentParser

from .data import VerticalDataConfig
from .training import PRIORS, SELECTIONS, UNSEEN_WEIGHTINGS, ProtoEvflTrainingArguments

_DATA, _TRAIN = VerticalDataConfig(), ProtoEvflTrainingArguments()
DATASETS = ("digits", "breast_cancer", "fashion_mnist")


@dataclass
class ProtoEvflTrainArguments:
    """The arguments of `hf-ext train proto_evfl`: output, data (simulated split or the parties' own), training knobs
    (see [`~hf_ext.proto_evfl.training.ProtoEvflTrainingArguments`]) and the top model's shape. Ranges are checked
    by the configs they fill (`VerticalDataConfig`, `ProtoEvflTrainingArguments`, `ProtoEvflRunConfig`), each naming
    the field.
    """

    # output
    output_dir: str = field(
        default="", metadata={"help": "folder for metrics.json (default $HF_EXT_HOME/proto_evfl/train)"}
    )
    artifact_dir: str = field(
        default="",
        metadata={
            "help": "where to save the top model (default OUTPUT_DIR/artifact); party models go inside it as "
            "parties/party-<k>/ (what `hf-ext push` uploads)"
        },
    )
    # data (simulated split)
    dataset: str = field(
        default=_DATA.dataset,
        metadata={"choices": DATASETS, "help": "fashion_mnist needs the Debian package dataset-fashion-mnist"},
    )
    num_parties: int = field(default=_DATA.num_parties, metadata={"help": "number of parties"})
    unseen_class: int | None = field(default=None, metadata={"help": "class without any labelled sample (zero-shot)"})
    imbalance_ratio: float = field(default=_DATA.imbalance_ratio, metadata={"help": "long-tail imbalance ratio"})
    aligned_per_class: int = field(default=_DATA.aligned_per_class, metadata={"help": "aligned samples per class"})
    max_unaligned_per_class: int = field(default=_DATA.max_unaligned_per_class, metadata={"help": "head class size"})
    test_per_class: int = field(default=_DATA.test_per_class, metadata={"help": "test samples per class"})
    # the user's files (party_data.py: one feature file per party keyed by entity id, plus labels)
    data: str = field(
        default="",
        metadata={"help": "a manifest (.json/.yaml: parties, labels, id_column, label_column) or a folder with one, "
                  "or with party-<k>.<ext> and labels.<ext> files"},
    )  # fmt: skip
    party_data: list[str] = field(
        default_factory=list, metadata={"help": "one feature file per party (the first is the active party)"}
    )
    labels: str = field(default="", metadata={"help": "the active party's labels file (id and label columns)"})
    id_column: str = field(default="id", metadata={"help": "the entity-id column of every file"})
    label_column: str = field(default="label", metadata={"help": "the label column of the labels file"})
    test_size: float = field(default=0.2, metadata={"help": "share of the aligned labelled entities held out for test"})
    # the parties' own saved datasets (party_data.py format)
    party_data_dir: str = field(
        default="", metadata={"help": "folder with party-<k>/ datasets; each reads only its own"}
    )
    labels_path: str = field(default="", metadata={"help": "the active party's label dataset"})
    feature_widths: str = field(default="", metadata={"help": "agreed widths, comma-separated, e.g. 32,32"})
    num_labels: int = field(default=0, metadata={"help": "number of classes (0: from --dataset)"})
    # training
    rounds: int = field(default=_TRAIN.rounds, metadata={"help": "bi-level rounds"})
    warmup_rounds: int | None = field(default=None, metadata={"help": "default min(15, rounds // 2)"})
    local_steps: int = field(default=_TRAIN.local_steps, metadata={"help": "lower-level steps per round and party"})
    selection: str = field(default=_TRAIN.selection, metadata={"choices": SELECTIONS, "help": "unaligned selection"})
    prior: str = field(default=_TRAIN.prior, metadata={"choices": PRIORS, "help": "OT column marginal"})
    prior_mix: float = field(default=_TRAIN.prior_mix, metadata={"help": "λ of the mixed prior"})
    sinkhorn_epsilon: float = field(default=_TRAIN.sinkhorn_epsilon, metadata={"help": "Sinkhorn ε"})
    novelty_quantile: float = field(default=_TRAIN.novelty_quantile, metadata={"help": "open-set quantile q"})
    unseen_weighting: str = field(
        default=_TRAIN.unseen_weighting, metadata={"choices": UNSEEN_WEIGHTINGS, "help": "unseen-class weighting"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the split, initialisation, batching and selection"})
    # models
    aggregation: str = field(default="gate", metadata={"choices": ("gate", "concat"), "help": "fusion of parties"})
    classifier: str = field(default="prototype", metadata={"choices": ("prototype", "linear"), "help": "top head"})
    local_loss_weight: float = field(
        default=1.0,
        metadata={"help": "μ of the label-tying term; > 0 lets passive parties read aligned labels from ∂L/∂s^k"},
    )

    def run_config(self):
        """The [`~hf_ext.proto_evfl.task.ProtoEvflRunConfig`] these arguments describe."""
        from .task import ProtoEvflRunConfig

        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int):
            raise TypeError(f"--rounds must be an integer, got {self.rounds!r}")
        warmup = self.warmup_rounds if self.warmup_rounds is not None else min(15, self.rounds // 2)
        return ProtoEvflRunConfig(
            data=VerticalDataConfig(
                dataset=self.dataset,
                num_parties=self.num_parties,
                unseen_class=self.unseen_class,
                imbalance_ratio=self.imbalance_ratio,
                aligned_per_class=self.aligned_per_class,
                max_unaligned_per_class=self.max_unaligned_per_class,
                test_per_class=self.test_per_class,
                seed=self.seed,
            ),
            training=ProtoEvflTrainingArguments(
                rounds=self.rounds,
                warmup_rounds=warmup,
                local_steps=self.local_steps,
                selection=self.selection,
                prior=self.prior,
                prior_mix=self.prior_mix,
                sinkhorn_epsilon=self.sinkhorn_epsilon,
                novelty_quantile=self.novelty_quantile,
                unseen_weighting=self.unseen_weighting,
                seed=self.seed,
            ),
            aggregation=self.aggregation,
            classifier=self.classifier,
            local_loss_weight=self.local_loss_weight,
            party_data_dir=self.party_data_dir,
            labels_path=self.labels_path,
            feature_widths=self.feature_widths,
            num_labels=self.num_labels,
        )


def build_parser() -> HfArgumentParser:
    """The `hf-ext train proto_evfl` parser (`transformers.HfArgumentParser` over [`ProtoEvflTrainArguments`])."""
    return HfArgumentParser(ProtoEvflTrainArguments, prog="hf-ext train proto_evfl", description=__doc__)


def parse_args(argv: list[str] | None = None) -> ProtoEvflTrainArguments:
    (args,) = build_parser().parse_args_into_dataclasses(args=argv, look_for_args_file=False)
    return args


def main(argv: list[str] | None = None) -> dict:
    """Trains one federation in-process and saves every party's model and the top model as Hub artifacts."""
    from hf_ext.core.paths import work_dir

    from . import SPEC
    from .inference import save_federation
    from .training import run_federation

    argv = list(argv) if argv is not None else __import__("sys").argv[1:]
    import datasets

    datasets.disable_progress_bars()  # a bad file's error is then the only line on stderr
    ns = parse_args(argv)
    own = ns.data or ns.party_data or ns.labels
    if own:
        from .party_data import align_party_files, resolve_party_files

        files = resolve_party_files(ns.data, ns.party_data, ns.labels, ns.id_column, ns.label_column)
        # every file is read and checked before any training
        aligned = align_party_files(files, test_size=ns.test_size, seed=ns.seed, num_labels=ns.num_labels)
    settings = ns.run_config()
    with tempfile.TemporaryDirectory(prefix="proto_evfl_parties_") as tmp:
        if own:
            from .party_data import write_party_datasets

            paths = write_party_datasets(aligned, tmp)
            settings = replace(
                settings,
                data=replace(settings.data, num_parties=len(aligned.widths)),
                party_data_dir=tmp, labels_path=str(paths["labels"]),
                feature_widths=",".join(map(str, aligned.widths)), num_labels=len(aligned.class_names),
            )  # fmt: skip
        result = run_federation(settings)
    out = Path(ns.output_dir) if ns.output_dir else work_dir("proto_evfl", "train")
    artifact = Path(ns.artifact_dir) if ns.artifact_dir else out / "artifact"
    save_federation(result.top_model, result.party_models, artifact, SPEC)
    _save_record(artifact, ns, argv, settings, result.metrics, aligned if own else None)
    report = {
        "metrics": result.metrics,
        "settings": asdict(settings),
        "artifact_dir": str(artifact),
        "seconds": round(result.seconds, 1),
        "rejections": result.rejections,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps(report["metrics"], indent=1))
    return report


RECORD_METRICS = {"accuracy": ("accuracy", "accuracy"), "macro_f1": ("macro-F1", "f1"),
                  "unseen_accuracy": ("unseen-class accuracy", "accuracy")}  # fmt: skip


def record_metrics(measured: dict, dataset: str) -> list[dict]:
    """The record's (and `hf-ext evaluate`'s) metrics: test accuracy, macro-F1 and, zero-shot, unseen accuracy."""
    from hf_ext.core.records import metric

    return [metric(label, kind, measured[key], dataset=dataset, higher_is_better=True)
            for key, (label, kind) in RECORD_METRICS.items() if key in measured]  # fmt: skip


def _save_record(artifact: Path, ns, argv, settings, measured: dict, aligned) -> None:
    """`training_record.json`: the command, the data (every file's fingerprint), the knobs and the test metrics."""
    from hf_ext.core.records import save_training_record

    simulated = ("dataset", "imbalance_ratio", "aligned_per_class", "max_unaligned_per_class", "test_per_class")
    own_files = ("data", "party_data", "labels", "id_column", "label_column", "test_size")
    drop = ("output_dir", "artifact_dir", *(simulated if aligned is not None else own_files))
    config = {k: v for k, v in asdict(ns).items() if k not in drop}
    config["settings"] = asdict(settings)
    if aligned is not None:
        entry = aligned.dataset_entry()
        config.update(id_column=aligned.files.id_column, label_column=aligned.files.label_column,
                      class_names=list(aligned.class_names), feature_columns=aligned.feature_names)  # fmt: skip
        config["settings"].update(party_data_dir="", labels_path="")  # a deleted temporary folder
        notes = f"Proto-EVFL on the user's {len(aligned.widths)} party files; " + "; ".join(aligned.notes)
    else:
        entry = {"name": settings.data.dataset, "hub_id": None,
                 "description": f"{settings.data.dataset}, vertically split (simulated)",
                 "fingerprint": f"simulated:{settings.data.dataset}:seed{settings.data.seed}"}  # fmt: skip
        notes = f"Proto-EVFL on a simulated vertical split of {settings.data.dataset}"
    save_training_record(
        artifact,
        method="proto_evfl",
        command="hf-ext train proto_evfl " + shlex.join(map(str, argv)),
        datasets=[entry],
        metrics=record_metrics(measured, entry["name"]),
        config=config,
        notes=notes.rstrip("; "),
        skip_nonfinite=True,
    )


__all__ = ["ProtoEvflTrainArguments", "build_parser", "main", "parse_args", "record_metrics"]


if __name__ == "__main__":
    main()
