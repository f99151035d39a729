"""The round × λ grid of `--full`: matched client steps across round counts, its jobs, and its stated rules decided
on paired per-seed own MRR through `hf_ext.core.reporting` (closed forms)."""

import pytest

from hf_ext.core.reporting import paired_difference
from hf_ext.fede4rag.grid import cell_name, decide_grid, grid_jobs, grid_rules
from hf_ext.fede4rag.task import RunConfig, round_steps


@pytest.mark.parametrize("rounds", [2, 10, 25])
def test_client_steps_are_matched_across_round_counts(rounds):
    run = RunConfig(rounds=rounds, client_steps=25)
    per_round = [round_steps(run, r) for r in range(rounds)]
    assert sum(per_round) == 25 and min(per_round) >= 1 and max(per_round) - min(per_round) <= 1
    assert round_steps(run, rounds + 3) == per_round[-1]  # a client asked again gets the last share
    assert round_steps(RunConfig(rounds=rounds), 0) == 0  # client_steps = 0: epochs as before


def test_client_steps_below_rounds_is_refused_by_name():
    with pytest.raises(ValueError, match="client_steps"):
        RunConfig(rounds=25, client_steps=10)
    with pytest.raises(ValueError, match="client_steps"):
        RunConfig(client_steps=-1)


def test_grid_jobs_cover_every_cell_and_seed():
    jobs = grid_jobs(RunConfig(client_steps=25), [0, 1])
    names = [(n, r.seed) for n, _, r in jobs]
    assert len(names) == len(set(names)) == 2 * (2 + 12 + 1)
    by = {(n, r.seed): (s, r) for n, s, r in jobs}
    s, r = by[(cell_name(25, 10.0), 1)]
    assert s == "fede4rag" and r.rounds == 25 and r.kd_lambda == 10.0 and r.client_steps == 25
    s, r = by[(cell_name(10, 0.0), 0)]
    assert s == "fedavg" and r.rounds == 10
    s, r = by[("R25 one-client λ=100", 0)]
    assert s == "fede4rag-one-client" and r.kd_lambda == 100.0


def test_grid_rules_decided_on_paired_seeds():
    rules = grid_rules((2, 25), (0.0, 100.0))
    assert len(rules) == 2 * 3  # per R: KD ≥ FedAvg, FedAvg > local-only, KD halves the gain
    own = {
        "zero-shot": [0.50, 0.52, 0.48],
        "local-only": [0.60, 0.61, 0.59],
        "R2 fedavg": [0.58, 0.60, 0.57],
        "R2 λ=100": [0.52, 0.54, 0.50],  # gain +0.02 against FedAvg's +0.083: KD more than halves it
        "R25 fedavg": [0.58, 0.60, 0.57],
        "R25 λ=100": [0.59, 0.61, 0.58],  # KD keeps the gain (+0.01 over FedAvg on every seed)
    }
    out = {v.claim: v for v in decide_grid(own, rules)}
    assert out["KD (λ = 100) halves FedAvg's gain at 2 rounds"].verdict == "confirmed"
    assert out["KD (λ = 100) halves FedAvg's gain at 25 rounds"].verdict == "refuted"
    assert out["FedE4RAG (λ = 100) beats FedAvg at 2 rounds"].verdict == "refuted"
    assert out["FedE4RAG (λ = 100) beats FedAvg at 25 rounds"].verdict == "confirmed"
    assert out["FedAvg beats local-only at 2 rounds (matched client steps)"].verdict == "refuted"
    halves = out["KD (λ = 100) halves FedAvg's gain at 2 rounds"].difference
    # (F − Z) − 2 (K − Z) per seed
    expected = paired_difference([0.08 - 0.04, 0.08 - 0.04, 0.09 - 0.04], [0.0, 0.0, 0.0])
    assert halves.mean == pytest.approx(expected.mean) and halves.ci_low == pytest.approx(expected.ci_low)
    own["local-only"] = [0.49, 0.51, 0.47]  # training does not help: the federated claims have no premise
    out = {v.claim: v for v in decide_grid(own, rules)}
    assert out["FedE4RAG (λ = 100) beats FedAvg at 25 rounds"].verdict == "premise absent"


def _metrics(v):
    from hf_ext.fede4rag.data import COMPANIES

    row = {k: v for k in ("hit@1", "hit@10", "mrr", "ndcg@10")}
    d = {"own": {c: dict(row) for c in COMPANIES}, "own_mean": row, "union_mean": row, "union_micro": row}
    return {"financebench": {}, "in_domain": d}


def test_a_grid_cut_short_is_summarised_over_its_complete_paired_cells(tmp_path):
    """`--grid-summary`: cells finished on every seed are summarised and the rules with all their arms decided; a
    cell with a missing seed and the rules that need it are reported as not run."""
    import json

    from hf_ext.core.results_schema import validate_results
    from hf_ext.fede4rag.grid import summarize_progress

    own = {"zero-shot": 0.50, "local-only": 0.60, "R2 fedavg": 0.58, "R2 λ=100": 0.52, "R25 fedavg": 0.59}
    lines = []
    for name, v in own.items():
        for seed in (0, 1, 2):
            if name == "R25 fedavg" and seed == 2:
                continue  # cut before its last seed
            metrics = _metrics(v + 0.01 * seed + (0.003 * seed**2 if name != "zero-shot" else 0))
            steps = {"total": 125, "sequential": 25}
            lines.append(json.dumps({"name": name, "seed": seed, "seconds": 1.0, "metrics": metrics, "steps": steps}))
    (tmp_path / "progress.jsonl").write_text("\n".join(lines) + "\n")
    res = summarize_progress(tmp_path, rounds=(2, 25), lambdas=(0.0, 100.0))
    assert res["seeds"] == [0, 1, 2] and "R25 fedavg" not in res["settings"]
    claims = {v["claim"]: v["verdict"] for v in res["verdicts"]}
    assert set(claims) == {
        "FedE4RAG (λ = 100) beats FedAvg at 2 rounds",
        "FedAvg beats local-only at 2 rounds (matched client steps)",
        "KD (λ = 100) halves FedAvg's gain at 2 rounds",
    }
    assert claims["FedE4RAG (λ = 100) beats FedAvg at 2 rounds"] == "refuted"
    assert "FedE4RAG (λ = 100) beats FedAvg at 25 rounds" in res["rules_not_run"]
    validate_results(json.loads((tmp_path / "results.json").read_text()))


def test_a_finished_job_is_reused_only_with_the_same_run_config(tmp_path):
    """`run_grid` skips a job whose row is already in `progress.jsonl` only when the row's run config equals the
    job's (`cache_dir` aside); another λ, seed or step budget is rerun."""
    import json
    from dataclasses import replace

    from hf_ext.fede4rag.grid import _finished_rows, _same_run

    run = RunConfig(rounds=25, client_steps=25, max_passage_length=64, cache_dir="/a")
    recorded = {**run.__dict__, "lora_layers": list(run.lora_layers)}
    progress = tmp_path / "progress.jsonl"
    rows = [{"name": "R25 fedavg", "seed": 0, "run": recorded, "v": 1}, {"name": "R25 fedavg", "seed": 0, "v": 2}]
    progress.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert _finished_rows(progress)[("R25 fedavg", 0)]["v"] == 2  # the last row of a job wins
    assert _finished_rows(tmp_path / "none.jsonl") == {}
    assert _same_run(recorded, replace(run, cache_dir="/elsewhere"))
    for change in ({"kd_lambda": 0.0}, {"seed": 1}, {"client_steps": 50}, {"max_passage_length": 128}):
        assert not _same_run(recorded, replace(run, **change)), change


@pytest.mark.parametrize(
    "module, job", [("hf_ext.fede4rag.grid", "_job"), ("hf_ext.fede4rag.reproduce", "_setting_job")]
)
def test_a_setting_trains_over_a_frozen_heap(monkeypatch, module, job):
    """Every `Trainer.train()` opens with a full `gc.collect()`; a grid cell and a quick setting run inside
    `hf_ext.core.gc_freeze.gc_frozen`, so that collection skips the process's long-lived heap (unfrozen after)."""
    import gc
    import importlib

    from hf_ext.fede4rag import federation, grid

    gc.unfreeze()  # a clean start: nothing frozen by an earlier test
    seen = []

    def fake_run_setting(setting, run, suite, engine="local"):
        seen.append(gc.get_freeze_count())
        return {"metrics": {}, "steps": {}}

    monkeypatch.setattr(federation, "run_setting", fake_run_setting)
    target = importlib.import_module(module)
    monkeypatch.setattr(target, "_suite", lambda run: None, raising=False)
    monkeypatch.setattr(grid, "_InDomainOnly", lambda suite: None)
    monkeypatch.setattr("hf_ext.fede4rag.evaluation.EvaluationSuite", lambda run: None)
    args = ("cell", "fedavg", RunConfig(), "local") if job == "_job" else ("fedavg", RunConfig(), "local")
    getattr(target, job)(*args)
    assert seen and seen[0] > 0
    assert gc.get_freeze_count() == 0
