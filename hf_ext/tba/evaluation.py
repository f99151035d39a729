"""Attacking the user's test images: TBA (a trained DHNG) and the gradient baselines against a loaded victim, with
per-image scores (what `hf-ext train tba --data` records and `hf-ext evaluate tba` reports and pairs).

Without ground truth, an attack's effect is the shift of the victim's prediction away from its own clean
prediction: the L2 shift of the whole output in % of the clean outputs' RMS norm (any regressor), and for a
[`TbaPoseRegressor`] also the MPJPE between the body joints of the adversarial and the clean prediction (mm). The
perceptual cost is the SSIM of the adversarial to the clean image. Every iterative attack spends `steps` victim
gradients (FGSM one), as in the reproduction.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .attacks import AdversarialLossConfig, AdversarialObjective, fgsm, mifgsm, pgd
from .interface import RegressionObjective
from .perceptual import ssim

GRADIENT_ATTACKS = ("pgd", "fgsm", "mifgsm")


@dataclass(frozen=True)
class AttackSetting:
    """The attack's budget and loss weights (recorded by train, reused by evaluate)."""

    eps: float = 8 / 255
    steps: int = 10
    lambda_perceptual: float = 50.0
    beta: float = 0.5
    seed: int = 0
    batch_size: int = 16


def _body(info: dict):
    from .body import build_body

    return build_body(info["body_model"]) if info.get("kind") == "pose" else None


def make_objective(victim, info: dict, clean: torch.Tensor, setting: AttackSetting, body=None):
    """The adversarial loss for `victim`: through its body model for a pose victim (untargeted, against the clean
    prediction), else [`RegressionObjective`]."""
    cfg = AdversarialLossConfig(lambda_perceptual=setting.lambda_perceptual)
    if info.get("kind") == "pose":
        return AdversarialObjective(victim, body if body is not None else _body(info), clean, setting.eps, cfg)
    return RegressionObjective(victim, clean, setting.eps, cfg)


def run_attack(attack, victim, info: dict, images: torch.Tensor, setting: AttackSetting) -> torch.Tensor:
    """Adversarial images for `images` (in batches of `setting.batch_size`, each seeded by `seed + batch index`).

    Args:
        attack: `"pgd"`, `"fgsm"`, `"mifgsm"`, or a [`TbaDhngModel`] (TBA with that generator).
    """
    from .dhng import TbaAttackConfig, tba_attack

    body = _body(info)
    out = []
    for i, start in enumerate(range(0, len(images), setting.batch_size)):
        clean = images[start : start + setting.batch_size]
        objective = make_objective(victim, info, clean, setting, body)
        seed = setting.seed + i
        if attack == "pgd":
            adv = pgd(objective, clean, setting.eps, setting.steps, generator=torch.Generator().manual_seed(seed))
        elif attack == "fgsm":  # against the clean prediction the gradient at x is zero: start at random
            adv = fgsm(objective, clean, setting.eps, random_start=True, generator=torch.Generator().manual_seed(seed))
        elif attack == "mifgsm":
            adv = mifgsm(objective, clean, setting.eps, setting.steps, random_start=True,
                         generator=torch.Generator().manual_seed(seed))  # fmt: skip
        elif isinstance(attack, str):
            raise ValueError(f"attack must be one of {GRADIENT_ATTACKS} or a DHNG model, got {attack!r}")
        else:
            cfg = TbaAttackConfig(eps=setting.eps, steps=setting.steps, beta=setting.beta, seed=seed)
            adv = tba_attack(objective, attack, clean, cfg)
        out.append(adv.detach())
    return torch.cat(out)


@torch.no_grad()
def _predict(victim, images: torch.Tensor, batch_size: int) -> torch.Tensor:
    from .attacks import call_victim

    return torch.cat([call_victim(victim, images[i : i + batch_size]) for i in range(0, len(images), batch_size)])


@torch.no_grad()
def attack_scores(victim, info: dict, clean: torch.Tensor, adversarial: torch.Tensor, batch_size: int = 64) -> dict:
    """Per-image scores of `adversarial` against `clean`: `output_shift` (L2 shift of the victim's output in % of
    the clean outputs' RMS norm), `ssim`, and for a pose victim `mpjpe_shift` (mm, body joints of the adversarial
    vs the clean prediction)."""
    ref = _predict(victim, clean, batch_size).float()
    pred = _predict(victim, adversarial, batch_size).float()
    flat_ref, flat_pred = ref.reshape(len(ref), -1), pred.reshape(len(pred), -1)
    scale = float(flat_ref.pow(2).sum(-1).mean().sqrt()) + 1e-12
    out = {
        "output_shift": (100 * (flat_pred - flat_ref).norm(dim=-1) / scale).tolist(),
        "ssim": ssim(adversarial, clean).tolist(),
        "linf": (adversarial - clean).abs().amax(dim=(1, 2, 3)).tolist(),
    }
    if info.get("kind") == "pose":
        from .metrics import body_errors

        out["mpjpe_shift"] = body_errors(_body(info), pred, ref)["mpjpe"].tolist()
    return out


def metric_names(label: str, info: dict) -> dict[str, str]:
    """Score key → the metric's name for attack `label` (e.g. `"TBA"`)."""
    names = {"output_shift": f"{label} output shift (%)", "ssim": f"{label} SSIM"}
    if info.get("kind") == "pose":
        names["mpjpe_shift"] = f"{label} MPJPE shift (mm)"
    return names


def score_metrics(label: str, info: dict, scores: dict, dataset: str | None) -> list[dict]:
    """The record / report entries of one attack's per-image `scores` (means over the test images)."""
    from hf_ext.core.records import metric

    types = {"output_shift": "output_shift", "ssim": "ssim", "mpjpe_shift": "mpjpe"}
    # for the attacker, higher is better for each: a larger shift, and a higher SSIM (a less visible perturbation)
    return [
        metric(name, types[key], sum(scores[key]) / len(scores[key]), dataset=dataset, higher_is_better=True)
        for key, name in metric_names(label, info).items()
    ]


__all__ = ["GRADIENT_ATTACKS", "AttackSetting", "attack_scores", "make_objective", "metric_names", "run_attack",
           "score_metrics"]  # fmt: skip
