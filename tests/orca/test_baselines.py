"""The baselines of issue 39: the single-task FM (its pairwise term against the O(n²) closed form), the ESMM-style
model (the entire-space product and its loss over every impression) and PLE (each task's gate mixes only its own and
the shared experts); the arms train through the sweep and join the rows of an earlier run."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from hf_ext.orca.modeling_orca import OrcaCGCLevel, OrcaModel
from hf_ext.orca.modeling_orca_baselines import OrcaESMMModel, OrcaFMModel
from hf_ext.orca.testing import tiny_batch, tiny_config


def test_fm_logits_are_bias_plus_linear_plus_pairwise_closed_form():
    torch.manual_seed(0)
    model = OrcaFMModel(tiny_config(use_orca=False)).eval()
    with torch.no_grad():  # away from the small initialisation, so that every term matters
        for p in model.parameters():
            p.normal_()
    ids = tiny_batch(8)["input_ids"]
    v, w = model.fm.lookup(ids)  # [B, F, K, D], [B, F, K]
    num_fields = ids.shape[1]
    pairwise = sum(
        (v[:, i] * v[:, j]).sum(-1) for i in range(num_fields) for j in range(i + 1, num_fields)
    )  # Σ_{i<j} <v_i^k, v_j^k>, the O(n²) definition
    expect = model.fm.bias + w.sum(1) + pairwise
    out = model(input_ids=ids)
    torch.testing.assert_close(out.dt_logits, expect, rtol=1e-5, atol=1e-5)
    assert pairwise.abs().mean() > 0.5  # the pairwise term is not negligible here
    assert torch.all(out.click_probs == 0.5)  # no click head


def test_fm_loss_is_the_dt_cross_entropy_on_clicked_rows():
    torch.manual_seed(0)
    model = OrcaFMModel(tiny_config(use_orca=False))
    batch = tiny_batch(16, seed=2)
    out = model(**batch)
    clicked = batch["click_labels"] > 0.5
    expect = F.cross_entropy(out.dt_logits[clicked], batch["dwell_labels"][clicked])
    torch.testing.assert_close(out.loss, expect)


def test_esmm_joint_is_the_entire_space_product():
    torch.manual_seed(0)
    model = OrcaESMMModel(tiny_config(use_orca=False)).eval()
    ids = tiny_batch(8)["input_ids"]
    click_logit, dt_logits = model.logits(ids)
    joint = model.entire_space_log_probs(click_logit, dt_logits).exp()
    torch.testing.assert_close(joint, torch.sigmoid(click_logit)[:, None] * dt_logits.softmax(-1))
    out = model(input_ids=ids)
    torch.testing.assert_close(out.dt_logits.softmax(-1), dt_logits.softmax(-1))  # the prediction is p(bin | click)


def test_esmm_loss_is_click_bce_plus_per_bin_bce_of_the_product_over_all_impressions():
    torch.manual_seed(0)
    model = OrcaESMMModel(tiny_config(use_orca=False, alpha=0.7))
    batch = tiny_batch(16, seed=3)
    out = model(**batch)
    p_click = out.click_probs
    product = p_click[:, None] * out.dt_logits.softmax(-1)  # p(click, bin = k), every impression
    clicked = batch["click_labels"] > 0.5
    target = torch.zeros_like(product)
    target[clicked, batch["dwell_labels"][clicked]] = 1.0
    ctcvr = F.binary_cross_entropy(product, target, reduction="none").sum(-1).mean()
    expect = F.binary_cross_entropy(p_click, batch["click_labels"]) + 0.7 * ctcvr
    torch.testing.assert_close(out.loss, expect, rtol=1e-5, atol=1e-6)


def test_esmm_unclicked_impressions_train_the_dwell_tower():
    """The entire-space loss: a batch with no click still moves p(bin | click) (a clicked-only DT loss would not)."""
    torch.manual_seed(0)
    model = OrcaESMMModel(tiny_config(use_orca=False))
    batch = tiny_batch(16, seed=4)
    batch["click_labels"] = torch.zeros_like(batch["click_labels"])
    batch["dwell_labels"] = torch.full_like(batch["dwell_labels"], -100)
    model(**batch).loss.backward()
    assert model.dt_head.fc2.weight.grad.abs().sum() > 0


def test_ple_gate_mixes_only_its_own_and_the_shared_experts():
    torch.manual_seed(0)
    cfg = tiny_config(use_orca=False, backbone="ple")
    level = OrcaCGCLevel(cfg, in_dim=6, dims=[4], last=True).eval()
    with torch.no_grad():  # built outside a model, the expert weights are `torch.empty` until `_init_weights` runs
        for p in level.parameters():
            p.normal_(0.0, 0.5)
    x = torch.randn(5, 6)
    before, _ = level([x, x], x)
    own = level.task[0](x)
    shared = level.shared(x)
    gate = level.task_gates[0](x).softmax(-1)
    assert gate.shape[1] == cfg.num_task_experts + cfg.num_experts
    torch.testing.assert_close(before[0], (gate.unsqueeze(-1) * torch.cat([own, shared], 1)).sum(1))
    with torch.no_grad():  # the other task's experts: no effect on task 0
        for p in level.task[1].parameters():
            p.add_(1.0)
    after, _ = level([x, x], x)
    torch.testing.assert_close(after[0], before[0])
    assert not torch.allclose(after[1], before[1])
    with torch.no_grad():  # the shared experts: an effect on both
        for p in level.shared.parameters():
            p.add_(1.0)
    shifted, _ = level([x, x], x)
    assert not torch.allclose(shifted[0], before[0])


def test_ple_arm_is_the_mtl_baseline_on_the_ple_backbone():
    from hf_ext.orca.reproduce import ARMS, _model_class

    assert ARMS["ple"] == {"use_orca": False, "backbone": "ple"} and _model_class("orca") is OrcaModel
    assert _model_class("fm") is OrcaFMModel and _model_class("esmm") is OrcaESMMModel


@pytest.fixture(scope="module")
def joined_run(tmp_path_factory):
    """A small core run, then the three baselines and the ablations trained alone and joined to it."""
    from hf_ext.orca.reproduce import main

    first, second = tmp_path_factory.mktemp("core"), tmp_path_factory.mktemp("arms")
    common = ["--family", "reliance", "--strengths", "3", "--seeds", "0", "--num-impressions", "1000"]
    common += ["--test-impressions", "1000", "--epochs", "1", "--workers", "1", "--device", "cpu", "--quiet"]
    main(["--out", str(first), *common])
    main(["--out", str(second), *common, "--arms", "fm", "esmm", "ple", "--ablations", "--only-arms", "--join"]
         + [str(first / "results.json")])  # fmt: skip
    return first, second


def test_new_arms_join_the_core_rows_paired_by_seed(joined_run):
    first, second = joined_run
    core = json.loads((first / "results.json").read_text())["backbones"]["mmoe"]["cells"]
    merged = json.loads((second / "results.json").read_text())
    cells = {(c["strength"], c["seed"], c["row"]): c for c in merged["backbones"]["mmoe"]["cells"]}
    for c in core:  # the joined rows are the first run's, unchanged
        for test in {"iid", "shifted"} & set(c):
            assert cells[(c["strength"], c["seed"], c["row"])][test] == c[test]
    for arm in ("fm", "esmm", "ple"):
        m = cells[(3.0, 0, arm)]["iid"]
        assert m["dt_ce"] > 0 and m["num_clicked"] > 100
        assert f"orca vs {arm} @ s=3" in merged["backbones"]["mmoe"]["paired_iid"]
    assert cells[(3.0, 0, "fm")]["iid"]["ctr_auc"] is None  # no click head, no CTR AUC
    from hf_ext.orca.reproduce import ABLATIONS

    assert not {c["row"] for c in core} & set(ABLATIONS)  # trained by the second run, beside the arms
    assert all(cells[(3.0, 0, name)]["iid"]["dt_ce"] > 0 for name in ABLATIONS)
    for name in ABLATIONS:  # each reported as what the removed part adds to ORCA (ablation − ORCA CE, per seed)
        d = merged["backbones"]["mmoe"]["paired_iid"][f"orca vs {name} @ s=3"]
        want = cells[(3.0, 0, name)]["iid"]["dt_ce"] - cells[(3.0, 0, "orca")]["iid"]["dt_ce"]
        assert d["ce_gain"]["per_pair"] == pytest.approx([want])
    claims = [v["claim"] for v in merged["verdicts"]]
    assert any("single-task FM" in c for c in claims) and any("ESMM" in c for c in claims)
    assert (second / "heatmaps.png").read_bytes() == (first / "heatmaps.png").read_bytes()


def test_join_refuses_a_run_with_other_settings(joined_run, tmp_path):
    from hf_ext.orca.reproduce import main

    first, _ = joined_run
    args = ["--out", str(tmp_path), "--family", "reliance", "--strengths", "3", "--seeds", "0", "--epochs", "1"]
    args += ["--num-impressions", "2000", "--test-impressions", "1000", "--workers", "1", "--device", "cpu"]
    args += ["--quiet", "--arms", "fm", "--only-arms", "--join", str(first / "results.json")]
    with pytest.raises(ValueError, match="num_impressions"):
        main(args)


def test_an_arm_with_fewer_seeds_pairs_on_the_seeds_it_shares():
    from hf_ext.orca.report import paired_differences, reference_table

    def m(ce):
        return {"iid": {"dt_ce": ce, "dt_macro_f1": 0.2, "ctr_auc": 0.6, "moderate_share_pred": 0.3,
                        "moderate_share_true": 0.3, "dt_mae_s": 1.0, "js_distance": 0.1}}  # fmt: skip

    cells = {(3.0, seed, "orca"): m(1.0 + 0.01 * seed) for seed in (0, 1, 2)}
    cells |= {(3.0, seed, "fm"): m(1.5 + 0.1 * seed) for seed in (0, 1)}  # the fm run finished seeds 0 and 1 only
    d = paired_differences(cells, [3.0], [0, 1, 2], "iid")["orca vs fm @ s=3"]
    assert d["seeds"] == [0, 1]
    assert d["ce_gain"].per_pair == pytest.approx([0.5, 0.59])  # fm − ORCA per shared seed
    assert "fm (seeds 0, 1)" in reference_table(cells, [3.0], [0, 1, 2], "iid")


def test_grows_pairs_on_the_seeds_both_strengths_have():
    """A sweep joined from per-seed runs may have fewer seeds at one end: "grows" pairs the gains on the shared
    seeds instead of refusing (or mispairing) them."""
    from hf_ext.orca.report import paired_differences, verdict

    def m(ce):
        return {"iid": {"dt_ce": ce, "dt_macro_f1": 0.2, "ctr_auc": 0.6, "moderate_share_pred": 0.3,
                        "moderate_share_true": 0.3, "dt_mae_s": 1.0, "js_distance": 0.1}}  # fmt: skip

    cells = {}
    for s, seeds, gain in ((3.0, (0, 1, 2), 0.1), (0.0, (0, 2), 0.0)):  # seed 1 missing at s = 0
        for seed in seeds:
            base = 1.0 + 0.01 * seed
            rows = {"baseline": base, "orca": base - gain - 0.001 * seed, "single-task": base - 0.05,
                    "trivial": 2.0, "oracle": 0.9}  # fmt: skip
            cells |= {(s, seed, row): m(ce) for row, ce in rows.items()}
    diffs = paired_differences(cells, [0.0, 3.0], [0, 1, 2], "iid")
    _, verdicts = verdict(cells, diffs, [0.0, 3.0], [0, 1, 2], "iid")
    grows = next(v for v in verdicts if "grows" in v.claim)
    assert grows.difference.n == 2  # seeds 0 and 2
    assert grows.difference.per_pair == pytest.approx([0.1, 0.1])
