"""Pictures for the reproduction and the Space: images with the predicted skeleton drawn on, and the clean /
perturbation / adversarial grid."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image, ImageDraw

from .render import project


def to_pil(image: torch.Tensor, scale: int = 4) -> Image.Image:
    arr = (image.detach().clamp(0, 1).permute(1, 2, 0).cpu().numpy() * 255).round().astype(np.uint8)
    img = Image.fromarray(arr)
    return img.resize((img.width * scale, img.height * scale), Image.NEAREST)


def perturbation_image(adv: torch.Tensor, clean: torch.Tensor, eps: float) -> torch.Tensor:
    """The perturbation mapped from [-eps, eps] to [0, 1] (grey = no change)."""
    return ((adv - clean) / (2 * eps) + 0.5).clamp(0, 1)


def draw_skeleton(img: Image.Image, joints: torch.Tensor, parents: list[int], body_name: str, image_size: int,
                  color=(255, 230, 0)) -> Image.Image:  # fmt: skip
    """Draws the skeleton `joints (J, 3)` (metres, the renderer's camera) on an upscaled image."""
    scale = img.width / image_size
    uv = project(joints.detach().float(), body_name, image_size).cpu().numpy() * scale
    draw = ImageDraw.Draw(img)
    for j, p in enumerate(parents):
        if p >= 0:
            draw.line([tuple(uv[p]), tuple(uv[j])], fill=color, width=max(1, int(scale // 2)))
    for u, v in uv:
        draw.ellipse([u - 1.5, v - 1.5, u + 1.5, v + 1.5], fill=(255, 60, 60))
    return img


@torch.no_grad()
def skeleton_view(image: torch.Tensor, params: torch.Tensor, body, scale: int = 4, color=(255, 230, 0)) -> Image.Image:
    joints, _ = body(params[None])
    return draw_skeleton(to_pil(image, scale), joints[0], body.parents, body.name, image.shape[-1], color)


def attack_grid(clean: torch.Tensor, adversarials: dict[str, torch.Tensor], predict, body, eps: float,
                rows: int = 3, scale: int = 3) -> Image.Image:  # fmt: skip
    """Rows of examples; columns: clean + predicted skeleton, then per attack the perturbation (x 1/(2 eps)) and the
    adversarial image with the victim's predicted skeleton."""
    tiles = []
    for i in range(min(rows, len(clean))):
        row = [skeleton_view(clean[i], predict(clean[i : i + 1])[0], body, scale)]
        for adv in adversarials.values():
            row.append(to_pil(perturbation_image(adv[i], clean[i], eps), scale))
            row.append(skeleton_view(adv[i], predict(adv[i : i + 1])[0], body, scale, color=(0, 255, 255)))
        tiles.append(row)
    w, h = tiles[0][0].size
    header = 14
    grid = Image.new("RGB", (w * len(tiles[0]), h * len(tiles) + header), "white")
    draw = ImageDraw.Draw(grid)
    labels = ["clean"] + [f"{name} {kind}" for name in adversarials for kind in ("delta", "adv")]
    for c, label in enumerate(labels):
        draw.text((c * w + 2, 1), label, fill=(0, 0, 0))
    for r, row in enumerate(tiles):
        for c, tile in enumerate(row):
            grid.paste(tile, (c * w, header + r * h))
    return grid


__all__ = ["attack_grid", "draw_skeleton", "perturbation_image", "skeleton_view", "to_pil"]
