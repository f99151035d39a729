"""Properties of the attacks (never the TBA-vs-PGD headline, which reproduce reports): the ε-ball and [0, 1], error
under attack above clean error, seeded determinism, the generator step's direction, bad input, and the baselines'
agreement with torchattacks on a classification proxy."""

from __future__ import annotations

import pytest
import torch

from hf_ext.tba.attacks import AdversarialLossConfig, AdversarialObjective, fgsm, mifgsm, pgd
from hf_ext.tba.body import ProceduralBody
from hf_ext.tba.data import render_batch
from hf_ext.tba.dhng import DhngNoise, TbaAttackConfig, tba_attack
from hf_ext.tba.metrics import body_errors
from hf_ext.tba.modeling_tba import TbaDhngModel, TbaPoseRegressor
from hf_ext.tba.testing import tiny_dhng_config, tiny_victim_config

SIZE = 32
EPS = 8 / 255


@pytest.fixture(scope="module")
def setup():
    """A small victim fitted for a few dozen steps on 32 px renders (enough that it tracks the pose), a tiny DHNG
    and a fixed held-out batch."""
    torch.manual_seed(0)
    body = ProceduralBody()
    images, params = render_batch(body, 384, seed=0, image_size=SIZE)
    victim = TbaPoseRegressor(tiny_victim_config(image_size=SIZE, backbone_kwargs=dict(
        patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)))  # fmt: skip
    opt = torch.optim.AdamW(victim.parameters(), lr=3e-3)
    for step in range(40):
        idx = torch.randint(0, len(images), (64,))
        loss = victim(pixel_values=images[idx], labels=params[idx]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    victim.eval()
    dhng = TbaDhngModel(tiny_dhng_config(image_size=SIZE)).eval()
    x, p = render_batch(body, 12, seed=99, image_size=SIZE)
    return body, victim, dhng, x, p


def _objective(setup, **kw):
    body, victim, _, x, p = setup
    return AdversarialObjective(victim, body, x, EPS, reference_params=p, **kw)  # untargeted, away from the truth


def _attacks(setup):
    _, _, dhng, x, _ = setup
    return {
        "fgsm": lambda: fgsm(_objective(setup), x, EPS),
        "pgd": lambda: pgd(_objective(setup), x, EPS, steps=3, generator=torch.Generator().manual_seed(0)),
        "mifgsm": lambda: mifgsm(_objective(setup), x, EPS, steps=3),
        "tba": lambda: tba_attack(_objective(setup), dhng, x, TbaAttackConfig(eps=EPS, steps=3)),
        "tba_no_generator_grad": lambda: tba_attack(
            _objective(setup), dhng, x, TbaAttackConfig(eps=EPS, steps=3, generator_grad=False)
        ),
    }


@pytest.fixture(scope="module")
def adversarials(setup):
    return {name: run() for name, run in _attacks(setup).items()}


@pytest.mark.parametrize("name", ["fgsm", "pgd", "mifgsm", "tba", "tba_no_generator_grad"])
def test_perturbation_stays_in_the_ball_and_in_range(setup, adversarials, name):
    x = setup[3]
    adv = adversarials[name]
    assert adv.shape == x.shape and adv.min() >= 0 and adv.max() <= 1
    assert (adv - x).abs().max() <= EPS + 1e-6
    assert (adv - x).abs().max() > EPS / 4  # it did perturb


@pytest.mark.parametrize("name", ["fgsm", "pgd", "mifgsm", "tba"])
def test_error_under_attack_exceeds_clean_error(setup, adversarials, name):
    body, victim, _, x, p = setup
    with torch.no_grad():
        clean = body_errors(body, victim(pixel_values=x).params, p)
        adv = body_errors(body, victim(pixel_values=adversarials[name]).params, p)
    for metric in ("mpjpe", "pve"):
        assert adv[metric].mean() > clean[metric].mean(), (metric, clean[metric].mean(), adv[metric].mean())


def test_fixed_seed_gives_identical_results(setup):
    runs = _attacks(setup)
    torch.testing.assert_close(runs["tba"](), runs["tba"](), rtol=0, atol=0)
    torch.testing.assert_close(runs["pgd"](), runs["pgd"](), rtol=0, atol=0)
    _, _, dhng, x, _ = setup
    other = tba_attack(_objective(setup), dhng, x, TbaAttackConfig(eps=EPS, steps=3, seed=1))
    assert not torch.equal(other, runs["tba"]())


def test_step_invariant_work_is_done_once_and_changes_nothing(setup):
    """`reuse_clean_work` computes the ControlNet's embedding of the clean image and the clean image's SSIM
    statistics once per attack instead of at every step: bitwise the same adversarial images and loss trace as the
    uncached path, and the embedding network runs once instead of `steps + 1` times (so the cache is really used)."""
    _, _, dhng, x, _ = setup
    calls = []
    hook = dhng.controlnet.controlnet_cond_embedding.register_forward_hook(lambda *a: calls.append(1))
    stats_calls = []
    import hf_ext.tba.attacks as attacks_module

    real_stats = attacks_module.reference_stats
    attacks_module.reference_stats = lambda y: stats_calls.append(1) or real_stats(y)
    try:
        runs = {}
        for reuse in (True, False):
            calls.clear()
            config = TbaAttackConfig(eps=EPS, steps=4, reuse_clean_work=reuse)
            runs[reuse] = tba_attack(_objective(setup), dhng, x, config, return_trace=True)
            assert len(calls) == (1 if reuse else 5), (reuse, len(calls))  # 4 steps + the final noise
    finally:
        hook.remove()
        attacks_module.reference_stats = real_stats
    assert len(stats_calls) == 1  # the cached path asked for the clean statistics once, the uncached path never
    assert torch.equal(runs[True][0], runs[False][0])
    assert runs[True][1] == runs[False][1]
    uncached = _objective(setup)
    uncached.reuse_clean_work = False  # PGD shares the objective's cache: same images either way
    cached = pgd(_objective(setup), x, EPS, 3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(cached, pgd(uncached, x, EPS, 3, generator=torch.Generator().manual_seed(0)))


def test_tba_counts_one_victim_gradient_per_step(setup):
    _, _, dhng, x, _ = setup
    objective = _objective(setup)
    tba_attack(objective, dhng, x, TbaAttackConfig(eps=EPS, steps=4))
    assert objective.grad_evals == 4
    objective = _objective(setup)
    pgd(objective, x, EPS, steps=4)
    assert objective.grad_evals == 4


def test_generator_step_increases_the_loss_on_a_fixed_batch(setup):
    """Untargeted: a small step along the generator gradient raises the adversarial loss; targeted: it lowers the
    distance to the target (raises the negated loss)."""
    body, victim, dhng, x, _ = setup
    from hf_ext.tba.attacks import project

    for targeted in (False, True):
        target = body.sample_params(len(x), torch.Generator().manual_seed(5)) if targeted else None
        objective = AdversarialObjective(victim, body, x, EPS, AdversarialLossConfig(targeted=targeted), target)
        # untargeted here: away from the clean prediction (the reference when no ground truth is given)
        noise = DhngNoise(dhng, x, TbaAttackConfig(eps=EPS))
        free = list(noise.free.values())
        for v in free:
            v.requires_grad_(True)
        loss0 = objective(project(x + noise(), x, EPS))
        grads = torch.autograd.grad(loss0.sum(), free)
        noise.step(list(grads), beta=0.02)
        with torch.no_grad():
            loss1 = objective(project(x + noise(), x, EPS))
        assert loss1.mean() > loss0.detach().mean(), (targeted, loss0.mean(), loss1.mean())


def test_ablations_and_bad_input(setup):
    body, victim, dhng, x, _ = setup
    for kw in (dict(use_controlnet=False), dict(use_vae=False)):
        adv = tba_attack(_objective(setup), dhng, x, TbaAttackConfig(eps=EPS, steps=1, **kw))
        assert (adv - x).abs().max() <= EPS + 1e-6
    with pytest.raises(ValueError, match="eps"):
        TbaAttackConfig(eps=0.0)
    with pytest.raises(ValueError, match="must be > 0"):
        pgd(_objective(setup), x, -0.1, steps=1)
    with pytest.raises(ValueError, match="must be > 0"):
        AdversarialObjective(victim, body, x, 0.0)
    with pytest.raises(ValueError, match=r"pixel values in \[0, 1\]"):
        AdversarialObjective(victim, body, x * 2, EPS)
    with pytest.raises(ValueError, match="32x32 images"):
        AdversarialObjective(victim, body, torch.rand(2, 3, 24, 24), EPS)
    with pytest.raises(ValueError, match="at least one noise branch"):
        TbaAttackConfig(use_vae=False, use_controlnet=False)
    wide = TbaPoseRegressor(tiny_victim_config(image_size=SIZE, num_params=body.num_params + 2)).eval()
    with pytest.raises(ValueError, match="victim and body model do not match"):
        AdversarialObjective(wide, body, x, EPS)
    # Against the clean prediction the gradient at x is zero: plain FGSM cannot move, the random start can. (Without
    # the SSIM term: its gradient at x' = x is zero only up to rounding, which sign() would turn into a full step.)
    still = fgsm(AdversarialObjective(victim, body, x, EPS, AdversarialLossConfig(lambda_perceptual=0.0)), x, EPS)
    torch.testing.assert_close(still, x, rtol=0, atol=0)
    moved = fgsm(AdversarialObjective(victim, body, x, EPS), x, EPS, random_start=True,
                 generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert (moved - x).abs().max() > EPS / 2
    with pytest.raises(ValueError, match="targeted attack needs reference_params"):
        AdversarialObjective(victim, body, x, EPS, AdversarialLossConfig(targeted=True))


# ---- cross-check against torchattacks on a classification proxy -------------------------------------------------

torchattacks = pytest.importorskip(
    "torchattacks",
    reason="torchattacks is installed with --no-deps (its wheel requires torchvision, which does not import beside "
    "the local torch CPU wheel; its attack code never imports torchvision)",
)


def _proxy():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 8 * 8, 5)).eval()  # fmt: skip
    x = torch.rand(6, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    y = torch.arange(6) % 5
    ce = lambda adv: torch.nn.functional.cross_entropy(model(adv), y, reduction="none")  # noqa: E731
    return model, x, y, ce


def test_baselines_match_torchattacks_on_a_classifier():
    model, x, y, ce = _proxy()
    eps, alpha, steps = 8 / 255, 2 / 255, 4
    torch.testing.assert_close(fgsm(ce, x, eps), torchattacks.FGSM(model, eps=eps)(x, y), rtol=0, atol=1e-6)
    torch.manual_seed(7)
    ours = pgd(ce, x, eps, steps=steps, alpha=alpha)
    torch.manual_seed(7)
    theirs = torchattacks.PGD(model, eps=eps, alpha=alpha, steps=steps, random_start=True)(x, y)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    ours = mifgsm(ce, x, eps, steps=steps, alpha=alpha, decay=1.0)
    theirs = torchattacks.MIFGSM(model, eps=eps, alpha=alpha, steps=steps, decay=1.0)(x, y)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)


def test_tuning_keeps_the_best_of_an_equal_grid_per_arm(setup):
    """`tune` scores the same number of configurations per arm on the tuning split, keeps each arm's highest
    white-box MPJPE, and the wall-time-matched PGD gets TBA's time in PGD steps."""
    from hf_ext.tba.tuning import GRIDS, time_matched_steps, tune

    body, victim, dhng, _, _ = setup
    result = tune(body, victim, dhng, EPS, 1, 2, AdversarialLossConfig())
    assert {len(rows) for rows in result["grid"].values()} == {4} and set(result["grid"]) == set(GRIDS)
    for arm, rows in result["grid"].items():
        assert [r["config"] for r in rows] == GRIDS[arm]
        assert result["chosen"][arm] == max(rows, key=lambda r: r["mpjpe_mm"])["config"]
        assert all(r["mpjpe_mm"] > 0 and r["time_s"] > 0 for r in rows)
    assert time_matched_steps({"step_time_s": {"pgd": 0.1, "tba": 1.04}}, 5) == 52
    assert time_matched_steps({"step_time_s": {"pgd": 1.0, "tba": 0.5}}, 5) == 5  # never below the gradient budget


def test_random_draws_come_from_the_seeded_cpu_generator_whatever_the_device():
    """PGD's random start, the body's parameter prior and the DHNG's reparameterisation noise are drawn from the
    seeded CPU generator and only then moved to the batch's device, so a `--device cuda` run attacks the same images
    with the same draws as the CPU run: pinned here against the draws made by hand on the CPU."""
    from hf_ext.tba.attacks import _random_start

    clean = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    by_hand = torch.empty(clean.shape).uniform_(-0.1, 0.1, generator=torch.Generator().manual_seed(5))
    assert torch.equal(_random_start(clean, 0.1, torch.Generator().manual_seed(5)), (clean + by_hand).clamp(0, 1))
    body = ProceduralBody()
    gen = torch.Generator().manual_seed(3)
    pose = torch.randn(4, body.num_pose, generator=gen) * body.pose_std
    shape = torch.randn(4, body.num_shape, generator=gen).clamp(-2.5, 2.5)
    assert torch.equal(body.sample_params(4, torch.Generator().manual_seed(3)), torch.cat([pose, shape], -1))
    dhng = TbaDhngModel(tiny_dhng_config()).eval()
    images, _ = render_batch(body, 2, seed=1, image_size=dhng.config.image_size)
    with torch.no_grad():
        state = dhng.prepare(images, torch.Generator().manual_seed(7))
        posterior = dhng.vae.encode(images * 2 - 1).latent_dist
    mu, std = posterior.mean, posterior.std
    gen = torch.Generator().manual_seed(7)
    xi, xi_t = torch.randn(mu.shape, generator=gen), torch.randn(mu.shape, generator=gen)
    a = dhng.alpha_bar
    assert torch.allclose(state["z"], mu + std * xi, atol=1e-6)
    assert torch.allclose(state["z_t"], a**0.5 * mu + (1 - a) ** 0.5 * xi_t, atol=1e-6)
