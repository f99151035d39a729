"""Training TBA's artifacts: the victim regressors (the EHPS models under attack) and the DHNG's VAE, on images
rendered from the body model; the `hf-ext train tba` script ([`build_parser`], [`main`]).

Default victims (`victim="efficientnet-lite0"`): two frozen ImageNet EfficientNet-Lite0 trunks with closed-form
ridge heads ([`~hf_ext.tba.victim`]): victim A on the first 8 MBConv blocks (stride 16, 80 channels) + 16x16 pooled
pixels, victim B (for transfer) on 12 blocks (stride 32, 192 channels) + 16x16 pooled pixels, both on the same
renders with the trunk at `victim_input_size`. `victim="vit"` keeps the original pair (ViT A, ConvNext B,
trained from scratch on `transformers.Trainer`), which never leave the prior-mean predictor at these budgets. The
DHNG's VAE trains on `Trainer` either way, its loss curve recorded.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import torch

from hf_ext.core.paths import work_dir

from .body import build_body
from .configuration_tba import TbaDhngConfig, TbaVictimConfig
from .metrics import prior_mean_errors, victim_error
from .modeling_tba import TbaPoseRegressor
from .trainer import train_dhng, train_victim


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
        victim_epochs (`float`, defaults to 12): epochs of each victim.
        victim_learning_rate (`float`, defaults to 3e-3): AdamW learning rate of the victims (linear decay).
        vae_epochs (`float`, defaults to 3): epochs of the DHNG's VAE.
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

    body: Literal["procedural", "anny"] = field(default="procedural", metadata={"help": "body model of the renders"})
    victim: Literal["efficientnet-lite0", "vit"] = field(
        default="efficientnet-lite0",
        metadata={"help": "victim pair: EfficientNet-Lite0 ridge (default) or ViT/ConvNext"},
    )
    victim_input_size: int = field(default=128, metadata={"help": "side the EfficientNet victims resize images to"})
    num_eval: int = field(default=500, metadata={"help": "held-out renders the victims are scored on"})
    num_train: int = field(default=3000, metadata={"help": "rendered training images"})
    image_size: int = field(default=64, metadata={"help": "image side"})
    victim_epochs: float = field(default=12, metadata={"help": "epochs of the from-scratch victims (--victim vit)"})
    victim_learning_rate: float = field(default=3e-3, metadata={"help": "AdamW learning rate of the victims"})
    vae_epochs: float = field(default=3, metadata={"help": "epochs of the DHNG's VAE"})
    vae_learning_rate: float = field(default=1e-3, metadata={"help": "AdamW learning rate of the VAE"})
    denoiser_epochs: float = field(
        default=2.0, metadata={"help": "epochs of the DHNG's latent denoiser (0: untrained)"}
    )
    denoiser_learning_rate: float = field(default=1e-3, metadata={"help": "AdamW learning rate of the denoiser"})
    dhng_num_train: int = field(default=2000, metadata={"help": "training renders the DHNG trains on (the first)"})
    batch_size: int = field(default=32, metadata={"help": "batch size"})
    seed: int = field(default=0, metadata={"help": "data and initialisation seed (victim B: seed + 1)"})

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
        for name in ("victim_epochs", "vae_epochs", "denoiser_epochs", "victim_learning_rate", "vae_learning_rate",
                     "denoiser_learning_rate"):  # fmt: skip
            value = getattr(self, name)  # check_finite_number parses numeric strings: a str field is refused here
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number, got {value!r}")
        for name in ("victim_epochs", "vae_epochs"):
            check_finite_number(name, getattr(self, name), low=0.0, low_open=True, high=1e6)
        check_finite_number("denoiser_epochs", self.denoiser_epochs, low=0.0, high=1e6)
        for name in ("victim_learning_rate", "vae_learning_rate", "denoiser_learning_rate"):
            check_finite_number(name, getattr(self, name), low=0.0, low_open=True, high=10.0)


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


def train_all(args: TbaTrainingArguments, out_dir: Path, log=print, reuse_victims: bool = False) -> dict:
    """Renders the data and trains victims A and B (see the module docstring) and the DHNG; saves all three under
    `out_dir` (`victim_a/`, `victim_b/`, `dhng/`) and returns their paths, training times, the victims' held-out
    errors beside the prior-mean predictor's, and the VAE's loss curve.

    `reuse_victims=True` (what `reproduce` passes unless `--retrain`): an EfficientNet victim that an earlier call
    with the same `args` saved completely (its `<name>.record.json` is written only after the artifact's atomic save)
    is kept, not retrained, so a run stopped while the DHNG trained loses only the DHNG."""
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
        from hf_ext.core.reporting import write_results

        for name, kwargs in EFFICIENTNET_VICTIMS:
            saved = out_dir / f"{name}.record.json"
            earlier = json.loads(saved.read_text()) if reuse_victims and saved.is_file() else None
            if earlier is not None and earlier["training_args"] == asdict(args) and (out_dir / name).is_dir():
                paths[name], victims[name], timings[f"{name}_s"] = str(out_dir / name), earlier["record"], earlier["s"]
                log(f"{name}: kept from an earlier call with the same arguments ({saved})")
                continue
            t = time.perf_counter()
            model, record = train_efficientnet_victim(kwargs, args, body, images, params, eval_images, eval_params,
                                                      log)  # fmt: skip
            paths[name] = str(save_artifact(model, out_dir / name, SPEC))
            victims[name] = record
            timings[f"{name}_s"] = time.perf_counter() - t
            write_results(saved, {"training_args": asdict(args), "record": record, "s": timings[f"{name}_s"]})
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


@dataclass
class TbaTrainScriptArguments:
    """Where `hf-ext train tba` writes (the knobs are [`TbaTrainingArguments`])."""

    output_dir: str = field(
        default_factory=lambda: str(work_dir("tba", "artifacts")),
        metadata={"aliases": ["--out"], "help": "output folder (victim_a/, victim_b/, dhng/, training.json)"},
    )
    full: bool = field(default=False, metadata={"help": "accepted for symmetry with reproduce; same as the defaults"})
    data: str | None = field(
        default=None,
        metadata={
            "help": "your images (an image folder, a CSV / JSON / Parquet table with an image path column, or a Hub "
            "id): the DHNG trains on them and the test split is attacked; default: rendered bodies"
        },
    )
    victim_model: str | None = field(
        default=None,
        metadata={
            "help": "with --data: the regressor to attack, a saved model folder or Hub id (see hf_ext.tba.interface); "
            "default: the project's EfficientNet-Lite0 pose victim, fitted on --num_train rendered bodies"
        },
    )
    trust_remote_code: bool = field(default=False, metadata={"help": "load --victim_model with remote code"})
    test_fraction: float = field(default=0.2, metadata={"help": "with --data: images held out and attacked"})
    split_seed: int = field(default=0, metadata={"help": "with --data: seed of the train / test split"})
    eps: float = field(default=8 / 255, metadata={"help": "with --data: the attack's L-infinity budget ([0, 1] units)"})
    attack_steps: int = field(default=10, metadata={"help": "with --data: victim gradients per attack (TBA and PGD)"})
    lambda_perceptual: float = field(default=50.0, metadata={"help": "with --data: weight of the SSIM penalty"})
    attack_batch_size: int = field(default=16, metadata={"help": "with --data: images attacked at once"})

    def __post_init__(self):
        from hf_ext.core.validation import check_finite_number, check_positive_int

        check_finite_number("test_fraction", self.test_fraction, low=0.0, low_open=True, high=1.0)
        if self.test_fraction >= 1.0:
            raise ValueError(f"--test_fraction must be in (0, 1), got {self.test_fraction}")
        check_positive_int("split_seed", self.split_seed, minimum=0)
        check_positive_int("attack_steps", self.attack_steps)
        check_positive_int("attack_batch_size", self.attack_batch_size)
        check_finite_number("lambda_perceptual", self.lambda_perceptual, low=0.0)
        from .attacks import check_eps

        check_eps(self.eps)


def build_parser():
    """The `transformers.HfArgumentParser` of `hf-ext train tba` ([`TbaTrainScriptArguments`] and
    [`TbaTrainingArguments`]: every knob is a flag; underscore style, dashed spellings accepted). A plain dataclass,
    not `TrainingArguments`: the victims are ridge fits and each Trainer stage takes its own epochs and rate."""
    from transformers import HfArgumentParser

    return HfArgumentParser(
        (TbaTrainScriptArguments, TbaTrainingArguments),
        prog="hf-ext train tba",
        description="Train TBA's victims and noise generator.",
    )


def main(argv: list[str] | None = None) -> dict:
    """`hf-ext train tba`: trains and saves victims A and B and the DHNG (returns [`train_all`]'s record); with
    `--data`, the DHNG on the user's images, attacked on their test split ([`~hf_ext.tba.train_own_data`])."""
    script, args = build_parser().parse_args_into_dataclasses(args=argv)
    if script.data is not None:
        from .train_own_data import train_on_own_data

        return train_on_own_data(script, args, argv)
    return train_all(args, Path(script.output_dir))


__all__ = [
    "EFFICIENTNET_VICTIMS",
    "TbaTrainScriptArguments",
    "TbaTrainingArguments",
    "build_parser",
    "main",
    "train_all",
    "train_efficientnet_victim",
]
