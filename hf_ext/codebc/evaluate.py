"""`hf-ext evaluate codebc --model DIR --data SOURCE [--baseline DIR]`: a CodeBC artifact's held-out metrics (TI test
loss, VD accuracy, compile rate of generated contracts with solc-js; see [`~hf_ext.codebc.train_contracts`]) on the
same test contracts `hf-ext train codebc --data` held out (its record gives the split's seed and share, and how
untagged contracts were labelled).

With `--baseline DIR` (another CodeBC artifact, or any causal LM folder or Hub id, e.g. the base model you adapted)
both are scored on the same contracts and each metric's per-contract difference (model − baseline) is bootstrapped
over the test contracts ([`~hf_ext.core.reporting.paired_bootstrap`]). A baseline with another tokenizer is scored with
its own: the VD and compile comparisons stay exact, the loss is then per token of each model's own tokenizer.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser

from hf_ext.core.records import Comparison


@dataclass
class CodeBCEvaluateArguments:
    """What `hf-ext evaluate codebc` measures."""

    model: str = field(metadata={"help": "the `hf-ext train codebc --data ...` output (base + adapter/ + tokenizer)"})
    data: str = field(metadata={"help": "the contracts it was trained on (same forms as `hf-ext train codebc --data`)"})
    baseline: str | None = field(
        default=None,
        metadata={"help": "another CodeBC artifact, or any causal LM (folder or Hub id), scored on the same contracts"},
    )
    output: str | None = field(default=None, metadata={"help": "write the metrics and the comparison as JSON here"})
    max_new_tokens: int | None = field(
        default=None, metadata={"help": "tokens generated per request for the compile rate (default: as trained)"}
    )


def build_parser() -> HfArgumentParser:
    return HfArgumentParser(CodeBCEvaluateArguments, prog="hf-ext evaluate codebc", description=__doc__)


def load_artifact(path: str | Path):
    """`(model, tokenizer)` of a CodeBC artifact (`PeftModel` of base + `adapter/`) or of any causal LM."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    if (folder / "adapter" / "adapter_config.json").is_file():
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, folder / "adapter")
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return model.eval(), tok


def _training_config(artifact: Path) -> dict:
    from hf_ext.core.records import load_training_record

    from .train_contracts import SPLIT_KEYS

    config = (load_training_record(artifact) or {}).get("config", {})
    missing = [k for k in SPLIT_KEYS if k not in config]
    if missing:
        raise ValueError(
            f"--model {artifact}: its training record has no {', '.join(missing)}; evaluate needs the output of "
            "`hf-ext train codebc --data ...` (it repeats that run's split)"
        )
    return config


def _pair(model: list, base: list, seed: int) -> dict:
    from hf_ext.core.reporting import paired_bootstrap

    pairs = [(m, b) for m, b in zip(model, base) if m is not None and b is not None]
    diff = paired_bootstrap([m for m, _ in pairs], [b for _, b in pairs], seed=seed)
    full = diff.to_dict()
    return Comparison.paired(
        "contracts",
        cell=diff.cell(4),
        contracts=len(pairs),
        **{k: full[k] for k in ("mean", "ci_low", "ci_high", "confidence", "method")},
    )


def main(argv: list[str] | None = None) -> dict:
    from hf_ext.core.records import report_evaluation

    from .train_contracts import contract_splits, heldout_metrics, prepare_rows, record_metrics

    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    (ns,) = build_parser().parse_args_into_dataclasses(argv)
    artifact = Path(ns.model)
    config = _training_config(artifact)
    _, splits = contract_splits(ns.data, test_split=config["test_split"], seed=config["seed"])
    rows = prepare_rows(splits["test"], config["labeller"])
    new_tokens = config["max_new_tokens"] if ns.max_new_tokens is None else ns.max_new_tokens
    kwargs = dict(max_length=config["max_length"], max_new_tokens=new_tokens, batch_size=config["eval_batch_size"])
    model, tok = load_artifact(artifact)
    result = heldout_metrics(model, tok, rows, **kwargs)
    name = Path(ns.data).name if Path(ns.data).exists() else ns.data
    metrics = record_metrics(result, name)
    comparison = None
    if ns.baseline:
        base_model, base_tok = load_artifact(ns.baseline)
        base = heldout_metrics(base_model, base_tok, rows, **kwargs)
        ours, theirs = result["per_contract"], base["per_contract"]
        comparison = {
            "test loss (per contract)": _pair(ours["loss"], theirs["loss"], config["seed"]),
            "test VD accuracy (per contract)": _pair(ours["vd_correct"], theirs["vd_correct"], config["seed"]),
        }
        if ours["compiled"] is not None and theirs["compiled"] is not None:
            comparison["test compile rate (per contract)"] = _pair(ours["compiled"], theirs["compiled"], config["seed"])
        for key, metric_name in (
            ("loss", "test loss"),
            ("vd_accuracy", "test VD accuracy"),
            ("compile_rate", "test compile rate"),
        ):
            if f"{metric_name} (per contract)" in comparison:
                comparison[f"{metric_name} (per contract)"].update(model=result[key], baseline=base[key])
    header = (
        f"CodeBC {artifact} on the {len(rows)} held-out contracts of {ns.data} "
        f"({sum(r['tag'] == 'bug' for r in rows)} tagged bug)"
    )
    return report_evaluation(metrics, output=ns.output, comparison=comparison, header=header)


__all__ = ["CodeBCEvaluateArguments", "build_parser", "load_artifact", "main"]
