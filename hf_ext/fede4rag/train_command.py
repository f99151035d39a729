"""`hf-ext train fede4rag`: trains one FedE4RAG retriever on Flower and saves it as a Hub artifact.

The federated settings run the ServerApp and ClientApps on Flower's simulation engine (one SuperNode per company;
`--engine local` runs the same apps on an in-process grid); `centralized` pools the companies' pairs in this
process. The result is scored like `hf-ext reproduce` (in-domain: each client's held-out questions; FinanceBench)
and saved under `--out` (a folder that loads with `AutoModel` and with `SentenceTransformer`), with `metrics.json`.

Example: `hf-ext train fede4rag --setting fede4rag-ckks --rounds 3 --out runs/fede4rag_train`.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from hf_ext.core.paths import work_dir

from .task import FEDERATED, RunConfig

TRAINABLE = (*FEDERATED, "centralized", "centralized-tau1")


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hf-ext train fede4rag", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--setting", choices=TRAINABLE, default="fede4rag", help="what to train (default: fede4rag)")
    p.add_argument("--out", default=str(work_dir("fede4rag", "train")), help="output folder of the retriever")
    p.add_argument(
        "--engine",
        choices=("simulation", "local"),
        default="simulation",
        help="Flower engine: simulation (Ray) or local (in-process grid)",
    )
    defaults = RunConfig()
    p.add_argument("--rounds", type=int, default=defaults.rounds, help="federated rounds (centralized: epochs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-fraction", type=float, default=defaults.train_fraction)
    p.add_argument("--max-passage-length", type=int, default=defaults.max_passage_length)
    p.add_argument("--lr", type=float, default=defaults.learning_rate, help="AdamW learning rate (LoRA factors)")
    p.add_argument("--temperature", type=float, default=defaults.temperature, help="contrastive τ (authors': 1)")
    p.add_argument("--kd-lambda", type=float, default=defaults.kd_lambda)
    p.add_argument("--client-companies", default="", help="company indices of the nodes, e.g. 0,1,2,4 (default all)")
    p.add_argument(
        "--lora-layers",
        default=",".join(map(str, defaults.lora_layers)),
        help="encoder layers with a LoRA adapter, e.g. 4,5 (default: the top one)",
    )
    p.add_argument("--lora-rank", type=int, default=defaults.lora_rank)
    p.add_argument("--encoder-path", default="", help="pretrained BERT folder (default: all-MiniLM-L6-v2)")
    p.add_argument("--no-eval", action="store_true", help="skip the retrieval evaluation")
    return p


def main(argv: list[str] | None = None) -> dict:
    ns = make_parser().parse_args(argv)
    out = Path(ns.out)
    run = RunConfig(
        rounds=ns.rounds,
        seed=ns.seed,
        train_fraction=ns.train_fraction,
        max_passage_length=ns.max_passage_length,
        learning_rate=ns.lr,
        temperature=ns.temperature,
        kd_lambda=ns.kd_lambda,
        client_companies=ns.client_companies,
        encoder_path=ns.encoder_path,
        lora_layers=tuple(int(v) for v in ns.lora_layers.split(",") if v.strip()),
        lora_rank=ns.lora_rank,
        cache_dir=str(out.parent / f".{out.name}-cache"),
    )
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


__all__ = ["TRAINABLE", "main", "make_parser"]
