"""TBA's Trainer runs: victim regressors from scratch (`victim="vit"`, MSE on the body parameters, with a
`compute_metrics` in millimetres) and the DHNG in two stages (its VAE, then its latent denoiser), all on
`transformers.Trainer`."""

from __future__ import annotations

from pathlib import Path

import torch

from .configuration_tba import TbaDhngConfig, TbaVictimConfig
from .data import collate
from .modeling_tba import TbaDhngModel, TbaPoseRegressor


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


def make_trainer(
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
    make_trainer(model, dataset, output_dir, epochs, lr, batch_size, seed, body=body).train()
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
        trainer = make_trainer(
            model, images, output_dir, epochs, lr, batch_size, seed, logging_steps=max(1, steps // 8)
        )
        trainer.train()
        if history is not None:
            history.extend(_logged(trainer))
    if denoiser_epochs > 0:
        model.vae.requires_grad_(False)
        model.unet.requires_grad_(True)
        model.controlnet.requires_grad_(True)
        steps = max(1, int(denoiser_epochs * len(images) / batch_size))
        trainer = make_trainer(model, images, output_dir, denoiser_epochs, denoiser_lr, batch_size, seed + 1,
                           logging_steps=max(1, steps // 8), data_collator=_denoiser_collate)  # fmt: skip
        trainer.train()
        if denoiser_history is not None:
            denoiser_history.extend(_logged(trainer))
    return model.cpu().eval().requires_grad_(False)
