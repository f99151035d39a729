"""Summaries of `hf-ext reproduce tba`: means ± std over seeds, the % increase over clean (the paper's "41 %"),
TBA's relative improvement over each baseline (the paper's "~17 %"), the paired per-image differences pooled over
seeds and images, and the SSIM of each perturbation; plus the printed tables."""

from __future__ import annotations

import math
import statistics

METRICS = ("mpjpe", "pa_mpjpe", "pve")
REGIMES = ("white_box", "transfer", "resize", "blur")
BASELINES = ("fgsm", "pgd", "mifgsm")
ABLATIONS = ("tba_vae_only", "tba_controlnet_only", "tba_no_generator_grad")


def mean_std(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "values": values}  # fmt: skip


def paired(per_seed_images: list[dict], regime: str, a: str, b: str, metric: str = "mpjpe") -> dict:
    """Per-image `error(a) - error(b)` (mm) pooled over seeds and images: mean, std, standard error, the share of
    images where `a` is worse for the victim (higher error), and the per-seed means' spread."""
    diffs, seed_means = [], []
    for s in per_seed_images:
        d = [x - y for x, y in zip(s[regime][a][metric], s[regime][b][metric])]
        diffs += d
        seed_means.append(statistics.fmean(d))
    sd = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
    return {"mean_mm": statistics.fmean(diffs), "std_mm": sd, "sem_mm": sd / math.sqrt(len(diffs)),
            "a_higher_share": sum(d > 0 for d in diffs) / len(diffs), "n": len(diffs),
            "seed_means_mm": seed_means}  # fmt: skip


def summarise(per_seed: list[dict], per_seed_images: list[dict] | None = None) -> dict:
    """Means ± std over seeds of the errors, the % increase over clean and TBA's relative improvement; with the
    per-image errors, the paired TBA-minus-baseline (and -ablation) differences."""
    summary = {"prior_mean_predictor": {m: mean_std([s["prior_mean_predictor"][m] for s in per_seed])
                                        for m in METRICS}}  # fmt: skip
    attacks = list(per_seed[0]["white_box"])
    for regime in REGIMES:
        reg = {}
        for name in attacks:
            entry = {}
            for m in METRICS:
                errs = [s[regime][name][m] for s in per_seed]
                entry[m] = mean_std(errs)
                if name != "clean":
                    inc = [100 * (s[regime][name][m] / s[regime]["clean"][m] - 1) for s in per_seed]
                    entry[f"{m}_increase_pct"] = mean_std(inc)
            reg[name] = entry
        others = [n for n in attacks if n not in ("clean", "tba")]
        reg["tba_improvement_pct"] = {
            base: {m: mean_std([100 * (s[regime]["tba"][m] / s[regime][base][m] - 1) for s in per_seed])
                   for m in METRICS}
            for base in BASELINES + (attacks[-1],)
        }  # fmt: skip
        if per_seed_images is not None:
            reg["tba_minus_paired"] = {o: paired(per_seed_images, regime, "tba", o) for o in others}
        summary[regime] = reg
    if per_seed and "ssim" in per_seed[0]:
        summary["ssim"] = {n: mean_std([s["ssim"][n] for s in per_seed]) for n in per_seed[0]["ssim"]}
    return summary


def print_table(summary: dict, eps: float, ns) -> None:
    print(f"\nTBA vs baselines, eps = {eps * 255:.0f}/255, {ns.steps} victim gradients (FGSM: 1), "
          f"{ns.num_test} test images x {len(ns.seeds)} seeds; errors in mm (mean ± std over seeds)")  # fmt: skip
    prior = summary["prior_mean_predictor"]
    print("a victim predicting the prior mean scores " + ", ".join(f"{m} {prior[m]['mean']:.1f}" for m in METRICS))
    ssim = summary.get("ssim", {})
    for regime in REGIMES:
        reg = summary[regime]
        print(f"\n[{regime}]")
        print(f"{'attack':<26}{'MPJPE':>16}{'PA-MPJPE':>16}{'PVE':>16}{'MPJPE +%':>12}{'PVE +%':>12}{'SSIM':>8}")
        for name, entry in reg.items():
            if name in ("tba_improvement_pct", "tba_minus_paired"):
                continue
            cells = "".join(f"{entry[m]['mean']:>9.1f} ± {entry[m]['std']:<4.1f}" for m in METRICS)
            inc = "".join(f"{entry[f'{m}_increase_pct']['mean']:>12.1f}" if name != "clean" else f"{'':>12}"
                          for m in ("mpjpe", "pve"))  # fmt: skip
            sim = f"{ssim[name]['mean']:>8.3f}" if name in ssim else ""
            print(f"{name:<26}{cells}{inc}{sim}")
        imp = reg["tba_improvement_pct"]
        print("TBA relative to: " + ", ".join(
            f"{b} {imp[b]['mpjpe']['mean']:+.1f}% MPJPE / {imp[b]['pve']['mean']:+.1f}% PVE" for b in imp))  # fmt: skip
        if "tba_minus_paired" in reg:
            print("paired TBA - other, MPJPE mm per image (mean ± sem, share TBA higher): " + ", ".join(
                f"{o} {d['mean_mm']:+.2f} ± {d['sem_mm']:.2f} ({d['a_higher_share']:.0%})"
                for o, d in reg["tba_minus_paired"].items()))  # fmt: skip


__all__ = ["ABLATIONS", "BASELINES", "METRICS", "REGIMES", "mean_std", "paired", "print_table", "summarise"]
