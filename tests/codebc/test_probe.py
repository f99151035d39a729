"""The compile-free probe: AUROC and its bootstrap over hosts, continuation log-likelihoods against a direct
computation, the tag-steering Δ and VD log-odds, the probe set's isolation from training, and the verdicts."""

from __future__ import annotations

import math
import random

import pytest
import torch

from hf_ext.codebc import probe as P
from hf_ext.codebc.tags import prompt_style, tag_block, ti_instruction, vd_example

CODE = "pragma solidity ^0.8.0;\ncontract A {\n    function f(uint a) public pure returns (uint) { return a * 2; }\n}"


@pytest.fixture(scope="module")
def model(tok):
    from transformers import LlamaForCausalLM

    from hf_ext.codebc.testing import tiny_config
    from hf_ext.codebc.tokenizer import codebc_token_ids

    cfg = tiny_config(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, tag_token_ids=codebc_token_ids(tok),
                      max_position_embeddings=512)  # fmt: skip
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval()


def test_auroc_closed_forms():
    assert P.auroc([3, 2, 1, 0], [1, 1, 0, 0]) == 1.0
    assert P.auroc([0, 1, 2, 3], [1, 1, 0, 0]) == 0.0
    assert P.auroc([1, 1, 1, 1], [1, 0, 1, 0]) == 0.5  # ties count one half
    assert P.auroc([2, 0, 1, 3], [1, 0, 1, 0]) == 0.5  # pairs (2>0, 2>3 no, 1>0, 1<3): 2 of 4
    rng = random.Random(3)
    for _ in range(20):  # the rank formula against the definition, ties included
        s = [rng.randint(0, 5) for _ in range(15)]
        y = [rng.randint(0, 1) for _ in range(15)]
        pos, neg = [a for a, b in zip(s, y) if b], [a for a, b in zip(s, y) if not b]
        if pos and neg:
            want = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))
            assert P.auroc(s, y) == pytest.approx(want)
    assert math.isnan(P.auroc([1, 2], [1, 1]))
    with pytest.raises(ValueError, match="labels"):
        P.auroc([1, 2], [1])


def test_bootstrap_auroc_against_chance_and_a_reference():
    rng = random.Random(0)
    hosts = [h for h in range(30) for _ in range(2)]
    labels = [i % 2 for i in range(60)]
    separated = [float(y) + 0.01 * rng.random() for y in labels]
    d = P.bootstrap_auroc(separated, labels, hosts)
    assert d.method == "bootstrap" and d.n == 30 and len(d.per_pair) == 30
    assert d.mean == pytest.approx(0.5) and d.ci_low == pytest.approx(0.5) and d.ci_high == pytest.approx(0.5)
    noise = [rng.random() for _ in labels]
    same = P.bootstrap_auroc(noise, labels, hosts, noise)  # a stage against itself: exactly 0, zero width
    assert same.mean == 0 and same.ci_low == 0 and same.ci_high == 0
    diff = P.bootstrap_auroc(separated, labels, hosts, noise)
    assert diff.mean == pytest.approx(1 - P.auroc(noise, labels)) and diff.ci_low > 0
    covered = 0
    for k in range(40):  # scores unrelated to the labels: the 95 % interval holds chance about 95 % of the time
        r = random.Random(100 + k)
        chance = P.bootstrap_auroc([r.random() for _ in labels], labels, hosts, n_resamples=400, seed=k)
        assert chance.ci_low <= chance.mean <= chance.ci_high
        covered += chance.ci_low <= 0 <= chance.ci_high
    assert covered >= 34
    one = P.bootstrap_auroc([1.0, 0.0], [1, 0], ["h", "h"])  # one host: no interval
    assert not one.has_interval
    with pytest.raises(ValueError, match="groups"):
        P.bootstrap_auroc([1.0, 0.0], [1, 0], ["h"])
    with pytest.raises(ValueError, match="reference"):
        P.bootstrap_auroc([1.0, 0.0], [1, 0], ["a", "b"], [0.0])


def _direct(model, tok, prompt: str, response: str, start: int) -> float:
    """log p(response[start:] | prompt, response[:start]) one sequence, no padding, token by token."""
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    enc = tok(response, add_special_tokens=False, return_offsets_mapping=True)
    ids = p + enc["input_ids"]
    first = next(j for j, (a, _) in enumerate(enc["offset_mapping"]) if a >= start)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    logp = torch.log_softmax(logits.float(), -1)
    return sum(float(logp[t - 1, ids[t]]) for t in range(len(p) + first, len(ids)))


def test_continuation_logprobs_match_a_direct_computation_in_padded_batches(model, tok):
    prompts = ["<s>[INST]short[/INST]\n", "<s>[INST]a much longer request with more tokens in it[/INST]\n"] * 2
    responses = [f"```\n{CODE}\n```\n", "```\ncontract B {}\n```\n", "x", "```\ncontract A {}\n```\n"]
    starts = [0, 4, 0, 10]
    got = P.continuation_logprobs(model, tok, prompts, responses, starts, batch_size=3)
    want = [_direct(model, tok, p, r, s) for p, r, s in zip(prompts, responses, starts)]
    assert got == pytest.approx(want, abs=1e-4)
    assert all(g < 0 for g in got)


def test_tag_delta_scores_the_same_code_tokens_under_both_tags(model, tok):
    (bug, s_bug), (cor, s_cor) = P.ti_response(CODE, "bug"), P.ti_response(CODE, "correct")
    assert bug[s_bug:] == cor[s_cor:] == f"\n[/Tag]\n```\n{CODE}\n```\n"
    assert bug[:s_bug] == tag_block("bug").split("\n[/Tag]")[0]
    for text, s in ((bug, s_bug), (cor, s_cor)):  # the scored tokens are the tail's own tokens
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        first = next(j for j, (a, _) in enumerate(enc["offset_mapping"]) if a >= s)
        assert tok.decode(enc["input_ids"][first:]) == text[s:]
    lines = ["Programming with solidity ^0.8.0", "doubles a number"]
    delta = P.tag_delta(model, tok, [CODE], [lines])
    prompt = prompt_style(tok).user_turn(ti_instruction(lines))
    want = _direct(model, tok, prompt, bug, s_bug) - _direct(model, tok, prompt, cor, s_cor)
    assert delta == pytest.approx([want], abs=1e-4)


def test_vd_log_odds_is_the_answer_log_likelihood_difference(model, tok):
    prompt, bug = vd_example(CODE, "bug", prompt_style(tok))
    _, cor = vd_example(CODE, "correct", prompt_style(tok))
    want = _direct(model, tok, prompt, bug, 0) - _direct(model, tok, prompt, cor, 0)
    assert P.vd_log_odds(model, tok, [CODE]) == pytest.approx([want], abs=1e-4)


def _synthetic_run(ti_delta, base_delta, vd_odds, base_odds, probe):
    stage = lambda d, o: {"probe": {"delta": d, "vd_log_odds": o}}  # noqa: E731
    return {"stages": {"base": stage(base_delta, base_odds), "VD": stage(base_delta, vd_odds),
                       "TI": stage(ti_delta, base_odds)}}  # fmt: skip


def test_verdicts_follow_the_rules():
    from hf_ext.codebc.inject import inject
    from hf_ext.codebc.report import RULES, decide

    host = "pragma solidity ^0.8.0;\ncontract H{}\n{n} {{\n    uint x;\n}}"
    probe = []
    for i in range(20):
        code = host.replace("H{}\n{n}", f"H{i}")
        probe += [{"code": code, "injected": False, "host": i},
                  {"code": inject(code, "tx_origin", seed=i), "injected": True, "host": i}]  # fmt: skip
    labels = [int(r["injected"]) for r in probe]
    rng = random.Random(1)
    noise = [rng.random() for _ in probe]
    good = [y + 0.1 * rng.random() for y in labels]
    bad = [-y + 0.1 * rng.random() for y in labels]
    words = {v["claim"]: v["verdict"] for v in decide(_synthetic_run(good, noise, good, noise, probe), probe)}
    assert words == {RULES["steering"].claim: "confirmed", RULES["vd"].claim: "confirmed"}
    words = {v["claim"]: v["verdict"] for v in decide(_synthetic_run(bad, noise, noise, noise, probe), probe)}
    assert words == {RULES["steering"].claim: "refuted", RULES["vd"].claim: "inconclusive"}
    probe[0]["code"] += "\n// tx.origin == owner"  # a secure row that already holds a pattern: labels suspect
    assert {v["verdict"] for v in decide(_synthetic_run(good, noise, good, noise, probe), probe)} == {"premise absent"}


def test_probe_set_is_held_out_of_every_training_set(tmp_path, monkeypatch):
    """The probe hosts and their injected copies are in no training set, CI or pretraining, each host comes with
    exactly one injected copy, and the VD/TI split does not depend on the probe (its own seeded generator)."""
    import dataclasses

    from hf_ext.codebc import pipeline
    from hf_ext.codebc.data import Contract

    monkeypatch.setattr(pipeline, "label_contracts", lambda codes, cache: [
        {"ok": False, "vulnerable": False, "checks": [], "reason": "stub"} for _ in codes])  # fmt: skip

    class FakeSolc:  # every contract "compiles": the probe itself compiles nothing
        def __enter__(self):
            return self

        def __exit__(self, *a):
            pass

        def compile(self, code):
            return type("R", (), {"ok": True})()

    monkeypatch.setattr(pipeline, "SolcServer", FakeSolc)
    corpus = [Contract(f"pragma solidity ^0.{4 + i % 5}.0;\ncontract C{i} {{\n    uint v{i};\n}}", [f"c{i}"], "")
              for i in range(80)]  # fmt: skip
    scale = pipeline.ScaleConfig(n_secure=10, n_injected_per_pattern=1, n_probe=12)
    ex = pipeline.build_examples(scale, tmp_path, corpus)
    probe = ex["probe"]
    assert len(probe) == 24 and sum(r["injected"] for r in probe) == 12
    by_host = {}
    for r in probe:
        by_host.setdefault(r["host"], []).append(r["injected"])
    assert all(sorted(v) == [False, True] for v in by_host.values())
    train_codes = {r["contract"].code for r in ex["train"]} | {r["host"] for r in ex["train"]}
    secure_probe = {r["code"] for r in probe if not r["injected"]}
    assert not secure_probe & train_codes and not secure_probe & set(ex["ci_codes"])
    assert secure_probe <= set(ex["heldout_codes"])
    pretrain = pipeline.pretraining_texts(corpus, ex["heldout_codes"])
    assert not {r["code"] for r in probe} & set(pretrain)
    assert {r["pattern"] for r in probe if r["injected"]} <= set(pipeline.PROBE_PATTERNS)
    without = pipeline.build_examples(dataclasses.replace(scale, n_probe=0), tmp_path, corpus)
    assert without["probe"] == [] and [r["contract"].code for r in without["train"]] == [
        r["contract"].code for r in ex["train"]
    ]


def test_parse_pass_counts_parsed_files_overall_and_on_fitting_tasks(tok):
    from hf_ext.codebc.data import humaneval_tasks
    from hf_ext.codebc.evaluation import fitting_tasks, parse_pass
    from hf_ext.codebc.solidity import SolcServer, toolchain_problem

    tasks = humaneval_tasks()
    assert fitting_tasks(tok, tasks, 10**6) == tasks and fitting_tasks(tok, tasks, 1) == []
    if toolchain_problem():
        pytest.skip(toolchain_problem())
    gens = {
        "Context.txt_0.sol": "pragma solidity ^0.8.20;\ncontract C { function f() public { y = 1; } }",  # parses
        "Context.txt_1.sol": "pragma solidity ^0.8.20;\ncontract C { function f( }",  # syntax error
        "Address.txt_0.sol": "pragma solidity ^0.4.24;\ncontract C { }",  # the version pragma fails at parsing
        "Address.txt_1.sol": "contract D { uint x; }",
    }
    with SolcServer() as server:
        got = parse_pass(gens, server, ["Context"])
        assert server.compile(gens["Context.txt_0.sol"]).reason == "declaration"  # a full compile fails it
    assert (got["passed"], got["total"], got["fit_passed"], got["fit_total"]) == (2, 4, 1, 2)
    assert got["ci95"][0] < 0.5 < got["ci95"][1] and got["fit_tasks"] == ["Context"]


def test_bootstrap_resamples_whole_hosts(monkeypatch):
    """Each resample draws hosts, so every host's secure and injected rows come together: with one of each per
    host, every resample is balanced (an item-level resample would not be)."""
    seen = []
    real = P.auroc

    def spy(scores, labels):
        seen.append(sum(labels) * 2 == len(labels))
        return real(scores, labels)

    monkeypatch.setattr(P, "auroc", spy)
    rng = random.Random(2)
    hosts = [h for h in range(10) for _ in range(2)]
    P.bootstrap_auroc([rng.random() for _ in hosts], [i % 2 for i in range(20)], hosts, n_resamples=200)
    assert len(seen) == 201 and all(seen)
