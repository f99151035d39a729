"""The two TBA artifacts: the generator passes the same contract checks as the victim (config round trip,
save/load equality through `AutoModel`, a Trainer step changes the trainable weights), the ControlNet zero-init
gotcha is handled, and bad configs and inputs give clear errors."""

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
    frozen = {k: v.detach().clone() for k, v in model.controlnet.state_dict().items()}
    assert before and all(k.startswith("vae.") for k in before)
    trainer = fx.make_trainer(model, tmp_path)
    trainer.train()
    after = fx.trainable(model)
    assert not [k for k in before if np.array_equal(before[k], after[k])]
    assert all(torch.equal(frozen[k], v) for k, v in model.controlnet.state_dict().items())


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
