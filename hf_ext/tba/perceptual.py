"""The perceptual measure of TBA's loss and tables: SSIM (Wang et al. 2004), differentiable, in pure torch.

LPIPS weights do not ship offline, so the "controllability" term of the adversarial loss and the perceptual column
of the comparison use SSIM with the standard constants (Gaussian window σ = 1.5, `K1 = 0.01`, `K2 = 0.03`, data
range 1), matching `skimage.metrics.structural_similarity(..., gaussian_weights=True, sigma=1.5,
use_sample_covariance=False, data_range=1, channel_axis=0)` on the valid (unpadded) region; the tests check the
agreement.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_K1, _K2, _SIGMA = 0.01, 0.03, 1.5


def _window(channels: int, dtype: torch.dtype, device) -> torch.Tensor:
    # skimage's gaussian_weights: truncate = 3.5 sigma, so the window is 2 * int(3.5 * 1.5 + 0.5) + 1 = 11 wide.
    radius = int(3.5 * _SIGMA + 0.5)
    x = torch.arange(-radius, radius + 1, dtype=dtype, device=device)
    g = torch.exp(-(x**2) / (2 * _SIGMA**2))
    g = g / g.sum()
    return (g[:, None] * g[None, :]).expand(channels, 1, -1, -1).contiguous()


def _blur(t: torch.Tensor) -> torch.Tensor:
    return F.conv2d(t, _window(t.shape[1], t.dtype, t.device), groups=t.shape[1])


def reference_stats(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The windowed mean and variance of a reference batch `y`, what [`ssim`] computes of it every call: pass them
    as `y_stats` to compute them once when `y` is fixed (the clean images of an attack)."""
    my = _blur(y)
    return my, _blur(y * y) - my * my


def ssim(x: torch.Tensor, y: torch.Tensor, y_stats: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Per-sample mean SSIM `(B,)` of images `(B, C, H, W)` in [0, 1] (mean over channels and valid pixels).

    `y_stats`: [`reference_stats`]`(y)` computed beforehand (same values, not recomputed). Raises a `ValueError`
    when the shapes differ or the images are smaller than the 11-pixel window.
    """
    if x.shape != y.shape or x.ndim != 4:
        raise ValueError(f"ssim needs two image batches of the same shape (B, C, H, W), got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")  # fmt: skip
    size = 2 * int(3.5 * _SIGMA + 0.5) + 1
    if min(x.shape[-2:]) < size:
        raise ValueError(f"ssim needs images of at least {size}x{size} pixels, got {tuple(x.shape)}")
    blur = _blur
    my, vy = reference_stats(y) if y_stats is None else y_stats
    mx = blur(x)
    # Population (not sample) covariances, as skimage with use_sample_covariance=False.
    vx, cxy = blur(x * x) - mx * mx, blur(x * y) - mx * my
    c1, c2 = _K1**2, _K2**2
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return s.mean((1, 2, 3))


__all__ = ["reference_stats", "ssim"]
