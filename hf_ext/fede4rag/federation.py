"""One setting of the FedE4RAG reproduction, from training to scores: zero-shot (no training), local-only and
centralized (no federation: the client code trained in this process), and the federated settings, which run the
Flower ServerApp and ClientApps on Flower's simulation engine ([`~hf_ext.fede4rag.flower_run.run_federated`]).
Every trained model is scored by the same [`~hf_ext.fede4rag.evaluation.EvaluationSuite`].
"""

from __future__ import annotations

from .data import COMPANIES
from .encoder import adapter_arrays, load_trainable_state
from .task import FedE4RAGClient, RunConfig, build_model, with_setting


def _combine_local(per_model: dict[str, dict], sizes: dict[str, int]) -> dict:
    """Local-only: each company's own model scored on its own held-out questions; FinanceBench averaged over the
    five models; the micro mean weights each company's union metrics by its number of held-out questions."""
    from .evaluation import _mean

    own = {c: m["in_domain"]["own"][c] for c, m in per_model.items()}
    union = {c: m["in_domain"]["union"][c] for c, m in per_model.items()}
    total = sum(sizes.values())
    micro = {k: float(sum(union[c][k] * sizes[c] for c in union) / total) for k in next(iter(union.values()))}
    return {
        "financebench": _mean({c: m["financebench"] for c, m in per_model.items()}),
        "in_domain": {
            "own": own,
            "union": union,
            "own_mean": _mean(own),
            "union_mean": _mean(union),
            "union_micro": micro,
        },
    }


def run_setting(setting: str, run: RunConfig, suite, engine: str = "simulation") -> dict:
    """Trains one of the settings and returns its metrics (`suite.evaluate`), its gradient-step budget and, per
    setting, extra records. Federated settings run on Flower ([`~hf_ext.fede4rag.flower_run.run_federated`]);
    local-only and centralized have no federation and train the same client code in this process."""
    from .task import FEDERATED

    run = with_setting(run, setting)
    model, tokenizer = build_model(run)
    out: dict = {"setting": setting, "seed": run.seed}
    companies = [COMPANIES[i] for i in run.companies]
    if setting == "zero-shot":  # LoRA B = 0: the adapter is the identity, this is MiniLM as released
        out["metrics"] = suite.evaluate(model, companies)
        out["steps"] = {"total": 0, "sequential": 0}
        return out
    init_state = adapter_arrays(model)
    if setting.startswith("centralized"):
        client = FedE4RAGClient(None, run, model, tokenizer)
        for _ in range(run.rounds):
            client.fit(kd=False)
        out["metrics"] = suite.evaluate(model, companies)
        out["num_examples"] = client.num_examples
        out["steps"] = {"total": client.steps_done, "sequential": client.steps_done}
        return out
    if setting == "local-only":  # each company alone for as many epochs; scored one by one
        per_model, sizes, steps = {}, {}, []
        for company in run.companies:
            c = FedE4RAGClient(company, run, model, tokenizer)
            c.set_state(init_state)
            for _ in range(run.rounds):
                c.fit(kd=False)
            name = COMPANIES[company]
            per_model[name] = suite.evaluate(model, [name])
            sizes[name] = len(suite.in_domain.questions_of(name))
            steps.append(c.steps_done)
        out["metrics"] = _combine_local(per_model, sizes)
        out["steps"] = {"total": int(sum(steps)), "sequential": int(max(steps))}
        return out
    if setting not in FEDERATED:
        raise ValueError(f"unknown setting {setting!r}")
    from .flower_run import run_federated

    res = run_federated(setting, run, engine=engine)
    load_trainable_state(model, res["adapter"])
    out["metrics"] = suite.evaluate(model, companies)
    out["sampled"] = res["sampled"]
    stats = res["round_stats"]
    out["steps"] = {
        "total": int(sum(r["steps-total"] for r in stats)),
        "sequential": int(sum(r["steps-max"] for r in stats)),
    }
    out["round_stats"] = stats
    out["rejected"] = res["rejected"]
    out["adapter"] = res["adapter"]
    return out


def final_model(run: RunConfig, state):
    """The run's model with `state` loaded in its adapter."""
    model, tokenizer = build_model(run)
    load_trainable_state(model, state)
    return model, tokenizer


__all__ = ["final_model", "run_setting"]
