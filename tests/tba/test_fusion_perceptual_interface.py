"""The DHNG fusion is the spec's `ε tanh(δ0 / ε)` (finite when a branch outputs exactly zero), the SSIM penalty
matches scikit-image and changes what the attack finds, and a user's own callable regressor (parameters or
keypoints) can be attacked through the documented interface with the same gradient accounting."""

from __future__ import annotations

import pytest
import torch

from hf_ext.tba.attacks import AdversarialLossConfig, AdversarialObjective, fgsm, mifgsm, pgd, project
from hf_ext.tba.body import ProceduralBody
from hf_ext.tba.data import render_batch
from hf_ext.tba.dhng import DhngNoise, TbaAttackConfig, fuse, tba_attack
from hf_ext.tba.interface import KeypointObjective
from hf_ext.tba.metrics import body_errors
from hf_ext.tba.modeling_tba import TbaDhngModel
from hf_ext.tba.perceptual import ssim
from hf_ext.tba.testing import tiny_dhng_config

SIZE = 16
EPS = 8 / 255


@pytest.fixture(scope="module")
def data():
    body = ProceduralBody()
    x, p = render_batch(body, 6, seed=3, image_size=SIZE)
    return body, x, p


def _linear_victim(num_out: int, seed: int = 0):
    """A user's own differentiable regressor: a fixed random linear map of 4x4-pooled pixels (a plain callable)."""
    g = torch.Generator().manual_seed(seed)
    w = 0.5 * torch.randn(3 * 16, num_out, generator=g)

    def predict(images: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.adaptive_avg_pool2d(images, 4).flatten(1) @ w

    return predict


def test_fusion_is_eps_tanh_of_d0_over_eps():
    d0 = torch.tensor([-1.0, -0.05, 0.0, 0.01, 0.2])
    torch.testing.assert_close(fuse(d0, EPS), EPS * torch.tanh(d0 / EPS))
    torch.testing.assert_close(fuse(d0, EPS, gain=2.0), EPS * torch.tanh(2 * d0 / EPS))
    small = torch.tensor([1e-5], requires_grad=True)
    (grad,) = torch.autograd.grad(fuse(small, EPS).sum(), small)
    torch.testing.assert_close(grad, torch.ones(1), rtol=1e-4, atol=0)  # linear inside the ball: δ ≈ δ0


def test_dhng_noise_is_the_weighted_fusion_of_both_branches(data):
    _, x, _ = data
    dhng = TbaDhngModel(tiny_dhng_config()).eval()
    cfg = TbaAttackConfig(eps=EPS, w_vae=0.3, w_controlnet=0.7)
    noise = DhngNoise(dhng, x, cfg)
    with torch.no_grad():
        v = dhng.vae_noise(noise.state, noise.free["eta_vae"])
        c = dhng.controlnet_noise(noise.state, noise.free["eta_latent"], noise.free["gains"])
        torch.testing.assert_close(noise(), EPS * torch.tanh((0.3 * v + 0.7 * c) / EPS))


def test_a_branch_that_outputs_exactly_zero_gives_no_nan(data, monkeypatch):
    """A branch whose noise is exactly zero (here the ControlNet branch, patched to return 0 · its inputs) gives
    δ = 0 with finite gradients and a finite attack (an RMS normalisation of δ0 made both NaN)."""
    body, x, p = data
    dhng = TbaDhngModel(tiny_dhng_config(controlnet_init_std=0.0)).eval()
    zero = lambda state, eta, gains: 0 * (eta.mean() + gains.mean()) * torch.ones_like(state["cond"])  # noqa: E731
    monkeypatch.setattr(dhng, "controlnet_noise", zero)
    cfg = TbaAttackConfig(eps=EPS, steps=2, use_vae=False)
    noise = DhngNoise(dhng, x, cfg)
    free = list(noise.free.values())
    for v in free:
        v.requires_grad_(True)
    delta = noise()
    assert torch.equal(delta, torch.zeros_like(delta))
    grads = torch.autograd.grad(delta.sum(), free)
    assert all(torch.isfinite(g).all() for g in grads)
    objective = AdversarialObjective(_linear_victim(body.num_params), body, x, EPS, reference_params=p)
    adv = tba_attack(objective, dhng, x, cfg)
    assert torch.isfinite(adv).all() and (adv - x).abs().max() <= EPS + 1e-6


def test_ssim_matches_scikit_image():
    metrics = pytest.importorskip("skimage.metrics")
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 24, 20, generator=g, dtype=torch.float64)
    y = (x + 0.1 * torch.randn(x.shape, generator=g, dtype=torch.float64)).clamp(0, 1)
    ours = ssim(x, y)
    for i in range(2):
        ref = metrics.structural_similarity(x[i].numpy(), y[i].numpy(), data_range=1.0, channel_axis=0,
                                            gaussian_weights=True, sigma=1.5, use_sample_covariance=False)  # fmt: skip
        assert abs(float(ours[i]) - ref) < 1e-6, (float(ours[i]), ref)
    torch.testing.assert_close(ssim(x, x), torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="at least 11x11"):
        ssim(x[..., :8, :8], y[..., :8, :8])


def test_the_perceptual_term_changes_what_the_attack_finds(data):
    body, x, p = data
    victim = _linear_victim(body.num_params)
    found = {}
    for lam in (0.0, 200.0):
        objective = AdversarialObjective(victim, body, x, EPS, AdversarialLossConfig(lambda_perceptual=lam), p)
        found[lam] = pgd(objective, x, EPS, steps=5, generator=torch.Generator().manual_seed(0))
    assert ssim(found[200.0], x).mean() > ssim(found[0.0], x).mean() + 0.01


def test_a_callable_parameter_regressor_is_attacked_like_the_hf_victim(data):
    body, x, p = data
    victim = _linear_victim(body.num_params)
    objective = AdversarialObjective(victim, body, x, EPS, AdversarialLossConfig(lambda_perceptual=0.0), p)
    adv = pgd(objective, x, EPS, steps=3, generator=torch.Generator().manual_seed(0))
    assert objective.grad_evals == 3
    # The objective's sign: the body error itself (not the objective, which any sign would raise) goes up.
    with torch.no_grad():
        before, after = body_errors(body, victim(x), p)["mpjpe"], body_errors(body, victim(adv), p)["mpjpe"]
    assert (after > before).float().mean() >= 0.8, (before, after)  # on (almost) every image
    with pytest.raises(ValueError, match=r"body model takes parameters of shape \(batch, 39\)"):
        AdversarialObjective(_linear_victim(5), body, x, EPS)
    with pytest.raises(ValueError, match="must be callable"):
        AdversarialObjective(object(), body, x, EPS)


def test_a_keypoint_regressor_is_attacked_through_the_interface(data):
    _, x, _ = data
    flat = _linear_victim(17 * 2)

    def keypoints(images):
        return flat(images).reshape(-1, 17, 2)

    cfg = AdversarialLossConfig(lambda_perceptual=0.0)
    dhng = TbaDhngModel(tiny_dhng_config()).eval()
    runs = {
        "fgsm": (lambda o: fgsm(o, x, EPS, random_start=True, generator=torch.Generator().manual_seed(0)), 1),
        "pgd": (lambda o: pgd(o, x, EPS, steps=3, generator=torch.Generator().manual_seed(0)), 3),
        # against the clean prediction the gradient at x is 0: MI-FGSM needs the random start here
        "mifgsm": (
            lambda o: mifgsm(o, x, EPS, steps=3, random_start=True, generator=torch.Generator().manual_seed(0)),
            3,
        ),
        "tba": (lambda o: tba_attack(o, dhng, x, TbaAttackConfig(eps=EPS, steps=3)), 3),
    }
    for name, (run, budget) in runs.items():
        objective = KeypointObjective(keypoints, x, EPS, cfg)
        adv = run(objective)
        assert objective.grad_evals == budget, name  # the same victim-gradient accounting for every attack
        moved = (keypoints(adv) - objective.ref_keypoints).norm(dim=-1).mean()
        assert moved > 0 and (adv - x).abs().max() <= EPS + 1e-6, name
    pgd_obj = KeypointObjective(keypoints, x, EPS, cfg)
    adv = pgd(pgd_obj, x, EPS, steps=3, generator=torch.Generator().manual_seed(0))
    rand = project(x + EPS * torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).sign(), x, EPS)
    # the objective's sign: the keypoint distance itself (not the objective) beats a random corner of the ball
    with torch.no_grad():
        dist = lambda im: (keypoints(im) - pgd_obj.ref_keypoints).norm(dim=-1).mean()  # noqa: E731
        assert dist(adv) > dist(rand)
    with pytest.raises(ValueError, match=r"\(batch, keypoints, dims\)"):
        KeypointObjective(flat, x, EPS)
    with pytest.raises(ValueError, match="needs reference_keypoints"):
        KeypointObjective(keypoints, x, EPS, AdversarialLossConfig(targeted=True))
    with pytest.raises(ValueError, match="detached from its input"):  # refused when built, not at the 1st step
        KeypointObjective(lambda im: keypoints(im).detach(), x, EPS, cfg)


def _loss_terms(body, victim, adv, x, ref):
    """The loss's terms computed here from the metrics and the body model, independently of the objective."""
    from hf_ext.tba.metrics import mpjpe, pve

    params = victim(adv)
    joints, verts = body(params)
    ref_joints, ref_verts = body(ref)
    root = body.root_joints
    return {
        "joint": mpjpe(joints, ref_joints, root),
        "vertex": pve(verts, ref_verts, joints, ref_joints, root),
        "param": ((params - ref) ** 2).mean(-1),
        "perceptual": 1 - ssim(adv, x),
    }


@pytest.mark.parametrize("targeted", [False, True])
def test_adversarial_loss_is_the_weighted_sum_of_its_four_terms(data, targeted):
    """Each weight multiplies its own term: the vertex (PVE) term alone, the joint term alone, ... and all four with
    the defaults (zeroing any one term in the objective fails one of these)."""
    body, x, p = data
    victim = _linear_victim(body.num_params, seed=1)
    adv = (x + EPS * torch.sign(torch.randn(x.shape, generator=torch.Generator().manual_seed(5)))).clamp(0, 1)
    ref = p + 0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(6))
    terms = _loss_terms(body, victim, adv, x, ref)
    assert all(float(t.min()) > 0 for t in terms.values())  # every term is live on this batch
    sign = -1.0 if targeted else 1.0
    weights = {"joint": "lambda_joint", "vertex": "lambda_vertex", "param": "lambda_param"}
    zero = dict(lambda_joint=0.0, lambda_vertex=0.0, lambda_param=0.0, lambda_perceptual=0.0, targeted=targeted)
    for term, name in weights.items():
        cfg = AdversarialLossConfig(**{**zero, name: 3.0})
        got = AdversarialObjective(victim, body, x, EPS, cfg, reference_params=ref)(adv)
        torch.testing.assert_close(got, sign * 3.0 * terms[term], msg=f"the {term} term")
    cfg = AdversarialLossConfig(targeted=targeted)
    want = sign * (cfg.lambda_joint * terms["joint"] + cfg.lambda_vertex * terms["vertex"]
                   + cfg.lambda_param * terms["param"]) - cfg.lambda_perceptual * terms["perceptual"]  # fmt: skip
    torch.testing.assert_close(AdversarialObjective(victim, body, x, EPS, cfg, reference_params=ref)(adv), want)


@pytest.mark.parametrize("weight", [0.0, 2.0, None])
def test_a_detached_victim_is_refused_with_a_value_error(data, weight):
    """A victim whose prediction carries no gradient to the images is refused when the objective is built, at every
    perceptual weight (None: the default): at the default weight the attack would otherwise optimise SSIM alone, at
    weight 0 autograd failed deep inside the attack with a RuntimeError."""
    body, x, p = data
    victim = _linear_victim(body.num_params)
    cfg = AdversarialLossConfig() if weight is None else AdversarialLossConfig(lambda_perceptual=weight)
    calls = []

    def counted(im):  # before any work: the one-image probe is the only call the victim sees
        calls.append(im.shape[0])
        return victim(im).detach()

    with pytest.raises(ValueError, match="detached from its input"):
        AdversarialObjective(counted, body, x, EPS, cfg)
    assert calls == [1]
    from hf_ext.tba.interface import RegressionObjective

    with pytest.raises(ValueError, match="detached from its input"):
        RegressionObjective(lambda im: victim(im).detach(), x, EPS, cfg)
    detached = [
        lambda im: victim(im).detach(),
        lambda im: victim(im.detach()),
        lambda im: torch.from_numpy(victim(im).detach().numpy()),
    ]
    for bad in detached:
        with pytest.raises(ValueError, match="detached from its input"):
            AdversarialObjective(bad, body, x, EPS, cfg, reference_params=p)

    def no_grad_victim(im):
        with torch.no_grad():
            return victim(im)

    with pytest.raises(ValueError, match="detached from its input"):
        AdversarialObjective(no_grad_victim, body, x, EPS, cfg, reference_params=p)
    trainable = torch.nn.Linear(3 * 16, body.num_params)  # parameters that require grad, the input cut off

    def cut(im):
        return trainable(torch.nn.functional.adaptive_avg_pool2d(im.detach(), 4).flatten(1))

    with pytest.raises(ValueError, match="detached from its input"):
        AdversarialObjective(cut, body, x, EPS, cfg, reference_params=p)
    AdversarialObjective(victim, body, x, EPS, cfg, reference_params=p)  # the differentiable victim is accepted
