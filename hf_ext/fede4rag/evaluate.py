"""`hf-ext evaluate fede4rag`: a trained FedE4RAG retriever on the test split of the user's (query, passage, client)
rows: retrieval of each test query's passage among every client's passages (recall@1/5/10, MRR, nDCG@10) and among
its own client's (`own.mrr`, `own.recall@1`).

The split is the one `hf-ext train fede4rag --data` used: the seed and test share are read from the artifact's
`training_record.json` (or given with `--seed` / `--test_fraction`). With `--baseline` (another retriever folder, a
BERT / sentence-transformers encoder folder, or `base`: the encoder the artifact was trained from, i.e. the
zero-shot retriever) both are scored on the same test queries and each metric is compared with a paired bootstrap
over the queries.

```bash
hf-ext evaluate fede4rag --model runs/fede4rag_own --data pairs.csv --baseline base --output eval.json
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser

from hf_ext.core.records import Comparison


@dataclass
class FedE4RAGEvaluateArguments:
    """Arguments of `hf-ext evaluate fede4rag`.

    Args:
        model (`str`): the trained retriever's folder (the output of `hf-ext train fede4rag`).
        data (`str`): the (query, passage, client) rows it was trained on (same forms as train's `--data`).
        output (`str`, *optional*): a JSON file for the metrics (and the comparison).
        baseline (`str`, *optional*): a retriever or encoder folder, or `base` (the artifact's own base encoder).
        seed (`int`, *optional*), test_fraction (`float`, *optional*): the split (default: the record's).
        max_query_length, max_passage_length (`int`, *optional*): truncation (default: the record's).
    """

    model: str = field(metadata={"help": "the trained retriever folder (hf-ext train fede4rag --output_dir)"})
    data: str = field(metadata={"help": "the (query, passage, client) rows: file, folder or Hub id"})
    output: str | None = field(default=None, metadata={"help": "write the metrics as JSON here"})
    baseline: str | None = field(
        default=None,
        metadata={"help": "a retriever / encoder folder, or 'base' (the encoder the model was trained from)"},
    )
    seed: int | None = field(default=None, metadata={"help": "split seed (default: the training record's)"})
    test_fraction: float | None = field(default=None, metadata={"help": "test share (default: the record's)"})
    max_query_length: int | None = field(default=None, metadata={"help": "query truncation (default: the record's)"})
    max_passage_length: int | None = field(default=None, metadata={"help": "passage truncation (default: record's)"})


def build_parser() -> HfArgumentParser:
    """The `hf-ext evaluate fede4rag` parser (`HfArgumentParser` over [`FedE4RAGEvaluateArguments`])."""
    return HfArgumentParser(FedE4RAGEvaluateArguments, prog="hf-ext evaluate fede4rag", description=__doc__)


def load_retriever(path: str, **config_overrides):
    """A retriever and its tokenizer from a folder: a saved FedE4RAG retriever (its own class), else any BERT or
    sentence-transformers encoder folder (wrapped as a FedE4RAG retriever with mean pooling; `config_overrides`
    are [`~hf_ext.fede4rag.FedE4RAGConfig`] fields such as the truncation lengths)."""
    import json

    from transformers import AutoTokenizer

    from .encoder import load_pretrained_retriever
    from .modeling_fede4rag import FedE4RAGRetriever

    folder = Path(path)
    if not folder.is_dir():
        raise ValueError(f"retriever folder {path!r} does not exist")
    config = folder / "config.json"
    if (
        config.is_file()
        and json.loads(config.read_text()).get("model_type") == FedE4RAGRetriever.config_class.model_type
    ):
        return FedE4RAGRetriever.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    if not config.is_file() and (folder / "0_Transformer" / "config.json").is_file():
        folder = folder / "0_Transformer"  # a sentence-transformers folder whose encoder is a module
    return load_pretrained_retriever(folder, **config_overrides)


def main(argv: list[str] | None = None) -> dict:
    (args,) = build_parser().parse_args_into_dataclasses(args=argv, look_for_args_file=False)
    from hf_ext.core.records import load_training_record, metric, report_evaluation
    from hf_ext.core.reporting import paired_bootstrap

    from .data import load_user_pairs
    from .encoder import minilm_path
    from .evaluation import USER_METRICS, mean_scores, score_user_pairs

    record = load_training_record(args.model) or {}
    run = record.get("config", {})
    seed = args.seed if args.seed is not None else int(run.get("seed", 0))
    test = args.test_fraction if args.test_fraction is not None else float(run.get("test_fraction", 0.1))
    lengths = {
        "max_query_length": args.max_query_length or int(run.get("max_query_length", 64)),
        "max_passage_length": args.max_passage_length or int(run.get("max_passage_length", 128)),
    }
    up = load_user_pairs(args.data, test=test, seed=seed)  # UserDataError before any model is loaded
    model, tokenizer = load_retriever(args.model)
    scores = score_user_pairs(model, tokenizer, up, **lengths)
    name = Path(args.data).name if Path(args.data).exists() else args.data
    metrics = [
        metric(k, k.split(".")[-1].split("@")[0], v, dataset=name, higher_is_better=True)
        for k, v in mean_scores(scores).items()
    ]
    comparison = None
    if args.baseline:
        base = args.baseline
        if base == "base":
            base = run.get("encoder_path") or str(minilm_path())
        base_model, base_tokenizer = load_retriever(base, **lengths)
        base_scores = score_user_pairs(base_model, base_tokenizer, up, **lengths)
        comparison = {}
        for k in USER_METRICS:
            diff = paired_bootstrap(scores[k], base_scores[k], seed=seed)
            comparison[k] = Comparison(diff.to_dict() | {"baseline": base, "cell": diff.cell()})
    header = (
        f"fede4rag {args.model} on {args.data}: {len(scores['mrr'])} test queries of {len(up.clients)} clients, "
        f"{len(up.passages)} passages (split seed {seed}, test share {test})"
    )
    return report_evaluation(metrics, output=args.output, comparison=comparison, header=header)


__all__ = ["FedE4RAGEvaluateArguments", "build_parser", "load_retriever", "main"]
