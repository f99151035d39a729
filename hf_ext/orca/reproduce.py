"""`hf-ext reproduce orca`: MMoE vs MMoE+ORCA and PLE vs PLE+ORCA over seeds and clickbait-shortcut strengths on
the synthetic generator with a known causal ground truth; prints the table, writes `results.json`, the CTR × DT
heatmaps (the paper's Fig. 1) and the ORCA artifact that `hf-ext push orca` uploads."""

from __future__ import annotations

import argparse
import functools
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from transformers import PrinterCallback

from hf_ext.core.parallel import run_jobs

from .configuration_orca import OrcaConfig
from .data import (
    FIELD_NAMES,
    POST_CLICK_FIELDS,
    SyntheticOrcaConfig,
    field_vocab_sizes,
    generate_synthetic,
    to_model_features,
    train_val_test_split,
)
from .metrics import ctr_dt_heatmap, ctr_metrics, dt_metrics
from .modeling_orca import OrcaModel
from .training import MODEL_COLUMNS, OrcaTrainer, OrcaTrainingArguments

REPORTED = ("moderate_share_pred", "js_distance", "dt_macro_f1", "dt_mae_s", "ndcg@5", "ctr_auc")


@dataclass
class OrcaReproduceArguments:
    """Scale of `hf-ext reproduce orca`. Quick scale by default; `--full` gives the complete sweep."""

    full: bool = False
    out: str = "runs/orca"
    backbones: list[str] = field(default_factory=lambda: ["mmoe", "ple"])
    strengths: list[float] = field(default_factory=lambda: [0.0, 1.0, 2.0, 3.0])
    seeds: list[int] = field(default_factory=lambda: [0, 1])  # --full: 3 seeds
    num_impressions: int = 48_000
    num_users: int = 1_000
    num_items: int = 600
    epochs: float = 4.0
    batch_size: int = 512
    ablations: bool = False
    workers: int = 2

    def __post_init__(self):
        if self.full:
            self.num_impressions, self.num_users, self.num_items = 300_000, 3_000, 2_000
            self.epochs, self.ablations, self.seeds = 5.0, True, [0, 1, 2]


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hf-ext reproduce orca", description=__doc__)
    p.add_argument("--full", action="store_true", help="300k impressions, 5 epochs, plus ablations on MMoE")
    p.add_argument("--out", default="runs/orca", help="output folder (results.json, heatmaps.png, artifact/)")
    p.add_argument("--backbones", nargs="+", choices=["mmoe", "ple"])
    p.add_argument("--strengths", nargs="+", type=float, help="clickbait shortcut strengths s")
    p.add_argument("--seeds", nargs="+", type=int)
    p.add_argument("--num-impressions", type=int)
    p.add_argument("--epochs", type=float)
    p.add_argument("--workers", type=int, help="parallel training processes (default 2)")
    return p


def _variants(run: OrcaReproduceArguments) -> dict[str, dict]:
    variants = {"baseline": {"use_orca": False}, "orca": {"use_orca": True}}
    if run.ablations:
        variants.update({
            "orca-no-mask": {"use_orca": True, "_use_mask_fea": False},
            "orca-no-inter": {"use_orca": True, "use_inter": False},
            "orca-no-inst": {"use_orca": True, "use_inst": False},
        })
    return variants


@torch.no_grad()
def predict(model: OrcaModel, dataset, batch_size: int = 4096) -> dict[str, np.ndarray]:
    """Click probabilities and DT bin probabilities (prediction head and raw head) on a model-features dataset."""
    model.eval()
    ids = torch.as_tensor(np.asarray(dataset["input_ids"], dtype=np.int64))
    out = {"click_probs": [], "dt_probs": [], "dt_probs_raw": []}
    for start in range(0, len(ids), batch_size):
        o = model(input_ids=ids[start : start + batch_size])
        out["click_probs"].append(o.click_probs)
        out["dt_probs"].append(o.dt_logits.softmax(-1))
        out["dt_probs_raw"].append(o.dt_logits_raw.softmax(-1))
    return {k: torch.cat(v).numpy() for k, v in out.items()}


def evaluate(model: OrcaModel, test) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    pred = predict(model, test)
    clicks = np.asarray(test["click_labels"])
    clicked = clicks > 0.5
    bins = np.asarray(test["dwell_labels"])[clicked]
    kw = dict(dwell_seconds_true=np.asarray(test["dwell_seconds"])[clicked],
              user_ids=np.asarray(test["user_ids"])[clicked], bin_seconds=model.config.bin_seconds)
    metrics = {**ctr_metrics(clicks, pred["click_probs"]), **dt_metrics(bins, pred["dt_probs"][clicked], **kw)}
    if model.config.use_orca:  # the raw head of the same model, for comparison
        raw = dt_metrics(bins, pred["dt_probs_raw"][clicked], **kw)
        metrics.update({f"raw_{k}": v for k, v in raw.items()})
    return metrics, pred


def train_one(splits, names, sizes, backbone: str, seed: int, run: OrcaReproduceArguments, **overrides) -> OrcaModel:
    use_mask = overrides.pop("_use_mask_fea", True)
    post_click = overrides.pop("post_click_fields", list(POST_CLICK_FIELDS))
    config = OrcaConfig(field_names=names, field_vocab_sizes=sizes, post_click_fields=post_click,
                        backbone=backbone, **overrides)
    torch.manual_seed(seed)
    model = OrcaModel(config)
    args = OrcaTrainingArguments(
        output_dir=str(Path(run.out) / "trainer"), num_train_epochs=run.epochs, seed=seed, data_seed=seed,
        per_device_train_batch_size=run.batch_size, logging_strategy="no", use_mask_fea=use_mask,
    )
    trainer = OrcaTrainer(model=model, args=args, train_dataset=splits["train"].select_columns(list(MODEL_COLUMNS)))
    trainer.remove_callback(PrinterCallback)  # one line per run from tqdm is enough
    trainer.train()
    return model


def _summarise(per_seed: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    keys = per_seed[0].keys()
    return {k: {"mean": float(np.nanmean([m[k] for m in per_seed])), "std": float(np.nanstd([m[k] for m in per_seed]))}
            for k in keys}


def format_table(results: dict) -> str:
    head = ["backbone", "s", "variant", "moderate%(true)", "JS dist", "macro-F1", "MAE s", "NDCG@5", "CTR AUC"]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for row in results["rows"]:
        m = row["metrics"]

        def cell(key, scale=1.0, digits=3):
            return f"{m[key]['mean'] * scale:.{digits}f}±{m[key]['std'] * scale:.{digits}f}"

        moderate = f"{cell('moderate_share_pred', 100, 1)} ({m['moderate_share_true']['mean'] * 100:.1f})"
        lines.append(" | ".join([row["backbone"], f"{row['strength']:g}", row["variant"], moderate,
                                 cell("js_distance"), cell("dt_macro_f1"), cell("dt_mae_s", 1, 1),
                                 cell("ndcg@5"), cell("ctr_auc", 1, 4)]))
    return "\n".join(lines)


def plot_heatmaps(panels: dict[str, np.ndarray], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4), constrained_layout=True)
    for ax, (name, counts) in zip(np.atleast_1d(axes), panels.items()):
        share = counts / max(counts.sum(), 1)
        ax.imshow(share, aspect="auto", cmap="viridis", origin="lower")
        ax.set_title(name)
        ax.set_xlabel("DT bin")
        ax.set_yticks(range(share.shape[0]))
        ax.set_yticklabels([f"{0.05 * i:.2f}" for i in range(share.shape[0] - 1)] + ["≥0.40"])
        ax.set_ylabel("predicted CTR bucket (ground truth: true CTR)")
    fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


@functools.lru_cache(maxsize=2)
def _splits(strength: float, num_impressions: int, num_users: int, num_items: int):
    """The synthetic data of one shortcut strength (seed 0), split 80/10/10; cached per worker process."""
    gen = SyntheticOrcaConfig(num_impressions=num_impressions, num_users=num_users, num_items=num_items,
                              shortcut_strength=strength, seed=0)
    sizes = field_vocab_sizes(gen)
    return train_val_test_split(to_model_features(generate_synthetic(gen), list(FIELD_NAMES), sizes), seed=0), sizes


def _run_job(run: OrcaReproduceArguments, strength: float, backbone: str, variant: str, seed: int, keep: bool):
    """Trains and evaluates one (strength, backbone, variant, seed); with `keep`, also returns heatmaps and saves
    the ORCA artifact."""
    splits, sizes = _splits(strength, run.num_impressions, run.num_users, run.num_items)
    test = splits["test"]
    model = train_one(splits, list(FIELD_NAMES), sizes, backbone, seed, run, **dict(_variants(run)[variant]))
    metrics, pred = evaluate(model, test)
    heatmaps = {}
    if keep:
        clicked = np.asarray(test["click_labels"]) > 0.5
        heatmaps["ground truth"] = ctr_dt_heatmap(np.asarray(test["true_click_prob"])[clicked],
                                                  np.asarray(test["dwell_labels"])[clicked])
        heatmaps[f"{backbone} {variant}"] = ctr_dt_heatmap(pred["click_probs"][clicked],
                                                           pred["dt_probs"][clicked].argmax(-1))
        if variant == "orca":
            from hf_ext.core.hub import save_artifact

            from . import SPEC

            save_artifact(model, Path(run.out) / "artifact", SPEC)
    return (strength, backbone, variant, seed), metrics, heatmaps


def main(argv: list[str] | None = None) -> dict:
    ns = make_parser().parse_args(argv)
    run = OrcaReproduceArguments(full=ns.full, out=ns.out)
    for key in ("backbones", "strengths", "seeds", "num_impressions", "epochs", "workers"):
        if getattr(ns, key) is not None:
            setattr(run, key, getattr(ns, key))
    out = Path(run.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    variants = _variants(run)
    top = max(run.strengths)
    jobs = [(s, b, v, seed, s == top and b == run.backbones[0] and seed == run.seeds[0] and v in ("baseline", "orca"))
            for s in run.strengths for b in run.backbones for v in variants for seed in run.seeds]
    done, heatmaps = {}, {}
    for key, metrics, maps in run_jobs(_run_job, [(run, *job) for job in jobs], workers=run.workers,
                                       desc="orca reproduce"):
        done[key] = metrics
        heatmaps.update(maps)
    rows = []
    for s in run.strengths:
        for b in run.backbones:
            for v in variants:
                per_seed = [done[(s, b, v, seed)] for seed in run.seeds]
                rows.append({"backbone": b, "strength": s, "variant": v, "metrics": _summarise(per_seed),
                             "per_seed": per_seed})
    results = {"method": "orca", "scale": "full" if run.full else "quick", "settings": asdict(run),
               "data": "synthetic causal generator (hf_ext.orca.data.generate_synthetic), seed 0; test split 10%",
               "rows": rows, "seconds": round(time.perf_counter() - start, 1)}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    order = ["ground truth"] + [f"{run.backbones[0]} {v}" for v in ("baseline", "orca")]
    plot_heatmaps({k: heatmaps[k] for k in order if k in heatmaps}, out / "heatmaps.png",
                  f"clicked test impressions, s = {top:g}: CTR bucket × DT bin")
    table = format_table(results)
    print(table)
    print(f"\nwrote {out / 'results.json'}, {out / 'heatmaps.png'} and {out / 'artifact'} "
          f"({results['seconds']:.0f} s)")
    results["table"] = table
    return results


if __name__ == "__main__":
    main()
