"""`hf-ext evaluate tba --model DIR --data IMAGES [--baseline pgd|fgsm|mifgsm|DIR]`: TBA with a trained DHNG against
the victim on the user's test images (the split `hf-ext train tba --data` held out, rebuilt from its record), and
with `--baseline` the paired comparison over the test images: a gradient attack at the same budget and number of
victim gradients, or another DHNG artifact."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TbaEvaluateArguments:
    """What `hf-ext evaluate tba` attacks and compares (budget and loss weights default to the training record's)."""

    model: str = field(metadata={"help": "the folder hf-ext train tba --data wrote (dhng/ + training_record.json)"})
    data: str = field(metadata={"help": "the same images as in train (folder, table or Hub id)"})
    output: str | None = field(default=None, metadata={"help": "write the metrics (and comparison) as JSON here"})
    baseline: str | None = field(
        default=None,
        metadata={"help": "pgd, fgsm or mifgsm (same budget and gradients), or another hf-ext train tba --data folder"},
    )
    victim_model: str | None = field(
        default=None,
        metadata={"help": "attack this regressor instead of the recorded victim (see hf_ext.tba.interface)"},
    )
    trust_remote_code: bool = field(default=False, metadata={"help": "load --victim_model with remote code"})
    eps: float | None = field(default=None, metadata={"help": "L-infinity budget (default: the record's)"})
    attack_steps: int | None = field(default=None, metadata={"help": "victim gradients per attack (default: record's)"})


def build_parser():
    """The `transformers.HfArgumentParser` of `hf-ext evaluate tba`."""
    from transformers import HfArgumentParser

    return HfArgumentParser(TbaEvaluateArguments, prog="hf-ext evaluate tba")


def _load(folder: str):
    """`(folder, record, dhng)` of a `hf-ext train tba --data` output."""
    from hf_ext.core.records import load_training_record

    from .modeling_tba import TbaDhngModel
    from .train_own_data import DHNG_DIR

    path = Path(folder)
    record = load_training_record(path) if path.is_dir() else None
    if record is None or "split" not in (record.get("config") or {}) or not (path / DHNG_DIR).is_dir():
        raise ValueError(
            f"--model / --baseline {folder!r} is not a `hf-ext train tba --data` output (a folder with dhng/ and a "
            "training_record.json holding the data split)"
        )
    return path, record, TbaDhngModel.from_pretrained(path / DHNG_DIR).eval().requires_grad_(False)


def main(argv: list[str] | None = None) -> dict:
    """Attacks the test split with TBA (and the baseline); prints the table and returns `report_evaluation`'s
    result."""
    from dataclasses import replace

    from hf_ext.core.records import report_evaluation
    from hf_ext.core.reporting import paired_bootstrap

    from .data import load_image_data, split_images, to_pixel_values
    from .evaluation import GRADIENT_ATTACKS, AttackSetting, attack_scores, metric_names, run_attack, score_metrics
    from .interface import load_victim
    from .train_own_data import resolve_victim

    (ns,) = build_parser().parse_args_into_dataclasses(args=argv)
    data = load_image_data(ns.data)  # the schema check first: bad data fails before any model loads
    folder, record, dhng = _load(ns.model)
    cfg = record["config"]
    if ns.victim_model is not None:
        victim, info = load_victim(ns.victim_model, ns.trust_remote_code)
    else:
        victim, info = resolve_victim(cfg["victim"], folder, cfg.get("trust_remote_code", False))
    split = cfg["split"]
    test = split_images(data, seed=split["seed"], test=split["test_fraction"])["test"]
    image_size = dhng.config.image_size
    if info["kind"] == "pose" and info["image_size"] != image_size:
        raise ValueError(
            f"the victim takes {info['image_size']}px images, the DHNG was trained at {image_size}px: pass the "
            "victim it was trained against"
        )
    pixels = to_pixel_values(test["image"], image_size)
    setting = AttackSetting(**cfg["attack"])
    if ns.eps is not None:
        setting = replace(setting, eps=ns.eps)
    if ns.attack_steps is not None:
        setting = replace(setting, steps=ns.attack_steps)
    name = Path(ns.data).name if Path(ns.data).exists() else ns.data
    scores = attack_scores(victim, info, pixels, run_attack(dhng, victim, info, pixels, setting))
    metrics = score_metrics("TBA", info, scores, name)
    comparison = None
    if ns.baseline is not None:
        if ns.baseline in GRADIENT_ATTACKS:
            label, attack = ns.baseline.upper(), ns.baseline
        else:
            _, _, attack = _load(ns.baseline)
            label = f"DHNG {ns.baseline}"
            if attack.config.image_size != image_size:
                raise ValueError(
                    f"--baseline {ns.baseline} was trained at {attack.config.image_size}px, not {image_size}"
                )
        base = attack_scores(victim, info, pixels, run_attack(attack, victim, info, pixels, setting))
        comparison = {"baseline": label}
        # per test image, TBA minus the baseline (a positive shift difference: TBA moved the prediction further)
        for key, metric_name in metric_names("TBA", info).items():
            summary = paired_bootstrap(scores[key], base[key]).to_dict()
            summary.pop("per_pair", None)
            summary["baseline_mean"] = sum(base[key]) / len(base[key])
            comparison[metric_name.replace("TBA ", "")] = summary
    return report_evaluation(
        metrics,
        output=ns.output,
        comparison=comparison,
        header=f"TBA ({folder}) against {info['class']} on the test split of {ns.data} ({len(pixels)} images, "
        f"eps {setting.eps:.4g}, {setting.steps} victim gradients)",
    )


__all__ = ["TbaEvaluateArguments", "build_parser", "main"]
