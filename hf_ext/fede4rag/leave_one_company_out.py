"""Leave-one-company-out (LOCO) transfer: a federation of the four other companies, scored on the left-out company's
held-out questions — over its own references (`own`) and over all five companies' (`union`) — next to the same
seed's zero-shot MiniLM and the 5-client federation on that company (in-domain, where the company was a client).

The left-out company is never a node: the run's `client_companies` lists the four others, so its pairs are in no
client's training data (`tests/fede4rag/test_leave_one_company_out.py` pins it); its held-out questions are the same
ones the in-domain evaluation uses, so the three rows of a company's table score the same questions over the same
corpora. Called by `hf-ext reproduce fede4rag --leave-out ...`.
"""

from __future__ import annotations

from dataclasses import replace

from .data import COMPANIES
from .report import cell, seed_differences, seed_summary
from .task import RunConfig

LOCO_SETTINGS = ("fedavg", "fede4rag")  # federated settings that may be trained without the left-out company
LOCO_METRICS = ("hit@1", "hit@10", "mrr", "ndcg@10")


def company_index(value: str | int) -> int:
    """A company given by index (`"4"`) or name (`"AES"`, any case) → its index in [`COMPANIES`]."""
    text = str(value).strip()
    if text.isdigit() and int(text) < len(COMPANIES):
        return int(text)
    names = [c.lower() for c in COMPANIES]
    if text.lower() in names:
        return names.index(text.lower())
    raise ValueError(f"unknown company {value!r}: give an index 0-{len(COMPANIES) - 1} or one of {COMPANIES}")


def loco_run(run: RunConfig, left_out: int) -> RunConfig:
    """The run without company `left_out`: the other companies are the nodes (in [`COMPANIES`] order)."""
    others = [i for i in range(len(COMPANIES)) if i != left_out]
    if len(others) == len(COMPANIES):
        raise ValueError(f"left_out must be a company index in [0, {len(COMPANIES) - 1}], got {left_out}")
    return replace(run, client_companies=",".join(map(str, others)))


def run_loco(setting: str, run: RunConfig, left_out: int, suite, engine: str = "simulation") -> dict:
    """Trains `setting` on Flower with the four companies other than `left_out` and scores the result on every
    company's held-out questions; `transfer` is the left-out company's row (the unseen company).

    Returns:
        `{"setting", "seed", "left_out", "clients", "transfer": {"own": ..., "union": ...}, "in_domain": {...},
        "steps", "reference_also_trained"}`; `in_domain` holds the four clients' own rows (for reference),
        `reference_also_trained` counts left-out questions whose golden passage text is also a training positive of
        a client (another company's identical boilerplate passage).
    """
    from .federation import final_model
    from .flower_run import run_federated
    from .task import client_heldout, client_pairs, with_setting

    if setting not in LOCO_SETTINGS:
        raise ValueError(f"{setting!r} has no leave-one-company-out variant; choose from {LOCO_SETTINGS}")
    loco = loco_run(run, left_out)
    name = COMPANIES[left_out]
    if left_out in loco.companies:  # the whole point: never train on the company that is scored
        raise AssertionError(f"{name} is a node of its own leave-one-out run")
    res = run_federated(setting, loco, engine=engine)
    model, _ = final_model(with_setting(loco, setting), res["adapter"])
    metrics = suite.in_domain.evaluate(model)
    trained = {p.reference for i in loco.companies for p in client_pairs(i, loco)}
    stats = res["round_stats"]
    return {
        "setting": setting,
        "seed": run.seed,
        "left_out": name,
        "clients": [COMPANIES[i] for i in loco.companies],
        "transfer": {"own": metrics["own"][name], "union": metrics["union"][name]},
        "in_domain": {COMPANIES[i]: metrics["own"][COMPANIES[i]] for i in loco.companies},
        "steps": {
            "total": int(sum(r["steps-total"] for r in stats)),
            "sequential": int(sum(r["steps-max"] for r in stats)),
        },
        "n_questions": len(client_heldout(left_out, run)),
        "reference_also_trained": sum(p.reference in trained for p in client_heldout(left_out, run)),
    }


def _flat(own: dict, union: dict) -> dict[str, float]:
    return {**{f"own.{k}": own[k] for k in LOCO_METRICS}, **{f"union.{k}": union[k] for k in LOCO_METRICS}}


def summarize_loco(done: dict, loco_done: dict, seeds, left_out, settings) -> dict:
    """Per left-out company: zero-shot, each 5-client setting and its LOCO variant on that company (mean ± sample SD
    over seeds, per seed kept), the paired per-seed differences LOCO − zero-shot (transfer gain) and LOCO − 5-client
    (what leaving the company out costs); then the macro mean over the left-out companies.

    Args:
        done (`dict`): `(setting, seed)` → the 5-client run (as `reproduce` collects it; needs `zero-shot`).
        loco_done (`dict`): `(setting, seed, left_out_index)` → [`run_loco`]'s result.
    """
    out: dict = {
        "left_out": [COMPANIES[c] for c in left_out],
        "settings": list(settings),
        "seeds": list(seeds),
        "per_company": {},
    }

    def five(setting, seed, name):
        d = done[(setting, seed)]["metrics"]["in_domain"]
        return _flat(d["own"][name], d["union"][name])

    for c in left_out:
        name = COMPANIES[c]
        rows = {"zero-shot": [five("zero-shot", s, name) for s in seeds]}
        for setting in settings:
            if all((setting, s) in done for s in seeds):
                rows[f"{setting} (5 clients)"] = [five(setting, s, name) for s in seeds]
            rows[f"{setting} (LOCO)"] = [_flat(**loco_done[(setting, s, c)]["transfer"]) for s in seeds]
        entry = {
            "n_questions": loco_done[(settings[0], seeds[0], c)]["n_questions"],
            "reference_also_trained": loco_done[(settings[0], seeds[0], c)]["reference_also_trained"],
            "rows": {k: seed_summary(v) for k, v in rows.items()},
            "differences": {},
        }
        for setting in settings:
            loco = rows[f"{setting} (LOCO)"]
            for base in ("zero-shot", f"{setting} (5 clients)"):
                if base in rows:
                    entry["differences"][f"{setting} (LOCO) - {base}"] = seed_differences(loco, rows[base])
        out["per_company"][name] = entry
    first = next(iter(out["per_company"].values()))
    # the macro mean over the left-out companies (of their means over seeds)
    out["mean"] = {
        key: seed_summary([e["rows"][key]["mean"] for e in out["per_company"].values()])["mean"]
        for key in first["rows"]
    }
    # paired over (company, seed): one difference per left-out company and seed, summarised with its sample SD and
    # 95 % t interval
    out["mean_differences"] = {}
    for key in first["differences"]:
        d = [v for e in out["per_company"].values() for v in e["differences"][key]["per_seed"]]
        out["mean_differences"][key] = seed_differences(d, [dict.fromkeys(v, 0.0) for v in d])
    return out


def format_loco(loco: dict) -> str:
    """A plain-text table per left-out company and the mean (own hit@1, own MRR, union hit@1, union MRR)."""
    cols = ("own.hit@1", "own.mrr", "union.hit@1", "union.mrr")
    lines = [
        f"leave-one-company-out (trained on the 4 other companies), seeds {loco['seeds']}; mean ± sample SD over "
        "seeds, differences paired per seed [95 % t interval]",
        f"  {'left out / row':<42}" + "".join(f"{c:>32}" for c in cols),
    ]
    for name, e in loco["per_company"].items():
        lines.append(f"  {name} ({e['n_questions']} held-out questions)")
        for key, r in {**e["rows"], **e["differences"]}.items():
            lines.append(
                f"    {key:<40}"
                + "".join(f"{cell(r, c, signed=' - ' in key, interval=' - ' in key):>32}" for c in cols)
            )
    lines.append(f"  mean over {len(loco['per_company'])} left-out companies")
    for key, m in loco["mean"].items():
        lines.append(f"    {key:<40}" + "".join(f"{m[c]:>32.3f}" for c in cols))
    for key, r in loco["mean_differences"].items():
        lines.append(f"    {key:<40}" + "".join(f"{cell(r, c, signed=True, interval=True):>32}" for c in cols))
    return "\n".join(lines)


__all__ = ["LOCO_SETTINGS", "company_index", "format_loco", "loco_run", "run_loco", "summarize_loco"]
