"""The comparisons `hf-ext reproduce h2tune` decides, without the confound of adapter form and sharing.

H2Tune differs from local-only plain LoRA in two ways: the adapter form (ΔW = (α/r)·B(T+I)A with its T, S and P_c,
trained by the two-pass step) and the sharing (the server's mean of the G_c). The **adapter-only** control (the
H2Tune adapter trained locally, no aggregation: `task.VARIANTS["adapter-only"]`) separates them; per client and
paired over seeds ([`~hf_ext.core.reporting.paired_difference`], sample SD, 95 % Student-t interval):

| comparison | difference | what it measures |
|---|---|---|
| `sharing` | H2Tune − adapter-only | the effect of sharing (the paper's claim; **the headline verdict**) |
| `adapter form` | adapter-only − local-only | the effect of the adapter form, no sharing on either side |
| `h2tune vs local-only` | H2Tune − local-only | both together (the confounded comparison, kept for continuity) |
| `headroom` | pooled ceiling − local-only | the premise: what the client could still gain |

**Premise (headroom).** A client can show a gain from sharing only if it has something left to gain: its pooled-data
ceiling (plain LoRA trained on every client's operand pairs, posed in its own format) must beat its local-only run,
paired over seeds with the 95 % interval above 0. A client without it is reported as such and each of its verdicts is
*premise absent*. Fewer than two seeds give no interval, hence no established headroom.

Every verdict comes from one [`~hf_ext.core.reporting.VerdictRule`] per (comparison, client) with margin
[`GAIN_MARGIN`], printed by `reproduce` before any work.
"""

from __future__ import annotations

from collections.abc import Mapping

GAIN_MARGIN = 0.05  # exact match: the smallest mean gain that counts as an effect
HEADROOM_PREMISE = "headroom on that client: pooled ceiling − local-only, paired over seeds, 95 % interval above 0"

# comparison → (method arm, reference arm, claim template); the first is the headline
COMPARISONS: dict[str, tuple[str, str, str]] = {
    "sharing": (
        "h2tune",
        "adapter-only",
        "sharing helps on {name} ({task}): H2Tune beats the adapter-only control (the same adapter, no sharing)",
    ),
    "adapter form": (
        "adapter-only",
        "local-only",
        "the adapter form helps on {name} ({task}): adapter-only beats local-only plain LoRA (neither shares)",
    ),
    "h2tune vs local-only": (
        "h2tune",
        "local-only",
        "H2Tune beats local-only plain LoRA on {name} ({task}) (adapter form and sharing together)",
    ),
}
HEADLINE = "sharing"


def verdict_rules(clients) -> dict[str, dict]:
    """comparison → client name → its [`~hf_ext.core.reporting.VerdictRule`] (method − reference on final exact
    match, margin [`GAIN_MARGIN`], premise [`HEADROOM_PREMISE`])."""
    from hf_ext.core.reporting import VerdictRule

    return {
        kind: {
            c["name"]: VerdictRule(
                claim=claim.format(name=c["name"], task=c["task"]),
                metric="final exact match",
                margin=GAIN_MARGIN,
                higher_is_better=True,
                premise=HEADROOM_PREMISE,
            )
            for c in clients
        }
        for kind, (_, _, claim) in COMPARISONS.items()
    }


def all_rules(rules: Mapping[str, Mapping]) -> list:
    """The rules of [`verdict_rules`] as one list, the headline comparison first (for `print_rules`)."""
    return [rule for kind in rules for rule in rules[kind].values()]


def _per_seed(results: dict, variant: str, name: str) -> list[float] | None:
    r = results.get("variants", {}).get(variant)
    return None if r is None else list(r["final_accuracy_per_seed"][name])


def headroom(results: dict) -> dict:
    """Per client: the pooled ceiling − local-only paired difference and whether its 95 % interval lies above 0
    (`ok`); `passed` when every client has headroom (`None` when the ceiling or local-only did not run). Also the
    ceiling − adapter-only difference (what sharing could add on top of the adapter), for information."""
    from hf_ext.core.reporting import paired_difference

    out: dict = {"passed": True, "clients": {}}
    if "pooled" not in results.get("variants", {}) or "local-only" not in results.get("variants", {}):
        return {"passed": None, "clients": {}, "note": "needs the local-only and pooled variants"}
    for c in results["clients"]:
        name = c["name"]
        d = paired_difference(_per_seed(results, "pooled", name), _per_seed(results, "local-only", name))
        ok = bool(d.has_interval and d.ci_low > 0)
        entry = {"ceiling_minus_local": d.to_dict(), "ok": ok}
        control = _per_seed(results, "adapter-only", name)
        if control is not None:
            entry["ceiling_minus_adapter_only"] = paired_difference(
                _per_seed(results, "pooled", name), control
            ).to_dict()
        entry["detail"] = (
            f"pooled ceiling − local-only {d.cell()}" + ("" if ok else ": no headroom established")
            if d.has_interval
            else f"pooled ceiling − local-only {d.mean:+.3f} on {d.n} seed(s): no interval, no headroom established"
        )
        out["clients"][name] = entry
        out["passed"] = out["passed"] and ok
    return out


def comparisons(results: dict) -> dict[str, dict[str, dict]]:
    """comparison → client → the paired difference (`to_dict`), for every comparison whose two arms ran."""
    from hf_ext.core.reporting import paired_difference

    out: dict[str, dict[str, dict]] = {}
    for kind, (a, b, _) in COMPARISONS.items():
        if a in results.get("variants", {}) and b in results["variants"]:
            out[kind] = {
                c["name"]: paired_difference(
                    _per_seed(results, a, c["name"]), _per_seed(results, b, c["name"])
                ).to_dict()
                for c in results["clients"]
            }
    return out


def decide(results: dict, rules: Mapping[str, Mapping]) -> dict[str, dict]:
    """comparison → client → [`~hf_ext.core.reporting.Verdict`] for every comparison whose arms ran; the premise of
    each is that client's [`headroom`] (*premise absent* without it, or when the ceiling did not run)."""
    from hf_ext.core.reporting import Premise, paired_difference

    room = results.get("headroom") or headroom(results)
    out: dict[str, dict] = {}
    for kind, (a, b, _) in COMPARISONS.items():
        if kind not in rules or a not in results.get("variants", {}) or b not in results["variants"]:
            continue
        out[kind] = {}
        for name, rule in rules[kind].items():
            diff = paired_difference(_per_seed(results, a, name), _per_seed(results, b, name))
            entry = room.get("clients", {}).get(name)
            if entry is None:
                premise = Premise(HEADROOM_PREMISE, False, "the pooled ceiling did not run: headroom is unchecked")
            else:
                premise = Premise(HEADROOM_PREMISE, bool(entry["ok"]), entry["detail"])
            out[kind][name] = rule.decide(diff, premise)
    return out


def format_comparisons(results: dict) -> str:
    """Markdown: per client, the paired differences (mean ± SD [95 % interval]) of every comparison and the headroom,
    with the verdict of each."""
    from hf_ext.core.reporting import paired_difference

    clients = results["clients"]
    lines = [
        "| paired difference (per seed; mean ± SD [95 % t-interval]) | "
        + " | ".join(f"{c['name']} ({c['task']})" for c in clients)
        + " |",
        "|---" * (len(clients) + 1) + "|",
    ]
    room = results.get("headroom", {}).get("clients", {})
    if room:
        cells = []
        for c in clients:
            d = room[c["name"]]["ceiling_minus_local"]
            cell = _cell(paired_difference(d["per_pair"], [0.0] * len(d["per_pair"])))
            cells.append(cell + ("" if room[c["name"]]["ok"] else " **no headroom**"))
        lines.append("| headroom: pooled ceiling − local-only | " + " | ".join(cells) + " |")
    verdicts = results.get("verdicts_by_comparison", {})
    for kind, (a, b, _) in COMPARISONS.items():
        diffs = results.get("comparisons", {}).get(kind)
        if not diffs:
            continue
        cells = []
        for c in clients:
            d = diffs[c["name"]]
            cell = _cell(paired_difference(d["per_pair"], [0.0] * len(d["per_pair"])))
            v = verdicts.get(kind, {}).get(c["name"])
            cells.append(cell + (f" → {v['verdict']}" if v else ""))
        lines.append(f"| {kind}: {a} − {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(d) -> str:
    return d.cell().replace("-0.000", "+0.000")


__all__ = [
    "COMPARISONS",
    "GAIN_MARGIN",
    "HEADLINE",
    "HEADROOM_PREMISE",
    "all_rules",
    "comparisons",
    "decide",
    "format_comparisons",
    "headroom",
    "verdict_rules",
]
