"""One source for results (issue 37): the committed `docs/results/<method>/<scale>/results.json` renders the report
section of every method page, the README's verdict column and each card's reproduction table; a page that
differs from that render fails here. Also the schema (a malformed results.json is refused naming the field), the
renderer on a hand-made results.json, and the figures every page shows."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pytest

from hf_ext.core import results_render as rr
from hf_ext.core.reporting import Results, VerdictRule, paired_difference, write_results

REPO_ROOT = Path(__file__).resolve().parents[1]
METHODS = ("orca", "gpmfs", "h2tune", "fl_llama", "tinyalign", "codebc", "fede4rag", "proto_evfl", "tba", "amplitudes")


def _example() -> dict:
    """A results.json as a reproduction writes it: one rule decided on two seeds, one display table with a plot."""
    rule = VerdictRule(claim="the method beats the baseline", metric="accuracy", margin=0.01)
    d = paired_difference([0.80, 0.82, 0.84], [0.70, 0.73, 0.71])
    results = Results(method="demo", scale="quick", rules=[rule], verdicts=[rule.decide(d)])
    payload = results.to_dict()
    payload["environment"] = {
        "date": "2026-12-02 15:00:00 UTC",
        "commit": "abc1234",
        "machine": "x86_64, 2 cores, Linux",
        "python": "3.11.7",
        "load_average": [1.5, 1.25, 1.0],
    }
    payload["report"] = [
        rr.table(
            "Accuracy by arm",
            ["arm", "accuracy"],
            [["method", "0.820 ± 0.020"], ["baseline", "0.713 ± 0.015"]],
            plot={"x": "arm", "y": ["accuracy"], "kind": "bar"},
            note="mean ± sample SD over 3 seeds",
        )  # fmt: skip
    ]
    return json.loads(json.dumps(payload))


# ---- the committed pages equal their render ------------------------------------------------------------------------


def test_every_method_has_committed_quick_results():
    files = rr.results_files(REPO_ROOT)
    missing = [m for m in METHODS if "quick" not in files.get(m, {})]
    assert not missing, f"no docs/results/<method>/quick/results.json for {missing}: run `make run`"


@pytest.mark.parametrize("method", METHODS)
def test_committed_results_are_valid(method):
    for scale, path in rr.results_files(REPO_ROOT).get(method, {}).items():
        results = rr.load_results(path)
        assert (results["method"], results["scale"]) == (method, scale)


def test_pages_cards_and_readme_equal_the_render_of_the_committed_results():
    rendered = rr.rendered_pages(REPO_ROOT)
    expected = {REPO_ROOT / "README.md"}
    expected |= {REPO_ROOT / "docs" / "methods" / f"{m}.md" for m in METHODS}
    expected |= {REPO_ROOT / "model_cards" / f"{m}.md" for m in METHODS}
    assert expected <= set(rendered), f"pages without results markers: {sorted(map(str, expected - set(rendered)))}"
    stale = [str(p.relative_to(REPO_ROOT)) for p, text in rendered.items() if p.read_text(encoding="utf-8") != text]
    assert not stale, f"edited by hand or stale; run `python scripts/render_docs.py`: {stale}"


def test_a_hand_edit_between_the_markers_is_caught(tmp_path):
    """The check itself: change one number inside a rendered section of a copy and the render differs."""
    for sub in ("docs", "model_cards"):
        shutil.copytree(REPO_ROOT / sub, tmp_path / sub)
    shutil.copy2(REPO_ROOT / "README.md", tmp_path / "README.md")
    page = tmp_path / "docs" / "methods" / "gpmfs.md"
    text = page.read_text(encoding="utf-8")
    start, end = text.index(rr.START), text.index(rr.END)
    section = text[start:end]
    edited = re.sub(r"\d\.\d{3}", "9.999", section, count=1)
    assert edited != section
    page.write_text(text[:start] + edited + text[end:], encoding="utf-8")
    stale = [p for p, t in rr.rendered_pages(tmp_path).items() if p.read_text(encoding="utf-8") != t]
    assert stale == [page]


def test_readme_verdict_column_comes_from_the_results():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index(rr.README_START) : readme.index(rr.README_END)]
    for method, scales in rr.results_files(REPO_ROOT).items():
        row = next(line for line in block.splitlines() if f"(docs/methods/{method}.md)" in line)
        summary = rr.verdict_summary(rr.load_results(scales["quick"]))
        assert summary.replace("|", "\\|") in row, method


@pytest.mark.parametrize("method", METHODS)
def test_each_page_shows_its_figures_and_they_exist(method):
    page = REPO_ROOT / "docs" / "methods" / f"{method}.md"
    text = page.read_text(encoding="utf-8")
    section = text[text.index(rr.START) : text.index(rr.END)]
    images = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", section)
    assert images, f"{page.name}: no figure in its results section"
    for image in images:
        assert (page.parent / image).resolve().is_file(), f"{page.name} shows {image}, which does not exist"
    folder = REPO_ROOT / "docs" / "results" / method / "quick"
    for png in folder.glob("*.png"):  # every committed figure (the method's own too) is shown
        assert f"../results/{method}/quick/{png.name}" in section, f"{png} is not shown on {page.name}"


def test_section_carries_date_commit_machine_and_load():
    for method, scales in rr.results_files(REPO_ROOT).items():
        text = (REPO_ROOT / "docs" / "methods" / f"{method}.md").read_text(encoding="utf-8")
        env = rr.load_results(scales["quick"])["environment"]
        assert env["date"] in text and env["machine"] in text and "load average" in text, method
        assert env["commit"] and f"`{env['commit']}`" in text, method


# ---- the renderer on a hand-made results.json ----------------------------------------------------------------------


def test_render_section_has_rule_verdict_interval_and_table():
    results = rr.validate_results(_example())
    text = rr.render_section(results, source="x/results.json", figure_dir="../results/demo/quick",
                             figures=["paired_differences.png"])  # fmt: skip
    d = results["verdicts"][0]["difference"]
    assert results["verdicts"][0]["verdict"] == "confirmed"
    assert "CONFIRMED if lo > 0 and mean >= 0.01" in text  # the rule, in words
    assert f"[{d['ci_low']:+.3f}, {d['ci_high']:+.3f}] (95%)" in text  # the interval
    assert " ".join(f"{x:+.3f}" for x in d["per_pair"]) in text  # the per-seed differences
    assert "| method | 0.820 ± 0.020 |" in text and "mean ± sample SD over 3 seeds" in text
    assert "2026-12-02 15:00:00 UTC" in text and "`abc1234`" in text and "1.5 1.25 1" in text
    assert "![demo: paired differences](../results/demo/quick/paired_differences.png)" in text
    assert rr.verdict_summary(results) == "**confirmed**: the method beats the baseline"


def test_replace_between_keeps_everything_outside_the_markers():
    page = f"# Title\n\nintro\n\n{rr.START}\nold\n{rr.END}\n\n## Citation\n"
    out = rr.replace_between(page, rr.START, rr.END, "new body", where="p")
    assert out == f"# Title\n\nintro\n\n{rr.START}\nnew body\n{rr.END}\n\n## Citation\n"
    assert rr.replace_between(out, rr.START, rr.END, "new body", where="p") == out
    with pytest.raises(ValueError, match="markers"):
        rr.replace_between("no markers", rr.START, rr.END, "x", where="p")


def test_readme_table_keeps_the_first_columns():
    readme = (
        f"x\n{rr.README_START}\n| method | HF | verdict |\n|---|---|---|\n"
        f"| [ORCA](docs/methods/orca.md) | `PreTrainedModel` | old words |\n"
        f"| [GPMFS](docs/methods/gpmfs.md) | estimator | kept |\n{rr.README_END}\n"
    )
    out = rr.render_readme_table(readme, {"orca": "**refuted**: a | b (quick)"})
    assert "| [ORCA](docs/methods/orca.md) | `PreTrainedModel` | **refuted**: a \\| b (quick) |" in out
    assert "| [GPMFS](docs/methods/gpmfs.md) | estimator | kept |" in out


def test_many_verdicts_are_counted_in_the_readme():
    results = _example()
    results["verdicts"] = results["verdicts"] * 2 + [dict(results["verdicts"][0], verdict="inconclusive")] * 3
    claim = results["verdicts"][0]["claim"]
    assert rr.verdict_summary(rr.validate_results(results)) == (
        f"5 claims: 2 **confirmed**, 3 **inconclusive** — confirmed: {claim}; {claim}"
    )


def test_figures_are_drawn_beside_results(tmp_path):
    results = rr.validate_results(_example())
    (tmp_path / "table_renamed_since.png").write_bytes(b"stale")
    (tmp_path / "heatmaps.png").write_bytes(b"the method's own")
    names = rr.draw_figures(results, tmp_path)
    assert names == ["paired_differences.png", "table_accuracy_by_arm.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names, "heatmaps.png"])
    for name in names:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_collect_copies_validates_and_renders(tmp_path):
    runs = tmp_path / "runs" / "demo"
    write_results(runs / "results.json", {**_example(), "out": str(runs)})
    (runs / "own_plot.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    (tmp_path / "docs" / "methods").mkdir(parents=True)
    page = tmp_path / "docs" / "methods" / "demo.md"
    page.write_text(f"# Demo\n\nintro\n\n{rr.START}\n{rr.END}\n\n## Citation\n", encoding="utf-8")
    copied = rr.collect(tmp_path / "runs", tmp_path)
    assert copied == [tmp_path / "docs" / "results" / "demo" / "quick" / "results.json"]
    assert json.loads(copied[0].read_text())["out"] == "$HF_EXT_HOME/demo"
    assert rr.render_tree(tmp_path) == [page]
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Demo\n\nintro\n\n") and text.endswith(f"{rr.END}\n\n## Citation\n")
    assert "(../results/demo/quick/paired_differences.png)" in text and "(../results/demo/quick/own_plot.png)" in text
    assert rr.render_tree(tmp_path, figures=False) == []  # idempotent


def test_rules_and_verdicts_keyed_by_name_are_read_in_order():
    results = _example()
    results["rules"] = {"a": results["rules"][0]}
    results["verdicts"] = {"a": results["verdicts"][0]}
    out = rr.validate_results(results)
    assert isinstance(out["rules"], list) and out["verdicts"][0]["verdict"] == "confirmed"
    # the same claim decided on two settings: the key's setting tells the rows apart
    v = results["verdicts"]["a"]
    results["verdicts"] = {"a (small LM)": v, "a (large LM)": v}
    claims = [x["claim"] for x in rr.validate_results(results)["verdicts"]]
    assert claims == [f"{v['claim']} (small LM)", f"{v['claim']} (large LM)"]


def test_headline_stands_in_for_verdicts():
    results = _example()
    results["verdicts"], results["headline"] = [], "23/23 identities within their tolerance"
    assert rr.verdict_summary(rr.validate_results(results)) == "23/23 identities within their tolerance"
    del results["headline"]
    with pytest.raises(rr.ResultsSchemaError, match="results.headline"):
        rr.validate_results(results)


def test_a_smoke_run_is_labelled_as_such():
    results = _example()
    assert "Smoke run" not in rr.render_section(rr.validate_results(results), source="x")
    results["smoke"] = True
    text = rr.render_section(rr.validate_results(results), source="x")
    assert text.startswith("**Smoke run at quick scale** (it exercises the code path; its numbers decide nothing)")
    results["smoke"] = "yes"
    with pytest.raises(rr.ResultsSchemaError, match="results.smoke"):
        rr.validate_results(results)


def test_a_labelled_subset_and_an_early_stop_say_so():
    results = _example()
    results["subset"] = {"num_train": {"full": 16000, "run": 3000}, "eps": {"full": [0.5, 1.0], "run": [1.0]}}
    text = rr.render_section(rr.validate_results(results), source="x")
    assert text.startswith(f"**Labelled subset of the {results['scale']} scale** (num_train 16000 → 3000; "
                           "eps [0.5, 1] → [1])")  # fmt: skip
    results["partial"] = {"note": "ε 8/255 done of 5 budgets"}
    assert "stopped early, ε 8/255 done of 5 budgets" in rr.render_section(results, source="x")
    assert rr._labels(results) == ", subset, partial" and rr._labels(_example()) == ""


# ---- the schema refuses malformed results, naming the field ------------------------------------------------------


def _broken(edit):
    results = copy.deepcopy(_example())
    edit(results)
    return results


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r.pop("schema_version"), "results.schema_version"),
        (lambda r: r.update(schema_version=99), "results.schema_version"),
        (lambda r: r.pop("method"), "results.method"),
        (lambda r: r.update(scale=3), "results.scale"),
        (lambda r: r.pop("environment"), "results.environment"),
        (lambda r: r["environment"].pop("date"), "results.environment.date"),
        (lambda r: r["environment"].update(load_average=[1.0]), "results.environment.load_average"),
        (lambda r: r["environment"].update(machine=None), "results.environment.machine"),
        (lambda r: r["environment"].update(torch_threads="1"), "results.environment.torch_threads"),
        (lambda r: r.update(rules="x"), "results.rules"),
        (lambda r: r["rules"][0].pop("text"), r"results.rules\[0\].text"),
        (lambda r: r["rules"][0].update(higher_is_better="yes"), r"results.rules\[0\].higher_is_better"),
        (lambda r: r["verdicts"][0].update(verdict="maybe"), r"results.verdicts\[0\].verdict"),
        (lambda r: r["verdicts"][0].pop("reason"), r"results.verdicts\[0\].reason"),
        (lambda r: r["verdicts"][0]["difference"].pop("mean"), r"results.verdicts\[0\].difference.mean"),
        (lambda r: r["verdicts"][0]["difference"].update(n=7), r"results.verdicts\[0\].difference.per_pair"),
        (lambda r: r["verdicts"][0]["difference"]["per_pair"].__setitem__(0, "x"), r"per_pair\[0\]"),
        (lambda r: r.pop("report"), "results.report"),
        (lambda r: r.update(report=[]), "results.report is empty"),
        (lambda r: r["report"][0].pop("title"), r"results.report\[0\].title"),
        (lambda r: r["report"][0]["rows"].append(["only one cell"]), r"results.report\[0\].rows\[2\]"),
        (lambda r: r["report"][0]["rows"][0].__setitem__(1, {"a": 1}), r"results.report\[0\].rows\[0\]\[1\]"),
        (lambda r: r["report"][0]["plot"].update(y=["nope"]), r"results.report\[0\].plot"),
        (lambda r: r.update(figures="a.png"), "results.figures"),
    ],
)
def test_malformed_results_are_refused_naming_the_field(edit, field):
    with pytest.raises(rr.ResultsSchemaError, match=field):
        rr.validate_results(_broken(edit))


def test_a_malformed_file_is_refused_with_its_path(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        rr.load_results(path)
    path.write_text(json.dumps(_broken(lambda r: r.pop("scale"))))
    with pytest.raises(ValueError, match=f"{re.escape(str(path))}: results.scale is missing"):
        rr.load_results(path)


def test_collect_refuses_a_run_without_the_schema(tmp_path):
    write_results(tmp_path / "runs" / "old" / "results.json", {"method": "old", "numbers": [1, 2]})
    with pytest.raises(rr.ResultsSchemaError, match="results.schema_version is missing"):
        rr.collect(tmp_path / "runs", tmp_path)


def test_the_rendered_command_names_the_scale_when_the_run_recorded_none():
    from hf_ext.core.results_render import command_of

    assert command_of({"method": "codebc", "scale": "quick"}) == "hf-ext reproduce codebc"
    assert command_of({"method": "codebc", "scale": "pretrained"}) == "hf-ext reproduce codebc --pretrained"
    assert command_of({"method": "tba", "scale": "full"}) == "hf-ext reproduce tba --full"
    recorded = {"method": "tba", "scale": "full", "command": "hf-ext reproduce tba --full --eps 0.1"}
    assert command_of(recorded) == recorded["command"]  # the run's own command wins
