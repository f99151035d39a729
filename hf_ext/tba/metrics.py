"""EHPS errors in millimetres: MPJPE and PVE (root-aligned) and PA-MPJPE (after a similarity Procrustes fit)."""

from __future__ import annotations

import torch


def _root(joints: torch.Tensor, root_joints: list[int]) -> torch.Tensor:
    return joints[:, root_joints].mean(1, keepdim=True)


def smooth_norm(diff: torch.Tensor) -> torch.Tensor:
    """`sqrt(|d|^2 + 1e-12)` over the last axis: differentiable where the error is exactly zero (an untargeted
    attack starts at zero error against the clean prediction, where a plain norm's gradient is NaN)."""
    return torch.sqrt((diff * diff).sum(-1) + 1e-12)


def mpjpe(pred: torch.Tensor, gt: torch.Tensor, root_joints: list[int]) -> torch.Tensor:
    """Per-sample mean per-joint position error (metres) after aligning the roots: `(B,)`."""
    return smooth_norm((pred - _root(pred, root_joints)) - (gt - _root(gt, root_joints))).mean(-1)


def pve(pred_v: torch.Tensor, gt_v: torch.Tensor, pred_j: torch.Tensor, gt_j: torch.Tensor,
        root_joints: list[int]) -> torch.Tensor:  # fmt: skip
    """Per-sample mean per-vertex error (metres), vertices translated by their skeleton's root: `(B,)`."""
    return smooth_norm((pred_v - _root(pred_j, root_joints)) - (gt_v - _root(gt_j, root_joints))).mean(-1)


def procrustes_align(pred: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """Similarity transform (scale, rotation, translation) of `pred (B, N, 3)` that best fits `gt` (Umeyama)."""
    mp, mg = pred.mean(1, keepdim=True), gt.mean(1, keepdim=True)
    p, g = pred - mp, gt - mg
    cov = p.transpose(1, 2) @ g  # (B, 3, 3)
    u, s, vh = torch.linalg.svd(cov)
    d = torch.sign(torch.linalg.det(u @ vh))
    fix = torch.ones_like(s)
    fix[:, -1] = d
    rot = u @ torch.diag_embed(fix) @ vh  # maps p to g as p @ rot
    scale = (s * fix).sum(-1) / (p * p).sum((1, 2)).clamp_min(1e-12)
    return scale[:, None, None] * (p @ rot) + mg


def pa_mpjpe(pred: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """Per-sample MPJPE after Procrustes alignment (metres): `(B,)`."""
    return smooth_norm(procrustes_align(pred, gt) - gt).mean(-1)


@torch.no_grad()
def body_errors(body, pred_params: torch.Tensor, gt_params: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-sample MPJPE, PA-MPJPE and PVE in millimetres of predicted against ground-truth body parameters."""
    pj, pv = body(pred_params)
    gj, gv = body(gt_params)
    return {
        "mpjpe": 1000 * mpjpe(pj, gj, body.root_joints),
        "pa_mpjpe": 1000 * pa_mpjpe(pj.double(), gj.double()).float(),
        "pve": 1000 * pve(pv, gv, pj, gj, body.root_joints),
    }


@torch.no_grad()
def victim_error(model, body, images: torch.Tensor, params: torch.Tensor) -> dict[str, float]:
    """Mean MPJPE, PA-MPJPE and PVE (mm) of a victim regressor on `images` against the true `params`."""
    pred = torch.cat([model(pixel_values=images[i : i + 256]).params for i in range(0, len(images), 256)])
    return {k: float(v.mean()) for k, v in body_errors(body, pred, params).items()}


def prior_mean_errors(body, gt: torch.Tensor) -> dict[str, float]:
    """Errors of the predictor that ignores the image and always outputs the prior mean (the bar's reference)."""
    prior = body.sample_params(4096, torch.Generator().manual_seed(0)).mean(0, keepdim=True).expand_as(gt)
    return {k: float(v.mean()) for k, v in body_errors(body, prior, gt).items()}


__all__ = ["body_errors", "mpjpe", "pa_mpjpe", "prior_mean_errors", "procrustes_align", "pve", "smooth_norm",
           "victim_error"]  # fmt: skip
