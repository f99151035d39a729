"""TBA configurations: the victim pose/shape regressor and the dual heterogeneous noise generator (DHNG).

This file is copied next to the weights when a TBA artifact is saved (transformers' `register_for_auto_class`), so
it imports nothing from hf_ext: a Hub user loads it with `trust_remote_code=True` without hf_ext installed.

Two configuration classes, not one with a `role` field: the victim and the generator are separate Hub artifacts
(the attacker ships the generator; the victim is whatever EHPS model is attacked), and `AutoModel` maps one model
class per config class.
"""

from __future__ import annotations

import math

from transformers import PreTrainedConfig

BACKBONES = ("vit", "convnext", "efficientnet-lite0", "random-cnn")
BODY_MODELS = ("procedural", "anny")

_VIT_DEFAULTS = dict(patch_size=8, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128)
_CONVNEXT_DEFAULTS = dict(patch_size=4, hidden_sizes=[24, 48, 96, 192], depths=[1, 1, 2, 1])
# EfficientNet-Lite0 trunk: the first `num_blocks` MBConv blocks (12: through the first 192-channel stride-32 block)
# on the image resized to `input_size`, flattened, beside the `pixel_pool` x `pixel_pool` average-pooled pixels.
_EFFICIENTNET_DEFAULTS = dict(num_blocks=12, input_size=128, pixel_pool=16)
# The architecture-disjoint transfer target: plain stride-2 convolutions with ReLU (fixed random weights drawn from
# `seed`), average-pooled to `pool` x `pool`, on the 64 px image itself (no resize, no ImageNet normalisation, no
# pixel pool); only its ridge head is fitted.
_RANDOM_CNN_DEFAULTS = dict(widths=[32, 64], kernel_size=5, pool=8, seed=0)
_DEFAULTS = {"vit": _VIT_DEFAULTS, "convnext": _CONVNEXT_DEFAULTS, "efficientnet-lite0": _EFFICIENTNET_DEFAULTS,
             "random-cnn": _RANDOM_CNN_DEFAULTS}  # fmt: skip


def _check_int(owner: str, name: str, value, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{owner}.{name} must be an integer >= {minimum}, got {value!r}")


def _check_real(owner: str, name: str, value, low: float = 0.0, high: float = math.inf, low_open: bool = False):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < low or value > high or (low_open and value == low):
        bracket = "(" if low_open else "["
        raise ValueError(f"{owner}.{name} must be a finite number in {bracket}{low:g}, {high:g}], got {value!r}")


class TbaVictimConfig(PreTrainedConfig):
    r"""Configuration of a victim expressive-human-pose-and-shape regressor for TBA
    ([Unveiling Hidden Vulnerabilities in Digital Human Generation via Adversarial Attacks, arXiv
    2504.17457](https://arxiv.org/abs/2504.17457)): an HF image backbone with `problem_type="regression"`
    predicting the body model's pose and shape parameters from an image in [0, 1].

    Args:
        backbone (`str`, defaults to `"vit"`): `"vit"` (`ViTForImageClassification`) or `"convnext"`
            (`ConvNextForImageClassification`), both randomly initialised and trained here; or
            `"efficientnet-lite0"`: a frozen ImageNet EfficientNet-Lite0 trunk (weights from
            `hf_ext.core.pretrained` at training time, then saved with the model) whose flattened features and
            pooled pixels feed a linear head fitted in closed form (ridge); differentiable end to end.
        backbone_kwargs (`dict`, *optional*): extra fields of the backbone's config (`ViTConfig` /
            `ConvNextConfig`); defaults to a tiny model (ViT: patch 8, width 64, 4 layers; ConvNext: widths
            24-192). For `"efficientnet-lite0"`: `num_blocks` (MBConv blocks kept, 1-16, default 12),
            `input_size` (the image is resized to it, a multiple of 32, default 128) and `pixel_pool` (side of the
            average-pooled pixels beside the features, 0 for none, default 16). `"random-cnn"`: stride-2 convolutions
            of `widths` (default [32, 64]; the first `kernel_size` wide, default 5, then 3) with ReLU and fixed random
            weights drawn from `seed` (default 0), average-pooled to `pool` x `pool` (default 8), and a linear head
            fitted in closed form: a transfer target that shares no weight and no block type with the EfficientNet.
        image_size (`int`, defaults to 64): side of the square input image.
        body_model (`str`, defaults to `"procedural"`): the body whose parameters are regressed (`"procedural"` or
            `"anny"`); an attack checks that its body matches.
        num_params (`int`, defaults to 39): output width (pose then shape parameters of `body_model`).
        initializer_range (`float`, defaults to 0.02): standard deviation of the initial weights.
    """

    model_type = "hf_ext_tba_victim"

    backbone: str = "vit"
    backbone_kwargs: dict | None = None
    image_size: int = 64
    body_model: str = "procedural"
    num_params: int = 39
    initializer_range: float = 0.02

    def __post_init__(self, **kwargs):
        defaults = _DEFAULTS.get(self.backbone, {})
        self.backbone_kwargs = {**defaults, **(self.backbone_kwargs or {})}
        super().__post_init__(**kwargs)
        self.validate_victim()

    def validate_victim(self):
        """Checks the fields; every failure is a `ValueError` that names the field."""
        name = type(self).__name__
        if self.backbone not in BACKBONES:
            raise ValueError(f"{name}.backbone must be one of {BACKBONES}, got {self.backbone!r}")
        if self.body_model not in BODY_MODELS:
            raise ValueError(f"{name}.body_model must be one of {BODY_MODELS}, got {self.body_model!r}")
        _check_int(name, "image_size", self.image_size, 8)
        _check_int(name, "num_params", self.num_params)
        _check_real(name, "initializer_range", self.initializer_range, 0.0, 1.0)
        if self.backbone == "efficientnet-lite0":
            kw = self.backbone_kwargs
            _check_int(name, "backbone_kwargs['num_blocks']", kw["num_blocks"])
            _check_int(name, "backbone_kwargs['input_size']", kw["input_size"], 32)
            _check_int(name, "backbone_kwargs['pixel_pool']", kw["pixel_pool"], 0)
            if kw["num_blocks"] > 16 or kw["input_size"] % 32:
                raise ValueError(
                    f"{name}.backbone_kwargs needs num_blocks <= 16 (EfficientNet-Lite0 has 16) and "
                    f"input_size a multiple of 32, got {kw['num_blocks']} and {kw['input_size']}"
                )
            if kw["pixel_pool"] > self.image_size:
                raise ValueError(f"{name}.backbone_kwargs['pixel_pool'] must be <= image_size={self.image_size}")
            return
        if self.backbone == "random-cnn":
            kw = self.backbone_kwargs
            widths = kw["widths"]
            if not isinstance(widths, (list, tuple)) or not widths:
                raise ValueError(f"{name}.backbone_kwargs['widths'] must be a non-empty list, got {widths!r}")
            for i, w in enumerate(widths):
                _check_int(name, f"backbone_kwargs['widths'][{i}]", w)
            for key in ("kernel_size", "pool"):
                _check_int(name, f"backbone_kwargs[{key!r}]", kw[key])
            _check_int(name, "backbone_kwargs['seed']", kw["seed"], 0)
            return
        patch = self.backbone_kwargs.get("patch_size", 1)
        _check_int(name, "backbone_kwargs['patch_size']", patch)
        if self.backbone == "vit" and self.image_size % patch:
            raise ValueError(f"{name}.image_size={self.image_size} must be divisible by the ViT patch_size={patch}")


class TbaDhngConfig(PreTrainedConfig):
    r"""Configuration of TBA's dual heterogeneous noise generator (DHNG): a diffusers `AutoencoderKL` (the VAE
    branch: feature-aligned, diverse noise from the reparameterisation sample) and a diffusers `ControlNetModel`
    made from a tiny `UNet2DConditionModel`, conditioned on the image (the ControlNet branch: structure-aligned
    noise, decoded from the UNet's x̂0 prediction), all tiny and random-initialised here; the VAE is then trained on
    the rendered images, and the UNet with its ControlNet as a latent denoiser on the VAE's latents.

    Args:
        image_size (`int`, defaults to 64): side of the square images the generator is used on.
        latent_channels (`int`, defaults to 4): channels of the VAE latent (the latent is `image_size / 2` wide).
        vae_block_out_channels (`list[int]`, defaults to `[16, 32]`): VAE encoder/decoder widths (the spec's
            `[32, 64]` costs 2.5x more per attack step on CPU).
        vae_mid_attention (`bool`, defaults to `False`): self-attention in the VAE's mid block (Stable Diffusion's
            VAE has it; off by default for CPU cost, on 32x32 latents it is a 1024-token attention).
        layers_per_block (`int`, defaults to 1): ResNet layers per VAE / ControlNet block.
        norm_num_groups (`int`, defaults to 8): GroupNorm groups.
        controlnet_block_out_channels (`list[int]`, defaults to `[16, 32]`): widths of the UNet and of the
            ControlNet made from it (`ControlNetModel.from_unet`).
        cross_attention_dim (`int`, defaults to 32): ControlNet cross-attention width (fed a null embedding).
        conditioning_embedding_out_channels (`list[int]`, defaults to `[16, 32]`): the condition encoder (one
            2x downsampling, so a `image_size` condition matches the latent).
        controlnet_init_std (`float`, defaults to 0.02): std of the normal re-initialisation of the ControlNet's
            zero-initialised output convolutions (`controlnet_down_blocks`, `controlnet_mid_block`,
            `controlnet_cond_embedding.conv_out`); with exact zeros the branch outputs 0 and passes no gradient.
        timestep (`int`, defaults to 500): diffusion step `t` at which the ControlNet sees the noised latent.
        num_train_timesteps (`int`, defaults to 1000): length of the linear beta schedule (DDPM/DDIM default).
        beta_start (`float`, defaults to 1e-4), beta_end (`float`, defaults to 0.02): the linear beta schedule.
        kl_weight (`float`, defaults to 1e-3): weight of the KL term when the VAE is trained.
        denoiser_timesteps (`list[int]`, *optional*): `[lo, hi]`, the band of diffusion steps the denoiser trains
            on (uniform); defaults to `[timestep // 2, min(3 * timestep // 2, num_train_timesteps - 1)]`, around
            the step the attack uses.
    """

    model_type = "hf_ext_tba_dhng"

    image_size: int = 64
    latent_channels: int = 4
    vae_block_out_channels: list[int] | None = None
    vae_mid_attention: bool = False
    layers_per_block: int = 1
    norm_num_groups: int = 8
    controlnet_block_out_channels: list[int] | None = None
    cross_attention_dim: int = 32
    conditioning_embedding_out_channels: list[int] | None = None
    controlnet_init_std: float = 0.02
    timestep: int = 500
    num_train_timesteps: int = 1000
    beta_start: float = 1e-4
    beta_end: float = 0.02
    kl_weight: float = 1e-3
    denoiser_timesteps: list[int] | None = None

    def __post_init__(self, **kwargs):
        name = type(self).__name__
        if not isinstance(self.vae_mid_attention, bool):  # "false" or 0 from a hand-edited config.json is refused
            raise ValueError(f"{name}.vae_mid_attention must be a bool (true / false), got {self.vae_mid_attention!r}")
        for field in ("vae_block_out_channels", "controlnet_block_out_channels", "conditioning_embedding_out_channels"):
            value = getattr(self, field)
            if value is None:
                value = [16, 32]
            if (
                not isinstance(value, (list, tuple))
                or not value
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value)
            ):
                raise ValueError(f"{name}.{field} must be a non-empty list of integers >= 1, got {value!r}")
            setattr(self, field, [int(v) for v in value])
        if (
            self.denoiser_timesteps is None
            and isinstance(self.timestep, int)
            and isinstance(self.num_train_timesteps, int)
        ):
            self.denoiser_timesteps = [self.timestep // 2, min(3 * self.timestep // 2, self.num_train_timesteps - 1)]
        super().__post_init__(**kwargs)
        self.validate_dhng()

    def validate_dhng(self):
        """Checks the fields; every failure is a `ValueError` that names the field."""
        name = type(self).__name__
        _check_int(name, "image_size", self.image_size, 8)
        for field in (
            "latent_channels",
            "layers_per_block",
            "norm_num_groups",
            "cross_attention_dim",
            "num_train_timesteps",
        ):
            _check_int(name, field, getattr(self, field))
        _check_int(name, "timestep", self.timestep, 0)
        _check_real(name, "controlnet_init_std", self.controlnet_init_std)
        _check_real(name, "kl_weight", self.kl_weight)
        _check_real(name, "beta_start", self.beta_start, 0.0, 1.0, low_open=True)
        _check_real(name, "beta_end", self.beta_end, 0.0, 1.0, low_open=True)
        if not self.beta_start <= self.beta_end or self.beta_end >= 1.0:
            raise ValueError(f"{name} needs 0 < beta_start <= beta_end < 1, got {self.beta_start} and {self.beta_end}")
        down = 2 ** (len(self.vae_block_out_channels) - 1)
        if self.image_size % down:
            raise ValueError(f"{name}.image_size must be divisible by {down}, got {self.image_size}")
        if 2 ** (len(self.conditioning_embedding_out_channels) - 1) != down:
            raise ValueError(
                f"{name}.conditioning_embedding_out_channels must downsample the condition {down}x to the latent size"
            )
        for field in ("vae_block_out_channels", "controlnet_block_out_channels"):
            if any(c % self.norm_num_groups or c % self.latent_channels for c in getattr(self, field)):
                raise ValueError(f"{name}.{field} must be multiples of norm_num_groups and latent_channels")
        if not 0 <= self.timestep < self.num_train_timesteps:
            raise ValueError(f"{name}.timestep must be in [0, num_train_timesteps), got {self.timestep}")
        band = self.denoiser_timesteps
        if (
            not isinstance(band, (list, tuple))
            or len(band) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) for v in band)
            or not 0 <= band[0] <= band[1] < self.num_train_timesteps
        ):
            raise ValueError(
                f"{name}.denoiser_timesteps must be [lo, hi] with 0 <= lo <= hi < num_train_timesteps="
                f"{self.num_train_timesteps}, got {band!r}"
            )
        self.denoiser_timesteps = [int(v) for v in band]
        if self.controlnet_init_std < 0 or self.kl_weight < 0:
            raise ValueError(f"{name}.controlnet_init_std and kl_weight must be >= 0")


__all__ = ["BACKBONES", "BODY_MODELS", "TbaDhngConfig", "TbaVictimConfig"]
