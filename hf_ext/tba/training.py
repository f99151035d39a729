"""Training TBA's artifacts: the victim regressors (the EHPS models under attack) and the DHNG's VAE, on images
rendered from the body model; `hf-ext tba train`.

Default victims (`victim="efficientnet-lite0"`): two frozen ImageNet EfficientNet-Lite0 trunks with closed-form
ridge heads ([`~hf_ext.tba.victim`]): victim A on the first 8 MBConv blocks (stride 16, 80 channels) + 16x16 pooled
pixels, victim B (for transfer) on 12 blocks (stride 32, 192 channels) + 16x16 pooled pixels, both on the same
renders with the trunk at `victim_input_size`. `victim="vit"` keeps the original pair (ViT A, ConvNext B,
trained from scratch on `transformers.Trainer`), which never leave the prior-mean predictor at these budgets. The
DHNG's VAE trains on `Trainer` either way, its loss curve recorded.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from hf_ext.core.paths import work_dir

from .body import build_body
from .configuration_tba import TbaDhngConfig, TbaVictimConfig
from .data import collate
from .modeling_tba import TbaDhngModel, TbaPoseRegressor


@dataclass(frozen=True)
class TbaTrainingArguments:
    """Training knobs of the victims and the generator (never in the model configs).

    Args:
        body (`str`, defaults to `"procedural"`): body model the data is rendered from (`"procedural"`, `"anny"`).
        victim (`str`, defaults to `"efficientnet-lite0"`): the victim pair: `"efficientnet-lite0"` (pretrained
            trunks + ridge heads) or `"vit"` (ViT A and ConvNext B from scratch, `victim_epochs` on `Trainer`).
        victim_input_size (`int`, defaults to 128): side the EfficientNet victims resize the image to.
        num_eval (`int`, defaults to 500): held-out renders (another seed) the victims are scored on.
        num_train (`int`, defaults to 3000): rendered training images.
        image_size (`int`, defaults to 64): image side.
        victim_epochs (`int`, defaults to 12): epochs of each victim.
        victim_learning_rate (`float`, defaults to 3e-3): AdamW learning rate of the victims (linear decay).
        vae_epochs (`int`, defaults to 3): epochs of the DHNG's VAE.
        vae_learning_rate (`float`, defaults to 1e-3): AdamW learning rate of the VAE.
        denoiser_epochs (`float`, defaults to 2): epochs of the DHNG's latent denoiser (UNet + ControlNet,
            ε-prediction on the trained VAE's latents, condition = the image); 0 leaves them untrained.
        denoiser_learning_rate (`float`, defaults to 1e-3): AdamW learning rate of the denoiser.
        dhng_num_train (`int`, defaults to 2000): how many of the training renders (the first ones) the DHNG trains
            on (its steps cost ~10x a victim's feature pass on CPU, so it gets a subset).
        batch_size (`int`, defaults to 32): batch size (32 rather than 64: at this scale more steps help more
            than bigger batches; 8 epochs at 64 left the ViT near the prior-mean predictor).
        seed (`int`, defaults to 0): data and initialisation seed (victim B uses `seed + 1`).
    """

    body: str = "procedural"
    victim: str = "efficientnet-lite0"
    victim_input_size: int = 128
    num_eval: int = 500
    num_train: int = 3000
    image_size: int = 64
    victim_epochs: int = 12
    victim_learning_rate: float = 3e-3
    vae_epochs: int = 3
    vae_learning_rate: float = 1e-3
    denoiser_epochs: float = 2.0
    denoiser_learning_rate: float = 1e-3
    dhng_num_train: int = 2000
    batch_size: int = 32
    seed: int = 0

    def __post_init__(self):
        from hf_ext.core.validation import check_finite_number, check_positive_int

        if self.body not in ("procedural", "anny"):
            raise ValueError(f"body must be 'procedural' or 'anny', got {self.body!r}")
        if self.victim not in ("efficientnet-lite0", "vit"):
            raise ValueError(f"victim must be 'efficientnet-lite0' or 'vit', got {self.victim!r}")
        check_positive_int("num_train", self.num_train, minimum=2)
        check_positive_int("num_eval", self.num_eval, minimum=2)
        check_positive_int("dhng_num_train", self.dhng_num_train, minimum=1)
        check_positive_int("victim_input_size", self.victim_input_size, minimum=32)
        check_positive_int("image_size", self.image_size, minimum=8)
        check_positive_int("batch_size", self.batch_size)
        check_positive_int("seed", self.seed, minimum=0)
        for name in ("victim_epochs", "vae_epochs"):
            check_finite_number(name, getattr(self, name), low=0.0, low_open=True, high=1e6)
        check_finite_number("denoiser_epochs", self.denoiser_epochs, low=0.0, high=1e6)
        for name in ("victim_learning_rate", "vae_learning_rate", "denoiser_learning_rate"):
            check_finite_number(name, getattr(self, name), low=0.0, low_open=True, high=10.0)


def victim_metrics(body):
    """`compute_metrics` of a victim regressor's `Trainer`: mean MPJPE, PA-MPJPE and PVE in millimetres (the README
    table's columns; lower is better) of the predicted against the true body parameters, through `body`."""

    def compute_metrics(eval_pred) -> dict[str, float]:
        from .metrics import body_errors

        preds = eval_pred.predictions[0] if isinstance(eval_pred.predictions, tuple) else eval_pred.predictions
        with torch.no_grad():
            errors = body_errors(body, torch.as_tensor(preds).float(), torch.as_tensor(eval_pred.label_ids).float())
        return {k: float(v.mean()) for k, v in errors.items()}

    return compute_metrics


def _trainer(
    model,
    dataset,
    output_dir: Path,
    epochs: float,
    lr: float,
    batch_size: int,
    seed: int,
    max_steps=-1,
    body=None,
    logging_steps: int = 0,
    data_collator=collate,
):
    from transformers import Trainer, TrainingArguments

    from hf_ext.core.devices import use_cpu

    args = TrainingArguments(
        output_dir=str(output_dir), num_train_epochs=epochs, max_steps=max_steps,
        per_device_train_batch_size=batch_size,
        learning_rate=lr, weight_decay=0.01, warmup_steps=0, use_cpu=use_cpu(), report_to="none", save_strategy="no",
        logging_strategy="steps" if logging_steps else "no", logging_steps=logging_steps or 500,
        dataloader_num_workers=0, remove_unused_columns=False, seed=seed,
    )  # fmt: skip
    return Trainer(
        model=model,
        args=args,
        train_dataset=dataset,
        data_collator=data_collator,
        compute_metrics=victim_metrics(body) if body is not None else None,
    )


def train_victim(config: TbaVictimConfig, dataset, output_dir: Path, *, epochs: float, lr: float, batch_size: int,
                 seed: int, body=None) -> TbaPoseRegressor:  # fmt: skip
    """Trains one victim regressor with `Trainer` (MSE on the body parameters) and returns it in eval mode."""
    torch.manual_seed(seed)
    model = TbaPoseRegressor(config)
    _trainer(model, dataset, output_dir, epochs, lr, batch_size, seed, body=body).train()
    return model.cpu().eval()  # Trainer moved it to CUDA when present; the attacks and metrics run on CPU tensors


def _denoiser_collate(rows: list[dict]) -> dict:
    """The Trainer's batches for the denoiser stage: the images plus `stage="denoiser"` for the model's forward."""
    return {**collate(rows), "stage": "denoiser"}


def _logged(trainer) -> list[dict]:
    return [{"step": r["step"], "loss": r["loss"]} for r in trainer.state.log_history if "loss" in r]


def train_dhng(config: TbaDhngConfig, dataset, output_dir: Path, *, epochs: float, lr: float, batch_size: int,
               seed: int, history: list | None = None, denoiser_epochs: float = 0.0, denoiser_lr: float = 1e-3,
               denoiser_history: list | None = None) -> TbaDhngModel:  # fmt: skip
    """Trains the DHNG with `Trainer` in two stages: the VAE (reconstruction + KL; UNet and ControlNet frozen),
    then the latent denoiser (the UNet and its ControlNet, ε-prediction on the VAE's latent means with the image as
    the condition; the VAE frozen). With `history` / `denoiser_history`, the logged training losses
    `{"step", "loss"}` (about 8 per stage) are appended to them. Returns the model frozen and in eval mode."""
    torch.manual_seed(seed)
    model = TbaDhngModel(config)
    images = dataset.remove_columns("labels") if dataset is not None and "labels" in dataset.column_names else dataset
    if epochs > 0:
        steps = max(1, int(epochs * len(images) / batch_size))
        trainer = _trainer(model, images, output_dir, epochs, lr, batch_size, seed, logging_steps=max(1, steps // 8))
        trainer.train()
        if history is not None:
            history.extend(_logged(trainer))
    if denoiser_epochs > 0:
        model.vae.requires_grad_(False)
        model.unet.requires_grad_(True)
        model.controlnet.requires_grad_(True)
        steps = max(1, int(denoiser_epochs * len(images) / batch_size))
        trainer = _trainer(model, images, output_dir, denoiser_epochs, denoiser_lr, batch_size, seed + 1,
                           logging_steps=max(1, steps // 8), data_collator=_denoiser_collate)  # fmt: skip
        trainer.train()
        if denoiser_history is not None:
            denoiser_history.extend(_logged(trainer))
    return model.cpu().eval().requires_grad_(False)


@torch.no_grad()
def victim_error(model: TbaPoseRegressor, body, images: torch.Tensor, params: torch.Tensor) -> dict[str, float]:
    from .metrics import body_errors

    pred = torch.cat([model(pixel_values=images[i : i + 256]).params for i in range(0, len(images), 256)])
    return {k: float(v.mean()) for k, v in body_errors(body, pred, params).items()}


# The EfficientNet victim pair: A (attacked white-box) and B (the transfer target), different trunk depths and
# pixel pools on the same renders.
# The EfficientNet victim pair: A (attacked white-box) and B (the transfer target), different trunk depths on the same
# renders. At 128 px with 8,000 renders, ridge on blocks 8 / 9 / 11 / 12 (+ pixels) gave 61 / 61 / 62 / 64 % of the
# prior-mean MPJPE (measured); the shallower trunk A is also the cheaper one to attack.
EFFICIENTNET_VICTIMS = (
    ("victim_a", dict(num_blocks=8, pixel_pool=16)),
    ("victim_b", dict(num_blocks=12, pixel_pool=16)),
)
CURVE_SIZES = (500, 1000, 2000, 4000, 8000, 12000)


def prior_mean_errors(body, gt: torch.Tensor) -> dict[str, float]:
    """Errors of the predictor that ignores the image and always outputs the prior mean (the bar's reference)."""
    from .metrics import body_errors

    prior = body.sample_params(4096, torch.Generator().manual_seed(0)).mean(0, keepdim=True).expand_as(gt)
    return {k: float(v.mean()) for k, v in body_errors(body, prior, gt).items()}


def train_efficientnet_victim(name_kwargs: dict, args: TbaTrainingArguments, body, images, params, eval_images,
                              eval_params, log=print) -> tuple[TbaPoseRegressor, dict]:  # fmt: skip
    """One EfficientNet-Lite0 ridge victim: ImageNet trunk, features of the renders, λ picked on a held-out 15 %
    by MPJPE, head refitted on all; returns the model and its record (held-out errors, the curve of held-out
    MPJPE against the number of training renders at the chosen λ)."""
    from .victim import extract_features, fit_ridge_head, mpjpe_score, pretrained_efficientnet_victim

    config = TbaVictimConfig(backbone="efficientnet-lite0", image_size=args.image_size, body_model=body.name,
                             num_params=body.num_params,
                             backbone_kwargs={**name_kwargs, "input_size": args.victim_input_size})  # fmt: skip
    model = pretrained_efficientnet_victim(config)
    t = time.perf_counter()
    feats = extract_features(model, images)
    eval_feats = extract_features(model, eval_images)
    feature_s = time.perf_counter() - t
    fit = fit_ridge_head(model.head, feats, params, score=mpjpe_score(body))
    curve = []
    for n in [n for n in CURVE_SIZES if n < len(images)] + [len(images)]:
        head = torch.nn.Linear(feats.shape[1], body.num_params)  # a head alone: the features are given
        fit_ridge_head(head, feats[:n], params[:n], lambdas=(fit["lambda"],), score=mpjpe_score(body))
        with torch.no_grad():
            pred = head(eval_feats)
        curve.append({"num_train": n, "eval_mpjpe": mpjpe_score(body)(pred, eval_params)})
    errors = victim_error(model, body, eval_images, eval_params)
    log(f"victim {name_kwargs}: held-out MPJPE {errors['mpjpe']:.1f} mm (lambda {fit['lambda']:g}; "
        f"features {feature_s:.0f}s)")  # fmt: skip
    return model, {
        "eval": errors,
        "ridge_lambda": fit["lambda"],
        "ridge_val_mpjpe": fit["val_scores"],
        "curve": curve,
        "num_features": model.regressor.num_features,
        "feature_s": feature_s,
    }


def train_all(args: TbaTrainingArguments, out_dir: Path, log=print) -> dict:
    """Renders the data and trains victims A and B (see the module docstring) and the DHNG; saves all three under
    `out_dir` (`victim_a/`, `victim_b/`, `dhng/`) and returns their paths, training times, the victims' held-out
    errors beside the prior-mean predictor's, and the VAE's loss curve."""
    from hf_ext.core.hub import save_artifact

    from . import SPEC
    from .data import render_batch

    body = build_body(args.body)
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    images, params = render_batch(body, args.num_train, seed=args.seed, image_size=args.image_size)
    eval_images, eval_params = render_batch(body, args.num_eval, seed=args.seed + 20_000, image_size=args.image_size)
    timings = {"render_s": time.perf_counter() - t0}
    paths, victims = {}, {"prior_mean_predictor": prior_mean_errors(body, eval_params)}
    if args.victim == "efficientnet-lite0":
        for name, kwargs in EFFICIENTNET_VICTIMS:
            t = time.perf_counter()
            model, record = train_efficientnet_victim(kwargs, args, body, images, params, eval_images, eval_params,
                                                      log)  # fmt: skip
            paths[name] = str(save_artifact(model, out_dir / name, SPEC))
            victims[name] = record
            timings[f"{name}_s"] = time.perf_counter() - t
    train = None
    if args.victim == "vit" or args.vae_epochs > 0 or args.denoiser_epochs > 0:
        from datasets import Dataset

        train = Dataset.from_dict({"pixel_values": images.numpy(), "labels": params.numpy()}).with_format("torch")
    if args.victim == "vit":
        for name, backbone, seed in (("victim_a", "vit", args.seed), ("victim_b", "convnext", args.seed + 1)):
            t = time.perf_counter()
            config = TbaVictimConfig(backbone=backbone, image_size=args.image_size, body_model=body.name,
                                     num_params=body.num_params)  # fmt: skip
            model = train_victim(config, train, out_dir / "_trainer", epochs=args.victim_epochs,
                                 lr=args.victim_learning_rate, batch_size=args.batch_size, seed=seed,
                                 body=body)  # fmt: skip
            paths[name] = str(save_artifact(model, out_dir / name, SPEC))
            victims[name] = {"eval": victim_error(model, body, eval_images, eval_params)}
            timings[f"{name}_s"] = time.perf_counter() - t
            log(f"trained {name} ({backbone}) in {timings[f'{name}_s']:.1f}s")
    t = time.perf_counter()
    vae_history, denoiser_history = [], []
    if train is not None and len(train) > args.dhng_num_train:
        train = train.select(range(args.dhng_num_train))
    dhng = train_dhng(TbaDhngConfig(image_size=args.image_size), train, out_dir / "_trainer", epochs=args.vae_epochs,
                      lr=args.vae_learning_rate, batch_size=args.batch_size, seed=args.seed, history=vae_history,
                      denoiser_epochs=args.denoiser_epochs, denoiser_lr=args.denoiser_learning_rate,
                      denoiser_history=denoiser_history)  # fmt: skip
    paths["dhng"] = str(save_artifact(dhng, out_dir / "dhng", SPEC))
    timings["dhng_s"] = time.perf_counter() - t
    for label, hist in (("VAE", vae_history), ("denoiser", denoiser_history)):
        log(f"DHNG {label} loss " + " -> ".join(f"{r['loss']:.4f}" for r in hist[:: max(1, len(hist) // 4)]))
    log(f"trained the DHNG in {timings['dhng_s']:.1f}s")
    meta = {"training_args": asdict(args), "paths": paths, "timings": timings, "victims": victims,
            "vae_loss_history": vae_history, "denoiser_loss_history": denoiser_history}  # fmt: skip
    (out_dir / "training.json").write_text(json.dumps(meta, indent=2))
    return meta


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hf-ext tba train", description="Train TBA's victims and noise generator.")
    p.add_argument("--out", default=str(work_dir("tba", "artifacts")), help="output folder")
    p.add_argument("--body", default="procedural", choices=["procedural", "anny"])
    p.add_argument("--victim", default=TbaTrainingArguments.victim, choices=["efficientnet-lite0", "vit"])
    p.add_argument("--victim-input-size", type=int, default=TbaTrainingArguments.victim_input_size)
    p.add_argument("--num-train", type=int, default=TbaTrainingArguments.num_train)
    p.add_argument("--victim-epochs", type=float, default=TbaTrainingArguments.victim_epochs)
    p.add_argument("--vae-epochs", type=float, default=TbaTrainingArguments.vae_epochs)
    p.add_argument("--denoiser-epochs", type=float, default=TbaTrainingArguments.denoiser_epochs)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--full", action="store_true", help="accepted for symmetry with reproduce; same as the defaults")
    return p


def main(argv: list[str] | None = None) -> dict:
    a = build_parser().parse_args(argv)
    args = TbaTrainingArguments(body=a.body, victim=a.victim, victim_input_size=a.victim_input_size,
                                num_train=a.num_train, victim_epochs=a.victim_epochs,
                                vae_epochs=a.vae_epochs, denoiser_epochs=a.denoiser_epochs, seed=a.seed)  # fmt: skip
    return train_all(args, Path(a.out))


__all__ = [
    "EFFICIENTNET_VICTIMS",
    "TbaTrainingArguments",
    "main",
    "prior_mean_errors",
    "train_all",
    "train_dhng",
    "train_efficientnet_victim",
    "train_victim",
    "victim_error",
]
