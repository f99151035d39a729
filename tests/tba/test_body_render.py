"""The procedural body, the renderer, the dataset and the error metrics: closed forms and invariances."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.tba.body import ProceduralBody, axis_angle_to_matrix, build_body
from hf_ext.tba.data import make_dataset, render_batch
from hf_ext.tba.metrics import body_errors, mpjpe, pa_mpjpe, procrustes_align
from hf_ext.tba.render import render


@pytest.fixture(scope="module")
def body():
    return ProceduralBody()


def test_rodrigues_matches_closed_form_and_is_smooth_at_zero():
    r = axis_angle_to_matrix(torch.tensor([0.0, 0.0, math.pi / 2]))
    torch.testing.assert_close(r, torch.tensor([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]), atol=1e-6, rtol=0)
    aa = torch.randn(10, 3)
    rot = axis_angle_to_matrix(aa)
    torch.testing.assert_close(rot @ rot.transpose(1, 2), torch.eye(3).expand(10, 3, 3), atol=1e-5, rtol=0)
    zero = torch.zeros(1, 3, requires_grad=True)
    axis_angle_to_matrix(zero)[0, 1, 0].backward()  # d R_10 / d z = 1 at the identity
    torch.testing.assert_close(zero.grad, torch.tensor([[0.0, 0.0, 1.0]]))


def test_rest_pose_bone_lengths_and_shape_scales(body):
    params = torch.zeros(1, body.num_params)
    joints, verts = body(params)
    assert joints.shape == (1, 16, 3) and verts.shape == (1, body.num_vertices, 3)
    # The left forearm (elbow -> wrist) at rest has the length of its offset.
    torch.testing.assert_close((joints[0, 6] - joints[0, 5]).norm(), body.offsets[6].norm())
    # Shape 2 (arms) scales arm bones by exp(0.1 beta) and also "overall" (shape 5) scales every bone.
    params[0, body.num_pose + 2] = 1.0
    params[0, body.num_pose + 5] = 0.5
    joints2, _ = body(params)
    ratio = (joints2[0, 6] - joints2[0, 5]).norm() / (joints[0, 6] - joints[0, 5]).norm()
    torch.testing.assert_close(ratio, torch.tensor(math.exp(0.1) * math.exp(0.05)))


def test_forward_is_differentiable_and_checks_width(body):
    params = body.sample_params(3, torch.Generator().manual_seed(0)).requires_grad_(True)
    joints, verts = body(params)
    (joints.sum() + verts.pow(2).sum()).backward()
    assert torch.isfinite(params.grad).all() and (params.grad.abs().sum(0) > 0).all()
    with pytest.raises(ValueError, match="victim's output width must match the body model"):
        body(torch.zeros(2, body.num_params + 1))
    with pytest.raises(ValueError, match="unknown body model"):
        build_body("smplx")


def test_render_is_seeded_in_range_and_shows_the_body(body):
    params = body.sample_params(4, torch.Generator().manual_seed(1))
    a = render(body, params, torch.Generator().manual_seed(2), image_size=32)
    b = render(body, params, torch.Generator().manual_seed(2), image_size=32)
    assert a.shape == (4, 3, 32, 32) and a.min() >= 0 and a.max() <= 1
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    # Same backgrounds, different pose: the pixels that change are where the body is.
    other = render(body, body.sample_params(4, torch.Generator().manual_seed(9)), torch.Generator().manual_seed(2), 32)
    changed = (a - other).abs().amax(1) > 0.05  # contrast jitter is about the image mean, so all pixels move a little
    assert 0.02 < changed.float().mean() < 0.5


def test_dataset_columns_and_determinism(body):
    ds = make_dataset(body, 6, seed=3, image_size=32)
    assert set(ds.column_names) == {"pixel_values", "labels"} and len(ds) == 6
    row = ds[0]
    assert tuple(row["pixel_values"].shape) == (3, 32, 32) and tuple(row["labels"].shape) == (body.num_params,)
    images, params = render_batch(body, 6, seed=3, image_size=32)
    torch.testing.assert_close(ds[:]["pixel_values"], images)
    torch.testing.assert_close(ds[:]["labels"], params)
    with pytest.raises(ValueError, match="at least one image"):
        make_dataset(body, 0, seed=0)


def test_metrics_invariances(body):
    g = torch.Generator().manual_seed(4)
    params = body.sample_params(5, g)
    joints, _ = body(params)
    moved = joints + torch.randn(5, 1, 3, generator=g)  # translation: root-aligned MPJPE is 0
    assert mpjpe(moved, joints, body.root_joints).max() < 1e-5
    rot = axis_angle_to_matrix(torch.randn(5, 3, generator=g))
    similar = 1.7 * joints @ rot.transpose(1, 2) + 0.3  # similarity: PA-MPJPE is 0
    assert pa_mpjpe(similar.double(), joints.double()).max() < 2e-6  # the smooth norm floors at 1e-6
    torch.testing.assert_close(procrustes_align(similar.double(), joints.double()), joints.double(), atol=1e-6, rtol=0)
    errors = body_errors(body, params, params)
    assert all(v.max() < 2e-3 for v in errors.values())  # millimetres (the smooth norm floors at 1e-3 mm)
    shifted = params.clone()
    shifted[:, 3 * 3 : 3 * 3 + 3] += 0.3  # rotate the left shoulder: every error grows
    errors = body_errors(body, shifted, params)
    assert all(v.min() > 1.0 for v in errors.values())
