"""TBA's adversarial loss on a body model small enough to write the vertex (PVE) term in closed form."""

from __future__ import annotations

import torch

from hf_ext.tba.attacks import AdversarialLossConfig, AdversarialObjective

EPS = 8 / 255
NUM_VERTS = 4


class _PointBody:
    """Joints fixed at the origin (root-alignment is the identity), the parameters are the vertices' coordinates."""

    name = "points"
    num_params = 3 * NUM_VERTS
    root_joints = [0]

    def check_params(self, params):
        assert params.shape[-1] == self.num_params

    def __call__(self, params):
        b = params.shape[0]
        return torch.zeros(b, 2, 3, dtype=params.dtype), params.view(b, NUM_VERTS, 3)


def test_the_vertex_term_is_the_mean_vertex_distance_in_closed_form():
    """Every vertex of the prediction moves by `m (3, 4, 0)` from the reference, `m` the image's mean pixel: PVE is
    `5 m`, the loss `λ_V 5 m` and its gradient `λ_V 5 / (3 S^2)` per pixel. Zeroing or dropping the vertex term of
    `AdversarialObjective` (or mis-rooting, mis-averaging it) fails this."""
    body = _PointBody()
    ref = torch.linspace(-0.5, 0.5, body.num_params).repeat(2, 1)
    offset = torch.tensor([3.0, 4.0, 0.0]).repeat(NUM_VERTS)

    def victim(images):
        return ref[: images.shape[0]] + images.mean((1, 2, 3))[:, None] * offset

    x = torch.stack([torch.full((3, 16, 16), 0.25), torch.full((3, 16, 16), 0.5)])
    cfg = AdversarialLossConfig(lambda_joint=0.0, lambda_vertex=2.0, lambda_param=0.0, lambda_perceptual=0.0)
    objective = AdversarialObjective(victim, body, x, EPS, cfg, reference_params=ref)
    adv = x + EPS
    loss, grad = objective.gradient(adv)
    m = adv.mean((1, 2, 3))
    torch.testing.assert_close(loss, 2.0 * 5.0 * m)
    torch.testing.assert_close(grad, torch.full_like(adv, 2.0 * 5.0 / adv[0].numel()))
    # with the joint term also on, the joints never move: MPJPE is 0 (to the smooth norm's 1e-6) and PVE is all of it
    both = AdversarialObjective(victim, body, x, EPS, AdversarialLossConfig(lambda_param=0.0, lambda_perceptual=0.0),
                                reference_params=ref)  # fmt: skip
    torch.testing.assert_close(both(adv), 10.0 * 5.0 * m + 10.0 * 1e-6)
