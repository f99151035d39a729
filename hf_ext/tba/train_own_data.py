"""`hf-ext train tba --data IMAGES`: TBA on the user's images and regressor. The DHNG (VAE, then the ControlNet-guided
latent denoiser) trains on the train split; TBA and PGD, at the same budget and number of victim gradients, attack the
held-out test split; the artifact (`OUTPUT_DIR/dhng/`, plus `OUTPUT_DIR/victim/` when the victim was fitted here)
gets a `training_record.json` with the per-attack output shift, MPJPE shift (pose victims) and SSIM.

The victim (`--victim_model`) is any saved regressor (see [`~hf_ext.tba.interface`]); by default the project's
EfficientNet-Lite0 pose victim (victim A of the reproduction: ImageNet trunk + ridge head) fitted on `--num_train`
rendered bodies.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

VICTIM_DIR, DHNG_DIR = "victim", "dhng"


def _default_victim(args, out_dir: Path, log=print):
    """The project's EfficientNet-Lite0 pose victim (victim A), fitted on rendered bodies, saved in `out_dir/victim`."""
    from hf_ext.core.hub import save_artifact

    from . import SPEC
    from .body import build_body
    from .data import render_batch
    from .train import EFFICIENTNET_VICTIMS, train_efficientnet_victim

    body = build_body(args.body)
    images, params = render_batch(body, args.num_train, seed=args.seed, image_size=args.image_size)
    eval_images, eval_params = render_batch(body, args.num_eval, seed=args.seed + 20_000, image_size=args.image_size)
    model, record = train_efficientnet_victim(EFFICIENTNET_VICTIMS[0][1], args, body, images, params, eval_images,
                                              eval_params, log)  # fmt: skip
    save_artifact(model, out_dir / VICTIM_DIR, SPEC)
    return model.eval(), record


def resolve_victim(ref: str, artifact: Path, trust_remote_code: bool = False):
    """`(victim, info)` from a record's victim reference: `"victim"` (inside the artifact) or a folder / Hub id."""
    from .interface import load_victim

    local = artifact / ref
    return load_victim(str(local) if ref == VICTIM_DIR and local.is_dir() else ref, trust_remote_code)


def train_on_own_data(script, args, argv) -> dict:
    """Runs `hf-ext train tba --data` (see the module docstring); returns the record's metrics and paths."""
    import json

    from datasets import Dataset

    from hf_ext.core.hub import save_artifact
    from hf_ext.core.records import save_training_record
    from hf_ext.core.user_data import dataset_entry

    from . import SPEC
    from .configuration_tba import TbaDhngConfig
    from .data import load_image_data, split_images, to_pixel_values
    from .evaluation import AttackSetting, attack_scores, run_attack, score_metrics
    from .interface import load_victim
    from .trainer import train_dhng

    data = load_image_data(script.data)  # the schema check first: bad data fails before any model loads
    splits = split_images(data, seed=script.split_seed, test=script.test_fraction)
    out_dir = Path(script.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if script.victim_model is not None:
        victim, info = load_victim(script.victim_model, script.trust_remote_code)
        local = Path(script.victim_model).expanduser()
        victim_ref = str(local.resolve()) if local.exists() else script.victim_model
        victim_record = None
    else:
        victim, victim_record = _default_victim(args, out_dir)
        info = {"kind": "pose", "image_size": victim.config.image_size, "body_model": victim.config.body_model,
                "class": type(victim).__name__}  # fmt: skip
        victim_ref = VICTIM_DIR
    image_size = info["image_size"] if info["kind"] == "pose" else args.image_size
    train_px, test_px = (to_pixel_values(splits[s]["image"], image_size) for s in ("train", "test"))
    vae_history, denoiser_history = [], []
    with tempfile.TemporaryDirectory() as scratch:  # the Trainer's scratch folder stays out of the artifact
        dhng = train_dhng(
            TbaDhngConfig(image_size=image_size), Dataset.from_dict({"pixel_values": train_px.numpy()}).with_format(
                "torch"), Path(scratch), epochs=args.vae_epochs, lr=args.vae_learning_rate,
            batch_size=args.batch_size, seed=args.seed, history=vae_history, denoiser_epochs=args.denoiser_epochs,
            denoiser_lr=args.denoiser_learning_rate, denoiser_history=denoiser_history,
        )  # fmt: skip
    save_artifact(dhng, out_dir / DHNG_DIR, SPEC)
    setting = AttackSetting(eps=script.eps, steps=script.attack_steps, lambda_perceptual=script.lambda_perceptual,
                            seed=args.seed, batch_size=script.attack_batch_size)  # fmt: skip
    entry = dataset_entry(script.data, splits)
    metrics = []
    for label, attack in (("TBA", dhng), ("PGD", "pgd")):
        adversarial = run_attack(attack, victim, info, test_px, setting)
        metrics += score_metrics(label, info, attack_scores(victim, info, test_px, adversarial), entry["name"])
    config = {
        **asdict(args),
        **{k: v for k, v in vars(script).items() if k not in ("output_dir", "full")},
        "victim": victim_ref,
        "victim_info": info,
        "image_size": image_size,
        "attack": asdict(setting),
        "split": {"seed": script.split_seed, "test_fraction": script.test_fraction,
                  "rows": {k: len(v) for k, v in splits.items()}},
        "vae_loss_history": vae_history,
        "denoiser_loss_history": denoiser_history,
    }  # fmt: skip
    if victim_record is not None:
        config["victim_held_out"] = victim_record["eval"]
    save_training_record(
        out_dir,
        method="tba",
        command="hf-ext train tba " + " ".join(argv if argv is not None else sys.argv[1:]),
        datasets=[entry],
        metrics=metrics,
        config=config,
        notes=f"TBA (this DHNG) and PGD at eps {script.eps:.4g}, {script.attack_steps} victim gradients each, on "
        f"{len(test_px)} held-out images; victim {victim_ref} ({info['class']}); shifts are measured against the "
        "victim's clean prediction (no ground truth)",
    )
    result = {"metrics": {m["name"]: m["value"] for m in metrics}, "artifact_dir": str(out_dir)}
    print(json.dumps(result, indent=1))
    return result


__all__ = ["DHNG_DIR", "VICTIM_DIR", "resolve_victim", "train_on_own_data"]
