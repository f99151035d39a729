"""Attack your own regressor: the interface every TBA attack (and FGSM / PGD / MI-FGSM) takes.

An attack needs an *objective*: a callable from adversarial images `(B, 3, S, S)` in [0, 1] to a per-sample loss
`(B,)` it maximises, with `grad_evals` counting victim gradients. Two are provided:

- [`~hf_ext.tba.attacks.AdversarialObjective`]`(victim, body, clean, eps)`: the victim predicts body-model
  parameters. `victim` is a [`TbaPoseRegressor`] or **any callable** `images -> (B, body.num_params)` tensor; the
  loss goes through the differentiable body (joint, vertex and parameter errors).
- [`KeypointObjective`]`(victim, clean, eps)`: the victim predicts keypoints directly, any callable
  `images -> (B, K, D)` (2D or 3D, any units); the loss is the mean keypoint distance to a reference (the clean
  prediction, or ground truth, or a target for the targeted variant). No body model is needed.

Both subtract the same SSIM penalty and count gradients the same way, so the budgets stay matched.

```python
>>> from hf_ext.tba.interface import KeypointObjective
>>> from hf_ext.tba.attacks import pgd
>>> objective = KeypointObjective(my_model, images, eps=8 / 255)  # my_model(images) -> (B, 17, 2)
>>> adversarial = pgd(objective, images, 8 / 255, steps=10)
```

The callable must be differentiable in its input (the attacks are white-box); a model whose forward detaches
(e.g. numpy inside) gives a `ValueError` on the first gradient.
"""

from __future__ import annotations

import torch

from .attacks import AdversarialLossConfig, ObjectiveBase, call_victim
from .metrics import smooth_norm


class KeypointObjective(ObjectiveBase):
    """Adversarial loss of a keypoint regressor: `λ_J mean_k |K̂_k(x') - K_ref,k| - λ_q (1 - SSIM(x', x))`
    (targeted: the distance term changes sign).

    Args:
        victim (callable): images `(B, 3, S, S)` in [0, 1] -> keypoints `(B, K, D)`.
        clean (`torch.Tensor`): the clean images.
        eps (`float`): the L∞ budget.
        config ([`AdversarialLossConfig`], *optional*): `lambda_joint`, `lambda_perceptual` and `targeted` are used.
        reference_keypoints (`torch.Tensor`, *optional*): `(B, K, D)`; defaults to the clean prediction (required
            when targeted).
    """

    def __init__(self, victim, clean: torch.Tensor, eps: float, config: AdversarialLossConfig | None = None,
                 reference_keypoints: torch.Tensor | None = None):  # fmt: skip
        super().__init__(victim, clean, eps, config)
        if self.config.targeted and reference_keypoints is None:
            raise ValueError("a targeted attack needs reference_keypoints (the target keypoints)")
        with torch.no_grad():
            clean_pred = self.predict(self.clean)
        ref = clean_pred if reference_keypoints is None else reference_keypoints.detach()
        if ref.shape != clean_pred.shape:
            raise ValueError(f"reference_keypoints has shape {tuple(ref.shape)}, the victim predicts "
                             f"{tuple(clean_pred.shape)}")  # fmt: skip
        self.ref_keypoints = ref

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        out = call_victim(self.victim, images)
        if out.ndim != 3 or out.shape[0] != images.shape[0]:
            raise ValueError(f"a keypoint victim must return (batch, keypoints, dims), got {tuple(out.shape)}")
        return out

    def __call__(self, adv: torch.Tensor) -> torch.Tensor:
        pred = self.predict(adv)
        if not pred.requires_grad and torch.is_grad_enabled() and adv.requires_grad:
            raise ValueError("the victim's output does not depend differentiably on the image (it detached the "
                             "graph); a white-box attack needs a torch-differentiable victim")  # fmt: skip
        err = self.config.lambda_joint * smooth_norm(pred - self.ref_keypoints).mean(-1)
        return (-err if self.config.targeted else err) - self.penalty(adv)


__all__ = ["KeypointObjective"]
