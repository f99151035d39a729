"""The TBA attack: DHNG noise fused inside the L∞ ball, refined with gradients from both the generators and the victim
(spec §1.3, a reconstruction: the paper's code is not public).

One iteration costs one victim gradient evaluation, like one PGD step: the loss at
`x_t = Proj(x + δ(η) + r)` is back-propagated once, and the same backward pass gives both signals,
`∂L/∂x_t` (the victim's, for the PGD-like residual `r`) and `∂L/∂η` (through the decoder, the UNet and the
ControlNet, for the generators' free variables `η`). So TBA and PGD at the same `steps` use the same number of
victim gradients.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from hf_ext.core.validation import check_finite_number, check_positive_int

from .attacks import AdversarialObjective, check_clean_images, check_eps, project


@dataclass
class TbaAttackConfig:
    """Knobs of the TBA attack (every default is an [INF] choice of the spec, not the paper's).

    Args:
        eps (`float`, defaults to 8/255): L∞ budget in [0, 1] pixel units.
        steps (`int`, defaults to 10): refinement iterations (= victim gradient evaluations).
        alpha (`float`, *optional*): signed step of the residual; defaults to `2.5 eps / steps` (as PGD).
        beta (`float`, defaults to 0.5): step on the generators' free variables, along the per-sample
            RMS-normalised gradient (latent units).
        use_vae (`bool`, defaults to `True`): include the VAE branch (`False`: the ControlNet-only ablation).
        use_controlnet (`bool`, defaults to `True`): include the ControlNet branch (`False`: VAE-only ablation).
        generator_grad (`bool`, defaults to `True`): update the generators' free variables (`False`: the
            "no generator gradient" ablation; the DHNG noise is then only a feature-aligned start).
        w_vae (`float`, defaults to 0.5), w_controlnet (`float`, defaults to 0.5): fusion weights.
        noise_gain (`float`, defaults to 1.0): the spec's fusion `δ = ε tanh(gain · δ0 / ε)`: linear (`δ ≈ gain ·
            δ0`) for noise well inside the ball, saturating smoothly at its surface, and finite with a finite
            gradient whatever `δ0` is (a branch that outputs exactly zero gives `δ = 0`, not NaN).
        seed (`int`, defaults to 0): seeds the reparameterisation samples.
        reuse_clean_work (`bool`, defaults to `True`): compute what does not depend on the perturbation once per
            attack (the ControlNet's embedding of the clean image, the clean image's SSIM statistics) instead of at
            every step; the output is the same either way (`False`: the uncached path, kept for
            `benchmarks/tba_cost.py`).
    """

    eps: float = 8 / 255
    steps: int = 10
    alpha: float | None = None
    beta: float = 0.5
    use_vae: bool = True
    use_controlnet: bool = True
    generator_grad: bool = True
    w_vae: float = 0.5
    w_controlnet: float = 0.5
    noise_gain: float = 1.0
    seed: int = 0
    reuse_clean_work: bool = True

    def __post_init__(self):
        check_eps(self.eps)
        check_positive_int("steps", self.steps)  # first: a string would fail the comparisons below unnamed
        if not (self.use_vae or self.use_controlnet):
            raise ValueError("TBA needs at least one noise branch: use_vae or use_controlnet")
        if self.beta < 0 or self.noise_gain <= 0:
            raise ValueError("beta must be >= 0 and noise_gain > 0")
        check_finite_number("beta", self.beta, low=0.0)
        check_finite_number("noise_gain", self.noise_gain, low=0.0, low_open=True)
        check_finite_number("w_vae", self.w_vae, low=0.0)
        check_finite_number("w_controlnet", self.w_controlnet, low=0.0)
        if self.alpha is not None:
            check_finite_number("alpha", self.alpha, low=0.0, low_open=True, high=1.0)

    def to_dict(self) -> dict:
        return asdict(self)


def _rms(t: torch.Tensor) -> torch.Tensor:
    return t.pow(2).mean(dim=tuple(range(1, t.ndim)), keepdim=True).sqrt()


def fuse(d0: torch.Tensor, eps: float, gain: float = 1.0) -> torch.Tensor:
    """The spec's fusion of the branch noises into the L∞ ball: `ε tanh(gain · δ0 / ε)`."""
    return eps * torch.tanh(gain * d0 / eps)


class DhngNoise:
    """The fused DHNG noise `δ(η)` for one batch of clean images, as a differentiable function of its free variables
    `η = (η_v, η_latent, gains)`."""

    def __init__(self, dhng, clean: torch.Tensor, config: TbaAttackConfig):
        self.dhng, self.config = dhng.eval(), config
        gen = torch.Generator().manual_seed(config.seed)
        self.state = dhng.prepare(clean, gen, reuse_clean_work=config.reuse_clean_work)
        b = clean.shape[0]
        self.free: dict[str, torch.Tensor] = {}
        if config.use_vae:
            self.free["eta_vae"] = torch.zeros_like(self.state["z"])
        if config.use_controlnet:
            self.free["eta_latent"] = torch.zeros_like(self.state["z_t"])
            self.free["gains"] = torch.ones(b, dhng.num_residuals, device=clean.device)

    def __call__(self) -> torch.Tensor:
        c = self.config
        d0 = 0
        if c.use_vae:
            d0 = d0 + c.w_vae * self.dhng.vae_noise(self.state, self.free["eta_vae"])
        if c.use_controlnet:
            free = self.free
            d0 = d0 + c.w_controlnet * self.dhng.controlnet_noise(self.state, free["eta_latent"], free["gains"])
        return fuse(d0, c.eps, c.noise_gain)

    def step(self, grads: list[torch.Tensor], beta: float) -> None:
        """Ascent on the free variables along per-sample RMS-normalised gradients."""
        for (name, value), grad in zip(self.free.items(), grads):
            self.free[name] = (value + beta * grad / (_rms(grad) + 1e-12)).detach()


def tba_attack(objective: AdversarialObjective, dhng, clean: torch.Tensor, config: TbaAttackConfig | None = None,
               return_trace: bool = False):  # fmt: skip
    """Runs TBA on a batch and returns the adversarial images (and, with `return_trace`, the loss per step).

    Args:
        objective ([`AdversarialObjective`]): the victim's adversarial loss on `clean`.
        dhng ([`TbaDhngModel`]): the noise generators.
        clean (`torch.Tensor`): images `(B, 3, S, S)` in [0, 1].
        config ([`TbaAttackConfig`], *optional*): the attack's knobs.
    """
    config = config or TbaAttackConfig()
    check_clean_images(clean, "tba_attack")
    eps = config.eps
    alpha = 2.5 * eps / config.steps if config.alpha is None else config.alpha
    if tuple(clean.shape[-2:]) != (dhng.config.image_size,) * 2:
        raise ValueError(f"the generator was built for {dhng.config.image_size}px images, got {tuple(clean.shape)}")
    noise = DhngNoise(dhng, clean, config)
    objective.reuse_clean_work = config.reuse_clean_work
    residual = torch.zeros_like(clean)
    trace = []
    fixed = None
    if not config.generator_grad:  # η never moves: the DHNG noise is computed once
        with torch.no_grad():
            fixed = noise()
    for _ in range(config.steps):
        free = list(noise.free.values())
        with torch.set_grad_enabled(True):
            for v in free:
                v.requires_grad_(config.generator_grad)
            delta = noise() if fixed is None else fixed
            adv = project(clean + delta + residual, clean, eps)
            if not config.generator_grad:
                adv.requires_grad_(True)
            loss = objective(adv)
            wrt = [adv] + (free if config.generator_grad else [])
            grads = torch.autograd.grad(loss.sum(), wrt)
        objective.grad_evals += 1
        trace.append(float(loss.detach().mean()))
        # Absorb the projection into the residual, then take the victim's signed step.
        residual = (adv.detach() - clean - delta.detach()) + alpha * grads[0].sign()
        if config.generator_grad:
            noise.step(list(grads[1:]), config.beta)
    with torch.no_grad():
        adv = project(clean + (noise() if fixed is None else fixed) + residual, clean, eps)
    return (adv, trace) if return_trace else adv


__all__ = ["DhngNoise", "TbaAttackConfig", "fuse", "tba_attack"]
