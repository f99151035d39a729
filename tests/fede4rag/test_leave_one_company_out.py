"""Leave-one-company-out transfer: the left-out company is in no client's training data, its table row is computed
on its own held-out questions, and the per-company rows and differences are paired per seed. Also the merge of
seed-by-seed runs."""

import json
from types import SimpleNamespace

import pytest

from hf_ext.fede4rag.data import COMPANIES, load_pairs
from hf_ext.fede4rag.leave_one_company_out import company_index, loco_run, run_loco, summarize_loco
from hf_ext.fede4rag.task import RunConfig, client_heldout, client_pairs

ROW_KEYS = ("hit@1", "hit@10", "mrr", "ndcg@10")


@pytest.mark.parametrize("left_out", range(len(COMPANIES)))
def test_left_out_company_is_in_no_clients_training_data(left_out):
    from hf_ext.fede4rag.client_app import _company

    base = RunConfig(seed=1)
    run = loco_run(base, left_out)
    name = COMPANIES[left_out]
    assert left_out not in run.companies and len(run.companies) == len(COMPANIES) - 1
    their_questions = {p.question for p in load_pairs() if p.company == name}
    for pid in range(len(run.companies)):  # every node, mapped to its company as the ClientApp maps it
        trained = client_pairs(_company(run, SimpleNamespace(node_config={"partition-id": pid})), run)
        assert trained and all(p.company != name for p in trained)
        assert not their_questions & {p.question for p in trained}
    with pytest.raises(ValueError, match="no company"):  # no fifth node that could stand for the left-out one
        _company(run, SimpleNamespace(node_config={"partition-id": len(run.companies)}))
    assert all(p.company != name for p in client_pairs(None, run))  # nor the pooled (centralized) data
    # scored on the same held-out questions as the 5-client in-domain evaluation
    assert client_heldout(left_out, run) == client_heldout(left_out, base)


def _fake_suite():
    def evaluate(model, companies=None):
        assert companies is None  # every company scored, the left-out one included
        return {
            "own": {c: {k: i / 10 for k in ROW_KEYS} for i, c in enumerate(COMPANIES)},
            "union": {c: {k: (i + 5) / 10 for k in ROW_KEYS} for i, c in enumerate(COMPANIES)},
        }

    return SimpleNamespace(in_domain=SimpleNamespace(evaluate=evaluate))


def test_loco_row_is_computed_on_the_left_out_company(monkeypatch):
    import hf_ext.fede4rag.federation as federation
    import hf_ext.fede4rag.flower_run as flower_run

    seen = {}

    def fake_federated(setting, run, engine="simulation"):
        seen.update(setting=setting, companies=run.companies, engine=engine)
        return {"adapter": {}, "round_stats": [{"steps-total": 7, "steps-max": 3}] * 2}

    monkeypatch.setattr(flower_run, "run_federated", fake_federated)
    monkeypatch.setattr(federation, "final_model", lambda run, state: ("model", None))
    res = run_loco("fedavg", RunConfig(), company_index("boeing"), _fake_suite(), engine="local")
    assert seen == {"setting": "fedavg", "companies": (0, 1, 3, 4), "engine": "local"}
    assert res["left_out"] == "BOEING" and "BOEING" not in res["clients"] and "BOEING" not in res["in_domain"]
    assert res["transfer"]["own"]["mrr"] == pytest.approx(0.2) and res["transfer"]["union"]["mrr"] == pytest.approx(0.7)
    assert res["steps"] == {"total": 14, "sequential": 6}
    assert res["n_questions"] == len(client_heldout(2, RunConfig()))
    with pytest.raises(ValueError, match="leave-one-company-out"):
        run_loco("fede4rag-ckks", RunConfig(), 2, _fake_suite())


def test_company_index_and_loco_run_checks():
    assert company_index("4") == company_index("aes") == 4
    with pytest.raises(ValueError, match="unknown company"):
        company_index("ACME")
    with pytest.raises(ValueError, match="left_out"):
        loco_run(RunConfig(), 7)


def _in_domain(values: dict[str, float]) -> dict:
    return {
        "own": {c: {k: v for k in ROW_KEYS} for c, v in values.items()},
        "union": {c: {k: v / 2 for k in ROW_KEYS} for c, v in values.items()},
    }


def test_summary_pairs_each_left_out_company_with_the_same_seeds_runs():
    seeds, left_out = [0, 1], [0, 4]
    done = {}
    for seed in seeds:
        done[("zero-shot", seed)] = {
            "metrics": {"in_domain": _in_domain({c: 0.1 * i + seed for i, c in enumerate(COMPANIES)})}
        }
        done[("fedavg", seed)] = {
            "metrics": {"in_domain": _in_domain({c: 0.1 * i + seed + 0.3 for i, c in enumerate(COMPANIES)})}
        }
    loco_done = {
        ("fedavg", seed, c): {
            "transfer": {"own": {k: 0.1 * c + seed + 0.1 for k in ROW_KEYS}, "union": {k: 0.0 for k in ROW_KEYS}},
            "n_questions": 9,
            "reference_also_trained": 0,
        }
        for seed in seeds
        for c in left_out
    }
    out = summarize_loco(done, loco_done, seeds, left_out, ["fedavg"])
    aes = out["per_company"]["AES"]
    assert aes["rows"]["zero-shot"]["mean"]["own.mrr"] == pytest.approx(0.4 + 0.5)  # AES's row, both seeds
    assert aes["rows"]["fedavg (5 clients)"]["per_seed"][1]["own.mrr"] == pytest.approx(0.4 + 1.3)
    d = aes["differences"]["fedavg (LOCO) - zero-shot"]
    assert d["mean"]["own.mrr"] == pytest.approx(0.1) and d["sd"]["own.mrr"] == pytest.approx(0.0)  # paired
    assert aes["differences"]["fedavg (LOCO) - fedavg (5 clients)"]["mean"]["own.mrr"] == pytest.approx(-0.2)
    assert out["mean"]["zero-shot"]["own.mrr"] == pytest.approx((0.5 + 0.9) / 2)
    assert len(out["mean_differences"]["fedavg (LOCO) - zero-shot"]["per_seed"]) == len(seeds) * len(left_out)


def _metrics(v):
    row = {k: v for k in ROW_KEYS}
    return {
        "financebench": dict(row),
        "in_domain": {
            **_in_domain({c: v for c in COMPANIES}),
            "own_mean": dict(row),
            "union_mean": dict(row),
            "union_micro": dict(row),
        },
    }


def test_merge_summarises_seed_by_seed_runs_and_checks_reruns(tmp_path):
    from hf_ext.fede4rag.reproduce import merge_results

    def write(name, raw):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps({"run": {}, "eval": {}, "raw": raw}))
        return folder

    steps = {"total": 0, "sequential": 0}
    a = write(
        "s0",
        {
            "zero-shot:0": {"metrics": _metrics(0.5), "steps": steps},
            "fedavg:0": {"metrics": _metrics(0.6), "steps": steps},
        },
    )
    b = write(
        "s1",
        {
            "zero-shot:1": {"metrics": _metrics(0.7), "steps": steps},
            "fedavg:1": {"metrics": _metrics(0.7), "steps": steps},
            "fedavg:0": {"metrics": _metrics(0.6), "steps": steps},  # a rerun of seed 0: same numbers
            "local-only:1": {"metrics": _metrics(0.9), "steps": steps},
        },
    )
    out = merge_results([a, b])
    assert out["seeds"] == [0, 1] and list(out["settings"]) == ["zero-shot", "local-only", "fedavg"]
    assert out["settings_missing_a_seed"] == ["local-only"] and out["settings"]["local-only"]["seeds"] == [1]
    assert out["settings"]["local-only"]["minus_zero-shot"]["mean"]["own.mrr"] == pytest.approx(0.2)  # seed 1's
    assert out["rerun_max_abs_difference"] == {"fedavg:0": 0.0}
    d = out["settings"]["fedavg"]["minus_zero-shot"]
    assert d["mean"]["own.mrr"] == pytest.approx(0.05) and d["sd"]["own.mrr"] == pytest.approx(0.05 * 2**0.5)


def test_merge_reads_the_jobs_a_cut_run_finished_from_its_progress_file(tmp_path):
    from hf_ext.fede4rag.reproduce import merge_results

    steps = {"total": 0, "sequential": 0}
    (tmp_path / "results.json").write_text(
        json.dumps(
            {
                "run": {},
                "eval": {},
                "raw": {
                    "zero-shot:0": {"metrics": _metrics(0.5), "steps": steps},
                    "fedavg:0": {"metrics": _metrics(0.6), "steps": steps},
                },
            }
        )
    )
    transfer = {"own": {k: 0.55 for k in ROW_KEYS}, "union": {k: 0.25 for k in ROW_KEYS}}
    lines = [
        {
            "setting": "fedavg",
            "seed": 0,
            "left_out": "AES",
            "transfer": transfer,
            "n_questions": 9,
            "reference_also_trained": 0,
            "seconds": 1.0,
        }
    ]  # the LOCO job finished; results.json was not rewritten
    (tmp_path / "progress.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = merge_results([tmp_path])
    aes = out["loco"]["per_company"]["AES"]
    assert out["loco"]["left_out"] == ["AES"]
    assert aes["differences"]["fedavg (LOCO) - zero-shot"]["mean"]["own.mrr"] == pytest.approx(0.05)


def test_merge_keeps_the_seeds_that_have_every_left_out_company(tmp_path):
    from hf_ext.fede4rag.reproduce import merge_results

    steps = {"total": 0, "sequential": 0}
    raw = {
        f"{s}:{seed}": {"metrics": _metrics(0.5), "steps": steps} for s in ("zero-shot", "fedavg") for seed in (0, 1)
    }
    transfer = {"own": {k: 0.5 for k in ROW_KEYS}, "union": {k: 0.25 for k in ROW_KEYS}}
    loco = {
        f"fedavg:{seed}:{c}": {"transfer": transfer, "n_questions": 1, "reference_also_trained": 0}
        for seed, c in ((0, 0), (0, 4), (1, 0))
    }  # seed 1 was cut before AES
    loco["fede4rag:0:0"] = loco["fedavg:0:0"]  # FedE4RAG at one seed and one company only
    (tmp_path / "results.json").write_text(json.dumps({"run": {}, "eval": {}, "raw": raw, "raw_loco": loco}))
    out = merge_results([tmp_path])["loco"]
    assert out["seeds"] == [0] and out["left_out"] == ["PEPSICO", "AES"] and out["settings"] == ["fedavg"]


def test_merge_takes_a_run_cut_before_its_results_json(tmp_path):
    from hf_ext.fede4rag.reproduce import merge_results

    steps = {"total": 0, "sequential": 0}
    done = tmp_path / "s0"
    done.mkdir()
    (done / "results.json").write_text(
        json.dumps({"run": {}, "eval": {}, "raw": {"zero-shot:0": {"metrics": _metrics(0.5), "steps": steps}}})
    )
    cut = tmp_path / "s1"
    cut.mkdir()
    rows = [
        {"setting": s, "seed": 1, "metrics": _metrics(v), "steps": steps}
        for s, v in (("zero-shot", 0.6), ("local-only", 0.9))
    ]
    (cut / "progress.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    out = merge_results([done, cut])
    assert out["settings"]["zero-shot"]["seeds"] == [0, 1] and out["settings"]["local-only"]["seeds"] == [1]
