"""`hf-ext evaluate h2tune`: a federation trained by `hf-ext train h2tune --federation` on each client's test split
(the same seeded split: seed and caps from the artifact's training record): per client, exact match of the greedy
answer and the answer's mean token cross-entropy; and exact match over every client's test items.

`--baseline local-only` (the local-only LoRA adapters `--with_local_only` saved in `MODEL/local-only`), or the
folder of another trained federation with the same clients, is scored on the same items; each client's exact match
and answer loss (and the pooled exact match) are compared with a paired bootstrap over its test items.

```bash
hf-ext evaluate h2tune --model runs/h2tune_own --data fed.yaml --baseline local-only --output eval.json
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser

from hf_ext.core.records import Comparison


@dataclass
class H2TuneEvaluateArguments:
    """Arguments of `hf-ext evaluate h2tune`.

    Args:
        model (`str`): the trained federation's folder (`hf-ext train h2tune --federation ... --output_dir`).
        data (`str`): its federation file (each client's data is read from it, as in training).
        output (`str`, *optional*): a JSON file for the metrics (and the comparison).
        baseline (`str`, *optional*): `local-only` (`MODEL/local-only`), or another trained federation's folder.
    """

    model: str = field(metadata={"help": "the trained federation (hf-ext train h2tune --federation --output_dir)"})
    data: str = field(metadata={"help": "the federation file (JSON / YAML) it was trained from"})
    output: str | None = field(default=None, metadata={"help": "write the metrics as JSON here"})
    baseline: str | None = field(
        default=None, metadata={"help": "'local-only' (MODEL/local-only) or another trained federation's folder"}
    )


def build_parser() -> HfArgumentParser:
    """The `hf-ext evaluate h2tune` parser (`HfArgumentParser` over [`H2TuneEvaluateArguments`])."""
    return HfArgumentParser(H2TuneEvaluateArguments, prog="hf-ext evaluate h2tune", description=__doc__)


def score_federation(folder, clients, split: dict, max_len: int) -> dict:
    """Each client's [`~hf_ext.h2tune.federation.ClientScores`] on its test split, from the federation `folder`."""
    from .federation import client_folders, load_client_model, load_client_split

    folders = client_folders(folder, [c.name for c in clients])
    missing = [n for n, f in folders.items() if not (f / "adapter" / "adapter_config.json").is_file()]
    if missing:
        raise ValueError(f"{folder} has no trained client(s) {missing} of the federation file")
    from .federation import score_client

    out = {}
    for c in clients:
        _, test = load_client_split(c.data, seed=split["seed"], num_train=0, num_test=split["num_test"])
        model, codec = load_client_model(folders[c.name])
        out[c.name] = score_client(model, test, codec, max_len)
    return out


def main(argv: list[str] | None = None) -> dict:
    (args,) = build_parser().parse_args_into_dataclasses(args=argv, look_for_args_file=False)
    from hf_ext.core.records import load_training_record, report_evaluation
    from hf_ext.core.reporting import paired_bootstrap

    from .federation import check_federation, metric_rows, read_federation
    from .train_federation import LOCAL_ONLY

    clients = read_federation(args.data)
    check_federation(clients)  # UserDataError naming the client and column before any model is loaded
    record = load_training_record(args.model) or {}
    config = record.get("config", {})
    split = config.get("split") or {"seed": 0, "num_test": 50}
    max_len = int(config.get("run", {}).get("max-len", 32))
    scores = score_federation(args.model, clients, split, max_len)
    names = {d["name"].split(":", 1)[0]: d["name"] for d in record.get("datasets", [])}
    metrics = metric_rows(scores, names)
    comparison = None
    if args.baseline:
        base = Path(args.model) / LOCAL_ONLY if args.baseline == LOCAL_ONLY else Path(args.baseline)
        if args.baseline == LOCAL_ONLY and not base.is_dir():
            raise ValueError(f"{args.model} has no {LOCAL_ONLY}/ baseline: train it with --with_local_only")
        base_scores = score_federation(base, clients, split, max_len)
        comparison = {}
        seed = int(split["seed"])
        for name, s in scores.items():
            b = base_scores[name]
            for label, mine, theirs in (("exact match", s.exact_match, b.exact_match),
                                        ("answer loss", s.answer_loss, b.answer_loss)):  # fmt: skip
                diff = paired_bootstrap(mine, theirs, seed=seed)
                comparison[f"{name} {label}"] = Comparison(
                    diff.to_dict() | {"baseline": str(base), "cell": diff.cell()}
                )
        pooled = [v for s in scores.values() for v in s.exact_match]
        pooled_base = [v for s in base_scores.values() for v in s.exact_match]
        diff = paired_bootstrap(pooled, pooled_base, seed=seed)
        comparison["exact match (all clients)"] = Comparison(
            diff.to_dict() | {"baseline": str(base), "cell": diff.cell()}
        )
    header = (
        f"h2tune {args.model} on {args.data}: {len(clients)} clients, "
        + ", ".join(f"{n} {len(s.exact_match)} test items" for n, s in scores.items())
        + f" (split seed {split['seed']})"
    )
    return report_evaluation(metrics, output=args.output, comparison=comparison, header=header)


__all__ = ["H2TuneEvaluateArguments", "build_parser", "main", "score_federation"]
