"""The thin layer over PyPI `anny` (imported lazily: it pulls warp-lang and builds a cache on first use).

anny's frame is z up with the body facing -y; hf_ext's renderer uses y up with the body facing +z (towards the
camera), so coordinates are mapped `(x, y, z) -> (x, z, -y)`, a proper rotation.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from .body import axis_angle_to_matrix

# Skeleton over anny's 23 COCO(+feet) keypoints, for drawing only (parent of each keypoint, -1 for the nose).
COCO23_PARENTS = [-1, 0, 0, 1, 2, 0, 0, 5, 6, 7, 8, 5, 6, 11, 12, 13, 14, 15, 16, 15, 16, 15, 16]
COCO23_ROOT = [11, 12]  # hips: their midpoint is the root for root-aligned errors


@functools.lru_cache(maxsize=2)
def load(cache_dir: Path):
    """Builds (or reads from `cache_dir`) anny's default full-body model and its COCO keypoint regressor."""
    try:
        import anny
        from anny.paths import set_anny_cache_path
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("the 'anny' body model needs `pip install anny` (see pyproject.toml)") from err
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    set_anny_cache_path(cache_dir)
    model = anny.Anny()
    model.requires_grad_(False)
    regressor = anny.KeypointsRegressor.coco(model)
    return model, regressor


def _to_view(t: torch.Tensor) -> torch.Tensor:
    return torch.stack([t[..., 0], t[..., 2], -t[..., 1]], -1)


def describe(backend, posed_bones) -> dict:
    model, regressor = backend
    labels = list(model.bone_labels)
    missing = [b for b in posed_bones if b not in labels]
    if missing:
        raise ValueError(f"anny has no bones named {missing}")
    with torch.no_grad():
        rest = model(phenotype_kwargs=torch.full((1, len(model.phenotype_labels)), 0.5))["vertices"][0].float()
    rest = _to_view(rest)
    # Colours from the rest pose: trunk band -> shirt, below the hips -> trousers, the rest (head, hands) -> skin.
    y, x = rest[:, 1], rest[:, 0]
    shirt = (y > -0.05) & (y < 0.5) & (x.abs() < 0.45)
    trousers = y <= -0.05
    colors = torch.tensor([0.85, 0.66, 0.55]).repeat(rest.shape[0], 1)
    colors[shirt] = torch.tensor([0.2, 0.4, 0.8])
    colors[trousers] = torch.tensor([0.25, 0.25, 0.3])
    return {
        "bone_index": [labels.index(b) for b in posed_bones],
        "phenotype_labels": list(model.phenotype_labels),
        "keypoint_parents": list(COCO23_PARENTS),
        "root_joints": list(COCO23_ROOT),
        "vertex_colors": colors,
    }


def forward(backend, params: torch.Tensor, bone_index, phenotype_labels, num_pose: int):
    """`params (B, num_pose + 6)` -> keypoints `(B, 23, 3)` and vertices `(B, 13718, 3)` in the view frame."""
    model, regressor = backend
    b = params.shape[0]
    glob = axis_angle_to_matrix(params[:, :3].double())  # global orientation, applied in the view frame below
    rot = axis_angle_to_matrix(params[:, 3:num_pose].reshape(b, -1, 3).double())
    pose = torch.eye(4, dtype=torch.float64).repeat(b, model.bone_count, 1, 1)
    pose = pose.index_put((torch.arange(b)[:, None], torch.tensor(bone_index)[None, :].expand(b, -1)),
                          torch.cat([torch.cat([rot, torch.zeros(b, rot.shape[1], 3, 1, dtype=rot.dtype)], -1),
                                     pose[:, bone_index, 3:]], -2))  # fmt: skip
    out = model(pose_parameters=pose, phenotype_kwargs=params[:, num_pose:].double())
    joints = regressor(out)
    joints = _to_view(joints) @ glob.transpose(1, 2)
    verts = _to_view(out["vertices"]) @ glob.transpose(1, 2)
    return joints.to(params.dtype), verts.to(params.dtype)


__all__ = ["COCO23_PARENTS", "COCO23_ROOT", "describe", "forward", "load"]
