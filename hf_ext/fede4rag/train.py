"""`hf-ext train fede4rag`: trains one FedE4RAG retriever on Flower and saves it as a Hub artifact.

The federated settings run the ServerApp and ClientApps on Flower's simulation engine (one SuperNode per company;
`--engine local` runs the same apps on an in-process grid); `centralized` pools the companies' pairs in this
process. The result is scored like `hf-ext reproduce` (in-domain: each client's held-out questions; FinanceBench)
and saved under `--output_dir` (a folder that loads with `AutoModel` and, without remote code, with
`SentenceTransformer`), with `metrics.json` and `training_record.json`.

Example: `hf-ext train fede4rag --setting fede4rag-ckks --rounds 3 --output_dir runs/fede4rag_train`.
The flags are parsed by `transformers.HfArgumentParser` from [`FedE4RAGTrainArguments`]; each has an underscore and a
dashed spelling, and the older names (`--out`, `--lr`) still work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from transformers import HfArgumentParser

from hf_ext.core.paths import work_dir

from .task import FEDERATED, RunConfig

TRAINABLE = (*FEDERATED, "centralized", "centralized-tau1")
_RUN = RunConfig()


@dataclass
class FedE4RAGTrainArguments:
    """The arguments of `hf-ext train fede4rag` (the run's knobs; the model itself is all-MiniLM-L6-v2 + LoRA).

    Args:
        setting (`str`, defaults to `"fede4rag"`): what to train, one of [`TRAINABLE`].
        output_dir (`str`): folder of the saved retriever (default `$HF_EXT_HOME/fede4rag/train`).
        engine (`str`, defaults to `"simulation"`): Flower engine, `simulation` (Ray) or `local` (in-process grid).
        rounds, seed, train_fraction, max_passage_length, learning_rate, temperature, kd_lambda, lora_rank: as
            [`~hf_ext.fede4rag.task.RunConfig`] (checked there, naming the field).
        client_companies (`str`): company indices of the nodes, e.g. `0,1,2,4` (empty = all five).
        lora_layers (`str`): encoder layers with a LoRA adapter, comma-separated (default: the top one).
        encoder_path (`str`): pretrained BERT folder (default: all-MiniLM-L6-v2); also `--base_model`.
        data (`str`): the user's (query, passage, client) rows ([`~hf_ext.fede4rag.data.PAIRS_SCHEMA`]); each
            distinct `client` value is one federated client, and `client_companies` indexes the sorted names.
        test_fraction (`float`): with `data`, the seeded test share (recorded; `hf-ext evaluate` uses the same rows).
        no_eval (`bool`): skip the retrieval evaluation.
    """

    setting: str = field(default="fede4rag", metadata={"help": "what to train", "choices": TRAINABLE})
    output_dir: str = field(
        default="", metadata={"aliases": ["--out"], "help": "output folder (default $HF_EXT_HOME/fede4rag/train)"}
    )
    engine: str = field(
        default="simulation",
        metadata={
            "help": "Flower engine: simulation (Ray) or local (in-process grid)",
            "choices": ("simulation", "local"),
        },
    )
    rounds: int = field(default=_RUN.rounds, metadata={"help": "federated rounds (centralized: epochs)"})
    seed: int = field(default=0, metadata={"help": "LoRA init, data order, holdout and client sampling"})
    train_fraction: float = field(default=_RUN.train_fraction, metadata={"help": "share of each client's pairs"})
    max_passage_length: int = field(default=_RUN.max_passage_length, metadata={"help": "passage truncation (tokens)"})
    learning_rate: float = field(
        default=_RUN.learning_rate, metadata={"aliases": ["--lr"], "help": "AdamW learning rate (LoRA factors)"}
    )
    temperature: float = field(default=_RUN.temperature, metadata={"help": "contrastive τ (authors': 1)"})
    kd_lambda: float = field(default=_RUN.kd_lambda, metadata={"help": "weight λ of the KD term (0 = FedAvg)"})
    client_companies: str = field(default="", metadata={"help": "company indices of the nodes, e.g. 0,1,2,4"})
    lora_layers: str = field(
        default=",".join(map(str, _RUN.lora_layers)),
        metadata={"help": "encoder layers with a LoRA adapter, e.g. 4,5 (default: the top one)"},
    )
    lora_rank: int = field(default=_RUN.lora_rank, metadata={"help": "LoRA rank"})
    encoder_path: str = field(
        default="",
        metadata={
            "aliases": ["--base_model", "--base-model"],
            "help": "the encoder to start from: a BERT / sentence-transformers folder (default: all-MiniLM-L6-v2)",
        },
    )
    data: str = field(
        default="",
        metadata={
            "help": "your (query, passage, client) rows: a CSV / JSON / JSONL / Parquet file, a folder with "
            "train/test files, or a Hub dataset id (default: the shipped FinanceBench-derived pairs)"
        },
    )
    test_fraction: float = field(
        default=0.1, metadata={"help": "with --data: seeded test share of the rows (unless the data has a test split)"}
    )
    no_eval: bool = field(default=False, metadata={"help": "skip the retrieval evaluation"})

    def __post_init__(self):
        if self.setting not in TRAINABLE:
            raise ValueError(f"--setting must be one of {TRAINABLE}, got {self.setting!r}")
        if self.engine not in ("simulation", "local"):
            raise ValueError(f"--engine must be 'simulation' or 'local', got {self.engine!r}")
        try:
            self.layer_indices = tuple(int(v) for v in str(self.lora_layers).split(",") if v.strip())
        except ValueError:
            raise ValueError(f"--lora_layers must be comma-separated integers, got {self.lora_layers!r}") from None

    def run_config(self, cache_dir: str) -> RunConfig:
        """The [`RunConfig`] these arguments describe (its checks name any out-of-range field)."""
        return RunConfig(
            rounds=self.rounds,
            seed=self.seed,
            train_fraction=self.train_fraction,
            max_passage_length=self.max_passage_length,
            learning_rate=self.learning_rate,
            temperature=self.temperature,
            kd_lambda=self.kd_lambda,
            client_companies=self.client_companies,
            encoder_path=self.encoder_path,
            user_data=self.data,
            test_fraction=self.test_fraction,
            lora_layers=self.layer_indices,
            lora_rank=self.lora_rank,
            cache_dir=cache_dir,
        )


def build_parser() -> HfArgumentParser:
    """The `hf-ext train fede4rag` parser (`transformers.HfArgumentParser` over [`FedE4RAGTrainArguments`])."""
    return HfArgumentParser(FedE4RAGTrainArguments, prog="hf-ext train fede4rag", description=__doc__)


def parse_args(argv: list[str] | None = None) -> FedE4RAGTrainArguments:
    (args,) = build_parser().parse_args_into_dataclasses(args=argv, look_for_args_file=False)
    return args


DEFAULT_BASE = "sentence-transformers/all-MiniLM-L6-v2"


def hub_base(encoder_path: str) -> str | None:
    """The record's `base_model`: MiniLM's Hub id by default, a Hub id as given, `None` for a local folder (its
    path is in the record's config)."""
    from hf_ext.core.user_data import is_hub_id

    if not encoder_path:
        return DEFAULT_BASE
    return encoder_path if is_hub_id(encoder_path) else None


def main(argv: list[str] | None = None) -> dict:
    ns = parse_args(argv)
    out = Path(ns.output_dir) if ns.output_dir else work_dir("fede4rag", "train")
    run = ns.run_config(cache_dir=str(out.parent / f".{out.name}-cache"))
    if ns.data:
        from .task import user_pairs

        up = user_pairs(run)  # reads and checks the data before any work (UserDataError names the column)
        print(f"{ns.data}: clients {list(up.clients)}, {len(up.train)} training pairs, {len(up.test)} test pairs")
    from .encoder import adapter_arrays, save_retriever
    from .federation import final_model
    from .task import FedE4RAGClient, build_model, with_setting

    run = with_setting(run, ns.setting)
    summary: dict = {
        "setting": ns.setting,
        "engine": ns.engine,
        "run": {**run.__dict__, "lora_layers": list(run.lora_layers)},
    }
    if ns.setting in FEDERATED:
        from .flower_run import run_federated

        res = run_federated(ns.setting, run, engine=ns.engine)
        adapter = res["adapter"]
        summary.update(round_stats=res["round_stats"], rejected=res["rejected"], sampled=res["sampled"])
    else:
        model, tokenizer = build_model(run)
        client = FedE4RAGClient(None, run, model, tokenizer)
        for _ in range(run.rounds):
            client.fit(kd=False)
        adapter = adapter_arrays(model)
        summary["steps"] = client.steps_done
    model, tokenizer = final_model(replace(run, encrypt=False), adapter)
    if ns.data:
        return _save_user_run(ns, argv, run, model, tokenizer, out, summary)
    if not ns.no_eval:
        from .evaluation import EvaluationSuite
        from .reproduce import flat_metrics

        summary["metrics"] = flat_metrics(EvaluationSuite(run).evaluate(model))
    from hf_ext.core.records import metric, save_training_record

    from . import SPEC

    save_retriever(model, tokenizer, out, spec=SPEC)
    m = summary.get("metrics", {})
    save_training_record(
        out,
        method="fede4rag",
        command="hf-ext train fede4rag " + " ".join(argv or []),
        base_model="sentence-transformers/all-MiniLM-L6-v2",
        datasets=[
            {
                "name": "financebench-derived-qa",
                "hub_id": None,
                "description": "FinanceBench-style QA pairs over 10-K passages (shipped offline, 5 clients)",
            }
        ],
        metrics=[
            metric(k, k.split(".")[-1].split("@")[0], v, dataset="financebench-derived-qa", higher_is_better=True)
            for k, v in m.items()
            if k in ("own.hit@1", "own.mrr", "union.mrr", "fb.mrr")
        ],
        config=summary["run"],
        skip_nonfinite=True,
        notes=f"{ns.setting} after {run.rounds} rounds, seed {run.seed}",
    )
    (out / "metrics.json").write_text(json.dumps(summary, indent=2, default=str))
    if m:
        print(
            f"{ns.setting}: own hit@1 {m['own.hit@1']:.3f}, own MRR {m['own.mrr']:.3f}, union MRR "
            f"{m['union.mrr']:.3f}, FinanceBench MRR {m['fb.mrr']:.3f}"
        )
    print(f"saved the retriever to {out}")
    return summary


def _save_user_run(ns, argv, run, model, tokenizer, out: Path, summary: dict) -> dict:
    """Saves the retriever trained on the user's pairs and scores the saved artifact (as `hf-ext evaluate` will)
    on their test split; the record keeps the data's fingerprint, the split and the metrics."""
    from hf_ext.core.records import metric, save_training_record
    from hf_ext.core.user_data import dataset_entry, load_user_data

    from . import SPEC
    from .data import PAIRS_SCHEMA
    from .encoder import save_retriever
    from .evaluation import mean_scores, score_user_pairs
    from .modeling_fede4rag import FedE4RAGRetriever
    from .task import user_pairs

    up = user_pairs(run)
    save_retriever(model, tokenizer, out, spec=SPEC)
    entry = dataset_entry(ns.data, load_user_data(ns.data, schema=PAIRS_SCHEMA))
    summary["clients"] = list(up.clients)
    summary["split"] = {"seed": run.seed, "test_fraction": run.test_fraction, "train": len(up.train)}
    summary["split"]["test"] = len(up.test)
    if not ns.no_eval:
        saved = FedE4RAGRetriever.from_pretrained(out).eval()
        summary["metrics"] = mean_scores(
            score_user_pairs(
                saved, tokenizer, up, max_query_length=run.max_query_length, max_passage_length=run.max_passage_length
            )
        )
    m = summary.get("metrics", {})
    save_training_record(
        out,
        method="fede4rag",
        command="hf-ext train fede4rag " + " ".join(argv or []),
        base_model=hub_base(run.encoder_path),
        datasets=[entry],
        metrics=[
            metric(k, k.split(".")[-1].split("@")[0], v, dataset=entry["name"], higher_is_better=True)
            for k, v in m.items()
        ],
        config={**summary["run"], "setting": ns.setting, "clients": list(up.clients), "split": summary["split"]},
        skip_nonfinite=True,
        notes=f"{ns.setting} after {run.rounds} rounds on {len(up.clients)} clients, seed {run.seed}",
    )
    (out / "metrics.json").write_text(json.dumps(summary, indent=2, default=str))
    if m:
        print(f"{ns.setting} on {ns.data} (test split): " + ", ".join(f"{k} {v:.3f}" for k, v in m.items()))
    print(f"saved the retriever to {out}")
    return summary


__all__ = ["TRAINABLE", "FedE4RAGTrainArguments", "build_parser", "main", "parse_args"]
