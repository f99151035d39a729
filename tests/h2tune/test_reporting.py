"""What `hf-ext reproduce h2tune` decides and prints: the setting check before any comparison, the paired per-seed
differences, the README / card tables; and the feature builder's refusal to truncate an answer away."""

from __future__ import annotations

import pytest

from hf_ext.h2tune.report import all_rules, comparisons, decide, format_comparisons, headroom, verdict_rules
from hf_ext.h2tune.reproduce import format_markdown, paired_differences, setting_check

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


def _rows(per_variant: dict) -> dict:
    """Hand-made results: variant -> client -> per-seed final exact match."""
    n = len(next(iter(next(iter(per_variant.values())).values())))
    results = {"clients": CLIENTS, "seeds": list(range(n)), "variants": {}}
    for name, per_seed in per_variant.items():
        results["variants"][name] = {
            "final_accuracy_per_seed": per_seed,
            "final_accuracy_mean": {k: sum(v) / len(v) for k, v in per_seed.items()},
        }
    return results


def test_the_stated_criteria_are_verdict_rules_per_comparison_and_client_headline_sharing_vs_adapter_only():
    rules = verdict_rules(CLIENTS)
    assert list(rules) == ["sharing", "adapter form", "h2tune vs local-only"]  # the headline first
    assert all(set(r) == {"client-0", "client-1"} for r in rules.values())
    text = rules["sharing"]["client-0"].describe()
    assert "client-0" in text and "adapter-only" in text and "0.05" in text and "premise first: headroom" in text
    assert [r.claim for r in all_rules(rules)][0] == rules["sharing"]["client-0"].claim


def test_headroom_premise_needs_the_ceiling_minus_local_only_interval_above_zero():
    room = headroom(
        _rows(
            {
                "local-only": {"client-0": [0.50, 0.52, 0.51], "client-1": [0.40, 0.60, 0.50]},
                # client-0: +0.49 every seed; client-1: a mean gain of 0.1 whose interval reaches below 0
                "pooled": {"client-0": [0.99, 1.0, 1.0], "client-1": [0.70, 0.50, 0.60]},
            }
        )
    )
    assert room["clients"]["client-0"]["ok"] and room["clients"]["client-0"]["ceiling_minus_local"]["ci_low"] > 0
    assert not room["clients"]["client-1"]["ok"] and "no headroom" in room["clients"]["client-1"]["detail"]
    assert room["passed"] is False
    # a client at its ceiling has none; one seed gives no interval, hence no established headroom
    flat = headroom(
        _rows(
            {
                "local-only": {"client-0": [1.0, 1.0], "client-1": [0.5, 0.5]},
                "pooled": {"client-0": [1.0, 1.0], "client-1": [0.9, 0.9]},
            }
        )
    )
    assert not flat["clients"]["client-0"]["ok"]
    one = headroom(
        _rows({"local-only": {"client-0": [0.1], "client-1": [0.1]}, "pooled": {"client-0": [0.9], "client-1": [0.9]}})
    )
    assert not one["clients"]["client-0"]["ok"] and "no interval" in one["clients"]["client-0"]["detail"]
    assert headroom({"clients": CLIENTS, "variants": {}})["passed"] is None  # no ceiling run: undecided


def test_sharing_is_decided_against_the_adapter_only_control_on_hand_made_rows():
    """confirmed / refuted / inconclusive / premise absent, each from rows made to produce it; the confounded
    comparison against local-only would say "confirmed" where sharing did nothing."""
    local = {"client-0": [0.30, 0.32, 0.31, 0.29], "client-1": [0.40, 0.41, 0.42, 0.40]}
    pooled = {"client-0": [0.90, 0.92, 0.91, 0.93], "client-1": [0.90, 0.91, 0.92, 0.90]}
    adapter = {"client-0": [0.50, 0.52, 0.51, 0.50], "client-1": [0.50, 0.52, 0.51, 0.50]}
    rules = verdict_rules(CLIENTS)

    def verdicts(h2tune, pooled=pooled):
        rows = _rows({"local-only": local, "pooled": pooled, "adapter-only": adapter, "h2tune": h2tune})
        return {kind: {c: v.verdict for c, v in vs.items()} for kind, vs in decide(rows, rules).items()}

    # client-0: +0.2 over the control on every seed -> confirmed; client-1: exactly the control -> refuted (the
    # interval excludes the 0.05 margin), while H2Tune − local-only (+0.1, the adapter form's) is "confirmed"
    v = verdicts({"client-0": [0.70, 0.72, 0.71, 0.70], "client-1": [0.50, 0.52, 0.51, 0.50]})
    assert v["sharing"] == {"client-0": "confirmed", "client-1": "refuted"}
    assert v["adapter form"] == {"client-0": "confirmed", "client-1": "confirmed"}
    assert v["h2tune vs local-only"]["client-1"] == "confirmed"  # the confound: no sharing effect, still "confirmed"
    # client-0: a noisy gain whose interval spans 0 and the margin -> inconclusive
    v = verdicts({"client-0": [0.80, 0.40, 0.75, 0.45], "client-1": [0.50, 0.52, 0.51, 0.50]})
    assert v["sharing"]["client-0"] == "inconclusive"
    # client-1 at its ceiling (no headroom): premise absent whatever H2Tune does, in every comparison
    at_ceiling = {**pooled, "client-1": local["client-1"]}
    v = verdicts({"client-0": [0.70, 0.72, 0.71, 0.70], "client-1": [0.9, 0.9, 0.9, 0.9]}, pooled=at_ceiling)
    assert v["sharing"]["client-1"] == "premise absent" and v["sharing"]["client-0"] == "confirmed"
    assert v["adapter form"]["client-1"] == "premise absent"
    # without the control the sharing verdict is not decided at all (never silently against local-only)
    rows = _rows({"local-only": local, "pooled": pooled, "h2tune": adapter})
    assert "sharing" not in decide(rows, rules) and "h2tune vs local-only" in decide(rows, rules)
    assert decide({"clients": CLIENTS, "variants": {"pooled": {}}}, rules) == {}


def test_the_comparison_table_prints_every_paired_difference_with_its_verdict():
    rows = _rows(
        {
            "local-only": {"client-0": [0.30, 0.32, 0.31], "client-1": [0.40, 0.41, 0.42]},
            "pooled": {"client-0": [0.90, 0.92, 0.91], "client-1": [0.40, 0.41, 0.42]},
            "adapter-only": {"client-0": [0.50, 0.52, 0.51], "client-1": [0.50, 0.52, 0.51]},
            "h2tune": {"client-0": [0.70, 0.72, 0.71], "client-1": [0.50, 0.52, 0.51]},
        }
    )
    rows["headroom"], rows["comparisons"] = headroom(rows), comparisons(rows)
    rows["verdicts_by_comparison"] = {
        k: {c: v.to_dict() for c, v in vs.items()} for k, vs in decide(rows, verdict_rules(CLIENTS)).items()
    }
    table = format_comparisons(rows)
    assert "| sharing: h2tune − adapter-only | +0.200 ± 0.000 [+0.200, +0.200] → confirmed |" in table
    assert "+0.000 ± 0.000 [+0.000, +0.000] **no headroom**" in table  # client-1's ceiling equals local-only
    assert "→ premise absent" in table


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


def test_every_scale_runs_the_adapter_only_control_and_pretrained_has_four_seeds_and_48_distinct_test_pairs():
    from hf_ext.h2tune.data import client_split
    from hf_ext.h2tune.presets import PRETRAINED, PRETRAINED_SEEDS, PRETRAINED_VARIANTS, QUICK_SEEDS, QUICK_VARIANTS
    from hf_ext.h2tune.task import VARIANTS

    for variants in (QUICK_VARIANTS, PRETRAINED_VARIANTS, list(VARIANTS)):  # --full runs every variant
        assert {"local-only", "pooled", "adapter-only", "h2tune"} <= set(variants)
    assert len(QUICK_SEEDS) >= 3 and len(set(PRETRAINED_SEEDS)) >= 4 and PRETRAINED["num_test"] >= 48
    # the synthetic split can give 48 test pairs that are all distinct and none of them a training input
    train, test = client_split("fill_in", 0, 3, PRETRAINED["num_train"], PRETRAINED["num_test"], seed=0)
    assert len(test) == 48 and len(set(test)) == 48 and not set(test) & set(train)
