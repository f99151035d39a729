"""The victim that estimates pose: a frozen ImageNet EfficientNet-Lite0 trunk with a closed-form ridge head.

Why this victim: from scratch, the ViT / ConvNext victims never leave the prior-mean predictor at the budgets of this
machine (issue 21), so no attack could move them. The pretrained trunk's features carry the pose; a ridge
regression on them (plus pooled pixels) is one linear solve, and the head is stored as a `torch.nn.Linear`, so the
victim stays differentiable end to end for the white-box attacks.

`fit_ridge_head` standardises the features (training mean and std), solves
`W = argmin |Y_c - X_s W|^2 + λ |W|^2` with centred targets `Y_c`, picks λ on a held-out split of the training
renders, and folds the standardisation into the linear layer: `head(f) = (f - μ) / σ · W + ȳ`.
"""

from __future__ import annotations

import torch

from .configuration_tba import TbaVictimConfig
from .modeling_tba import TbaPoseRegressor

# Wide enough for the 128 px trunk: its best λ is 3,000-10,000 on 4,000-8,000 renders (measured).
DEFAULT_LAMBDAS = (30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0, 30000.0)


def pretrained_efficientnet_victim(config: TbaVictimConfig) -> TbaPoseRegressor:
    """A `"efficientnet-lite0"` victim whose trunk holds the ImageNet weights (through `hf_ext.core.pretrained`, the
    project's one loader); the head is still zero (call [`fit_ridge_head`])."""
    from hf_ext.core.pretrained import load_efficientnet_lite0

    if config.backbone != "efficientnet-lite0":
        raise ValueError(f"pretrained_efficientnet_victim needs backbone='efficientnet-lite0', got {config.backbone!r}")
    model = TbaPoseRegressor(config)
    net = load_efficientnet_lite0()
    trunk = model.regressor
    trunk.conv_stem.load_state_dict(net._conv_stem.state_dict())
    trunk.bn0.load_state_dict(net._bn0.state_dict())
    for mine, theirs in zip(trunk.blocks, net._blocks):
        mine.load_state_dict(theirs.state_dict())
    return model.eval()


@torch.no_grad()
def extract_features(model: TbaPoseRegressor, images: torch.Tensor, batch_size: int = 100) -> torch.Tensor:
    """The trunk's feature vectors `(N, num_features)` of `images (N, 3, S, S)`, in batches."""
    model.eval()
    return torch.cat([model.regressor(images[i : i + batch_size]) for i in range(0, len(images), batch_size)])


def ridge_solve(x: torch.Tensor, y: torch.Tensor, lam: float) -> torch.Tensor:
    """`argmin_W |y - x W|^2 + λ |W|^2` in float64; the primal form when features <= samples, else the dual
    (`W = xᵀ (x xᵀ + λ I)^-1 y`), whichever matrix is smaller."""
    return ridge_path(x, y, (lam,))[0]


def ridge_path(x: torch.Tensor, y: torch.Tensor, lambdas) -> list[torch.Tensor]:
    """[`ridge_solve`] for several λ from one Gram matrix (its cost, not the solves', dominates at 10^4 features)."""
    x, y = x.double(), y.double()
    n, d = x.shape
    primal = d <= n
    gram = x.T @ x if primal else x @ x.T
    rhs = x.T @ y if primal else y
    eye = torch.eye(gram.shape[0], dtype=x.dtype)
    out = []
    for lam in lambdas:
        w = torch.linalg.solve(gram + lam * eye, rhs)
        out.append(w if primal else x.T @ w)
    return out


def fit_ridge_head(head: torch.nn.Linear, features: torch.Tensor, params: torch.Tensor,
                   lambdas=DEFAULT_LAMBDAS, val_fraction: float = 0.15, score=None) -> dict:  # fmt: skip
    """Fits the linear `head` (the victim's `model.head`) by ridge regression of `params (N, P)` on
    `features (N, F)` (see the module docstring).

    λ is chosen on the last `val_fraction` of the rows by `score(pred, target) -> float` (lower is better; defaults
    to the MSE of the parameters), then the head is refitted on all rows with it. With a single λ there is nothing
    to choose: the head is fitted on all rows at once (`val_scores` is then empty).

    Returns `{"lambda": chosen λ, "val_scores": {λ: score}}`.
    """
    if features.ndim != 2 or params.ndim != 2 or len(features) != len(params):
        raise ValueError(f"fit_ridge_head needs features (N, F) and params (N, P) with the same N, got "
                         f"{tuple(features.shape)} and {tuple(params.shape)}")  # fmt: skip
    if features.shape[1] != head.in_features or params.shape[1] != head.out_features:
        raise ValueError(f"the head maps {head.in_features} features to {head.out_features} parameters, "
                         f"got {features.shape[1]} features and {params.shape[1]} parameters")  # fmt: skip
    if not lambdas or any(not lam > 0 for lam in lambdas):
        raise ValueError(f"lambdas must be a non-empty list of numbers > 0, got {lambdas!r}")
    score = score or (lambda p, t: float(((p - t) ** 2).mean()))

    def fit(x, y, lams):
        mu, sd = x.double().mean(0), x.double().std(0).clamp_min(1e-6)
        ym = y.double().mean(0)
        out = []
        for w in ridge_path((x.double() - mu) / sd, y.double() - ym, lams):  # (F, P) on standardised features
            weight = (w / sd[:, None]).T  # fold the standardisation into the linear layer
            out.append((weight, ym - (mu / sd) @ w))
        return out

    if len(lambdas) == 1:
        ((weight, bias),) = fit(features, params, tuple(lambdas))
        with torch.no_grad():
            head.weight.copy_(weight.float())
            head.bias.copy_(bias.float())
        return {"lambda": float(lambdas[0]), "val_scores": {}}
    n_val = max(1, int(round(val_fraction * len(features))))
    if len(features) - n_val < 2:
        raise ValueError(f"fit_ridge_head needs at least {n_val + 2} rows, got {len(features)}")
    tr_x, tr_y, va_x, va_y = features[:-n_val], params[:-n_val], features[-n_val:], params[-n_val:]
    val_scores = {}
    for lam, (weight, bias) in zip(lambdas, fit(tr_x, tr_y, lambdas)):
        val_scores[float(lam)] = score((va_x.double() @ weight.T + bias).float(), va_y)
    best = min(val_scores, key=val_scores.get)
    ((weight, bias),) = fit(features, params, (best,))
    with torch.no_grad():
        head.weight.copy_(weight.float())
        head.bias.copy_(bias.float())
    return {"lambda": best, "val_scores": val_scores}


def mpjpe_score(body):
    """`score` for [`fit_ridge_head`]: mean MPJPE (mm) through `body`, what the victim is judged on."""
    from .metrics import body_errors

    def score(pred: torch.Tensor, target: torch.Tensor) -> float:
        return float(body_errors(body, pred, target)["mpjpe"].mean())

    return score


__all__ = ["DEFAULT_LAMBDAS", "extract_features", "fit_ridge_head", "mpjpe_score", "pretrained_efficientnet_victim",
           "ridge_path", "ridge_solve"]  # fmt: skip
