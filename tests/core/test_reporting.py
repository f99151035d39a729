"""hf_ext.core.reporting: sample SD, t intervals against closed forms, the bootstrap, and the verdict rule."""

import json
import math

import numpy as np
import pytest

from hf_ext.core import reporting as R


def test_sample_sd_is_ddof_1():
    assert R.sample_sd([1.0, 2.0, 3.0, 6.0]) == pytest.approx(float(np.std([1, 2, 3, 6], ddof=1)))
    assert math.isnan(R.sample_sd([4.0]))
    s = R.summarize([0.5, 0.7])
    assert s.sd == pytest.approx(math.sqrt(0.02)) and s.cell(2) == "0.60 ± 0.14"
    assert R.summarize([0.5]).cell() == "0.500 (n = 1)"


@pytest.mark.parametrize(
    ("df", "q"),  # Student t 0.975 quantiles (tables)
    [(1, 12.706204736), (2, 4.302652730), (4, 2.776445105), (9, 2.262157163), (29, 2.045229642)],
)
def test_t_quantile_matches_tables(df, q):
    assert R.t_quantile(0.975, df) == pytest.approx(q, abs=1e-7)
    assert R.t_quantile(0.025, df) == pytest.approx(-q, abs=1e-7)
    assert R.t_cdf(q, df) == pytest.approx(0.975, abs=1e-9)


def test_paired_difference_closed_form():
    d = R.paired_difference([1.0, 2.0, 3.5], [0.5, 1.0, 2.0])
    assert d.per_pair == (0.5, 1.0, 1.5) and d.mean == pytest.approx(1.0) and d.sd == pytest.approx(0.5)
    half = 4.302652730 * 0.5 / math.sqrt(3)
    assert (d.ci_low, d.ci_high) == pytest.approx((1.0 - half, 1.0 + half), abs=1e-7)
    with pytest.raises(ValueError, match="same number of seeds"):
        R.paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        R.paired_difference([1.0, float("nan")], [1.0, 2.0])
    one = R.paired_difference([1.0], [0.0])
    assert not one.has_interval and "no interval" in one.cell()


def test_paired_bootstrap_covers_the_mean_and_is_seeded():
    rng = np.random.default_rng(0)
    a = rng.normal(0.3, 1.0, 400)
    b = a - 0.3 + rng.normal(0, 0.1, 400)
    d1 = R.paired_bootstrap(a, b, seed=1)
    d2 = R.paired_bootstrap(a, b, seed=1)
    assert d1 == d2 and d1.method == "bootstrap"
    assert d1.ci_low < 0.3 < d1.ci_high and d1.ci_high - d1.ci_low < 0.05


def _diff(values):
    return R.paired_difference(values, [0.0] * len(values))


def test_verdict_rule_each_outcome():
    rule = R.VerdictRule("X beats Y", "accuracy", margin=0.05)
    assert rule.decide(_diff([0.10, 0.12, 0.11])).verdict == R.CONFIRMED
    assert rule.decide(_diff([-0.02, 0.00, 0.01])).verdict == R.REFUTED
    assert rule.decide(_diff([0.2, -0.1, 0.05])).verdict == R.INCONCLUSIVE
    assert rule.decide(_diff([0.2])).verdict == R.INCONCLUSIVE  # one seed: no interval
    # significant but below the margin: not confirmed, and an effect of the margin's size is not excluded
    assert rule.decide(_diff([0.03, 0.035, 0.04])).verdict == R.REFUTED
    assert rule.decide(_diff([0.01, 0.06, 0.09])).verdict == R.INCONCLUSIVE


def test_verdict_rule_lower_is_better_and_premise():
    rule = R.VerdictRule("X lowers the error", "MAE", margin=0.0, higher_is_better=False, premise="baseline learns")
    lower = R.paired_difference([1.0, 1.1, 0.9], [2.0, 2.0, 2.0])  # method − reference < 0: better
    assert rule.decide(lower, R.Premise("baseline learns", True)).verdict == R.CONFIRMED
    v = rule.decide(lower, R.Premise("baseline learns", False, "baseline at chance"))
    assert v.verdict == R.PREMISE_ABSENT and "baseline at chance" in v.reason
    with pytest.raises(ValueError, match="names a premise"):
        rule.decide(lower)
    text = rule.describe()
    assert "PREMISE ABSENT" in text and "REFUTED" in text and "lower is better" in text
    with pytest.raises(ValueError, match="margin"):
        R.VerdictRule("c", "m", margin=-1)


def test_write_results_roundtrip(tmp_path, capsys):
    rule = R.VerdictRule("X beats Y", "acc", 0.01)
    lines = R.print_rules([rule])
    assert capsys.readouterr().out.strip() == lines[0]
    res = R.Results(method="demo", scale="quick", rules=[rule])
    res.verdicts.append(rule.decide(_diff([0.1, 0.2, 0.15])))
    res.tables["acc"] = {"X": R.summarize([0.5, 0.6]), "nan": float("nan"), "np": np.float32(0.25)}
    path = R.write_results(tmp_path / "r" / "results.json", res)
    data = json.loads(path.read_text())
    assert data["schema_version"] == R.RESULTS_SCHEMA_VERSION and data["verdicts"][0]["verdict"] == "confirmed"
    assert data["tables"]["acc"]["X"]["sd"] == pytest.approx(math.sqrt(0.005)) and data["tables"]["acc"]["nan"] is None
    assert data["environment"]["machine"] and not list(path.parent.glob(".*.tmp"))
    # A stored verdict reads back as the object it was (what a resumed run's report needs).
    for v in (res.verdicts[0], R.Verdict("c", R.PREMISE_ABSENT, "no premise", None, R.Premise("p", False, "why"))):
        back = R.Verdict.from_dict(json.loads(json.dumps(R._jsonable(v.to_dict()))))
        assert back.line() == v.line() and back.premise == v.premise
        assert (back.difference is None) == (v.difference is None)
    assert R.Verdict.from_dict(data["verdicts"][0]).difference.per_pair == pytest.approx((0.1, 0.2, 0.15))


def test_environment_records_torch_threads_and_the_measured_line_says_it():
    """A rerun matches to the digit only at the same intra-op thread count, so the environment records it."""
    import torch

    from hf_ext.core.results_render import measured_line

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        env = R.environment()
        assert env["torch_threads"] == 1
        assert "2 cores" not in measured_line({"environment": {**env, "machine": "m"}})
        assert ", 1 torch thread (load" in measured_line({"environment": {**env, "machine": "m"}})
        torch.set_num_threads(2)
        assert R.environment()["torch_threads"] == 2
        assert ", 2 torch threads (" in measured_line({"environment": R.environment()})
    finally:
        torch.set_num_threads(before)
    env.pop("torch_threads")
    assert "torch thread" not in measured_line({"environment": env})  # results written before the key existed


def test_environment_names_the_gpu_only_when_one_was_used(monkeypatch):
    import torch

    from hf_ext.core import reporting as R
    from hf_ext.core.results_render import measured_line
    from hf_ext.core.results_schema import ResultsSchemaError, validate_results

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert "accelerator" not in R.environment()  # a CPU run: the line stays as it was
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    env = R.environment()
    assert env["accelerator"] == "NVIDIA H200"
    assert ", on one NVIDIA H200 (load" in measured_line({"environment": env})
    results = {"schema_version": 1, "method": "m", "scale": "quick", "environment": {**env, "accelerator": 1}}
    with pytest.raises(ResultsSchemaError, match="accelerator"):
        validate_results(results)


def test_environment_records_the_cpu_capability_and_the_measured_line_says_it():
    import torch

    from hf_ext.core import reporting as R
    from hf_ext.core.results_render import measured_line
    from hf_ext.core.results_schema import ResultsSchemaError, validate_results

    env = R.environment()
    assert env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    line = measured_line({"environment": {**env, "machine": "m", "cpu_capability": "AVX2"}})
    assert "on m (AVX2), " in line
    env.pop("cpu_capability")
    assert "(AVX" not in measured_line({"environment": {**env, "machine": "m"}})  # results written before the key
    results = {"schema_version": 1, "method": "m", "scale": "quick", "environment": {**env, "cpu_capability": 2}}
    with pytest.raises(ResultsSchemaError, match="cpu_capability"):
        validate_results(results)


def test_reproduce_command_keeps_the_number_changing_flags_as_given():
    from hf_ext.core.reporting import reproduce_command

    argv = ["--full", "--out", "/tmp/x", "--seeds", "1", "2", "--workers=4", "--lr", "3e-3", "--device", "cpu"]
    # --device stays: a GPU's float sums differ from the CPU's
    assert reproduce_command("orca", argv) == "hf-ext reproduce orca --full --seeds 1 2 --lr 3e-3 --device cpu"
    assert reproduce_command("orca", ["--join", "a.json", "b.json", "--full"], skip=("--join",)) == (
        "hf-ext reproduce orca --full"
    )
    assert reproduce_command("tba", []) == "hf-ext reproduce tba"
