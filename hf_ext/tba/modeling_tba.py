"""TBA models: the victim pose/shape regressor ([`TbaPoseRegressor`]) and the dual heterogeneous noise generator
([`TbaDhngModel`]) of [TBA, arXiv 2504.17457](https://arxiv.org/abs/2504.17457).

Self-contained (relative imports plus torch / transformers / diffusers only): this file is copied next to the
weights, so a Hub user loads either artifact with `trust_remote_code=True` without hf_ext.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_tba import TbaDhngConfig, TbaVictimConfig


def check_pixel_values(pixel_values: torch.Tensor, image_size: int, who: str) -> None:
    """Raises a `ValueError` naming the problem unless `pixel_values` is `(B, 3, image_size, image_size)` in [0, 1]."""
    if not isinstance(pixel_values, torch.Tensor) or pixel_values.ndim != 4 or pixel_values.shape[1] != 3:
        shape = tuple(pixel_values.shape) if isinstance(pixel_values, torch.Tensor) else type(pixel_values).__name__
        raise ValueError(f"{who} expects images of shape (batch, 3, {image_size}, {image_size}), got {shape}")
    if tuple(pixel_values.shape[-2:]) != (image_size, image_size):
        raise ValueError(
            f"{who} expects {image_size}x{image_size} images, got {pixel_values.shape[-2]}x{pixel_values.shape[-1]}"
        )
    if pixel_values.shape[0] == 0:
        raise ValueError(f"{who} got an empty batch: pass at least one image of shape (3, {image_size}, {image_size})")
    if not pixel_values.is_floating_point():
        raise ValueError(f"{who} expects float pixel values in [0, 1], got {pixel_values.dtype}")
    lo, hi = float(pixel_values.detach().min()), float(pixel_values.detach().max())
    if lo < 0.0 or hi > 1.0 or math.isnan(lo) or math.isnan(hi):
        raise ValueError(f"{who} expects pixel values in [0, 1], got values in [{lo:.4g}, {hi:.4g}]")


@dataclass
class TbaPoseOutput(ModelOutput):
    """Output of [`TbaPoseRegressor`].

    Args:
        loss (`torch.FloatTensor`, *optional*): MSE against `labels` (the backbone's regression loss).
        params (`torch.FloatTensor` of shape `(batch, num_params)`): predicted pose and shape parameters.
    """

    loss: torch.FloatTensor | None = None
    params: torch.FloatTensor | None = None


# ImageNet normalisation of EfficientNet-Lite0 (as `hf_ext.core.pretrained.EFFICIENTNET_MEAN/STD`; repeated here
# because this file must not import hf_ext).
_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)


class EfficientNetFeatures(torch.nn.Module):
    """The frozen EfficientNet-Lite0 trunk of the `"efficientnet-lite0"` victim: stem and the first `num_blocks`
    MBConv blocks on the image resized to `input_size` and ImageNet-normalised; the output is the flattened feature
    map concatenated with the `pixel_pool`-pooled pixels (in [0, 1]), a fixed-width vector for the linear head.

    The architecture comes from `efficientnet_lite_pytorch` (random weights); the ImageNet weights are copied in at
    training time ([`hf_ext.tba.victim.pretrained_efficientnet_victim`]) and saved with the model.
    """

    def __init__(self, image_size: int, num_blocks: int, input_size: int, pixel_pool: int):
        super().__init__()
        try:
            from efficientnet_lite_pytorch import EfficientNet
        except ImportError as err:
            raise ImportError("the efficientnet-lite0 victim needs efficientnet-lite-pytorch: "
                              "pip install 'hf_ext[pretrained]'") from err  # fmt: skip
        net = EfficientNet.from_name("efficientnet-lite0")
        self.conv_stem, self.bn0, self.act = net._conv_stem, net._bn0, net._swish
        self.blocks = torch.nn.ModuleList(list(net._blocks)[:num_blocks])
        self.image_size, self.input_size, self.pixel_pool = image_size, input_size, pixel_pool
        with torch.no_grad():
            self.num_features = self.eval()(torch.zeros(1, 3, image_size, image_size)).shape[-1]

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = pixel_values
        if self.input_size != self.image_size:
            x = F.interpolate(x, size=(self.input_size,) * 2, mode="bilinear", align_corners=False)
        # Constants made here, not buffers: `from_pretrained` builds the model without initialising buffers that
        # the checkpoint does not hold, so a non-persistent buffer would load as garbage.
        mean = torch.tensor(_IMAGENET_MEAN, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(_IMAGENET_STD, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
        h = self.act(self.bn0(self.conv_stem((x - mean) / std)))
        for block in self.blocks:
            h = block(h)  # eval: no drop-connect
        parts = [h.flatten(1)]
        if self.pixel_pool:
            parts.append(F.adaptive_avg_pool2d(pixel_values, self.pixel_pool).flatten(1))
        return torch.cat(parts, 1)


class RandomConvFeatures(torch.nn.Module):
    """The trunk of the `"random-cnn"` victim (the architecture-disjoint transfer target): stride-2 convolutions
    with ReLU whose weights are fixed random draws (He-normal weights, N(0, 0.1) biases, from `seed`), average-pooled
    to `pool` x `pool` and flattened. No batch norm, depthwise convolution, squeeze-excitation, resize, ImageNet
    normalisation or pixel pool: nothing of the EfficientNet victims' structure or weights. The draws are saved
    with the model, so a loaded model does not depend on the generator."""

    def __init__(self, image_size: int, widths, kernel_size: int, pool: int, seed: int):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        layers, c_in = [], 3
        for i, width in enumerate(widths):
            k = kernel_size if i == 0 else 3
            conv = torch.nn.Conv2d(c_in, width, k, stride=2, padding=k // 2)
            with torch.no_grad():
                conv.weight.copy_(torch.randn(conv.weight.shape, generator=gen) * math.sqrt(2 / (c_in * k * k)))
                conv.bias.copy_(torch.randn(conv.bias.shape, generator=gen) * 0.1)
            layers += [conv, torch.nn.ReLU()]
            c_in = width
        self.convs = torch.nn.Sequential(*layers)
        self.pool = pool
        self.num_features = c_in * pool * pool

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(self.convs(pixel_values), self.pool).flatten(1)


class TbaPoseRegressor(PreTrainedModel):
    """A victim EHPS model on images in [0, 1]:

    - `"vit"` / `"convnext"`: `ViTForImageClassification` or `ConvNextForImageClassification` with
      `problem_type="regression"` and `num_labels = num_params` (images normalised inside to [-1, 1]);
    - `"efficientnet-lite0"`: [`EfficientNetFeatures`] (frozen ImageNet trunk + pooled pixels) and a linear `head`
      to the parameters, fitted in closed form ([`hf_ext.tba.victim.fit_ridge_head`]); the forward is plain torch,
      so attacks differentiate through it end to end (the fine-tuned victim of `hf_ext.tba.extra_victims` is this
      model with its last blocks trained);
    - `"random-cnn"`: [`RandomConvFeatures`] and a ridge `head` the same way (the architecture-disjoint transfer
      target).
    """

    config_class = TbaVictimConfig
    config: TbaVictimConfig
    base_model_prefix = "regressor"
    main_input_name = "pixel_values"

    def __init__(self, config: TbaVictimConfig):
        super().__init__(config)
        kwargs = dict(config.backbone_kwargs)
        common = dict(num_channels=3, image_size=config.image_size, num_labels=config.num_params,
                      problem_type="regression", initializer_range=config.initializer_range)  # fmt: skip
        if config.backbone == "vit":
            from transformers import ViTConfig, ViTForImageClassification

            self.regressor = ViTForImageClassification(ViTConfig(**common, **kwargs))
        elif config.backbone == "convnext":
            from transformers import ConvNextConfig, ConvNextForImageClassification

            self.regressor = ConvNextForImageClassification(ConvNextConfig(**common, **kwargs))
        else:
            trunk = RandomConvFeatures if config.backbone == "random-cnn" else EfficientNetFeatures
            self.regressor = trunk(config.image_size, **kwargs)
            self.regressor.requires_grad_(False)  # frozen: only the head is fitted
            self.head = torch.nn.Linear(self.regressor.num_features, config.num_params)
            with torch.no_grad():
                self.head.weight.zero_()
                self.head.bias.zero_()
        self.post_init()

    def _init_weights(self, module):
        # The backbones initialise themselves; the efficientnet head starts at zero (a prior-free predictor) and is
        # then fitted in closed form, so nothing here owns raw parameters.
        pass

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None, **kwargs) -> TbaPoseOutput:
        check_pixel_values(pixel_values, self.config.image_size, type(self).__name__)
        if labels is not None:
            if not isinstance(labels, torch.Tensor) or labels.ndim != 2 or labels.shape[-1] != self.config.num_params:
                raise ValueError(
                    f"labels must have {self.config.num_params} columns (num_params), shape (batch, "
                    f"{self.config.num_params}); got {tuple(getattr(labels, 'shape', ()))}"
                )
            if labels.shape[0] != pixel_values.shape[0]:
                raise ValueError(f"labels has {labels.shape[0]} rows for {pixel_values.shape[0]} images")
            if not labels.is_floating_point() or not bool(torch.isfinite(labels).all()):
                raise ValueError("labels must be finite float pose/shape parameters; got NaN, Inf or integers")
        if self.config.backbone in ("efficientnet-lite0", "random-cnn"):
            params = self.head(self.regressor(pixel_values))
            loss = F.mse_loss(params, labels) if labels is not None else None
            return TbaPoseOutput(loss=loss, params=params)
        out = self.regressor(pixel_values=pixel_values * 2 - 1, labels=labels)
        return TbaPoseOutput(loss=out.loss, params=out.logits)


class _Precomputed(torch.nn.Module):
    """Stands in for a submodule whose output is already known: returns it whatever the input."""

    def __init__(self, value: torch.Tensor):
        super().__init__()
        self.value = value

    def forward(self, *args, **kwargs) -> torch.Tensor:
        return self.value


@dataclass
class TbaDhngOutput(ModelOutput):
    """Output of [`TbaDhngModel`]'s training forward.

    Args:
        loss (`torch.FloatTensor`, *optional*): `stage="vae"`: VAE reconstruction MSE (in [-1, 1] units) +
            `kl_weight` x KL; `stage="denoiser"`: the ε-prediction MSE of the latent denoiser.
        reconstruction (`torch.FloatTensor`, *optional*): `stage="vae"`: the decoded reparameterised sample, in
            [0, 1] units.
    """

    loss: torch.FloatTensor | None = None
    reconstruction: torch.FloatTensor | None = None


class TbaDhngModel(PreTrainedModel):
    """TBA's dual heterogeneous noise generator: a diffusers `AutoencoderKL` (VAE branch) and a diffusers
    `ControlNetModel` made from a tiny `UNet2DConditionModel` (`ControlNetModel.from_unet`), conditioned on the image
    (ControlNet branch), as in the spec's "DHNG-lite with diffusers".

    Training (both on `transformers.Trainer`, see [`hf_ext.tba.trainer.train_dhng`]):

    - `forward(pixel_values)` (`stage="vae"`): the VAE's step, reconstruction + KL; the UNet and ControlNet are
      frozen;
    - `forward(pixel_values, stage="denoiser")`: the latent denoiser's step, ε-prediction MSE of
      `UNet(z_t, t, residuals=ControlNet(z_t, t, cond=x))` on the VAE's latent means `z_0 = mu(x)` (the VAE is
      frozen), `z_t = sqrt(ᾱ_t) z_0 + sqrt(1 - ᾱ_t) ε`.

    The attack uses [`prepare`], [`vae_noise`] and [`controlnet_noise`]: image-space noise (in [0, 1] units) as a
    differentiable function of the attack's free variables. The ControlNet's zero-initialised output convolutions
    are re-initialised with small normal noise (`controlnet_init_std`) so that even an untrained ControlNet
    produces, and passes gradients through, non-zero residuals.
    """

    config_class = TbaDhngConfig
    config: TbaDhngConfig
    base_model_prefix = "dhng"
    main_input_name = "pixel_values"

    def __init__(self, config: TbaDhngConfig):
        super().__init__(config)
        try:  # only the noise generator needs diffusers; the victim in this file loads without it
            from diffusers import AutoencoderKL, ControlNetModel, UNet2DConditionModel
        except ImportError as err:
            raise ImportError(
                "TbaDhngModel (the DHNG noise generator) needs diffusers, which is not installed: "
                "pip install 'diffusers>=0.42.1,<0.43'"
            ) from err

        n_vae = len(config.vae_block_out_channels)
        self.vae = AutoencoderKL(
            in_channels=3, out_channels=3, latent_channels=config.latent_channels,
            block_out_channels=tuple(config.vae_block_out_channels), down_block_types=("DownEncoderBlock2D",) * n_vae,
            up_block_types=("UpDecoderBlock2D",) * n_vae, layers_per_block=config.layers_per_block,
            norm_num_groups=config.norm_num_groups, sample_size=config.image_size,
            mid_block_add_attention=config.vae_mid_attention,
        )  # fmt: skip
        n_cn = len(config.controlnet_block_out_channels)
        self.unet = UNet2DConditionModel(
            sample_size=config.image_size // 2 ** (n_vae - 1), in_channels=config.latent_channels,
            out_channels=config.latent_channels, block_out_channels=tuple(config.controlnet_block_out_channels),
            layers_per_block=config.layers_per_block,
            down_block_types=("DownBlock2D",) + ("CrossAttnDownBlock2D",) * (n_cn - 1),
            up_block_types=("CrossAttnUpBlock2D",) * (n_cn - 1) + ("UpBlock2D",),
            cross_attention_dim=config.cross_attention_dim, norm_num_groups=config.norm_num_groups,
        )  # fmt: skip
        self.controlnet = ControlNetModel.from_unet(
            self.unet, conditioning_embedding_out_channels=tuple(config.conditioning_embedding_out_channels)
        )
        self._reinit_zero_convs()
        # Frozen until their own training stage (`train_dhng` unfreezes them); the attack still differentiates
        # through them.
        self.unet.requires_grad_(False)
        self.controlnet.requires_grad_(False)
        self.post_init()

    def _init_weights(self, module):
        # diffusers modules initialise themselves; transformers' generic init would overwrite their scheme.
        pass

    @torch.no_grad()
    def _reinit_zero_convs(self):
        cn, std = self.controlnet, self.config.controlnet_init_std
        convs = [*cn.controlnet_down_blocks, cn.controlnet_mid_block, cn.controlnet_cond_embedding.conv_out]
        for conv in convs:
            conv.weight.normal_(0.0, std)
            conv.bias.zero_()

    def alpha_bar_at(self, t: torch.Tensor) -> torch.Tensor:
        """`ᾱ_t` of the linear beta schedule (as diffusers' `DDPMScheduler(beta_schedule="linear")`) at steps `t`."""
        c = self.config
        betas = torch.linspace(c.beta_start, c.beta_end, c.num_train_timesteps, dtype=torch.float64)
        return torch.cumprod(1 - betas, 0)[t.long().cpu()].float().to(t.device)

    @property
    def alpha_bar(self) -> float:
        """`ᾱ_t` at the configured attack timestep."""
        return float(self.alpha_bar_at(torch.tensor([self.config.timestep]))[0])

    @property
    def num_residuals(self) -> int:
        return len(self.controlnet.controlnet_down_blocks) + 1

    def forward(self, pixel_values: torch.Tensor, stage: str = "vae", **kwargs) -> TbaDhngOutput:
        check_pixel_values(pixel_values, self.config.image_size, type(self).__name__)
        if stage == "denoiser":
            return TbaDhngOutput(loss=self.denoiser_loss(pixel_values))
        if stage != "vae":
            raise ValueError(f"stage must be 'vae' or 'denoiser', got {stage!r}")
        x = pixel_values * 2 - 1
        posterior = self.vae.encode(x).latent_dist
        recon = self.vae.decode(posterior.sample()).sample
        loss = F.mse_loss(recon, x) + self.config.kl_weight * posterior.kl().mean() / recon[0].numel()
        return TbaDhngOutput(loss=loss, reconstruction=(recon + 1) / 2)

    def denoiser_loss(self, pixel_values: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """ε-prediction MSE of the ControlNet-guided UNet on the VAE's latent means of `pixel_values` (the
        condition), at steps drawn uniformly from `denoiser_timesteps` (a band around the attack's `timestep`, so a
        short training run spends itself where the attack looks)."""
        with torch.no_grad():
            z0 = self.vae.encode(pixel_values * 2 - 1).latent_dist.mean
        lo, hi = self.config.denoiser_timesteps
        b = z0.shape[0]
        t = torch.randint(lo, hi + 1, (b,), generator=generator).to(z0.device)
        noise = torch.randn(z0.shape, generator=generator, dtype=z0.dtype).to(z0.device)
        a = self.alpha_bar_at(t).view(b, 1, 1, 1)
        z_t = a.sqrt() * z0 + (1 - a).sqrt() * noise
        return F.mse_loss(self.predict_noise(z_t, t, pixel_values), noise)

    def _null_embedding(self, latent: torch.Tensor) -> torch.Tensor:
        return torch.zeros(latent.shape[0], 1, self.config.cross_attention_dim, dtype=latent.dtype,
                           device=latent.device)  # fmt: skip

    def controlnet_residuals(self, latent: torch.Tensor, cond: torch.Tensor, t: torch.Tensor | None = None,
                             cond_embedding: torch.Tensor | None = None):  # fmt: skip
        """The ControlNet's down and mid residuals `[*down, mid]` for `latent` at step `t` (default: the attack's).

        `cond_embedding`: `controlnet_cond_embedding(cond)` computed beforehand (the condition is the clean image, the
        same at every attack step), used instead of recomputing it."""
        if t is None:
            t = torch.full((latent.shape[0],), self.config.timestep, dtype=torch.long, device=latent.device)
        cn = self.controlnet
        embedder = cn.controlnet_cond_embedding
        if cond_embedding is not None:  # diffusers embeds `controlnet_cond` inside forward: hand it the cached one
            cn.controlnet_cond_embedding = _Precomputed(cond_embedding)
        try:
            down, mid = cn(latent, t, encoder_hidden_states=self._null_embedding(latent), controlnet_cond=cond,
                           return_dict=False)  # fmt: skip
        finally:
            cn.controlnet_cond_embedding = embedder
        return [*down, mid]

    def predict_noise(self, latent: torch.Tensor, t: torch.Tensor, cond: torch.Tensor,
                      gains: torch.Tensor | None = None,
                      cond_embedding: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """`ε̂ = UNet(z_t, t, residuals = gains · ControlNet(z_t, t, cond))`; `gains (B, num_residuals)` scale the
        residuals one by one (the attack's free variables; default 1); `cond_embedding` as in
        [`controlnet_residuals`]."""
        res = self.controlnet_residuals(latent, cond, t, cond_embedding)
        if gains is not None:
            res = [g[:, None, None, None] * r for g, r in zip(gains.unbind(1), res)]
        return self.unet(
            latent,
            t,
            encoder_hidden_states=self._null_embedding(latent),
            down_block_additional_residuals=res[:-1],
            mid_block_additional_residual=res[-1],
        ).sample

    def predict_x0(self, latent: torch.Tensor, eps_hat: torch.Tensor, t: int | None = None) -> torch.Tensor:
        """The denoised latent `x̂0 = (z_t - sqrt(1 - ᾱ_t) ε̂) / sqrt(ᾱ_t)` (DDIM's x0 prediction)."""
        a = self.alpha_bar if t is None else float(self.alpha_bar_at(torch.tensor([t]))[0])
        return (latent - math.sqrt(1 - a) * eps_hat) / math.sqrt(a)

    @torch.no_grad()
    def prepare(self, pixel_values: torch.Tensor, generator: torch.Generator | None = None,
                reuse_clean_work: bool = True) -> dict:  # fmt: skip
        """Everything about the clean images the noise branches reuse at every attack step.

        Returns a dict with the VAE mean `mu`, a reparameterised sample `z = mu + σ ξ`, the noised latent
        `z_t = sqrt(ᾱ_t) mu + sqrt(1 - ᾱ_t) ξ'`, the condition (the image itself), the decoded reference
        `decode(mu)` both branches subtract and (`reuse_clean_work`) the ControlNet's embedding of the condition,
        `cond_embedding` (`None` without: recomputed at every step, the uncached path `benchmarks/tba_cost.py`
        measures against).
        """
        check_pixel_values(pixel_values, self.config.image_size, type(self).__name__)
        posterior = self.vae.encode(pixel_values * 2 - 1).latent_dist
        mu, std = posterior.mean, posterior.std
        # Drawn on the CPU (a seeded generator's device), then moved: the same noise on every device.
        xi = torch.randn(mu.shape, generator=generator, dtype=mu.dtype).to(mu.device)
        xi_t = torch.randn(mu.shape, generator=generator, dtype=mu.dtype).to(mu.device)
        a = self.alpha_bar
        z_t = math.sqrt(a) * mu + math.sqrt(1 - a) * xi_t
        embedding = self.controlnet.controlnet_cond_embedding(pixel_values) if reuse_clean_work else None
        return {"mu": mu, "z": mu + std * xi, "z_t": z_t, "cond": pixel_values, "ref": self.vae.decode(mu).sample,
                "cond_embedding": embedding}  # fmt: skip

    def vae_noise(self, state: dict, eta_v: torch.Tensor) -> torch.Tensor:
        """VAE branch: `(decode(z + η_v) - decode(mu)) / 2`, image-space noise tailored to the image's features."""
        return (self.vae.decode(state["z"] + eta_v).sample - state["ref"]) / 2

    def controlnet_noise(self, state: dict, eta_latent: torch.Tensor, gains: torch.Tensor) -> torch.Tensor:
        """ControlNet branch (the spec's): `ε̂ = UNet(z_t + η, t, gains · ControlNet(z_t + η, t, cond=x))`, the
        denoised latent `x̂0 = (z_t + η - sqrt(1 - ᾱ_t) ε̂) / sqrt(ᾱ_t)`, decoded:
        `(decode(x̂0) - decode(mu)) / 2`. `η` moves the noised latent, `gains (B, num_residuals)` the structure the
        ControlNet injects."""
        latent = state["z_t"] + eta_latent
        t = torch.full((latent.shape[0],), self.config.timestep, dtype=torch.long, device=latent.device)
        eps_hat = self.predict_noise(latent, t, state["cond"], gains, state.get("cond_embedding"))
        x0_hat = self.predict_x0(latent, eps_hat)
        return (self.vae.decode(x0_hat).sample - state["ref"]) / 2


__all__ = [
    "EfficientNetFeatures",
    "TbaDhngModel",
    "TbaDhngOutput",
    "TbaPoseOutput",
    "TbaPoseRegressor",
    "check_pixel_values",
]
