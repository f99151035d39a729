"""Summaries of `hf-ext reproduce tba`: means ± sample SD over seeds, the % increase over clean (the paper's "41 %"),
TBA's relative improvement over each baseline (the paper's "~17 %"), the paired per-image differences pooled over
seeds and images with a paired bootstrap interval, the SSIM of each perturbation, the verdict rules and the printed
tables. Every spread and interval comes from [`hf_ext.core.reporting`]."""

from __future__ import annotations

from hf_ext.core.reporting import VerdictRule, paired_bootstrap, summarize

METRICS = ("mpjpe", "pa_mpjpe", "pve")
REGIMES = ("white_box", "transfer", "resize", "blur")
# With the extra victims (hf_ext.tba.extra_victims): A's adversarial images on the architecture-disjoint target C, and
# the arms crafted white-box on the fine-tuned victim F (no wall-time-matched arm there).
EXTRA_REGIMES = ("transfer_disjoint", "white_box_finetuned")


def regimes_of(mapping) -> list[str]:
    """The regimes present in a seed's errors (or a summary), in table order."""
    return [r for r in REGIMES + EXTRA_REGIMES if r in mapping]


BASELINES = ("fgsm", "pgd", "mifgsm")
ABLATIONS = ("tba_vae_only", "tba_controlnet_only", "tba_no_generator_grad")


def mean_std(values: list[float]) -> dict:
    """Mean ± sample SD over seeds ([`~hf_ext.core.reporting.summarize`]; `std` is `nan` for one seed)."""
    s = summarize(values)
    return {"mean": s.mean, "std": s.sd, "values": list(values)}


def rules(tuned: bool = False, extra: bool = False) -> dict[str, VerdictRule]:
    """Printed before the run: in each regime, does TBA raise the victim's MPJPE above PGD's at the same number of
    victim gradients? Decided on the per-image paired differences pooled over seeds (paired bootstrap, 95 %).
    `tuned`: both arms tuned on the tuning split with the same grid, and the same question at equal wall time
    (keys `<regime>_time_matched`, against the PGD given TBA's wall time). `extra`: also the regimes of the extra
    victims (the disjoint target C, both tables; the fine-tuned victim F, gradient-matched only)."""
    note = ", both tuned on the tuning split" if tuned else ""
    regimes = REGIMES + (EXTRA_REGIMES if extra else ())
    out = {
        regime: VerdictRule(
            claim=f"TBA beats PGD at an equal victim-gradient budget{note} ({regime})",
            metric="MPJPE under attack, mm per image (higher = stronger attack)",
            margin=0.0,
        )
        for regime in regimes
    }
    if tuned:
        for regime in (r for r in regimes if r != "white_box_finetuned"):
            out[f"{regime}_time_matched"] = VerdictRule(
                claim=f"TBA beats PGD at equal wall time, both tuned on the tuning split ({regime})",
                metric="MPJPE under attack, mm per image (higher = stronger attack)",
                margin=0.0,
            )
    return out


# Entries of a regime's summary that are not attacks.
SUMMARY_KEYS = ("tba_improvement_pct", "tba_minus_paired", "verdict_vs_pgd", "verdict_vs_pgd_time_matched")


def paired(per_seed_images: list[dict], regime: str, a: str, b: str, metric: str = "mpjpe") -> dict:
    """Per-image `error(a) - error(b)` (mm) pooled over seeds and images: mean, sample SD, a 95 % paired bootstrap
    interval over the images ([`~hf_ext.core.reporting.paired_bootstrap`]), the share of images where `a` is worse
    for the victim (higher error), and the per-seed mean differences."""
    xs, ys, seed_means = [], [], []
    for s in per_seed_images:
        x, y = s[regime][a][metric], s[regime][b][metric]
        xs += x
        ys += y
        seed_means.append(summarize([p - q for p, q in zip(x, y)]).mean)
    d = paired_bootstrap(xs, ys)
    return {"mean_mm": d.mean, "std_mm": d.sd, "ci95_mm": [d.ci_low, d.ci_high], "difference": d,
            "a_higher_share": sum(v > 0 for v in d.per_pair) / d.n, "n": d.n,
            "seed_means_mm": seed_means}  # fmt: skip


def summarise(per_seed: list[dict], per_seed_images: list[dict] | None = None) -> dict:
    """Means ± std over seeds of the errors, the % increase over clean and TBA's relative improvement; with the
    per-image errors, the paired TBA-minus-baseline (and -ablation) differences."""
    summary = {"prior_mean_predictor": {m: mean_std([s["prior_mean_predictor"][m] for s in per_seed])
                                        for m in METRICS}}  # fmt: skip
    for regime in regimes_of(per_seed[0]):
        attacks = list(per_seed[0][regime])
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
            tuned = "pgd_time_matched" in per_seed[0]["white_box"]  # the run was tuned (F has no time-matched arm)
            if "pgd" in reg["tba_minus_paired"]:
                rule = rules(tuned, extra=True)[regime]
                reg["verdict_vs_pgd"] = rule.decide(reg["tba_minus_paired"]["pgd"]["difference"])
            if "pgd_time_matched" in reg["tba_minus_paired"]:
                reg["verdict_vs_pgd_time_matched"] = rules(True, extra=True)[f"{regime}_time_matched"].decide(
                    reg["tba_minus_paired"]["pgd_time_matched"]["difference"]
                )
        summary[regime] = reg
    if per_seed and "ssim" in per_seed[0]:
        summary["ssim"] = {n: mean_std([s["ssim"][n] for s in per_seed]) for n in per_seed[0]["ssim"]}
    return summary


def print_table(summary: dict, eps: float, ns) -> None:
    print(f"\nTBA vs baselines, eps = {eps * 255:g}/255, {ns.steps} victim gradients (FGSM: 1), "
          f"{ns.num_test} test images x {len(ns.seeds)} seeds; errors in mm (mean ± sample SD over seeds)")  # fmt: skip
    prior = summary["prior_mean_predictor"]
    print("a victim predicting the prior mean scores " + ", ".join(f"{m} {prior[m]['mean']:.1f}" for m in METRICS))
    ssim = summary.get("ssim", {})
    for regime in regimes_of(summary):
        reg = summary[regime]
        print(f"\n[{regime}]")
        print(f"{'attack':<26}{'MPJPE':>16}{'PA-MPJPE':>16}{'PVE':>16}{'MPJPE +%':>12}{'PVE +%':>12}{'SSIM':>8}")
        for name, entry in reg.items():
            if name in SUMMARY_KEYS:
                continue
            cells = "".join(f"{entry[m]['mean']:>9.1f} ± {entry[m]['std']:<4.1f}" for m in METRICS)  # nan: one seed
            inc = "".join(f"{entry[f'{m}_increase_pct']['mean']:>12.1f}" if name != "clean" else f"{'':>12}"
                          for m in ("mpjpe", "pve"))  # fmt: skip
            sim = f"{ssim[name]['mean']:>8.3f}" if name in ssim and regime != "white_box_finetuned" else ""
            print(f"{name:<26}{cells}{inc}{sim}")
        imp = reg["tba_improvement_pct"]
        print("TBA relative to: " + ", ".join(
            f"{b} {imp[b]['mpjpe']['mean']:+.1f}% MPJPE / {imp[b]['pve']['mean']:+.1f}% PVE" for b in imp))  # fmt: skip
        if "tba_minus_paired" in reg:
            print("paired TBA - other, MPJPE mm per image (mean [95 % bootstrap], share TBA higher): " + ", ".join(
                f"{o} {d['mean_mm']:+.2f} [{d['ci95_mm'][0]:+.2f}, {d['ci95_mm'][1]:+.2f}] ({d['a_higher_share']:.0%})"
                for o, d in reg["tba_minus_paired"].items()))  # fmt: skip
        for key in ("verdict_vs_pgd", "verdict_vs_pgd_time_matched"):
            if key in reg:
                print(reg[key].line())


def report_fields(by_eps: dict, ns, victims: dict | None = None, extra: dict | None = None) -> dict:
    """What the docs renderer reads (`hf_ext.core.results_render`): the verdict of every regime at every ε (claim
    prefixed with ε) and, per ε, the printed table (errors in mm, mean ± sample SD over seeds; % over clean; SSIM);
    with `victims` (the training record's held-out errors, `extra` the C / F record), the victims' tables first."""
    from hf_ext.core.results_render import table

    verdicts, tables = [], []
    for label, entry in by_eps.items():
        summary, ssim = entry["summary"], entry["summary"].get("ssim", {})
        rows = []
        for regime in regimes_of(summary):
            reg = summary[regime]
            for key in ("verdict_vs_pgd", "verdict_vs_pgd_time_matched"):
                if key in reg:
                    v = reg[key]
                    verdicts.append(type(v)(f"ε {label}: {v.claim}", v.verdict, v.reason, v.difference, v.premise))
            for name, e in reg.items():
                if name in SUMMARY_KEYS:
                    continue
                cells = [f"{e[m]['mean']:.1f} ± {e[m]['std']:.1f}" for m in METRICS]
                inc = [f"{e[f'{m}_increase_pct']['mean']:.1f}" if name != "clean" else "" for m in ("mpjpe", "pve")]
                sim = f"{ssim[name]['mean']:.3f}" if name in ssim and regime != "white_box_finetuned" else ""
                rows.append([regime, name, *cells, *inc, sim])
        tables.append(
            table(
                f"Victim errors under attack, ε = {label}, {ns.steps} victim gradients (FGSM: 1), "
                f"{ns.num_test} test images × {len(ns.seeds)} seeds",
                ["regime", "attack", "MPJPE mm", "PA-MPJPE mm", "PVE mm", "MPJPE +% over clean", "PVE +%", "SSIM"],
                rows,
                note="Mean ± sample SD over seeds (nan with one seed). The verdicts compare TBA with PGD per image "
                "(paired bootstrap over seeds × images).",
            )
        )
    if any("white_box_finetuned" in e["summary"] for e in by_eps.values()):
        tables.append(rise_table(by_eps))
    return {"verdicts": verdicts, "report": (victim_tables(victims, extra) if victims else []) + tables}


VICTIM_ROLES = {
    "victim_a": "A (attacked, white-box)",
    "victim_b": "B (transfer target, shares A's trunk)",
    "victim_c": "C (architecture-disjoint transfer target)",
    "victim_f": "F (A with its last blocks fine-tuned)",
}


def victim_tables(victims: dict, extra: dict | None = None) -> list:
    """The victims before any attack, from the training record: held-out errors against the image-blind prior-mean
    predictor (every victim is scored on the same held-out renders), and A's and B's error by number of training
    renders (the learning curve, at the ridge λ chosen on validation)."""
    from hf_ext.core.results_render import table

    prior = victims["prior_mean_predictor"]
    scored = {k: v for k, v in victims.items() if k in VICTIM_ROLES}
    if extra:
        scored.update({k: v for k, v in extra["victims"].items() if k in VICTIM_ROLES})
    rows = [["prior-mean predictor (ignores the image)", f"{prior['mpjpe']:.1f}", "100%", f"{prior['pa_mpjpe']:.1f}",
             f"{prior['pve']:.1f}", ""]]  # fmt: skip
    for key, v in scored.items():
        e = v["eval"]
        share = f"{e['mpjpe'] / prior['mpjpe']:.0%}"
        rows.append([VICTIM_ROLES[key], f"{e['mpjpe']:.1f}", share, f"{e['pa_mpjpe']:.1f}", f"{e['pve']:.1f}",
                     f"{v['ridge_lambda']:g}" if "ridge_lambda" in v else ""])  # fmt: skip
    out = [table("Victims before the attack: held-out errors (mm) on renders of another seed", ["victim", "MPJPE",
                 "% of prior mean", "PA-MPJPE", "PVE", "ridge λ"], rows)]  # fmt: skip
    curves = {k: {c["num_train"]: c["eval_mpjpe"] for c in v["curve"]} for k, v in scored.items() if v.get("curve")}
    if curves:
        sizes = sorted({n for c in curves.values() for n in c})
        rows = [[VICTIM_ROLES[k], *(f"{c[n]:.1f}" if n in c else "" for n in sizes)] for k, c in curves.items()]
        out.append(table("Victims' held-out MPJPE (mm) by number of training renders, at the chosen ridge λ",
                         ["victim", *(f"{n:,}" for n in sizes)], rows))  # fmt: skip
    return out


def rise_table(by_eps: dict):
    """Per ε, the clean MPJPE and its % rise under PGD and TBA for the frozen victim A (white-box), the fine-tuned
    victim F (white-box) and the disjoint target C (A's images): where each lands against the paper's +41 %."""
    from hf_ext.core.results_render import table

    rows = []
    for label, entry in sorted(by_eps.items(), key=lambda kv: kv[1]["eps"]):
        row = [label]
        for regime in ("white_box", "white_box_finetuned", "transfer_disjoint"):
            reg = entry["summary"].get(regime)
            if reg is None:
                row += ["", "", ""]
                continue
            row.append(f"{reg['clean']['mpjpe']['mean']:.1f}")
            row += [f"{reg[a]['mpjpe_increase_pct']['mean']:+.0f} ± {reg[a]['mpjpe_increase_pct']['std']:.0f}"
                    for a in ("pgd", "tba")]  # fmt: skip
        rows.append(row)
    return table(
        "White-box rise by victim: MPJPE % over clean (paper: +41 %)",
        [
            "ε",
            "A clean mm",
            "A PGD +%",
            "A TBA +%",
            "F clean mm",
            "F PGD +%",
            "F TBA +%",
            "C clean mm",
            "C PGD +%",
            "C TBA +%",
        ],  # fmt: skip
        rows,
        note="A: frozen trunk + ridge head (white-box); F: A's last stage fine-tuned (white-box, attacks crafted on "
        "F); C: the architecture-disjoint random-feature CNN scored on A's adversarial images (transfer). Mean ± "
        "sample SD over seeds.",
    )


__all__ = [
    "ABLATIONS",
    "BASELINES",
    "METRICS",
    "EXTRA_REGIMES",
    "REGIMES",
    "mean_std",
    "regimes_of",
    "paired",
    "print_table",
    "report_fields",
    "rise_table",
    "rules",
    "victim_tables",
    "summarise",
]
