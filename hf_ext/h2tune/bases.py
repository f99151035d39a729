"""The clients' base decoders: tiny random-init ones briefly pretrained on a shared corpus (cached), or real ones
(SmolLM2-135M through `hf_ext.core.pretrained`, a user's HF model id or local folder) with their own tokenizer.

[`build_base`] returns `(model, codec)`: the codec turns prompts and answers into the model's token ids (the tiny
decoders' character codec, or the real model's tokenizer; see [`~hf_ext.h2tune.data.TokenizerCodec`]).
"""

from __future__ import annotations

import tempfile

from .data import VOCAB_SIZE, to_features

PRETRAIN_CORPUS = {"n": 2000, "seed": 7}
PRETRAIN_ARGS = {"per_device_train_batch_size": 32, "learning_rate": 3e-3, "seed": 0}


def pretrain_corpus(n: int, seed: int) -> list[tuple[str, str]]:
    """The shared synthetic corpus: plain sums `a+b=` → `a+b` (no modulo), related to but not the clients' tasks."""
    import random

    rng = random.Random(seed)
    return [(f"{a}+{b}=", str(a + b)) for a, b in ((rng.randrange(10), rng.randrange(10)) for _ in range(n))]


def pretrain_key(base, spec, steps: int, init_seed: int | None = None) -> str:
    """Cache key of a pretrained base: client, family, depth, width, init seed, steps, plus a short hash of the full
    model config, the corpus and the pretraining hyperparameters (so a changed config never reuses a stale base)."""
    import hashlib
    import json

    blob = json.dumps(
        {
            "config": base.config.to_diff_dict(),
            "init_seed": init_seed,
            "steps": steps,
            "corpus": PRETRAIN_CORPUS,
            "args": PRETRAIN_ARGS,
        },
        sort_keys=True,
        default=str,
    )
    digest = hashlib.sha256(blob.encode()).hexdigest()[:10]
    return f"{spec.family}-L{spec.layers}-d{spec.hidden}-init{init_seed}-steps{steps}-{digest}"


def pretrained_base(base, spec, run, init_seed: int | None = None):
    """Briefly pretrains `base` (all weights) on [`pretrain_corpus`]; cached under
    `run.cache_dir/<pretrain_key>` (written atomically, so parallel workers never read a half-written base)."""
    import os
    import shutil
    from pathlib import Path

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, PrinterCallback, Trainer, TrainingArguments

    from hf_ext.core.devices import use_cpu

    folder = Path(run.cache_dir) / pretrain_key(base, spec, run.pretrain_steps, init_seed)
    if (folder / "config.json").is_file():
        return _load_cached(folder, AutoModelForCausalLM)
    ds = Dataset.from_dict(to_features(pretrain_corpus(PRETRAIN_CORPUS["n"], seed=PRETRAIN_CORPUS["seed"])))
    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="h2tune_pre_"),
        use_cpu=use_cpu(),
        report_to="none",
        max_steps=run.pretrain_steps,
        save_strategy="no",
        logging_strategy="no",
        **PRETRAIN_ARGS,
    )
    trainer = Trainer(model=base, args=args, train_dataset=ds)
    trainer.remove_callback(PrinterCallback)
    try:
        trainer.train()
    finally:  # the Trainer's scratch folder (save_strategy "no"); the base is saved below
        shutil.rmtree(args.output_dir, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    base.save_pretrained(tmp)
    try:
        os.replace(tmp, folder)
    except OSError:  # another process cached the same base meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return base


# Bases already loaded in this process, by cache folder and the files' (size, mtime): a reproduction builds every
# client of every (variant, seed) run from the same two cached bases, and each load reads and checks the files again.
_LOADED: dict = {}


def _load_cached(folder, auto_class):
    """`auto_class.from_pretrained(folder)`, loaded once per process: later calls get a deep copy of the first load
    (the caller adapts and trains its copy in place), so every caller starts from the same weights. A changed file
    in `folder` loads again."""
    import copy

    stamp = tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(folder.iterdir()) if f.is_file())
    key = str(folder.resolve())
    if key not in _LOADED or _LOADED[key][0] != stamp:
        _LOADED[key] = (stamp, auto_class.from_pretrained(folder))
    return copy.deepcopy(_LOADED[key][1])


def tiny_client_base(spec, seed: int):
    """Client `spec`'s tiny random-init decoder (the character codec's vocabulary)."""
    from .presets import tiny_base, tiny_base_config

    return tiny_base(tiny_base_config(spec.family, spec.layers, spec.hidden, VOCAB_SIZE), seed=seed)


def build_base(spec, run, seed: int):
    """`(model, codec)` of client `spec`: its real model and tokenizer when `spec.model` is set (`smollm2`: the
    offline SmolLM2-135M-Instruct; `smollm2-L<N>`: derived from it, see `derive.py`), else its tiny decoder,
    pretrained for `run.pretrain_steps` (cached)."""
    from .data import CHARS_CODEC, TokenizerCodec

    if spec.model:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .derive import derive_smollm2, is_derived

        if spec.model == "smollm2":
            from hf_ext.core.pretrained import load_smollm2

            model, tokenizer = load_smollm2()
        elif is_derived(spec.model):  # smollm2-L<N>: layer-dropped, healed by distillation, cached
            model, tokenizer = derive_smollm2(spec.model, run.heal_steps, run.cache_dir)
        else:
            model, tokenizer = (
                AutoModelForCausalLM.from_pretrained(spec.model),
                AutoTokenizer.from_pretrained(spec.model),
            )
        return model.train(), TokenizerCodec(tokenizer)
    base = tiny_client_base(spec, seed)
    if run.pretrain_steps > 0:
        base = pretrained_base(base, spec, run, init_seed=seed)
    return base, CHARS_CODEC


__all__ = [
    "PRETRAIN_ARGS",
    "PRETRAIN_CORPUS",
    "build_base",
    "pretrain_corpus",
    "pretrain_key",
    "pretrained_base",
    "tiny_client_base",
]
