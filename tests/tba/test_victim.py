"""The victim that estimates pose: EfficientNet-Lite0 (ImageNet) trunk + closed-form ridge head. Its held-out error
beats the prior-mean predictor by a margin (a bound on the error, not a timing), the ridge solve and the folded
standardisation match their closed forms, the trunk holds the ImageNet weights, and the artifact round-trips and
stays differentiable for the attacks."""

from __future__ import annotations

import pytest
import torch

import hf_ext.tba  # noqa: F401  (registers the Auto classes)
from hf_ext.core.pretrained import efficientnet_lite0_available
from hf_ext.tba.body import ProceduralBody
from hf_ext.tba.configuration_tba import TbaVictimConfig
from hf_ext.tba.data import render_batch
from hf_ext.tba.metrics import prior_mean_errors, victim_error
from hf_ext.tba.victim import (
    extract_features,
    fit_ridge_head,
    mpjpe_score,
    pretrained_efficientnet_victim,
    ridge_path,
    ridge_solve,
)

needs_weights = pytest.mark.skipif(
    not efficientnet_lite0_available(), reason="EfficientNet-Lite0 weights not installed"
)
SIZE = 64


def test_ridge_solve_primal_and_dual_match_the_normal_equations():
    g = torch.Generator().manual_seed(0)
    for n, d in ((40, 7), (7, 40)):  # primal and dual branch
        x, y = torch.randn(n, d, generator=g), torch.randn(n, 3, generator=g)
        w = ridge_solve(x, y, 0.5)
        # the gradient of |y - xW|^2 + λ|W|^2 vanishes at the solution
        residual = x.double().T @ (x.double() @ w - y.double()) + 0.5 * w
        assert residual.abs().max() < 1e-9
    x, y = torch.randn(30, 5, generator=g), torch.randn(30, 2, generator=g)
    torch.testing.assert_close(ridge_solve(x, y, 1e-9), torch.linalg.lstsq(x.double(), y.double()).solution,
                               rtol=1e-5, atol=1e-6)  # fmt: skip
    for n, d in ((40, 7), (7, 40)):  # one Gram for several λ gives each λ's own solution
        x, y = torch.randn(n, d, generator=g), torch.randn(n, 3, generator=g)
        for lam, w in zip((0.1, 10.0), ridge_path(x, y, (0.1, 10.0))):
            torch.testing.assert_close(w, x.double().T @ torch.linalg.solve(
                x.double() @ x.double().T + lam * torch.eye(n, dtype=torch.float64), y.double()))  # fmt: skip


def test_fit_ridge_head_folds_the_standardisation_and_picks_lambda_on_validation():
    g = torch.Generator().manual_seed(1)
    x = 3 + 5 * torch.randn(200, 6, generator=g)
    w_true = torch.randn(6, 2, generator=g)
    y = x @ w_true + 0.1 * torch.randn(200, 2, generator=g) + 7
    head = torch.nn.Linear(6, 2)
    info = fit_ridge_head(head, x, y, lambdas=(1e-3, 1e4))
    assert info["lambda"] == 1e-3 and info["val_scores"][1e-3] < info["val_scores"][1e4]
    mu, sd = x.double().mean(0), x.double().std(0)
    w = ridge_solve((x.double() - mu) / sd, y.double() - y.double().mean(0), 1e-3)
    expected = ((x.double() - mu) / sd) @ w + y.double().mean(0)
    with torch.no_grad():
        torch.testing.assert_close(head(x).double(), expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="maps 6 features to 2 parameters"):
        fit_ridge_head(head, x[:, :5], y)
    with pytest.raises(ValueError, match="lambdas"):
        fit_ridge_head(head, x, y, lambdas=(0.0,))


@pytest.fixture(scope="module")
def quick_victim():
    """The small quick-scale victim: 64 px renders, the trunk at its native 64 px (no resize), 1,200 renders."""
    torch.manual_seed(0)
    body = ProceduralBody()
    config = TbaVictimConfig(backbone="efficientnet-lite0", image_size=SIZE, num_params=body.num_params,
                             backbone_kwargs=dict(num_blocks=12, input_size=64, pixel_pool=16))  # fmt: skip
    model = pretrained_efficientnet_victim(config)
    images, params = render_batch(body, 1200, seed=0, image_size=SIZE)
    fit_ridge_head(model.head, extract_features(model, images), params, score=mpjpe_score(body))
    test_x, test_p = render_batch(body, 200, seed=777, image_size=SIZE)
    return body, model.eval(), test_x, test_p


@needs_weights
def test_quick_victim_beats_the_prior_mean_on_held_out_renders(quick_victim):
    body, model, x, p = quick_victim
    errors, prior = victim_error(model, body, x, p), prior_mean_errors(body, p)
    # The bound: 15 % below the predictor that ignores the image (the ridge curve gives ~0.78 at 1,000-1,200
    # renders, ~0.67 at 6,000).
    assert errors["mpjpe"] < 0.85 * prior["mpjpe"], (errors, prior)
    assert errors["pve"] < 0.85 * prior["pve"], (errors, prior)


@needs_weights
def test_trunk_holds_the_imagenet_weights_and_is_frozen(quick_victim):
    from hf_ext.core.pretrained import load_efficientnet_lite0

    _, model, x, _ = quick_victim
    net = load_efficientnet_lite0()
    with torch.no_grad():
        from hf_ext.core.pretrained import EFFICIENTNET_MEAN, EFFICIENTNET_STD

        h = (x[:2] - torch.tensor(EFFICIENTNET_MEAN).view(1, 3, 1, 1)) / torch.tensor(EFFICIENTNET_STD).view(1, 3, 1, 1)
        h = net._swish(net._bn0(net._conv_stem(h)))
        for block in net._blocks[:12]:
            h = block(h)
        torch.testing.assert_close(model.regressor(x[:2])[:, : h[0].numel()], h.flatten(1))
    assert not any(p.requires_grad for p in model.regressor.parameters())


@needs_weights
def test_victim_round_trips_and_passes_gradients_to_the_image(quick_victim, tmp_path):
    from transformers import AutoModel

    from hf_ext.core.hub import save_artifact

    _, model, x, p = quick_victim
    save_artifact(model, tmp_path / "v")
    assert (tmp_path / "v" / "model.safetensors").is_file()
    reloaded = AutoModel.from_pretrained(tmp_path / "v").eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(pixel_values=x[:4]).params, model(pixel_values=x[:4]).params)
    xg = x[:2].clone().requires_grad_(True)
    out = model(pixel_values=xg, labels=p[:2])
    (grad,) = torch.autograd.grad(out.params.pow(2).sum(), xg)
    assert grad.abs().sum() > 0 and torch.isfinite(grad).all()
    torch.testing.assert_close(out.loss, torch.nn.functional.mse_loss(out.params, p[:2]))


def test_efficientnet_config_validation():
    with pytest.raises(ValueError, match="num_blocks <= 16"):
        TbaVictimConfig(backbone="efficientnet-lite0", backbone_kwargs=dict(num_blocks=17))
    with pytest.raises(ValueError, match="input_size"):
        TbaVictimConfig(backbone="efficientnet-lite0", backbone_kwargs=dict(input_size=100))
    with pytest.raises(ValueError, match="pixel_pool"):
        TbaVictimConfig(backbone="efficientnet-lite0", image_size=16, backbone_kwargs=dict(pixel_pool=32))


def test_train_parser_keeps_the_old_dashed_flags():
    """`hf-ext train tba` is parsed by HfArgumentParser now: every old flag still works (`--out`, dashed names,
    fractional epochs) and lands in `TbaTrainingArguments`."""
    from hf_ext.tba.train import build_parser

    old = ["--out", "/tmp/t", "--body", "anny", "--victim", "vit", "--victim-input-size", "64",
           "--num-train", "40", "--victim-epochs", "1.5", "--vae-epochs", "0.5", "--denoiser-epochs", "0",
           "--seed", "3", "--full"]  # fmt: skip
    script, args = build_parser().parse_args_into_dataclasses(args=old)
    assert script.output_dir == "/tmp/t" and script.full
    assert (args.body, args.victim, args.victim_input_size, args.num_train) == ("anny", "vit", 64, 40)
    assert (args.victim_epochs, args.vae_epochs, args.denoiser_epochs, args.seed) == (1.5, 0.5, 0.0, 3)
    script, args = build_parser().parse_args_into_dataclasses(args=["--output_dir", "/tmp/t", "--num_train", "40"])
    assert args.num_train == 40 and args.victim == "efficientnet-lite0"
    with pytest.raises(SystemExit):  # argparse refuses a body model it does not know
        build_parser().parse_args_into_dataclasses(args=["--body", "smpl"])
