"""The powered noise verdict (issue 40): the paired AUC bootstrap against a direct recomputation, the verdict rule on
hand-made runs (confirmed / refuted / inconclusive / premise absent), the pairing of a real (tiny) run and the noise
stated in absolute and relative terms."""

import json
import math

import pytest
import torch

from hf_ext.core.reporting import CONFIRMED, INCONCLUSIVE, PREMISE_ABSENT, REFUTED
from hf_ext.fl_llama.evaluation import margin_auc
from hf_ext.fl_llama.reproduce import main
from hf_ext.fl_llama.reproduce_noise import NoiseVerdictArguments, auc_difference, decide_noise_verdict

N_ITEMS = 80


def _labels() -> torch.Tensor:
    return (torch.arange(N_ITEMS) % 2 == 0).long()  # 40 yes, 40 no


def _margins(quality: float, seed: int) -> list[float]:
    """Scores whose AUC grows with `quality` (0 = chance): the label's sign times `quality`, plus unit noise."""
    g = torch.Generator().manual_seed(seed)
    return ((2 * _labels() - 1) * quality + torch.randn(N_ITEMS, generator=g)).tolist()


def _runs(central: float, zero: dict, noisy: dict, seeds=(0, 1, 2)) -> list[dict]:
    """Hand-made runs: one centralised run per seed, and per depth one split run at s = 0 and one at s = 1x."""
    runs = []
    for s in seeds:
        m = _margins(central, 100 + s)
        runs.append({"setting": "centralized", "seed": s, "a": None, "noise_multiple": 0.0, "margins": m,
                     "auc": margin_auc(torch.tensor(m), _labels())})  # fmt: skip
        for a in zero:
            for mult, q in ((0.0, zero[a]), (1.0, noisy[a])):
                m = _margins(q, 1000 * a + 10 * s + int(mult))
                runs.append({"setting": "split", "seed": s, "a": a, "noise_multiple": mult, "margins": m,
                             "auc": margin_auc(torch.tensor(m), _labels())})  # fmt: skip
    return runs


ARGS = NoiseVerdictArguments(backbone="tiny", seeds=[0, 1, 2], depths=[1, 3], n_resamples=1000)


def _words(runs) -> tuple[str, list[str]]:
    out = decide_noise_verdict(runs, _labels(), ARGS)
    return out["premise"].verdict, [v.verdict for v in out["verdicts"]]


def test_verdict_confirmed_and_inconclusive_per_depth():
    # a = 1: the noise destroys the signal; a = 3: s = 0 and s = 1x are the same quality (independent draws)
    premise, words = _words(_runs(3.0, {1: 3.0, 3: 1.0}, {1: 0.2, 3: 1.0}))
    assert premise == CONFIRMED
    assert words == [CONFIRMED, INCONCLUSIVE]


def test_verdict_refuted():
    # the noisy arm is clearly better: the interval of s = 0 − s = 1x lies below the margin 0
    premise, words = _words(_runs(3.0, {1: 0.2, 3: 0.2}, {1: 3.0, 3: 3.0}))
    assert premise == CONFIRMED
    assert words == [REFUTED, REFUTED]


def test_verdict_premise_absent_when_centralised_does_not_learn():
    # the same noise effect as the confirmed case, but the positive control sits at chance
    premise, words = _words(_runs(0.0, {1: 3.0, 3: 3.0}, {1: 0.2, 3: 0.2}))
    assert premise != CONFIRMED
    assert words == [PREMISE_ABSENT, PREMISE_ABSENT]


def test_one_seed_gives_no_interval():
    args = NoiseVerdictArguments(backbone="tiny", seeds=[0], depths=[1], n_resamples=1000)
    out = decide_noise_verdict(_runs(3.0, {1: 3.0}, {1: 0.2}, seeds=(0,)), _labels(), args)
    assert out["premise"].verdict == INCONCLUSIVE  # so every noise rule is premise absent
    assert [v.verdict for v in out["verdicts"]] == [PREMISE_ABSENT]


def test_missing_or_duplicated_arm_is_named():
    runs = [r for r in _runs(3.0, {1: 3.0, 3: 3.0}, {1: 0.2, 3: 0.2}) if not (r["seed"] == 2 and r["a"] == 3)]
    with pytest.raises(ValueError, match="seed 2"):
        decide_noise_verdict(runs, _labels(), ARGS)


def _auc64(scores, labels) -> float:
    """Mann-Whitney AUC in float64 (`margin_auc` averages in float32)."""
    scores = torch.as_tensor(scores, dtype=torch.float64)
    pos, neg = scores[labels.bool()], scores[~labels.bool()]
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).double() + 0.5 * (diff == 0).double()).mean())


def test_auc_bootstrap_equals_direct_recomputation():
    """The bilinear shortcut gives exactly the percentile interval of recomputing the seed-mean AUC difference on
    every stratified resample (the same draws for every arm and seed)."""
    labels = _labels()
    a = [_margins(1.0, 1), _margins(1.2, 2)]
    b = [_margins(0.5, 3), _margins(0.4, 4)]
    reps, conf = 300, 0.9
    d = auc_difference(a, b, labels, n_resamples=reps, seed=7, confidence=conf)
    per_seed = [_auc64(x, labels) - _auc64(y, labels) for x, y in zip(a, b)]
    assert per_seed == pytest.approx([margin_auc(torch.tensor(x), labels) - margin_auc(torch.tensor(y), labels)
                                      for x, y in zip(a, b)], abs=1e-6)  # fmt: skip
    assert d.per_pair == pytest.approx(per_seed, abs=1e-12)
    assert d.mean == pytest.approx(sum(per_seed) / 2, abs=1e-12) and d.n == 2 and d.method == "bootstrap"
    pos, neg = labels.nonzero().flatten(), (1 - labels).nonzero().flatten()
    g = torch.Generator().manual_seed(7)
    ip = torch.randint(len(pos), (reps, len(pos)), generator=g)
    iq = torch.randint(len(neg), (reps, len(neg)), generator=g)
    direct = []
    for r in range(reps):
        idx = torch.cat([pos[ip[r]], neg[iq[r]]])
        diffs = [_auc64(torch.tensor(x)[idx], labels[idx]) - _auc64(torch.tensor(y)[idx], labels[idx])
                 for x, y in zip(a, b)]  # fmt: skip
        direct.append(sum(diffs) / 2)
    direct.sort()
    alpha = (1 - conf) / 2  # the percentile indices exactly as `hf_ext.core.reporting.paired_bootstrap` takes them
    lo = direct[int(math.floor(alpha * reps))]
    hi = direct[int(math.ceil((1 - alpha) * reps)) - 1]
    assert (d.ci_low, d.ci_high) == pytest.approx((lo, hi), abs=1e-12)
    # against chance: the AUC minus 0.5
    c = auc_difference(a, None, labels, n_resamples=200)
    assert c.per_pair == pytest.approx([_auc64(x, labels) - 0.5 for x in a], abs=1e-12)


def test_auc_difference_rejects_bad_pairs():
    with pytest.raises(ValueError, match="same seeds"):
        auc_difference([_margins(1, 1)], [_margins(1, 2), _margins(1, 3)], _labels())
    with pytest.raises(ValueError, match="scored 3 prompts"):
        auc_difference([[0.1, 0.2, 0.3]], None, _labels())
    with pytest.raises(ValueError, match="both classes"):
        auc_difference([[0.1, 0.2]], None, [1, 1])


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("seeds", [0, 0], "seeds must not repeat"),
        ("depths", [], "depths must be a non-empty"),
        ("backbone", "gpt", "backbone must be one of"),
        ("train_steps", 0, "train_steps must be an integer"),
        ("noise_multiple", 0.0, "noise_multiple must be a finite number > 0"),
    ],  # fmt: skip
)
def test_arguments_name_the_bad_field(field, value, match):
    with pytest.raises(ValueError, match=match):
        NoiseVerdictArguments(**{field: value})


def test_cli_rejects_bad_noise_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--noise_verdict", "--noise_seeds", "1", "1"])
    assert exc.value.code == 2
    assert "seeds must not repeat" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for a machine without a GPU")
def test_cli_refuses_cuda_without_a_gpu_in_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["--noise_verdict", "--noise_smoke", "--device", "cuda", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "--device cuda: no CUDA device is available" in capsys.readouterr().err
    assert not (tmp_path / "results.json").exists()


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """A real smoke run on the tiny random Llama through the CLI: 2 seeds x {centralised, s = 0, s = 1x} x a in
    {1, 2}."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("noise")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["--noise_verdict", "--noise_backbone", "tiny", "--noise_smoke", "--noise_seeds", "3", "5",
              "--noise_depths", "1", "2", "--noise_steps", "3", "--out", str(out)])  # fmt: skip
    return json.loads((out / "results.json").read_text()), buf.getvalue()


def test_smoke_run_is_paired(smoke):
    results, _ = smoke
    nv = results["tables"]["noise_verdict"]
    runs = [r for r in nv["runs"] if r["setting"] != "pretrained"]
    assert len(runs) == 2 * (1 + 2 * 2)
    # every arm of every seed is scored on the same prompts, in the same order
    assert len({r["eval_prompts"] for r in nv["runs"]}) == 1
    assert all(len(r["margins"]) == nv["val_examples"] == len(nv["labels"]) for r in nv["runs"])
    for seed in (3, 5):
        mine = [r for r in runs if r["seed"] == seed]
        assert len(mine) == 5
        assert len({r["train_order"] for r in mine}) == 1  # the same batches in the same order for every arm
        assert all(r["noise_seed"] == seed for r in mine if r["setting"] == "split")
    assert len({r["train_order"] for r in runs}) == 2  # seeds differ
    assert nv["device"] == ("cuda" if torch.cuda.is_available() else "cpu")  # --device auto, recorded
    # s = 0 and s = 1x at one depth and seed differ only by the noise: its arms really were noised
    for a in (1, 2):
        z = [r for r in runs if r.get("a") == a and r["noise_multiple"] == 0.0]
        n = [r for r in runs if r.get("a") == a and r["noise_multiple"] == 1.0]
        assert all(r["sigma"] == 0.0 for r in z) and all(r["sigma"] > 0 for r in n)
        assert [r["margins"] for r in z] != [r["margins"] for r in n]


def test_smoke_run_states_sigma_in_both_terms(smoke):
    results, stdout = smoke
    nv = results["tables"]["noise_verdict"]
    for r in nv["summary"] + [r for r in nv["runs"] if r["setting"] == "split"]:
        if r["setting"] != "split":
            continue
        scale = nv["mean_abs_h_a"][str(r["a"])]
        assert r["mean_abs_h_a"] == pytest.approx(scale) and scale > 0
        assert r["s"] == pytest.approx(r["noise_multiple"] * scale)
        assert r["sigma"] == pytest.approx(r["s"] * math.sqrt(math.pi / 2))  # E|ε| = s
        assert r["sigma_relative"] == pytest.approx(r["sigma"] / scale)
    noisy = [r for r in nv["summary"] if r["noise_multiple"] == 1.0]
    assert all(r["sigma_relative"] == pytest.approx(math.sqrt(math.pi / 2)) for r in noisy)
    assert "σ (abs)" in stdout and "σ/mean|h_A|" in stdout
    rows = [line for line in stdout.splitlines() if line.strip().startswith("split a=1")]
    assert any(f"{noisy[0]['sigma']:.4g}" in line and "1.253" in line for line in rows)


def test_smoke_run_prints_rules_first_and_says_smoke(smoke):
    results, stdout = smoke
    lines = stdout.splitlines()
    first_rule = next(i for i, line in enumerate(lines) if line.startswith("[rule]"))
    first_run = next(i for i, line in enumerate(lines) if "pretrained: AUC" in line)
    assert first_rule < first_run
    assert "SMOKE RUN" in stdout
    assert len(results["rules"]) == 3 and len(results["verdicts"]) == 3
    assert results["verdicts"][0]["claim"].startswith("positive control")
    # a random tiny Llama cannot learn MultiRC in 3 steps: the premise is not confirmed, the noise rules cannot speak
    assert results["verdicts"][0]["verdict"] != CONFIRMED
    assert {v["verdict"] for v in results["verdicts"][1:]} == {PREMISE_ABSENT}


def test_smoke_run_renders_as_a_labelled_smoke_run_with_its_arms(smoke, tmp_path):
    from hf_ext.core.results_render import load_results, render_section

    results, _ = smoke
    assert results["scale"] == "noise_verdict" and results["smoke"] is True
    assert results["command"].startswith("hf-ext reproduce fl_llama --noise_verdict ")
    assert "--noise_smoke" in results["command"] and "--noise_seeds 3 5" in results["command"]
    assert "--out" not in results["command"] and "--noise_max_length" not in results["command"]  # as typed only
    arms, diffs = results["report"]
    nv = results["tables"]["noise_verdict"]
    assert [row[0] for row in arms["rows"]] == ["centralized", "split a=1 c=2", "split a=1 c=2", "split a=2 c=2",
                                                "split a=2 c=2"]  # fmt: skip
    assert [row[1] for row in arms["rows"]] == ["0", "0", "1", "0", "1"]  # s / mean|h_A| of each arm
    assert [row[0] for row in diffs["rows"]] == list(nv["differences"])
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    page = render_section(load_results(path), source="results.json")
    assert page.startswith("**Smoke run at noise_verdict scale**")
    assert "split a=2 c=2" in page


def test_a_resumed_run_trains_only_what_its_log_lacks(tmp_path, monkeypatch, capsys):
    """Every finished arm is logged as it ends; `--noise_resume` reuses the arms measured with the same settings
    (a run cut short, or seeds run apart) and trains nothing twice; other settings are never reused."""
    import hf_ext.fl_llama.reproduce_noise as rn

    base = ["--noise_verdict", "--noise_backbone", "tiny", "--noise_smoke", "--noise_depths", "1", "--noise_steps",
            "2", "--out", str(tmp_path)]  # fmt: skip
    main([*base, "--noise_seeds", "3"])
    first = json.loads((tmp_path / "results.json").read_text())["tables"]["noise_verdict"]["runs"]
    assert len((tmp_path / "noise_runs.jsonl").read_text().splitlines()) == 1 + 3  # pretrained + 3 arms of seed 3
    trained = []
    real_central, real_setup = rn._train_centralized, rn.build_setup
    monkeypatch.setattr(rn, "_train_centralized", lambda *a, **k: trained.append("central") or real_central(*a, **k))
    monkeypatch.setattr(rn, "build_setup", lambda *a, **k: trained.append("split") or real_setup(*a, **k))
    capsys.readouterr()
    main([*base, "--noise_seeds", "3", "5", "--noise_resume"])
    assert trained == ["central", "split", "split"]  # seed 5 only: seed 3's arms and the pretrained score reused
    results = json.loads((tmp_path / "results.json").read_text())["tables"]["noise_verdict"]
    assert results["runs_from_log"] == 4 and "from noise_runs.jsonl" in capsys.readouterr().out
    assert [r for r in results["runs"] if r["seed"] in (None, 3)] == first  # the logged arms, unchanged
    trained.clear()
    main([*base, "--noise_seeds", "3", "--noise_resume", "--noise_lr", "1e-3"])  # other settings: all trained
    assert trained == ["central", "split", "split"]
    trained.clear()
    main([*base, "--noise_seeds", "3"])  # without --noise_resume nothing is reused
    assert trained == ["central", "split", "split"]
