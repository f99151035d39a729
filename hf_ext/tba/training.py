"""Training TBA's artifacts on `transformers.Trainer`: the victim regressors (the EHPS models under attack) and the
DHNG's VAE, on images rendered from the body model; `hf-ext tba train`.
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
from .data import collate, make_dataset
from .modeling_tba import TbaDhngModel, TbaPoseRegressor


@dataclass(frozen=True)
class TbaTrainingArguments:
    """Training knobs of the victims and the generator (never in the model configs).

    Args:
        body (`str`, defaults to `"procedural"`): body model the data is rendered from (`"procedural"`, `"anny"`).
        num_train (`int`, defaults to 3000): rendered training images.
        image_size (`int`, defaults to 64): image side.
        victim_epochs (`int`, defaults to 12): epochs of each victim.
        victim_learning_rate (`float`, defaults to 3e-3): AdamW learning rate of the victims (linear decay).
        vae_epochs (`int`, defaults to 3): epochs of the DHNG's VAE.
        vae_learning_rate (`float`, defaults to 1e-3): AdamW learning rate of the VAE.
        batch_size (`int`, defaults to 32): batch size (32 rather than 64: at this scale more steps help more
            than bigger batches; 8 epochs at 64 left the ViT near the prior-mean predictor).
        seed (`int`, defaults to 0): data and initialisation seed (victim B uses `seed + 1`).
    """

    body: str = "procedural"
    num_train: int = 3000
    image_size: int = 64
    victim_epochs: int = 12
    victim_learning_rate: float = 3e-3
    vae_epochs: int = 3
    vae_learning_rate: float = 1e-3
    batch_size: int = 32
    seed: int = 0

    def __post_init__(self):
        from hf_ext.core.validation import check_finite_number, check_positive_int

        if self.body not in ("procedural", "anny"):
            raise ValueError(f"body must be 'procedural' or 'anny', got {self.body!r}")
        check_positive_int("num_train", self.num_train, minimum=2)
        check_positive_int("image_size", self.image_size, minimum=8)
        check_positive_int("batch_size", self.batch_size)
        check_positive_int("seed", self.seed, minimum=0)
        for name in ("victim_epochs", "vae_epochs"):
            check_finite_number(name, getattr(self, name), low=0.0, low_open=True, high=1e6)
        for name in ("victim_learning_rate", "vae_learning_rate"):
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


def _trainer(model, dataset, output_dir: Path, epochs: float, lr: float, batch_size: int, seed: int, max_steps=-1,
             body=None):
    from transformers import Trainer, TrainingArguments

    from hf_ext.core.devices import use_cpu

    args = TrainingArguments(
        output_dir=str(output_dir), num_train_epochs=epochs, max_steps=max_steps,
        per_device_train_batch_size=batch_size,
        learning_rate=lr, weight_decay=0.01, warmup_steps=0, use_cpu=use_cpu(), report_to="none", save_strategy="no",
        logging_strategy="no", dataloader_num_workers=0, remove_unused_columns=False, seed=seed,
    )  # fmt: skip
    return Trainer(model=model, args=args, train_dataset=dataset, data_collator=collate,
                   compute_metrics=victim_metrics(body) if body is not None else None)


def train_victim(config: TbaVictimConfig, dataset, output_dir: Path, *, epochs: float, lr: float, batch_size: int,
                 seed: int, body=None) -> TbaPoseRegressor:  # fmt: skip
    """Trains one victim regressor with `Trainer` (MSE on the body parameters) and returns it in eval mode."""
    torch.manual_seed(seed)
    model = TbaPoseRegressor(config)
    _trainer(model, dataset, output_dir, epochs, lr, batch_size, seed, body=body).train()
    return model.cpu().eval()  # Trainer moved it to CUDA when present; the attacks and metrics run on CPU tensors


def train_dhng(config: TbaDhngConfig, dataset, output_dir: Path, *, epochs: float, lr: float, batch_size: int,
               seed: int) -> TbaDhngModel:  # fmt: skip
    """Trains the DHNG's VAE (reconstruction + KL) with `Trainer`; the ControlNet stays frozen."""
    torch.manual_seed(seed)
    model = TbaDhngModel(config)
    if epochs > 0:
        _trainer(model, dataset.remove_columns("labels"), output_dir, epochs, lr, batch_size, seed).train()
    return model.cpu().eval()


@torch.no_grad()
def victim_error(model: TbaPoseRegressor, body, images: torch.Tensor, params: torch.Tensor) -> dict[str, float]:
    from .metrics import body_errors

    pred = torch.cat([model(pixel_values=images[i : i + 256]).params for i in range(0, len(images), 256)])
    return {k: float(v.mean()) for k, v in body_errors(body, pred, params).items()}


def train_all(args: TbaTrainingArguments, out_dir: Path, log=print) -> dict:
    """Renders the data and trains victim A (ViT), victim B (ConvNext) and the DHNG; saves all three under
    `out_dir` (`victim_a/`, `victim_b/`, `dhng/`) and returns their paths and training times."""
    from hf_ext.core.hub import save_artifact

    from . import SPEC

    body = build_body(args.body)
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    train = make_dataset(body, args.num_train, seed=args.seed, image_size=args.image_size)
    timings = {"render_s": time.perf_counter() - t0}
    paths = {}
    for name, backbone, seed in (("victim_a", "vit", args.seed), ("victim_b", "convnext", args.seed + 1)):
        t = time.perf_counter()
        config = TbaVictimConfig(backbone=backbone, image_size=args.image_size, body_model=body.name,
                                 num_params=body.num_params)  # fmt: skip
        model = train_victim(config, train, out_dir / "_trainer", epochs=args.victim_epochs,
                             lr=args.victim_learning_rate, batch_size=args.batch_size, seed=seed, body=body)  # fmt: skip
        paths[name] = str(save_artifact(model, out_dir / name, SPEC))
        timings[f"{name}_s"] = time.perf_counter() - t
        log(f"trained {name} ({backbone}) in {timings[f'{name}_s']:.1f}s")
    t = time.perf_counter()
    dhng = train_dhng(TbaDhngConfig(image_size=args.image_size), train, out_dir / "_trainer", epochs=args.vae_epochs,
                      lr=args.vae_learning_rate, batch_size=args.batch_size, seed=args.seed)  # fmt: skip
    paths["dhng"] = str(save_artifact(dhng, out_dir / "dhng", SPEC))
    timings["dhng_s"] = time.perf_counter() - t
    log(f"trained the DHNG's VAE in {timings['dhng_s']:.1f}s")
    meta = {"training_args": asdict(args), "paths": paths, "timings": timings}
    (out_dir / "training.json").write_text(json.dumps(meta, indent=2))
    return meta


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hf-ext tba train", description="Train TBA's victims and noise generator.")
    p.add_argument("--out", default=str(work_dir("tba", "artifacts")), help="output folder")
    p.add_argument("--body", default="procedural", choices=["procedural", "anny"])
    p.add_argument("--num-train", type=int, default=TbaTrainingArguments.num_train)
    p.add_argument("--victim-epochs", type=float, default=TbaTrainingArguments.victim_epochs)
    p.add_argument("--vae-epochs", type=float, default=TbaTrainingArguments.vae_epochs)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--full", action="store_true", help="accepted for symmetry with reproduce; same as the defaults")
    return p


def main(argv: list[str] | None = None) -> dict:
    a = build_parser().parse_args(argv)
    args = TbaTrainingArguments(body=a.body, num_train=a.num_train, victim_epochs=a.victim_epochs,
                                vae_epochs=a.vae_epochs, seed=a.seed)  # fmt: skip
    return train_all(args, Path(a.out))


__all__ = ["TbaTrainingArguments", "main", "train_all", "train_dhng", "train_victim", "victim_error"]
