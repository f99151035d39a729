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
(`.detach()`, `torch.no_grad()`, numpy inside) is refused with a `ValueError` when the objective is built (one
probe image), before any attack step.

**A saved regressor as the victim** (what `hf-ext train tba --data ... --victim DIR` and `hf-ext evaluate tba` take,
through [`load_victim`]): a folder (or Hub id) that `transformers.AutoModel.from_pretrained` loads, whose forward
takes `pixel_values` `(B, C, H, W)` and returns a tensor or an output with `params` (a [`TbaPoseRegressor`]) or
`logits` (any `*ForImageClassification` with `problem_type="regression"`, or any model with a `logits` output),
differentiable in `pixel_values`. Images reach it as [0, 1] RGB resized to its `config.image_size` and normalised
with the `image_mean` / `image_std` of the processor saved beside it (none when there is none), inside a
differentiable wrapper ([`ImageRegressor`]), so the attack's budget stays in [0, 1] pixel units. A
[`TbaPoseRegressor`] is attacked through its body model ([`~hf_ext.tba.attacks.AdversarialObjective`]: joint, vertex
and parameter errors); any other regressor through [`RegressionObjective`] (the L2 shift of its whole output).
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
        self._check_differentiable()
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


class RegressionObjective(ObjectiveBase):
    """Adversarial loss of any regressor: `λ_J |f(x') - f(x)|_2 / (rms_B |f(x)|_2 + 1e-6) - λ_q (1 - SSIM(x', x))`,
    the L2 shift of the whole (flattened) output away from the clean prediction, relative to the batch's typical
    output norm so that the weights do not depend on the output's units.

    Args:
        victim (callable): images `(B, 3, S, S)` in [0, 1] -> any tensor `(B, ...)`.
        clean (`torch.Tensor`): the clean images.
        eps (`float`): the L∞ budget.
        config ([`AdversarialLossConfig`], *optional*): `lambda_joint` (the shift's weight) and `lambda_perceptual`.
    """

    def __init__(self, victim, clean: torch.Tensor, eps: float, config: AdversarialLossConfig | None = None):
        super().__init__(victim, clean, eps, config)
        if self.config.targeted:
            raise ValueError("RegressionObjective is untargeted (it pushes the output away from the clean one)")
        self._check_differentiable()
        with torch.no_grad():
            self.ref = self.predict(self.clean)
        self.scale = float(self.ref.pow(2).sum(-1).mean().sqrt()) + 1e-6

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        out = call_victim(self.victim, images)
        if out.ndim < 1 or out.shape[0] != images.shape[0]:
            raise ValueError(f"the victim must return one prediction per image, got shape {tuple(out.shape)}")
        return out.reshape(out.shape[0], -1).float()

    def __call__(self, adv: torch.Tensor) -> torch.Tensor:
        pred = self.predict(adv)
        if not pred.requires_grad and torch.is_grad_enabled() and adv.requires_grad:
            raise ValueError("the victim's output does not depend differentiably on the image (it detached the "
                             "graph); a white-box attack needs a torch-differentiable victim")  # fmt: skip
        return self.config.lambda_joint * smooth_norm(pred - self.ref) / self.scale - self.penalty(adv)


class ImageRegressor(torch.nn.Module):
    """A saved image regressor as a victim callable: [0, 1] RGB `(B, 3, S, S)` → bilinear resize to the model's
    `image_size` → its processor's normalisation → the model → `params` / `logits` / the tensor, all differentiable.

    Args:
        model (`torch.nn.Module`): the regressor (its forward takes `pixel_values`).
        image_size (`int`, *optional*): the side it expects (no resize when `None`).
        image_mean (`list[float]`, *optional*), image_std (`list[float]`, *optional*): its input normalisation.
    """

    def __init__(self, model, image_size: int | None = None, image_mean=None, image_std=None):
        super().__init__()
        self.model, self.image_size = model.eval(), image_size
        self.mean = None if image_mean is None else torch.tensor(image_mean, dtype=torch.float32).view(1, -1, 1, 1)
        self.std = None if image_std is None else torch.tensor(image_std, dtype=torch.float32).view(1, -1, 1, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images
        if self.image_size is not None and tuple(x.shape[-2:]) != (self.image_size, self.image_size):
            x = torch.nn.functional.interpolate(x, size=(self.image_size,) * 2, mode="bilinear", align_corners=False)
        if self.mean is not None:
            x = (x - self.mean.to(x)) / self.std.to(x)
        out = self.model(pixel_values=x)
        for name in ("params", "logits"):
            if getattr(out, name, None) is not None:
                return getattr(out, name)
        if isinstance(out, torch.Tensor):
            return out
        raise ValueError(
            f"the victim {type(self.model).__name__} returned {type(out).__name__} without `params` or `logits`; "
            "a victim must return a tensor or an output with one of them"
        )


def load_victim(source: str, trust_remote_code: bool = False):
    """`(victim, info)`: a saved regressor (a folder or Hub id, see the module docstring) ready to attack.

    A [`TbaPoseRegressor`] is returned as is (`info["body_model"]` names its body: the attack goes through it); any
    other model is wrapped in [`ImageRegressor`] with the image size and normalisation of the processor saved beside
    it. `info` holds `kind` (`"pose"` or `"regressor"`), `image_size`, `body_model` and `class`.
    """
    import transformers
    from transformers import AutoConfig, AutoModel

    from .modeling_tba import TbaPoseRegressor

    try:
        # the class the folder was saved from (config.architectures), so a task head is not dropped the way
        # AutoModel would (it loads a *ForImageClassification checkpoint as the bare encoder); else AutoModel
        # (hf_ext's and remote-code models register there)
        arch = (getattr(AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code), "architectures", None)
                or [None])[0]  # fmt: skip
        cls = getattr(transformers, arch, None) if arch else None
        if cls is not None and hasattr(cls, "from_pretrained"):
            model = cls.from_pretrained(source)
        else:
            model = AutoModel.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise ValueError(
            f"--victim {source!r} is not a model transformers.AutoModel can load ({str(err).splitlines()[0]}); "
            "pass a saved regressor folder or Hub id (see hf_ext.tba.interface)"
        ) from None
    model.eval().requires_grad_(False)
    config = model.config
    if isinstance(model, TbaPoseRegressor):
        info = {"kind": "pose", "image_size": config.image_size, "body_model": config.body_model}
        return model, {**info, "class": type(model).__name__}
    size = getattr(config, "image_size", None)
    if isinstance(size, (list, tuple)):
        size = size[0]
    mean = std = None
    try:
        from transformers import AutoImageProcessor

        processor = AutoImageProcessor.from_pretrained(source)
        mean, std = getattr(processor, "image_mean", None), getattr(processor, "image_std", None)
    except (OSError, ValueError, KeyError):
        pass
    wrapped = ImageRegressor(model, size, mean, std)
    side = size or 64
    with torch.no_grad():  # one probe now: a victim without a usable output fails before any training
        call_victim(wrapped, torch.full((1, 3, side, side), 0.5))
    return wrapped, {"kind": "regressor", "image_size": size, "body_model": None, "class": type(model).__name__}


__all__ = ["ImageRegressor", "KeypointObjective", "RegressionObjective", "load_victim"]
