"""The two TBA artifacts: the generator passes the same contract checks as the victim (config round trip,
save/load equality through `AutoModel`, a Trainer step changes the trainable weights of each training stage), the
ControlNet branch decodes the UNet's x̂0 prediction, the ControlNet zero-init gotcha is handled, and bad configs and
inputs give clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import hf_ext.tba  # noqa: F401  (registers the Auto classes)
from hf_ext.core.testing import comparable_config_dict, to_numpy
from hf_ext.tba.configuration_tba import TbaDhngConfig, TbaVictimConfig
from hf_ext.tba.modeling_tba import TbaDhngModel, TbaPoseRegressor
from hf_ext.tba.testing import dhng_contract_fixture, tiny_dhng_config, tiny_images, tiny_victim_config


@pytest.fixture(scope="module")
def fx():
    return dhng_contract_fixture()


def test_dhng_config_roundtrip(fx, tmp_path):
    config = fx.make_config()
    assert comparable_config_dict(fx.config_roundtrip(config)) == comparable_config_dict(config)
    config.save_pretrained(tmp_path)
    assert comparable_config_dict(TbaDhngConfig.from_pretrained(tmp_path)) == comparable_config_dict(config)


def test_dhng_save_load_outputs(fx, tmp_path):
    model = fx.make_artifact(fx.make_config())
    inputs = fx.example_inputs()
    before = fx.outputs(model, inputs)
    fx.save_artifact(model, tmp_path / "a")
    written = {p.name for p in (tmp_path / "a").iterdir()}
    assert "model.safetensors" in written and not {n for n in written if n.endswith((".bin", ".pt", ".pkl"))}
    auto_map = json.loads((tmp_path / "a" / "config.json").read_text())["auto_map"]
    assert "AutoModel" in auto_map
    reloaded = fx.load_artifact(tmp_path / "a")
    assert type(reloaded) is TbaDhngModel
    after = fx.outputs(reloaded, inputs)
    for key in before:
        np.testing.assert_allclose(to_numpy(before[key]), to_numpy(after[key]), rtol=1e-6, atol=1e-7, err_msg=key)


def test_dhng_trainer_step_changes_the_vae_only(fx, tmp_path):
    model = fx.make_artifact(fx.make_config())
    before = fx.trainable(model)
    frozen = {k: v.detach().clone() for k, v in [*model.controlnet.state_dict().items(),
                                                 *model.unet.state_dict().items()]}  # fmt: skip
    assert before and all(k.startswith("vae.") for k in before)
    trainer = fx.make_trainer(model, tmp_path)
    trainer.train()
    after = fx.trainable(model)
    assert not [k for k in before if np.array_equal(before[k], after[k])]
    now = dict([*model.controlnet.state_dict().items(), *model.unet.state_dict().items()])
    assert all(torch.equal(frozen[k], now[k]) for k in frozen)


def test_dhng_denoiser_stage_trains_unet_and_controlnet_not_the_vae(tmp_path):
    """`train_dhng`'s second stage: ε-prediction on the VAE latents changes the UNet and the ControlNet (both),
    leaves the VAE as it was, and logs its loss; the returned model is frozen."""
    from datasets import Dataset

    from hf_ext.tba.trainer import train_dhng

    batch = tiny_images(16, seed=2)
    ds = Dataset.from_dict({k: v.numpy() for k, v in batch.items()}).with_format("torch")
    torch.manual_seed(0)
    ref = TbaDhngModel(tiny_dhng_config())  # what train_dhng builds under the same seed
    history = []
    model = train_dhng(tiny_dhng_config(), ds, tmp_path, epochs=0, lr=1e-2, batch_size=8, seed=0,
                       denoiser_epochs=1, denoiser_lr=1e-2, denoiser_history=history)  # fmt: skip
    for part, changed in (("vae", False), ("unet", True), ("controlnet", True)):
        a, b = getattr(ref, part).state_dict(), getattr(model, part).state_dict()
        moved = [k for k in a if not torch.equal(a[k], b[k])]
        assert bool(moved) is changed, (part, moved[:3])
    assert history and all(np.isfinite(r["loss"]) for r in history)
    assert not any(p.requires_grad for p in model.parameters())


def test_denoiser_loss_is_the_eps_prediction_mse():
    model = TbaDhngModel(tiny_dhng_config()).eval()
    x = tiny_images(3)["pixel_values"]
    loss = model.denoiser_loss(x, torch.Generator().manual_seed(4))
    g = torch.Generator().manual_seed(4)
    lo, hi = model.config.denoiser_timesteps
    t = torch.randint(lo, hi + 1, (3,), generator=g)
    noise = torch.randn((3, 4, 8, 8), generator=g)
    with torch.no_grad():
        z0 = model.vae.encode(x * 2 - 1).latent_dist.mean
        a = model.alpha_bar_at(t).view(3, 1, 1, 1)
        z_t = a.sqrt() * z0 + (1 - a).sqrt() * noise
        expected = torch.nn.functional.mse_loss(model.predict_noise(z_t, t, x), noise)
        torch.testing.assert_close(loss, expected)
        torch.testing.assert_close(model(pixel_values=x, stage="denoiser").loss.shape, torch.Size([]))
    with pytest.raises(ValueError, match="stage must be 'vae' or 'denoiser'"):
        model(pixel_values=x, stage="unet")


def test_controlnet_branch_decodes_the_x0_prediction():
    """`x̂0 = (z_t - sqrt(1 - ᾱ_t) ε̂) / sqrt(ᾱ_t)` recovers `z_0` exactly when `ε̂` is the true noise, and the
    branch's noise is `(decode(x̂0) - decode(mu)) / 2` with `ε̂` from the ControlNet-guided UNet."""
    model = TbaDhngModel(tiny_dhng_config()).eval()
    g = torch.Generator().manual_seed(0)
    z0, eps = torch.randn(2, 4, 8, 8, generator=g), torch.randn(2, 4, 8, 8, generator=g)
    a = model.alpha_bar
    assert 0 < a < 1
    z_t = a**0.5 * z0 + (1 - a) ** 0.5 * eps
    torch.testing.assert_close(model.predict_x0(z_t, eps), z0, rtol=1e-5, atol=1e-5)
    x = tiny_images(2)["pixel_values"]
    state = model.prepare(x, torch.Generator().manual_seed(0))
    eta, gains = 0.1 * torch.randn(state["z_t"].shape, generator=g), torch.rand(2, model.num_residuals, generator=g)
    with torch.no_grad():
        latent = state["z_t"] + eta
        t = torch.full((2,), model.config.timestep, dtype=torch.long)
        eps_hat = model.predict_noise(latent, t, x, gains)
        x0 = (latent - (1 - a) ** 0.5 * eps_hat) / a**0.5
        expected = (model.vae.decode(x0).sample - model.vae.decode(state["mu"]).sample) / 2
        torch.testing.assert_close(model.controlnet_noise(state, eta, gains), expected, rtol=1e-5, atol=1e-6)
        # the gains reach the UNet: zero gains remove the ControlNet's residuals
        res = model.controlnet_residuals(latent, x, t)
        plain = model.unet(latent, t, encoder_hidden_states=torch.zeros(2, 1, model.config.cross_attention_dim),
                           down_block_additional_residuals=[0 * r for r in res[:-1]],
                           mid_block_additional_residual=0 * res[-1]).sample  # fmt: skip
        torch.testing.assert_close(model.predict_noise(latent, t, x, torch.zeros_like(gains)), plain)
        assert not torch.allclose(model.predict_noise(latent, t, x, gains), plain)


def test_controlnet_zero_init_is_replaced():
    """A fresh diffusers ControlNet outputs exact zeros and passes no gradient; the re-initialised one does both."""
    x = tiny_images(2)["pixel_values"]
    for std, nonzero in ((0.0, False), (0.02, True)):
        model = TbaDhngModel(tiny_dhng_config(controlnet_init_std=std)).eval()
        state = model.prepare(x, torch.Generator().manual_seed(0))
        eta = torch.zeros_like(state["z_t"], requires_grad=True)
        res = model.controlnet_residuals(state["z_t"] + eta, state["cond"])
        total = sum(r.abs().sum() for r in res)
        (grad,) = torch.autograd.grad(sum(r.sum() for r in res), eta)
        assert bool(total > 0) is nonzero and bool(grad.abs().sum() > 0) is nonzero


def test_victim_forward_loss_and_bad_input():
    model = TbaPoseRegressor(tiny_victim_config()).eval()
    batch = tiny_images(3)
    out = model(**batch)
    assert out.params.shape == (3, 39)
    torch.testing.assert_close(out.loss, torch.nn.functional.mse_loss(out.params, batch["labels"]))
    with pytest.raises(ValueError, match=r"pixel values in \[0, 1\]"):
        model(pixel_values=batch["pixel_values"] - 0.5)
    with pytest.raises(ValueError, match="16x16 images"):
        model(pixel_values=torch.rand(1, 3, 20, 20))
    with pytest.raises(ValueError, match=r"shape \(batch, 3, 16, 16\)"):
        model(pixel_values=torch.rand(3, 16, 16))
    with pytest.raises(ValueError, match="labels must have 39 columns"):
        model(pixel_values=batch["pixel_values"], labels=torch.zeros(3, 5))
    convnext = TbaPoseRegressor(tiny_victim_config(backbone="convnext", backbone_kwargs=dict(
        num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], patch_size=4))).eval()  # fmt: skip
    assert convnext(pixel_values=batch["pixel_values"]).params.shape == (3, 39)


def test_config_validation():
    with pytest.raises(ValueError, match="backbone must be one of"):
        TbaVictimConfig(backbone="resnet")
    with pytest.raises(ValueError, match="body_model must be one of"):
        TbaVictimConfig(body_model="smplx")
    with pytest.raises(ValueError, match="timestep must be in"):
        TbaDhngConfig(timestep=1000)
    with pytest.raises(ValueError, match="image_size must be divisible"):
        TbaDhngConfig(image_size=63)
    with pytest.raises(ValueError, match="denoiser_timesteps must be"):
        TbaDhngConfig(denoiser_timesteps=[600, 400])
    assert TbaDhngConfig(timestep=400).denoiser_timesteps == [200, 600]
