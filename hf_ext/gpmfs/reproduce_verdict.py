"""The GPMFS verdict (`hf-ext reproduce gpmfs --full`, or `--verdict` at a smaller scale): GPMFS against tuned
baselines with the same tuning budget, a Friedman test with a Nemenyi post-hoc over data set x budget, paired
average-precision differences with 95 % intervals, and the two ablations (personal features: theta = 1; the explicit
label-correlation term: rho = 0). The rules are printed before anything runs; the verdict words come from them
([`hf_ext.core.reporting`]).

Protocol:
- every real multi-label set that loads offline (`data.REAL_DATASETS`), `folds`-fold CV repeated `repeats` times;
  each training fold is split 75/25 (inner train / validation); every selector picks, per budget, the configuration
  of its grid ([`grids.GRIDS`], 6 configurations each) with the best validation ML-kNN average precision (ties:
  the first in grid order), is refitted with it on the whole training fold and scored on the test fold; the chosen
  configurations are recorded;
- ML-kNN (k = 10, s = 1) on each label's own subset; Hamming loss, ranking loss, one-error, coverage, average precision,
  macro- and micro-F1 on the test fold;
- premises: a data set enters the comparison only if ML-kNN on all features beats the prior (training label
  frequencies) in AP, paired over runs (95 % interval above 0); the personal-feature ablation's positive control is
  the planted data (label-specific features known to exist): GPMFS must beat its global-only ablation there.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.model_selection import KFold, train_test_split

from hf_ext.core.reporting import (
    INCONCLUSIVE,
    PairedDifference,
    Premise,
    Verdict,
    VerdictRule,
    paired_difference,
    summarize,
)

from .data import REAL_DATASETS
from .grids import ABLATIONS, COMPARED, GRID_SIZE, GRIDS, FamilyCache
from .metrics import HIGHER_IS_BETTER, METRICS, average_precision, evaluate_all
from .mlknn import SplitScorer
from .planted import make_planted
from .stats import friedman
from .tuning import inner_split

BASELINES = tuple(m for m in COMPARED if m != "gpmfs")
REFERENCES = ("all", "prior")
ARMS = COMPARED + ABLATIONS
MARGIN = 0.005  # the spec's smallest expected gain: 0.5 points of AP
SCALES = {
    "full": {"folds": 5, "repeats": 3, "budgets": (0.1, 0.2, 0.3, 0.4, 0.5), "planted_seeds": 10},
    "verdict": {"folds": 3, "repeats": 1, "budgets": (0.1, 0.3, 0.5), "planted_seeds": 3},
}
PLANTED_BUDGET = 0.1

RULES = {
    "rank": VerdictRule(
        claim="GPMFS ranks ahead of the best tuned baseline (Friedman + Nemenyi over informative data x budget)",
        metric="average rank on AP over data x budget blocks, best baseline's rank − GPMFS's (+ favours GPMFS); "
        "interval = ± the Nemenyi critical difference (family-wise 95 %); INCONCLUSIVE when the Friedman test "
        "(Iman-Davenport F, 5 %) does not reject 'all selectors rank alike'",
        margin=0.0,
        premise=">= 2 informative data sets (ML-kNN on all features beats the prior in AP, 95 % interval > 0)",
    ),
    **{
        b: VerdictRule(
            claim=f"GPMFS beats the tuned {b} baseline by >= {MARGIN:g} AP (the spec's smallest expected gain)",
            metric=f"AP, GPMFS − {b}, paired over informative data x budget blocks (block = mean over CV runs)",
            margin=MARGIN,
            premise=">= 2 informative data sets",
        )
        for b in BASELINES
    },
    "personal": VerdictRule(
        claim=f"personal features (tuned theta) add >= {MARGIN:g} AP to the global-only ablation (theta = 1)",
        metric="AP, GPMFS − gpmfs_global, paired over informative data x budget blocks",
        margin=MARGIN,
        premise="positive control: on planted data (known label-specific features, budget 10 %) GPMFS beats "
        "gpmfs_global in AP, paired over seeds, 95 % interval > 0",
    ),
    "correlation": VerdictRule(
        claim=f"the explicit label-correlation term (rho = 10) adds >= {MARGIN:g} AP to rho = 0 (equal theta grids)",
        metric="AP, gpmfs_corr − gpmfs_no_corr, paired over informative data x budget blocks",
        margin=MARGIN,
        premise=">= 2 informative data sets",
    ),
}
RULE_NOTES = (
    "[note] every selector in the rank test (gpmfs, ftest, rfs, lrfs, scls, random) is tuned with a grid of "
    f"{GRID_SIZE} configurations on a validation split of each training fold, never on test; the ablations are "
    "restrictions of GPMFS's grid",
    "[note] blocks at several budgets of one data set and CV runs sharing training rows are correlated: the block "
    "intervals are optimistic; the best baseline is identified after the run (Nemenyi compares all pairs)",
)


def _budgets(d: int, fractions) -> dict[int, str]:
    return {max(1, int(round(f * d))): f"{100 * f:.0f}%" for f in fractions}


def run_split(Xtr, Ytr, Xte, Yte, budgets: list[int], seed: int, arms=ARMS) -> dict:
    """Tunes every arm on a validation split of the training data, refits it with the chosen configuration and scores
    it on the test data. Returns `{"metrics": {arm: {k: metrics}}, "chosen": {arm: {k: config}}}`."""
    Xa, Xv, Ya, Yv = inner_split(Xtr, Ytr, seed)
    k_max = max(budgets)
    inner, outer = FamilyCache(Xa, Ya, k_max, seed), FamilyCache(Xtr, Ytr, k_max, seed)
    val, test = SplitScorer(Xa, Ya, Xv), SplitScorer(Xtr, Ytr, Xte)
    out = {"metrics": {}, "chosen": {}, "validation_ap": {}}
    for arm in arms:
        grid = GRIDS[arm]
        families = [inner.sets(arm, cfg) for cfg in grid]
        out["metrics"][arm], out["chosen"][arm], out["validation_ap"][arm] = {}, {}, {}
        for k in budgets:
            aps = [average_precision(Yv, val.predict_proba(f(k))) for f in families]
            best = int(np.argmax(aps))  # first maximum: ties keep grid order
            S = test.predict_proba(outer.sets(arm, grid[best])(k))
            out["metrics"][arm][k] = evaluate_all(Yte, (S > 0.5).astype(np.int64), S)
            out["chosen"][arm][k], out["validation_ap"][arm][k] = dict(grid[best]), aps[best]
    S = test.predict_proba(None)
    prior = np.tile(Ytr.mean(axis=0), (Yte.shape[0], 1))
    for name, scores in (("all", S), ("prior", prior)):
        m = evaluate_all(Yte, (scores > 0.5).astype(np.int64), scores)
        out["metrics"][name] = {k: m for k in budgets}
    return out


def _collect(runs: list[dict], budgets: dict[int, str]) -> dict:
    """Per arm x budget x metric: [`summarize`] over runs; the chosen configurations; GPMFS − arm AP paired over
    runs ([`paired_difference`])."""
    methods = list(runs[0]["metrics"])
    res: dict = {"results": {}, "chosen": {}, "gpmfs_minus": {}}
    for m in methods:
        res["results"][m] = {
            pct: {met: summarize([r["metrics"][m][k][met] for r in runs]).to_dict() for met in METRICS}
            for k, pct in budgets.items()
        }
        if m in runs[0]["chosen"]:
            res["chosen"][m] = {pct: [r["chosen"][m][k] for r in runs] for k, pct in budgets.items()}
    for m in methods:
        if m != "gpmfs":
            res["gpmfs_minus"][m] = {
                pct: paired_difference(
                    [r["metrics"]["gpmfs"][k]["average_precision"] for r in runs],
                    [r["metrics"][m][k]["average_precision"] for r in runs],
                ).to_dict()
                for k, pct in budgets.items()
            }
    res["corr_minus_no_corr"] = {
        pct: paired_difference(
            [r["metrics"]["gpmfs_corr"][k]["average_precision"] for r in runs],
            [r["metrics"]["gpmfs_no_corr"][k]["average_precision"] for r in runs],
        ).to_dict()
        for k, pct in budgets.items()
        if "gpmfs_corr" in runs[0]["metrics"]
    }
    return res


def run_real(name: str, scale: dict, seed: int) -> dict:
    """Repeated k-fold CV of every arm on the real data set `name` (a key of `data.REAL_DATASETS`)."""
    loader, source = REAL_DATASETS[name]
    data = loader()
    budgets = _budgets(data.X.shape[1], scale["budgets"])
    runs, i = [], 0
    for rep in range(scale["repeats"]):
        for tr, te in KFold(scale["folds"], shuffle=True, random_state=seed + rep).split(data.X):
            runs.append(run_split(data.X[tr], data.Y[tr], data.X[te], data.Y[te], list(budgets), seed + i))
            i += 1
    res = _collect(runs, budgets)
    info = paired_difference(
        [r["metrics"]["all"][next(iter(budgets))]["average_precision"] for r in runs],
        [r["metrics"]["prior"][next(iter(budgets))]["average_precision"] for r in runs],
    )
    premise = Premise(
        f"{name} informative",
        bool(info.has_interval and info.ci_low > 0),
        f"AP all features − prior {info.cell(4)}",
    )
    n, d, q = data.shape
    return {
        "n": n,
        "d": d,
        "q": q,
        "source": source,
        "protocol": f"{scale['folds']}-fold CV x {scale['repeats']} repeat(s) = {len(runs)} paired runs",
        "informative": premise.to_dict(),
        "all_minus_prior_ap": info.to_dict(),
        **res,
    }


def run_positive_control(scale: dict, seed: int) -> dict:
    """GPMFS vs its global-only ablation on planted data (70/30 split per seed, budget 10 %)."""
    runs = []
    for s in range(seed, seed + scale["planted_seeds"]):
        data = make_planted(seed=s)
        k = max(1, int(round(PLANTED_BUDGET * data.X.shape[1])))
        Xtr, Xte, Ytr, Yte = train_test_split(data.X, data.Y, test_size=0.3, random_state=s)
        runs.append(run_split(Xtr, Ytr, Xte, Yte, [k], s, arms=("gpmfs", "gpmfs_global")))
    k = next(iter(runs[0]["metrics"]["gpmfs"]))
    diff = paired_difference(
        [r["metrics"]["gpmfs"][k]["average_precision"] for r in runs],
        [r["metrics"]["gpmfs_global"][k]["average_precision"] for r in runs],
    )
    premise = Premise(
        "planted positive control",
        bool(diff.has_interval and diff.ci_low > 0),
        f"planted, budget {PLANTED_BUDGET:.0%}: AP GPMFS − gpmfs_global {diff.cell(4)}",
    )
    return {
        "seeds": scale["planted_seeds"],
        "budget": k,
        "difference": diff.to_dict(),
        "premise": premise.to_dict(),
        "chosen": {a: [r["chosen"][a][k] for r in runs] for a in ("gpmfs", "gpmfs_global")},
    }


def _block_table(datasets: dict, names: list[str], metric: str) -> tuple[list[str], np.ndarray]:
    """Rows = informative data x budget blocks (mean over runs), columns = [`COMPARED`]."""
    rows, labels = [], []
    for n in names:
        for pct in datasets[n]["results"]["gpmfs"]:
            labels.append(f"{n} {pct}")
            rows.append([datasets[n]["results"][m][pct][metric]["mean"] for m in COMPARED])
    return labels, np.array(rows)


def decide(datasets: dict, control: dict | None) -> tuple[list[Verdict], dict]:
    """Applies [`RULES`]: the Friedman / Nemenyi rank verdict and the pooled paired AP verdicts. Returns the verdicts
    and the tables they read (Friedman per metric, block differences)."""
    names = [n for n in datasets if datasets[n]["informative"]["passed"]]
    enough = Premise(
        "informative data sets",
        len(names) >= 2,
        f"{len(names)} of {len(datasets)} data sets informative ({', '.join(names) or 'none'})",
    )
    tables: dict = {"informative": names, "friedman": {}, "pooled_ap": {}}
    verdicts: list[Verdict] = []
    if names:
        for met in METRICS:
            labels, S = _block_table(datasets, names, met)
            tables["friedman"][met] = {**friedman(S, COMPARED, met in HIGHER_IS_BETTER).to_dict(), "blocks": labels}
    fr = tables["friedman"].get("average_precision")
    # the rank rule
    rule = RULES["rank"]
    if not enough.passed or fr is None:
        diff = PairedDifference(float("nan"), float("nan"), 0, float("nan"), float("nan"), 0.95, ())
        verdicts.append(rule.decide(diff, enough))
    else:
        ranks = fr["avg_ranks"]
        best = min(BASELINES, key=lambda b: ranks[b])
        per_block = [row[COMPARED.index(best)] - row[COMPARED.index("gpmfs")] for row in fr["ranks"]]
        delta = ranks[best] - ranks["gpmfs"]
        sd = summarize(per_block).sd if len(per_block) > 1 else float("nan")
        cd = fr["nemenyi_cd"]
        diff = PairedDifference(delta, sd, len(per_block), delta - cd, delta + cd, 0.95, tuple(per_block), "nemenyi")
        tables["best_baseline"] = best
        if not fr["rejects"]:
            reason = (
                f"Friedman does not reject (Iman-Davenport p = {fr['p_value']:.3g}); best baseline {best}, "
                f"rank difference {delta:+.3f}, CD {fr['nemenyi_cd']:.3f}"
            )
            verdicts.append(Verdict(rule.claim, INCONCLUSIVE, reason, diff, enough))
        else:
            v = rule.decide(diff, enough)
            verdicts.append(Verdict(v.claim, v.verdict, f"best baseline {best}; {v.reason}", diff, enough))
    # pooled paired AP differences over informative blocks
    pairs = [*((b, "gpmfs", b) for b in BASELINES), ("personal", "gpmfs", "gpmfs_global")]
    for key, arm, other in [*pairs, ("correlation", "gpmfs_corr", "gpmfs_no_corr")]:
        a, b = [], []
        for n in names:
            for pct, c in datasets[n]["results"][arm].items():
                a.append(c["average_precision"]["mean"])
                b.append(datasets[n]["results"][other][pct]["average_precision"]["mean"])
        premise = enough
        if key == "personal" and control is not None:
            premise = Premise(**control["premise"]) if enough.passed else enough
        if len(a) == 0:
            diff = PairedDifference(float("nan"), float("nan"), 0, float("nan"), float("nan"), 0.95, ())
        else:
            diff = paired_difference(a, b)
        tables["pooled_ap"][f"{arm} − {other}"] = diff.to_dict()
        verdicts.append(RULES[key].decide(diff, premise))
    return verdicts, tables


def run(scale_name: str, seed: int, names: list[str] | None = None, log=print) -> dict:
    """Runs the protocol at `scale_name` (a key of [`SCALES`]) on `names` (default: every real data set)."""
    scale = SCALES[scale_name]
    names = list(REAL_DATASETS) if names is None else names
    datasets = {}
    for name in names:
        t0 = time.perf_counter()
        datasets[name] = run_real(name, scale, seed)
        datasets[name]["runtime_s"] = round(time.perf_counter() - t0, 1)
        log(f"{name}: {datasets[name]['runtime_s']} s ({datasets[name]['protocol']})")
    t0 = time.perf_counter()
    control = run_positive_control(scale, seed)
    control["runtime_s"] = round(time.perf_counter() - t0, 1)
    log(f"planted positive control: {control['runtime_s']} s")
    verdicts, tables = decide(datasets, control)
    return {
        "scale": scale_name,
        "protocol": dict(scale),
        "grids": GRIDS,
        "grid_size": GRID_SIZE,
        "compared": list(COMPARED),
        "ablations": list(ABLATIONS),
        "datasets": datasets,
        "positive_control": control,
        "verdict_tables": tables,
        "verdict_objects": verdicts,
    }


def _cell(c: dict, digits: int = 4) -> str:
    return f"{c['mean']:.{digits}f}±{(c['sd'] if c['sd'] is not None else float('nan')):.{digits}f}"


def format_verdict_table(res: dict) -> str:
    """The printed report: AP per data x budget x arm, the other metrics' mean over budgets, the Friedman tables, the
    paired and pooled differences, the chosen configurations."""
    lines = []
    arms = [*COMPARED, *ABLATIONS, *REFERENCES]
    for name, ds in res["datasets"].items():
        inf = ds["informative"]
        lines.append(
            f"\n{name} ({ds['n']}x{ds['d']}, q={ds['q']}; {ds['protocol']}; {ds.get('runtime_s', '?')} s); "
            f"informative: {'yes' if inf['passed'] else 'NO'} ({inf['detail']})"
        )
        budgets = list(ds["results"]["gpmfs"])
        lines.append("  AP, mean ± SD over runs" + "".join(f"{b:>16}" for b in budgets))
        for m in arms:
            lines.append(
                f"    {m:<18}" + "".join(f"{_cell(ds['results'][m][b]['average_precision']):>16}" for b in budgets)
            )
        lines.append("  GPMFS − arm, AP [95 % interval over runs]")
        for m in [*BASELINES, *ABLATIONS]:
            cells = []
            for b in budgets:
                c = ds["gpmfs_minus"][m][b]
                ci = "" if c["ci_low"] is None else f" [{c['ci_low']:+.4f}, {c['ci_high']:+.4f}]"
                cells.append(f"{b}: {c['mean']:+.4f}{ci}")
            lines.append(f"    {m:<18}" + "  ".join(cells))
        cells = []
        for b, c in ds.get("corr_minus_no_corr", {}).items():
            ci = "" if c["ci_low"] is None else f" [{c['ci_low']:+.4f}, {c['ci_high']:+.4f}]"
            cells.append(f"{b}: {c['mean']:+.4f}{ci}")
        if cells:
            lines.append(f"    {'corr − no_corr':<18}" + "  ".join(cells))
        lines.append("  other metrics, mean over budgets (lower is better except F1)")
        lines.append("    " + " " * 18 + "".join(f"{met:>14}" for met in METRICS if met != "average_precision"))
        for m in arms:
            vals = [
                np.mean([ds["results"][m][b][met]["mean"] for b in budgets])
                for met in METRICS
                if met != "average_precision"
            ]
            lines.append(f"    {m:<18}" + "".join(f"{v:>14.4f}" for v in vals))
        lines.append(
            "  chosen configuration per budget (first run): "
            + "; ".join(
                f"{m}: " + ", ".join(f"{b} {_cfg(ds['chosen'][m][b][0])}" for b in budgets) for m in ("gpmfs", "ftest")
            )
        )
    t = res["verdict_tables"]
    lines.append(f"\nFriedman + Nemenyi over informative data x budget blocks ({', '.join(t['informative'])})")
    lines.append("  metric" + " " * 14 + "".join(f"{m:>8}" for m in COMPARED) + "   p(F_ID)      CD   N")
    for met, fr in t["friedman"].items():
        lines.append(
            f"  {met:<20}"
            + "".join(f"{fr['avg_ranks'][m]:>8.2f}" for m in COMPARED)
            + f"   {fr['p_value'] if fr['p_value'] is not None else float('nan'):<9.3g}{fr['nemenyi_cd']:>6.2f}"
            + f"{fr['n_blocks']:>4}"
        )
    lines.append("pooled AP difference over informative blocks (mean ± SD [95 % interval])")
    for m, c in t["pooled_ap"].items():
        if c["n"]:
            lines.append(f"  {m:<28}{PairedDifference.from_dict(c).cell(4)}  (n = {c['n']})")
    pc = res["positive_control"]
    lines.append(f"positive control: {pc['premise']['detail']} -> {'passed' if pc['premise']['passed'] else 'FAILED'}")
    return "\n".join(lines)


def _cfg(cfg: dict) -> str:
    return "/".join(f"{v:g}" if isinstance(v, float) else str(v) for v in cfg.values())


def format_verdict_markdown(res: dict) -> str:
    """README / card tables of a verdict `results.json`: AP (mean ± SD over runs) per data x budget x arm, the
    Friedman average ranks per metric, the pooled paired differences and the verdict lines."""
    arms = [*COMPARED, *ABLATIONS, *REFERENCES]
    lines = ["| data | budget | " + " | ".join(arms) + " |", "|---|---|" + "---|" * len(arms)]
    for name, ds in res["datasets"].items():
        for b in ds["results"]["gpmfs"]:
            lines.append(
                f"| {name} | {b} | " + " | ".join(_cell(ds["results"][m][b]["average_precision"]) for m in arms) + " |"
            )
    t = res["verdict_tables"]
    lines += ["", "| metric | " + " | ".join(COMPARED) + " | p (Iman-Davenport) | Nemenyi CD | blocks |"]
    lines.append("|---|" + "---|" * (len(COMPARED) + 3))
    for met, fr in t["friedman"].items():
        p = "n/a" if fr["p_value"] is None else f"{fr['p_value']:.3g}"
        ranks = " | ".join(f"{fr['avg_ranks'][m]:.2f}" for m in COMPARED)
        lines.append(f"| {met} | {ranks} | {p} | {fr['nemenyi_cd']:.2f} | {fr['n_blocks']} |")
    lines += ["", "| pooled AP difference | mean ± SD [95 % interval] | blocks |", "|---|---|---|"]
    for m, c in t["pooled_ap"].items():
        if c["n"]:
            lines.append(f"| {m} | {PairedDifference.from_dict(c).cell(4)} | {c['n']} |")
    lines += ["", *(f"- {v['claim']}: **{v['verdict']}** ({v['reason']})" for v in res.get("verdicts", []))]
    return "\n".join(lines)
