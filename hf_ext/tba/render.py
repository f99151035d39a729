"""Images of a body with known parameters: orthographic z-buffered point splatting with Lambert shading, random
smooth backgrounds and colour jitter, in pure torch (no rasteriser dependency).

The renderer makes the *data*; it does not need gradients (the attack differentiates the victim, not the renderer).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .body import BodyModel

# Vertical centre and half-height (metres) of the view for each body, so the figure fills the frame.
VIEWS = {"procedural": (-0.03, 0.97), "anny": (-0.1, 0.92)}
LIGHT = torch.tensor([0.35, 0.45, 0.82])


def project(points: torch.Tensor, body_name: str, image_size: int) -> torch.Tensor:
    """Orthographic camera looking down -z: `(..., 3)` metres -> `(..., 2)` pixel coordinates `(u, v)`."""
    center, half = VIEWS.get(body_name, (0.0, 1.0))
    s = image_size / (2 * half)
    u = image_size / 2 + s * points[..., 0]
    v = image_size / 2 - s * (points[..., 1] - center)
    return torch.stack([u, v], -1)


def _backgrounds(n: int, size: int, generator: torch.Generator) -> torch.Tensor:
    """Smooth random colour fields plus fine grain: clutter the victim must learn to ignore."""
    base = torch.rand(n, 3, 1, 1, generator=generator)
    coarse = torch.randn(n, 3, 4, 4, generator=generator) * 0.18
    field = F.interpolate(coarse, size=(size, size), mode="bicubic", align_corners=False)
    grain = torch.randn(n, 3, size, size, generator=generator) * 0.03
    return (base + field + grain).clamp(0, 1)


@torch.no_grad()
def render(body: BodyModel, params: torch.Tensor, generator: torch.Generator, image_size: int = 64,
           splat_radius: float = 1.3, jitter: bool = True) -> torch.Tensor:  # fmt: skip
    """Renders `params (B, P)` to images `(B, 3, image_size, image_size)` in [0, 1].

    Args:
        body ([`BodyModel`]): the body.
        params (`torch.Tensor`): body parameters.
        generator (`torch.Generator`): drives backgrounds and jitter (same seed, same images).
        image_size (`int`, defaults to 64): square image side in pixels.
        splat_radius (`float`, defaults to 1.3): disc radius of each splatted point, in pixels.
        jitter (`bool`, defaults to `True`): random clothing tint, brightness and contrast per image.
    """
    b = params.shape[0]
    _, verts = body(params)
    verts = verts.float()
    normals = body.vertex_normals(params)
    colors = body.vertex_colors().float()[None].expand(b, -1, -1)
    if jitter:
        tint = 0.75 + 0.5 * torch.rand(b, 1, 3, generator=generator)
        colors = (colors * tint).clamp(0, 1)
    if normals is not None:
        shade = 0.35 + 0.65 * (normals.float() @ (LIGHT / LIGHT.norm())).clamp_min(0)
    else:  # depth cue when the body has no normals at hand
        z = verts[..., 2]
        shade = 0.55 + 0.45 * (z - z.amin(1, keepdim=True)) / (z.amax(1, keepdim=True) - z.amin(1, keepdim=True) + 1e-6)
    colors = colors * shade[..., None]

    uv = project(verts, body.name, image_size)
    r = int(splat_radius)
    offs = torch.tensor([(dx, dy) for dx in range(-r, r + 1) for dy in range(-r, r + 1)
                         if dx * dx + dy * dy <= splat_radius**2], dtype=torch.long)  # fmt: skip
    centre = uv.round().long()  # (B, V, 2)
    pix = centre[:, :, None, :] + offs[None, None]  # (B, V, K, 2)
    valid = (pix >= 0).all(-1) & (pix < image_size).all(-1)
    n_v, n_k = pix.shape[1], pix.shape[2]
    flat = torch.arange(b)[:, None, None] * image_size * image_size + pix[..., 1] * image_size + pix[..., 0]
    flat = flat[valid]
    depth = verts[..., 2][:, :, None].expand(-1, -1, n_k)[valid]
    point = (torch.arange(b)[:, None, None] * n_v + torch.arange(n_v)[None, :, None]).expand(-1, -1, n_k)[valid]
    total = b * image_size * image_size
    zbuf = torch.full((total,), -float("inf")).scatter_reduce(0, flat, depth, "amax")
    front = depth >= zbuf[flat]
    # Ties at equal depth: the highest point index wins, so the result does not depend on scatter order.
    winner = torch.full((total,), -1, dtype=torch.long).scatter_reduce(0, flat[front], point[front], "amax")
    covered = winner >= 0
    img = _backgrounds(b, image_size, generator).permute(0, 2, 3, 1).reshape(total, 3).clone()
    img[covered] = colors.reshape(-1, 3)[winner[covered]]
    img = img.reshape(b, image_size, image_size, 3).permute(0, 3, 1, 2)
    if jitter:
        bright = 0.85 + 0.3 * torch.rand(b, 1, 1, 1, generator=generator)
        contrast = 0.8 + 0.4 * torch.rand(b, 1, 1, 1, generator=generator)
        mean = img.mean(dim=(1, 2, 3), keepdim=True)
        img = (mean + contrast * (img - mean)) * bright
    return img.clamp(0, 1).contiguous()


__all__ = ["VIEWS", "project", "render"]
