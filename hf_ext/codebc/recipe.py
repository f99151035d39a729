"""The staged CodeBC recipe shared by `hf-ext reproduce codebc` and `hf-ext codebc train`: data + base, the three
stage datasets, and the stage arguments of a [`~hf_ext.codebc.pipeline.ScaleConfig`]."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .data import Contract, ci_dataset, load_secure_contracts, ti_dataset, vd_dataset
from .pipeline import ScaleConfig, build_examples, load_base, pretraining_texts, with_version_line
from .trainer import CodeBCStageArguments

STAGES = ("CI", "VD", "TI")


@dataclass
class Prepared:
    """What a run trains on: the examples of [`build_examples`], the base, its tokenizer, the token rows that train
    with the adapter, and the npm contracts that joined the corpus."""

    examples: dict
    model: object
    tokenizer: object
    trainable: list[int]
    extra: list[Contract] = field(default_factory=list)


def prepare(scale: ScaleConfig, cache: Path, npm: str | None = None) -> Prepared:
    """Corpus (+ the npm contracts of `npm`, if given) → Slither-labelled examples → the base of `scale.base`.

    The examples come first so that the held-out VD/TI contracts stay out of the tiny base's pretraining and of CI.
    """
    from .external import load_npm_contracts

    corpus = load_secure_contracts()
    extra = load_npm_contracts(npm) if npm else []
    ex = build_examples(scale, cache, corpus + extra)
    model, tok, trainable = load_base(scale, cache, pretraining_texts(corpus, ex["heldout_codes"]))
    return Prepared(ex, model, tok, trainable, extra)


def stage_arguments(scale: ScaleConfig, trainable: list[int]) -> CodeBCStageArguments:
    return CodeBCStageArguments(
        learning_rate=scale.stage_lr,
        max_steps=scale.stage_steps,
        batch_size=scale.stage_batch,
        max_length=scale.max_length,
        seed=scale.seed,
        trainable_token_ids=trainable or None,
        logging_steps=max(1, scale.stage_steps // 5),
    )


def stage_dataset(stage: str, tok, examples: dict, max_length: int, *, tags: bool = True):
    """The dataset of one stage: CI on `ci_codes`, VD / TI on the training rows (`tags=False`: TI without tags,
    the control)."""
    train = examples["train"]
    codes = [r["contract"].code for r in train]
    if stage == "CI":
        return ci_dataset(tok, examples["ci_codes"], max_length)
    if stage == "VD":
        return vd_dataset(tok, codes, [r["tag"] for r in train], max_length)
    if stage == "TI":
        return ti_dataset(
            tok,
            codes,
            [with_version_line(r["contract"]) for r in train],
            [r["tag"] if tags else None for r in train],
            max_length,
        )
    raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
