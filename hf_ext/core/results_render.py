"""One source for results: the schema of a reproduction's `results.json` and the renderer that turns it into the
report section of `docs/methods/<method>.md`, the verdict column of the README's methods table and the
reproduction table of `model_cards/<method>.md`, plus a figure drawn beside it.

Every `hf-ext reproduce <method>` writes `results.json` through [`~hf_ext.core.reporting.write_results`]; the
committed copies live in `docs/results/<method>/<scale>/` (`scripts/render_docs.py --collect runs/` copies them
there from a run's work folder and re-renders every page). Pages are never edited between their markers by hand:
`tests/test_docs_results.py` fails when a page differs from the render of its committed `results.json`.

The schema, its validation and the writers' helpers ([`table`], [`markdown_tables`]) are in
[`~hf_ext.core.results_schema`]; they are re-exported here.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .reporting import CONFIRMED, PREMISE_ABSENT, REFUTED, VERDICTS
from .results_schema import (  # noqa: F401  (re-exported: the writers and tests import them from here)
    SCHEMA_VERSIONS,
    ResultsSchemaError,
    load_results,
    markdown_tables,
    table,
    validate_results,
)

START, END = "<!-- results:start -->", "<!-- results:end -->"
README_START, README_END = "<!-- results-table:start -->", "<!-- results-table:end -->"
DIFFERENCES_FIGURE = "paired_differences.png"
TABLE_FIGURE_PREFIX = "table_"  # generic figures of display tables; a method's own figures never start with it
_GENERATED = "Rendered from `{src}` by `python scripts/render_docs.py`; do not edit between the markers."


# ---- rendering ---------------------------------------------------------------------------------------------------


def _cell(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x).replace("|", "\\|").replace("\n", " ")


def _md_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _num(x: float | None, digits: int = 3, sign: bool = True) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _rule_for(results: Mapping, claim: str) -> Mapping | None:
    """The rule that decided a verdict: the same claim, else the longest rule claim inside it (a claim decided on
    one setting: `"yeast 10%: <claim>"`, `"<claim> (mmoe)"`)."""
    rules = results.get("rules", [])
    exact = next((r for r in rules if r.get("claim") == claim), None)
    if exact:
        return exact
    inside = [r for r in rules if r.get("claim") and r["claim"] in claim]  # "yeast 10%: <claim>", "<claim> (mmoe)"
    return max(inside, key=lambda r: len(r["claim"])) if inside else None


def measured_line(results: Mapping) -> str:
    """`measured 2026-12-02 15:30:12 UTC at commit 4dad5f6 on x86_64, 2 cores, Linux (load average 1.2 0.9 0.8)`."""
    env = results["environment"]
    load = env.get("load_average")
    load_text = " ".join(f"{x:g}" for x in load) if load else "not available"
    threads = env.get("torch_threads")
    where = env["machine"] + (f" ({env['cpu_capability']})" if env.get("cpu_capability") else "")
    if threads is not None:
        where += f", {threads} torch thread{'s' if threads != 1 else ''}"
    if env.get("accelerator"):
        where += f", on one {env['accelerator']}"
    return (
        f"measured {env['date']} at commit `{env.get('commit') or 'unknown'}` on {where} "
        f"(load average over 1 / 5 / 15 min: {load_text})"
    )


def command_of(results: Mapping) -> str:
    """The command a reader reruns: the run's own `command`, else the scale's flag (`--full`, `--pretrained`, ...;
    none for quick)."""
    if results.get("command"):
        return results["command"]
    flag = "" if results["scale"] == "quick" else f" --{results['scale']}"
    return f"hf-ext reproduce {results['method']}{flag}"


def verdict_summary(results: Mapping) -> str:
    """The README cell: each verdict word with its claim, or the headline."""
    verdicts = results["verdicts"]
    if not verdicts:
        return results["headline"]
    if len(verdicts) <= 3:
        return "; ".join(f"**{v['verdict']}**: {v['claim']}" for v in verdicts)
    counts = {w: sum(v["verdict"] == w for v in verdicts) for w in VERDICTS}
    words = ", ".join(f"{n} **{w}**" for w, n in counts.items() if n)
    named = [  # the decided ones by name, when few enough to read in a table cell
        f"{w}: " + "; ".join(v["claim"] for v in verdicts if v["verdict"] == w)
        for w in (CONFIRMED, REFUTED, PREMISE_ABSENT)
        if 0 < counts[w] <= 3
    ]
    return f"{len(verdicts)} claims: {words}" + (" — " + " — ".join(named) if named else "")


def _verdict_rows(results: Mapping) -> tuple[list[list[str]], list[str]]:
    """One row per verdict: claim, verdict word, the paired difference (mean, SD, interval, pairs, per pair); and
    the reasons the table cannot show (a failed premise, a verdict without a difference)."""
    rows, reasons = [], []
    for v in results["verdicts"]:
        d = v.get("difference")
        word = f"**{v['verdict']}**"
        if not d:
            rows.append([v["claim"], word, "—", "—", "—", "—", "—"])
            reasons.append(f"{v['claim']}: {v['reason']}")
            continue
        interval = (
            f"[{_num(d['ci_low'])}, {_num(d['ci_high'])}] ({d['confidence']:.0%})"
            if d["ci_low"] is not None
            else "no interval"
        )
        if d.get("method") == "bootstrap":
            pairs, per_pair = f"{d['n']} (bootstrap interval)", "—"
        else:
            pairs = f"{d['n']} (t)"
            per_pair = " ".join(_num(x) for x in d["per_pair"][:12]) + (" …" if len(d["per_pair"]) > 12 else "")
        rows.append([v["claim"], word, _num(d["mean"]), _num(d["sd"], sign=False), interval, pairs, per_pair])
        if v["verdict"] == PREMISE_ABSENT:
            reasons.append(f"{v['claim']}: {v['reason']}")
    return rows, reasons


def _num_or(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_num_or(v) for v in value) + "]"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _labels(results: Mapping) -> str:
    """The README's scale label additions: smoke run, labelled subset, stopped early."""
    return "".join(f", {word}" for key, word in (("smoke", "smoke run"), ("subset", "subset"), ("partial", "partial"))
                   if results.get(key))  # fmt: skip


def render_section(results: Mapping, *, source: str, figure_dir: str | None = None, figures: Sequence[str] = ()) -> str:
    """The report section of a method page (what goes between the markers), or of a card (`figure_dir=None`)."""
    heading = f"**Reproduction at {results['scale']} scale**"
    if results.get("subset"):  # {knob: {"full": value, "run": value}}: a labelled subset of the scale
        changed = "; ".join(f"{k} {_num_or(v['full'])} → {_num_or(v['run'])}" for k, v in results["subset"].items())
        heading = f"**Labelled subset of the {results['scale']} scale** ({changed})"
    if results.get("partial"):  # a run stopped early: what it finished
        heading += f" — stopped early, {results['partial'].get('note', 'partial')}"
    if results.get("smoke"):
        heading = f"**Smoke run at {results['scale']} scale** (it exercises the code path; its numbers decide nothing)"
    lines = [
        f"{heading} (`{command_of(results)}`), {measured_line(results)}.",
        f"<!-- {_GENERATED.format(src=source)} -->",
        "",
    ]
    if results["verdicts"]:
        lines += ["**Rules** (printed before the run, then applied mechanically):", ""]
        lines += [f"- {r['text'].removeprefix('[rule] ')}" for r in results["rules"]] + [""]
        rows, reasons = _verdict_rows(results)
        lines += ["**Verdicts and paired differences** (method − reference as measured: mean, sample SD, "
                  "confidence interval, pairs, per-pair values):", ""]  # fmt: skip
        lines += _md_table(["claim", "verdict", "mean", "SD", "interval", "pairs", "per pair"], rows) + [""]
        lines += [f"- {r}" for r in reasons] + ([""] if reasons else [])
    else:
        lines += [f"**Result:** {results['headline']}", ""]
    for t in results["report"]:
        lines += [f"**{t['title']}**", ""]
        lines += _md_table(t["columns"], t["rows"]) + [""]
        if t.get("note"):
            lines += [t["note"], ""]
    if figure_dir is not None and figures:
        for name in figures:
            alt = Path(name).stem.replace("_", " ")
            lines += [f"![{results['method']}: {alt}]({figure_dir}/{name})", ""]
    return "\n".join(lines).rstrip() + "\n"


def replace_between(text: str, start: str, end: str, body: str, *, where: str) -> str:
    """`text` with what lies between the markers `start` and `end` replaced by `body`."""
    i, j = text.find(start), text.find(end)
    if i < 0 or j < 0 or j < i:
        raise ValueError(f"{where}: the markers {start} ... {end} are missing or out of order")
    if text.find(start, i + 1) >= 0:
        raise ValueError(f"{where}: the marker {start} appears twice")
    return text[: i + len(start)] + "\n" + body.strip("\n") + "\n" + text[j:]


def render_readme_table(readme: str, summaries: Mapping[str, str]) -> str:
    """The README with the last column of the methods table (between its markers) replaced by `summaries`, keyed by
    the method named in each row's link `(docs/methods/<method>.md)`; rows of methods without results keep theirs."""
    i, j = readme.find(README_START), readme.find(README_END)
    if i < 0 or j < 0 or j < i:
        raise ValueError(f"README: the markers {README_START} ... {README_END} are missing or out of order")
    block = readme[i + len(README_START) : j].strip("\n").splitlines()
    out = []
    for line in block:
        m = re.search(r"\(docs/methods/([a-z0-9_]+)\.md\)", line)
        if m and m.group(1) in summaries and line.startswith("|"):
            cells = line.strip().strip("|").split(" | ")
            cells[-1] = summaries[m.group(1)].replace("|", "\\|")
            line = "| " + " | ".join(c.strip() for c in cells) + " |"
        out.append(line)
    return readme[: i + len(README_START)] + "\n" + "\n".join(out) + "\n" + readme[j:]


# ---- figures -----------------------------------------------------------------------------------------------------


def _first_number(x: Any) -> float:
    if isinstance(x, bool) or x is None:
        return math.nan
    if isinstance(x, int | float):
        return float(x)
    m = re.search(r"[-+−]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", str(x))
    return float(m.group(0).replace("−", "-")) if m else math.nan


def _save(fig, path: Path) -> None:
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.png")
    fig.savefig(tmp, dpi=100, metadata={"Software": None})
    os.replace(tmp, path)


def draw_figures(results: Mapping, folder: str | os.PathLike) -> list[str]:
    """Draws the generic figures of `results` into `folder` (beside its `results.json`); returns their file names.

    * `paired_differences.png`: every verdict's paired difference oriented so that + favours the method, its
      per-pair values (seeds) as dots, the mean and its interval as a bar, zero and the rule's margin as lines.
    * `table_<title>.png` for each display table with a `plot`.

    Generic figures an earlier render left there are removed first; the method's own figures are kept.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    for stale in [folder / DIFFERENCES_FIGURE, *folder.glob(f"{TABLE_FIGURE_PREFIX}*.png")]:
        stale.unlink(missing_ok=True)  # drawn by an earlier render (a renamed table would leave its old figure)
    names: list[str] = []
    decided = [v for v in results["verdicts"] if v.get("difference")]
    if decided:
        fig, ax = plt.subplots(figsize=(8, 1.4 + (0.75 if len(decided) < 6 else 0.4) * len(decided)))
        for k, v in enumerate(decided):
            d, rule = v["difference"], _rule_for(results, v["claim"]) or {}
            sign = 1.0 if rule.get("higher_is_better", True) else -1.0
            y = len(decided) - 1 - k
            if d.get("method") != "bootstrap":
                ax.scatter([sign * p for p in d["per_pair"]], [y] * len(d["per_pair"]), s=18, color="0.45", zorder=2)
            if d["ci_low"] is not None and d["ci_high"] is not None:
                lo, hi = sorted((sign * d["ci_low"], sign * d["ci_high"]))
                ax.plot([lo, hi], [y, y], color="C0", linewidth=3, zorder=1)
            ax.scatter([sign * d["mean"]], [y], marker="D", s=40, color="C3", zorder=3)
            if rule.get("margin"):
                ax.plot([rule["margin"]] * 2, [y - 0.35, y + 0.35], color="C2", linestyle=":", linewidth=1.5)
            ax.annotate(v["verdict"], (1.0, y), xycoords=("axes fraction", "data"), xytext=(4, -3),
                        textcoords="offset points", fontsize=8)  # fmt: skip
        ax.axvline(0.0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(decided)))
        ax.set_yticklabels([_short(v["claim"], 56) for v in reversed(decided)], fontsize=7)
        ax.set_xlabel("method − reference (+ favours the method)\ndots: per seed · bar: confidence interval · ◆: mean")
        ax.set_title(f"{results['method']} ({results['scale']}): paired differences", fontsize=10)
        fig.tight_layout()
        _save(fig, folder / DIFFERENCES_FIGURE)
        plt.close(fig)
        names.append(DIFFERENCES_FIGURE)
    for t in results["report"]:
        plot = t.get("plot")
        if not plot:
            continue
        name = f"{TABLE_FIGURE_PREFIX}{_slug(t['title'])}.png"
        xi = t["columns"].index(plot["x"])
        labels = [str(r[xi]) for r in t["rows"]]
        fig, ax = plt.subplots(figsize=(7.5, 4))
        width = 0.8 / max(1, len(plot["y"]))
        for n, col in enumerate(plot["y"]):
            ci = t["columns"].index(col)
            ys = [_first_number(r[ci]) for r in t["rows"]]
            if plot.get("kind", "line") == "bar":
                ax.bar([i + n * width for i in range(len(ys))], ys, width=width, label=col)
            else:
                ax.plot(range(len(ys)), ys, marker="o", label=col)
        ax.set_xticks([i + width * (len(plot["y"]) - 1) / 2 for i in range(len(labels))] if plot.get("kind") == "bar"
                      else range(len(labels)))  # fmt: skip
        ax.set_xticklabels([_short(x, 18) for x in labels], rotation=30, ha="right", fontsize=7)
        if plot.get("log_y"):
            ax.set_yscale("log")
        ax.set_xlabel(plot["x"])
        ax.set_ylabel(plot.get("ylabel", ", ".join(plot["y"])))
        ax.set_title(f"{results['method']} ({results['scale']}): {t['title']}", fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        _save(fig, folder / name)
        plt.close(fig)
        names.append(name)
    return names


def _short(text: str, width: int = 48) -> str:
    """Cut in the middle, so a claim keeps its setting at either end (`"yeast 10%: …"`, `"… (small LM)"`)."""
    if len(text) <= width:
        return text
    tail = min(16, width // 3)
    return text[: width - tail - 1] + "…" + text[-tail:]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower())[:40].strip("_") or "table"


# ---- the whole tree ------------------------------------------------------------------------------------------------


def results_files(root: str | os.PathLike) -> dict[str, dict[str, Path]]:
    """`{method: {scale: path}}` of the committed `docs/results/<method>/<scale>/results.json` under `root`."""
    out: dict[str, dict[str, Path]] = {}
    for path in sorted(Path(root, "docs", "results").glob("*/*/results.json")):
        out.setdefault(path.parent.parent.name, {})[path.parent.name] = path
    return out


def _figures_of(folder: Path) -> list[str]:
    """Every PNG beside `results.json`: the generic ones first, then the method's own (sorted)."""
    pngs = sorted(p.name for p in folder.glob("*.png"))
    first = [n for n in pngs if n == DIFFERENCES_FIGURE]
    return first + [n for n in pngs if n not in first]


def rendered_pages(root: str | os.PathLike) -> dict[Path, str]:
    """`{path: text}` of every page the committed results render into (method pages, cards, README); pages
    without results (or without markers) are left out. Reads the current pages and replaces only between markers."""
    root = Path(root)
    out: dict[Path, str] = {}
    summaries: dict[str, str] = {}
    for method, scales in results_files(root).items():
        order = sorted(scales, key=lambda s: (s != "quick", s))
        loaded = {s: load_results(scales[s]) for s in order}
        for s, r in loaded.items():
            if r["method"] != method or r["scale"] != s:
                raise ResultsSchemaError(
                    f"{scales[s]}: method/scale {r['method']!r}/{r['scale']!r} do not match its folder {method}/{s}"
                )
        page = root / "docs" / "methods" / f"{method}.md"
        card = root / "model_cards" / f"{method}.md"
        page_body = "\n".join(
            render_section(
                loaded[s],
                source=f"docs/results/{method}/{s}/results.json",
                figure_dir=f"../results/{method}/{s}",
                figures=_figures_of(scales[s].parent),
            )
            for s in order
        )
        card_body = "\n".join(
            render_section(loaded[s], source=f"docs/results/{method}/{s}/results.json") for s in order
        )
        for path, body in ((page, page_body), (card, card_body)):
            if path.is_file() and START in path.read_text(encoding="utf-8"):
                out[path] = replace_between(path.read_text(encoding="utf-8"), START, END, body, where=str(path))
        summaries[method] = "; ".join(f"{verdict_summary(loaded[s])} ({s}{_labels(loaded[s])})" for s in order)
    readme = root / "README.md"
    if summaries and readme.is_file() and README_START in readme.read_text(encoding="utf-8"):
        out[readme] = render_readme_table(readme.read_text(encoding="utf-8"), summaries)
    return out


def render_tree(root: str | os.PathLike, *, figures: bool = True) -> list[Path]:
    """Re-renders every page (and, with `figures`, the generic figures) from the committed results; returns the
    pages that changed."""
    root = Path(root)
    if figures:
        for scales in results_files(root).values():
            for path in scales.values():
                draw_figures(load_results(path), path.parent)
    changed = []
    for path, text in rendered_pages(root).items():
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def collect(runs: str | os.PathLike, root: str | os.PathLike, *, methods: Sequence[str] | None = None) -> list[Path]:
    """Copies `runs/<method>/results.json` (validated; the absolute path of `runs` written as `$HF_EXT_HOME`) and
    the PNGs beside it into `docs/results/<method>/<scale>/` under `root`; returns the copied `results.json` paths."""
    runs, root = Path(runs), Path(root)
    copied = []
    for src in sorted(runs.glob("*/results.json")):
        method = src.parent.name
        if methods and method not in methods:
            continue
        results = load_results(src)
        dest = root / "docs" / "results" / method / results["scale"]
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        # the run's absolute work folder means nothing in the docs: it is written as $HF_EXT_HOME
        text = src.read_text(encoding="utf-8").replace(json.dumps(str(runs.resolve()))[1:-1], "$HF_EXT_HOME")
        (dest / "results.json").write_text(text, encoding="utf-8")
        for png in sorted(src.parent.glob("*.png")):
            shutil.copy2(png, dest / png.name)
        copied.append(dest / "results.json")
    return copied


__all__ = [
    "END",
    "README_END",
    "README_START",
    "START",
    "ResultsSchemaError",
    "collect",
    "draw_figures",
    "load_results",
    "markdown_tables",
    "render_section",
    "render_tree",
    "rendered_pages",
    "table",
    "validate_results",
]
