"""TBA bad-input fuzz suite: the victim and generator configs, their forwards, the attacks (FGSM, PGD, MI-FGSM, TBA),
the training arguments and reproduce flags each refuse bad input naming the field and the allowed range."""

from __future__ import annotations

import functools

import pytest
import torch

import hf_ext  # noqa: F401  (registers the config-key guard)
from hf_ext.core.testing import BadInput, assert_clear_error
from hf_ext.core.validation import UnknownConfigKeyError
from hf_ext.tba.attacks import AdversarialLossConfig, AdversarialObjective, fgsm, mifgsm, pgd
from hf_ext.tba.testing import TINY_IMAGE, tiny_dhng_config, tiny_images, tiny_victim_config

S = TINY_IMAGE


@functools.cache
def _victim():
    from hf_ext.tba.modeling_tba import TbaPoseRegressor

    torch.manual_seed(0)
    return TbaPoseRegressor(tiny_victim_config()).eval()


@functools.cache
def _dhng():
    from hf_ext.tba.modeling_tba import TbaDhngModel

    torch.manual_seed(0)
    return TbaDhngModel(tiny_dhng_config()).eval()


@functools.cache
def _body():
    from hf_ext.tba.body import build_body

    return build_body("procedural")


def _images(n=2):
    return tiny_images(n)["pixel_values"]


def _victim_forward(**inputs):
    with torch.no_grad():
        return _victim()(**{"pixel_values": _images(), **inputs})


def _loss(adv):
    return adv.mean((1, 2, 3))


def _attack_config(**kwargs):
    from hf_ext.tba.dhng import TbaAttackConfig

    return TbaAttackConfig(**kwargs)


def _tba(clean):
    from hf_ext.tba.dhng import TbaAttackConfig, tba_attack

    objective = AdversarialObjective(_victim(), _body(), _images(), 8 / 255)
    return tba_attack(objective, _dhng(), clean, TbaAttackConfig(steps=1))


def _reproduce(*argv):
    """`main(argv)` with the first expensive step replaced by an error: a flag that slips through validation shows
    up as a deep failure at once instead of starting a real run."""
    from unittest import mock

    from hf_ext.tba import reproduce

    def reached(*args, **kwargs):
        raise RuntimeError(f"bad flags {argv} reached the run (_run)")

    with mock.patch.object(reproduce, "_run", reached):
        return reproduce.main(["--out", "/dev/null/hf_ext_fuzz", *argv])


def _train_args(**kwargs):
    from hf_ext.tba.train import TbaTrainingArguments

    return TbaTrainingArguments(**kwargs)


def _detached_objective(weight):
    from hf_ext.tba.attacks import AdversarialLossConfig

    victim = _victim()

    def detached(images):
        with torch.no_grad():
            return victim(pixel_values=images).params

    cfg = AdversarialLossConfig(lambda_perceptual=weight)
    return AdversarialObjective(detached, _body(), _images(), 8 / 255, cfg)


def _loaded_dhng(**changes):
    from hf_ext.tba.configuration_tba import TbaDhngConfig

    return TbaDhngConfig.from_dict({**tiny_dhng_config().to_dict(), **changes})


def _train_cli(*argv):
    from hf_ext.tba.train import build_parser

    return build_parser().parse_args_into_dataclasses(args=[*argv, "--out", "/dev/null/hf_ext_fuzz"])


CASES = [
    # victim config
    BadInput(
        "victim typo key", lambda: tiny_victim_config(num_param=39), r"'num_param'.*num_params", UnknownConfigKeyError
    ),
    BadInput("victim image_size=0", lambda: tiny_victim_config(image_size=0), r"image_size must be an integer >= 8"),
    BadInput("victim num_params=0", lambda: tiny_victim_config(num_params=0), r"num_params must be an integer >= 1"),
    BadInput("victim backbone", lambda: tiny_victim_config(backbone="resnet"), r"backbone must be one of"),
    BadInput(
        "victim init nan",
        lambda: tiny_victim_config(initializer_range=float("nan")),
        r"initializer_range must be a finite number in \[0, 1\]",
    ),
    BadInput("victim patch", lambda: tiny_victim_config(image_size=20), r"divisible by the ViT patch_size=8"),
    # generator config
    BadInput(
        "dhng typo key",
        lambda: tiny_dhng_config(latent_channel=4),
        r"'latent_channel'.*latent_channels",
        UnknownConfigKeyError,
    ),
    BadInput("dhng latent_channels=0", lambda: tiny_dhng_config(latent_channels=0), r"latent_channels must be an"),
    BadInput("dhng norm groups=0", lambda: tiny_dhng_config(norm_num_groups=0), r"norm_num_groups must be an"),
    BadInput(
        "dhng empty channels",
        lambda: tiny_dhng_config(vae_block_out_channels=[]),
        r"vae_block_out_channels must be a non-empty list",
    ),
    BadInput(
        "dhng negative channels",
        lambda: tiny_dhng_config(controlnet_block_out_channels=[8, -16]),
        r"controlnet_block_out_channels must be a non-empty list of integers >= 1",
    ),
    BadInput("dhng kl nan", lambda: tiny_dhng_config(kl_weight=float("nan")), r"kl_weight must be a finite number"),
    BadInput("dhng beta order", lambda: tiny_dhng_config(beta_start=0.1, beta_end=0.01), r"beta_start <= beta_end"),
    BadInput("dhng timestep<0", lambda: tiny_dhng_config(timestep=-1), r"timestep must be an integer >= 0"),
    BadInput("dhng timesteps=0", lambda: tiny_dhng_config(num_train_timesteps=0), r"num_train_timesteps must be"),
    BadInput(
        "dhng denoiser band reversed",
        lambda: tiny_dhng_config(denoiser_timesteps=[700, 300]),
        r"denoiser_timesteps must be \[lo, hi\] with 0 <= lo <= hi < num_train_timesteps=1000",
    ),
    BadInput(
        "dhng denoiser band short", lambda: tiny_dhng_config(denoiser_timesteps=[3]), r"denoiser_timesteps must be"
    ),
    # forwards
    BadInput("empty batch", lambda: _victim_forward(pixel_values=torch.zeros(0, 3, S, S)), r"empty batch"),
    BadInput(
        "NaN image",
        lambda: _victim_forward(pixel_values=torch.full((2, 3, S, S), float("nan"))),
        r"pixel values in \[0, 1\]",
    ),
    BadInput(
        "image out of range",
        lambda: _victim_forward(pixel_values=torch.full((2, 3, S, S), 2.0)),
        r"pixel values in \[0, 1\]",
    ),
    BadInput(
        "integer image",
        lambda: _victim_forward(pixel_values=torch.ones(2, 3, S, S, dtype=torch.long)),
        r"float pixel values",
    ),
    BadInput(
        "wrong size", lambda: _victim_forward(pixel_values=torch.zeros(2, 3, S + 8, S + 8)), rf"expects {S}x{S} images"
    ),
    BadInput("NaN labels", lambda: _victim_forward(labels=torch.full((2, 39), float("nan"))), r"labels must be finite"),
    BadInput(
        "labels columns",
        lambda: _victim_forward(labels=torch.zeros(2, 7)),
        r"labels must have 39 columns \(num_params\)",
    ),
    BadInput("labels rows", lambda: _victim_forward(labels=torch.zeros(3, 39)), r"labels has 3 rows for 2 images"),
    BadInput("dhng empty batch", lambda: _dhng()(pixel_values=torch.zeros(0, 3, S, S)), r"empty batch"),
    BadInput("dhng stage", lambda: _dhng()(pixel_values=_images(), stage="unet"), r"stage must be 'vae' or 'denoiser'"),
    # attacks
    BadInput("fgsm eps nan", lambda: fgsm(_loss, _images(), float("nan")), r"eps .* must be > 0"),
    BadInput("fgsm eps 2", lambda: fgsm(_loss, _images(), 2.0), r"eps .* must be <= 1"),
    BadInput("fgsm eps string", lambda: fgsm(_loss, _images(), "big"), r"eps .* must be a number in \(0, 1\]"),
    BadInput("pgd steps 0", lambda: pgd(_loss, _images(), 0.03, steps=0), r"steps must be an integer >= 1"),
    BadInput("pgd alpha nan", lambda: pgd(_loss, _images(), 0.03, steps=2, alpha=float("nan")), r"alpha .* \(0, 1\]"),
    BadInput("pgd empty batch", lambda: pgd(_loss, torch.zeros(0, 3, S, S), 0.03, steps=2), r"empty batch"),
    BadInput("mifgsm decay nan", lambda: mifgsm(_loss, _images(), 0.03, 2, decay=float("nan")), r"decay must be"),
    BadInput(
        "objective NaN clean",
        lambda: AdversarialObjective(_victim(), _body(), torch.full((2, 3, S, S), float("nan")), 0.03),
        r"pixel values in \[0, 1\]",
    ),
    BadInput(
        "objective lambda nan",
        lambda: AdversarialObjective(
            _victim(), _body(), _images(), 0.03, AdversarialLossConfig(lambda_joint=float("nan"))
        ),
        r"lambda_joint must be a finite number >= 0",
    ),
    BadInput("tba config noise_gain nan", lambda: _attack_config(noise_gain=float("nan")), r"noise_gain must be"),
    BadInput("tba config w_vae nan", lambda: _attack_config(w_vae=float("nan")), r"w_vae must be a finite"),
    BadInput("tba config steps 0", lambda: _attack_config(steps=0), r"steps must be (an integer )?>= 1"),
    BadInput("tba empty clean", lambda: _tba(torch.zeros(0, 3, S, S)), r"empty batch"),
    # training arguments and reproduce flags (refused before any training)
    BadInput("train num_train 0", lambda: _train_args(num_train=0), r"num_train must be an integer >= 2"),
    BadInput("train lr nan", lambda: _train_args(victim_learning_rate=float("nan")), r"victim_learning_rate must"),
    BadInput("train body", lambda: _train_args(body="smpl"), r"body must be 'procedural' or 'anny'"),
    BadInput(
        "train denoiser_epochs nan", lambda: _train_args(denoiser_epochs=float("nan")), r"denoiser_epochs must be"
    ),
    BadInput(
        "train dhng_num_train 0", lambda: _train_args(dhng_num_train=0), r"dhng_num_train must be an integer >= 1"
    ),
    BadInput("reproduce --steps 0", lambda: _reproduce("--steps", "0"), r"--steps and --reference-steps must be"),
    BadInput("reproduce --num-test 0", lambda: _reproduce("--num-test", "0"), r"--num-test must be >= 2"),
    BadInput("reproduce --eps 2", lambda: _reproduce("--eps", "2"), r"eps .* must be <= 1"),
    BadInput("reproduce --beta nan", lambda: _reproduce("--beta", "nan"), r"--beta must be a finite number"),
    BadInput("reproduce --victim-epochs 0", lambda: _reproduce("--victim-epochs", "0"), r"victim_epochs must be"),
    # issue 41: a victim detached from its input (SSIM alone would be optimised; at weight 0 a raw RuntimeError)
    BadInput(
        "objective detached victim, default weight", lambda: _detached_objective(50.0), r"detached from its input"
    ),
    BadInput("objective detached victim, weight 0", lambda: _detached_objective(0.0), r"detached from its input"),
    BadInput(
        "body NaN params",
        lambda: _body()(torch.full((1, _body().num_params), float("nan"))),
        r"procedural body parameters must be finite",
    ),
    BadInput("attack config steps='3'", lambda: _attack_config(steps="3"), r"steps must be an integer >= 1"),
    BadInput(
        "train args victim_learning_rate='1'",
        lambda: _train_args(victim_learning_rate="1"),
        r"victim_learning_rate must be a number",
    ),
    # strict config fields and train flags, issue 38
    BadInput(
        "dhng config vae_mid_attention='no'",
        lambda: tiny_dhng_config(vae_mid_attention="no"),
        r"vae_mid_attention must be a bool",
    ),
    BadInput(
        "loaded dhng config vae_mid_attention=0",
        lambda: _loaded_dhng(vae_mid_attention=0),
        r"vae_mid_attention must be a bool",
    ),
    BadInput("train --num_train -3", lambda: _train_cli("--num_train", "-3"), r"num_train must be an integer >= 2"),
    BadInput(
        "train --vae-epochs nan", lambda: _train_cli("--vae-epochs", "nan"), r"vae_epochs must be a finite number"
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case):
    assert_clear_error(case)
