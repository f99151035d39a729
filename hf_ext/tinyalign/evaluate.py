"""`hf-ext evaluate tinyalign --model DIR --data SOURCE [--baseline DIR]`: a trained TinyAlign artifact's caption
metrics on the user's test split (the same rows `hf-ext train tinyalign --data` held out: the split is rebuilt from
the seed and fractions in the artifact's training record), and with `--baseline` (e.g. the `--variant baseline`
artifact, no memory) the paired comparison over the test captions."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TinyAlignEvaluateArguments:
    """What `hf-ext evaluate tinyalign` scores."""

    model: str = field(metadata={"help": "the artifact folder hf-ext train tinyalign wrote (<output_dir>/artifact)"})
    data: str = field(metadata={"help": "the same data source as in train (folder, table or Hub id)"})
    output: str | None = field(default=None, metadata={"help": "write the metrics (and comparison) as JSON here"})
    baseline: str | None = field(
        default=None, metadata={"help": "another TinyAlign artifact (e.g. --variant baseline) to compare, paired"}
    )
    batch_size: int = field(default=32, metadata={"help": "evaluation batch size"})
    max_new_tokens: int | None = field(default=None, metadata={"help": "greedy caption length (default: train's)"})


def build_parser():
    """The `transformers.HfArgumentParser` of `hf-ext evaluate tinyalign`."""
    from transformers import HfArgumentParser

    return HfArgumentParser(TinyAlignEvaluateArguments, prog="hf-ext evaluate tinyalign")


def _resolve(folder: str) -> Path:
    path = Path(folder)
    if not (path / "config.json").is_file() and (path / "artifact" / "config.json").is_file():
        return path / "artifact"  # the train --output_dir: its artifact
    if not (path / "config.json").is_file():
        raise ValueError(f"--model / --baseline {folder!r} is not a TinyAlign artifact folder (no config.json)")
    return path


def _split_config(folder: Path) -> dict:
    from hf_ext.core.records import load_training_record

    record = load_training_record(folder)
    split = ((record or {}).get("config") or {}).get("split")
    if split is None:
        raise ValueError(
            f"{folder} has no training record with the data split: evaluate an artifact written by "
            "`hf-ext train tinyalign --data ...`"
        )
    return {"split": split, "max_new_tokens": record["config"].get("max_new_tokens", 16)}


def score_artifact(folder: Path, data, batch_size: int, max_new_tokens: int) -> dict:
    """Per-caption scores of the artifact in `folder` on `data` (the held-out split)."""
    from transformers import AutoProcessor

    from .evaluation import caption_scores
    from .modeling_tinyalign import TinyAlignForConditionalGeneration
    from .pretrained_parts import add_vision_features

    model = TinyAlignForConditionalGeneration.from_pretrained(folder)
    processor = AutoProcessor.from_pretrained(folder)
    test = add_vision_features(model, processor, data)
    return caption_scores(model, processor, test, batch_size=batch_size, max_new_tokens=max_new_tokens)


def main(argv: list[str] | None = None) -> dict:
    """Scores `--model` (and `--baseline`) on the test split; prints the table and returns `report_evaluation`'s
    result (`{"metrics": [...], "comparison": {...}}`)."""
    from hf_ext.core.records import metric, report_evaluation
    from hf_ext.core.reporting import paired_bootstrap

    from .data import load_caption_data, split_caption_data
    from .evaluation import summarize_caption_scores

    (ns,) = build_parser().parse_args_into_dataclasses(args=argv)
    data = load_caption_data(ns.data)  # the schema check first: bad data fails before any model loads
    folder = _resolve(ns.model)
    info = _split_config(folder)
    split = info["split"]
    test = split_caption_data(data, seed=split["seed"], test=split["test_fraction"], memory=split["memory_fraction"])[
        "test"
    ].rename_column("image", "pixel_values")
    max_new = ns.max_new_tokens or info["max_new_tokens"]
    scores = score_artifact(folder, test, ns.batch_size, max_new)
    summary = summarize_caption_scores(scores)
    name = Path(ns.data).name if Path(ns.data).exists() else ns.data
    metrics = [
        metric("caption CE (nats/token)", "loss", summary["caption_ce"], dataset=name, higher_is_better=False),
        metric("token accuracy", "accuracy", summary["token_accuracy"], dataset=name, higher_is_better=True),
        metric("BLEU-4", "bleu", summary["bleu"], dataset=name, higher_is_better=True),
    ]
    comparison = None
    if ns.baseline is not None:
        base_folder = _resolve(ns.baseline)
        base_split = _split_config(base_folder)["split"]
        if {k: base_split[k] for k in ("seed", "test_fraction", "memory_fraction")} != {
            k: split[k] for k in ("seed", "test_fraction", "memory_fraction")
        }:
            raise ValueError(
                f"--baseline {ns.baseline} was trained on another split ({base_split}) than --model ({split}): "
                "a paired comparison needs the same test rows (train both with the same --split_seed and fractions)"
            )
        base = score_artifact(base_folder, test, ns.batch_size, max_new)
        base_summary = summarize_caption_scores(base)
        comparison = {
            # per test caption, model minus baseline: negative CE differences favour the model
            "caption CE (nats/token)": paired_bootstrap(scores["caption_ce"], base["caption_ce"]).to_dict(),
            "token accuracy": paired_bootstrap(scores["token_accuracy"], base["token_accuracy"]).to_dict(),
            "baseline": {"artifact": str(base_folder), **base_summary},
        }
        for key in ("caption CE (nats/token)", "token accuracy"):
            comparison[key].pop("per_pair", None)
    return report_evaluation(
        metrics,
        output=ns.output,
        comparison=comparison,
        header=f"TinyAlign {folder} on the test split of {ns.data} ({len(test)} pairs)",
    )


__all__ = ["TinyAlignEvaluateArguments", "build_parser", "main", "score_artifact"]
