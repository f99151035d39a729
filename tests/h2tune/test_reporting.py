"""What `hf-ext reproduce h2tune` decides and prints: the setting check before any comparison, the paired per-seed
differences, the README / card tables; and the feature builder's refusal to truncate an answer away."""

from __future__ import annotations

import pytest

from hf_ext.h2tune.reproduce import decide, format_markdown, paired_differences, setting_check, verdict_rules

CLIENTS = [
    {"name": "client-0", "task": "fill_in", "family": "llama", "layers": 4, "hidden": 64, "rank": 4},
    {"name": "client-1", "task": "modulo", "family": "llama", "layers": 4, "hidden": 64, "rank": 8},
]


def _results(local: dict, pooled: dict, other: dict | None = None) -> dict:
    """Two seeds per variant; `local` etc. map client name -> per-seed final accuracy."""
    variants = {"local-only": local, "pooled": pooled, **({"h2tune": other} if other else {})}
    out = {"clients": CLIENTS, "seeds": [0, 1], "variants": {}}
    for name, per_seed in variants.items():
        out["variants"][name] = {
            "final_accuracy_per_seed": per_seed,
            "final_accuracy_mean": {k: sum(v) / len(v) for k, v in per_seed.items()},
            "accuracy_per_round": [{k: [0.1, v[s]] for k, v in per_seed.items()} for s in range(2)],
            "bytes_sent_per_round": 86016 if name == "h2tune" else 0,
        }
    return out


def test_setting_check_passes_only_strictly_between_chance_and_the_ceiling():
    ok = setting_check(
        _results({"client-0": [0.6, 0.7], "client-1": [0.4, 0.5]}, {"client-0": [1.0, 1.0], "client-1": [0.9, 1.0]})
    )
    assert ok["passed"] and all(c["ok"] for c in ok["clients"].values())
    at_chance = setting_check(
        _results({"client-0": [0.6, 0.7], "client-1": [0.1, 0.1]}, {"client-0": [1.0, 1.0], "client-1": [0.9, 1.0]})
    )
    assert not at_chance["passed"] and not at_chance["clients"]["client-1"]["ok"]  # learned nothing locally
    assert at_chance["clients"]["client-0"]["ok"]
    at_ceiling = setting_check(
        _results({"client-0": [1.0, 1.0], "client-1": [0.4, 0.5]}, {"client-0": [1.0, 1.0], "client-1": [0.9, 1.0]})
    )
    assert not at_ceiling["passed"] and not at_ceiling["clients"]["client-0"]["ok"]  # nothing left to gain
    assert setting_check({"clients": CLIENTS, "variants": {}})["passed"] is None  # no ceiling run: undecided


def test_paired_differences_are_per_seed_with_sample_sd_and_t_interval_and_the_tables_print_them():
    results = _results(
        {"client-0": [0.6, 0.7], "client-1": [0.4, 0.5]},
        {"client-0": [1.0, 1.0], "client-1": [0.9, 1.0]},
        {"client-0": [0.7, 0.7], "client-1": [0.3, 0.6]},
    )
    paired_differences(results)
    diff = results["variants"]["h2tune"]["paired_vs_local"]
    assert diff["client-0"]["per_pair"] == pytest.approx([0.1, 0.0])
    # sample SD (ddof 1) of [0.1, 0]: 0.0707, not the population 0.05; t(0.975, 1) = 12.706
    assert diff["client-0"]["mean"] == pytest.approx(0.05) and diff["client-0"]["sd"] == pytest.approx(0.1 / 2**0.5)
    half = 12.7062 * 0.1 / 2**0.5 / 2**0.5
    assert diff["client-0"]["ci_low"] == pytest.approx(0.05 - half, abs=1e-3)
    assert diff["client-1"]["per_pair"] == pytest.approx([-0.1, 0.1]) and diff["client-1"]["mean"] == pytest.approx(0)
    table = format_markdown(results)
    assert "| h2tune | 0.700 ± 0.000, Δ +0.050 ± 0.071 [-0.585, +0.685] | 0.450 ± 0.212, Δ +0.000 ± 0.141" in table
    assert "| local-only | 0.650 ± 0.071 | 0.450 ± 0.071 | 0 |" in table  # no difference to itself
    assert "| h2tune | 0.10 / 0.70 | 0.10 / 0.45 |" in table  # the convergence curve, mean over seeds


def test_the_stated_criterion_is_a_verdict_rule_per_client_decided_with_its_setting_check_as_premise():
    rules = verdict_rules(CLIENTS)
    assert set(rules) == {"client-0", "client-1"}
    text = rules["client-0"].describe()
    assert "client-0" in text and "0.05" in text and "premise first" in text
    # client-0: a clear gain on 3 seeds; client-1: the setting check fails (local-only at chance)
    three = {
        "local-only": {"client-0": [0.50, 0.52, 0.51], "client-1": [0.05, 0.1, 0.1]},
        "pooled": {"client-0": [1.0, 1.0, 1.0], "client-1": [0.9, 1.0, 0.95]},
        "h2tune": {"client-0": [0.70, 0.71, 0.73], "client-1": [0.6, 0.7, 0.65]},
    }
    results = {"clients": CLIENTS, "seeds": [0, 1, 2], "variants": {}}
    for name, per_seed in three.items():
        results["variants"][name] = {
            "final_accuracy_per_seed": per_seed,
            "final_accuracy_mean": {k: sum(v) / len(v) for k, v in per_seed.items()},
        }
    results["setting_check"] = setting_check(results)
    verdicts = decide(results, rules)
    assert verdicts["client-0"].verdict == "confirmed"
    assert verdicts["client-1"].verdict == "premise absent"  # a gain there cannot speak to the claim
    # a gain below the 0.05 margin whose interval excludes the margin is refuted
    results["variants"]["h2tune"]["final_accuracy_per_seed"]["client-0"] = [0.50, 0.52, 0.52]
    assert decide(results, rules)["client-0"].verdict == "refuted"
    # without H2Tune or local-only there is nothing to decide
    assert decide({"variants": {"pooled": {}}}, rules) == {}


def test_features_refuse_an_example_longer_than_max_len():
    from hf_ext.h2tune.data import to_features

    assert len(to_features([("print((3+4)%10)>", "7")], max_len=19)["input_ids"][0]) == 19  # BOS + 16 + 7 + EOS
    with pytest.raises(ValueError, match="more than max_len=18"):
        to_features([("print((3+4)%10)>", "7")], max_len=18)


def test_healing_corpus_poses_sums_as_chat_turns_for_a_chat_tokenizer():
    from hf_ext.core import pretrained as P
    from hf_ext.h2tune.derive import HEAL, HEAL_SUMS, HEAL_TEXT, heal_texts

    if not P.smollm2_available():
        pytest.skip(P.SMOLLM2_PIP)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(P.smollm2_path())
    texts = heal_texts(tok)
    assert len(texts) == len(HEAL_SUMS) + len(HEAL_TEXT) and texts[len(HEAL_SUMS) :] == HEAL_TEXT
    assert "<|im_start|>user\n3+4=<|im_end|>\n<|im_start|>assistant\n7<|im_end|>" in texts[34]
    assert max(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts) <= HEAL["max_len"]  # none cut
