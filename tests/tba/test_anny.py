"""The `anny` body model behind the BodyModel interface (opt-in: its first construction builds a cache of about
4 minutes and 0.8 GB; this runs only when the cache exists, e.g. after `hf-ext reproduce tba --full`)."""

from __future__ import annotations

import pytest
import torch

from hf_ext.tba.body import default_anny_cache

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not default_anny_cache().is_dir() or not any(default_anny_cache().iterdir()),
        reason="anny's cache is not built (ANNY_CACHE_DIR or runs/tba/anny_cache)",
    ),  # fmt: skip
]


def test_anny_body_is_differentiable_renders_and_feeds_the_loss():
    pytest.importorskip("anny")
    from hf_ext.tba.attacks import AdversarialObjective
    from hf_ext.tba.body import AnnyBody
    from hf_ext.tba.data import render_batch
    from hf_ext.tba.modeling_tba import TbaPoseRegressor
    from hf_ext.tba.testing import tiny_victim_config

    body = AnnyBody()
    assert body.num_params == 39 and len(body.parents) == 23
    params = body.sample_params(2, torch.Generator().manual_seed(0)).requires_grad_(True)
    joints, verts = body(params)
    assert joints.shape == (2, 23, 3) and verts.shape[-1] == 3
    (joints.sum() + verts.sum()).backward()
    assert torch.isfinite(params.grad).all() and (params.grad.abs().sum(0) > 0).all()
    images, gt = render_batch(body, 2, seed=0, image_size=32)
    assert images.min() >= 0 and images.max() <= 1
    victim = TbaPoseRegressor(tiny_victim_config(image_size=32, body_model="anny", num_params=39)).eval()
    loss = AdversarialObjective(victim, body, images, 8 / 255, reference_params=gt)(images)
    assert loss.shape == (2,) and torch.isfinite(loss).all()
