"""A scorer that cannot be poisoned: a pathological file, a malformed server reply, an ASCII locale, non-files and
an empty folder; and the core lines of the vulnerability rate (High/Medium, the count) and of the training tag."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hf_ext.codebc import scoring, solidity
from hf_ext.codebc.pipeline import training_tag
from hf_ext.codebc.solidity import AnalysisResult, CompileResult, SolcServer, toolchain_problem

needs_solc = pytest.mark.skipif(toolchain_problem() is not None, reason=f"{toolchain_problem()}")
GOOD = "pragma solidity ^0.8.0;\ncontract A { function g() public pure returns (uint) { return 2; } }\n"


@needs_solc
def test_a_stack_overflowing_file_does_not_poison_the_files_after_it():
    # an 80 KB `1 + 1 + ...` overflows solc-js's stack; the same process then refuses every later compile
    # ("You shall not have another CompilerStack aside me") unless the server is restarted
    expr = " + ".join(["1"] * 20000)
    bad = f"pragma solidity ^0.8.0;\ncontract P {{ function f() public pure returns (uint) {{ return {expr}; }} }}\n"
    with SolcServer() as server:
        first = server.compile(bad, "P.sol")
        assert not first.ok and first.reason == "server_error" and "call stack" in first.errors[0]
        for k in range(3):
            assert server.compile(GOOD, f"A{k}.sol").ok


@needs_solc
def test_a_malformed_server_reply_is_a_per_file_result_then_a_fresh_server(monkeypatch, tmp_path):
    liar = tmp_path / "liar.js"  # ready, then answers every request with a line that is not JSON
    liar.write_text(
        'console.log(JSON.stringify({ready: true, version: "liar"}));\n'
        'require("readline").createInterface({input: process.stdin}).on("line", () => console.log("<html>oops"));\n'
    )
    real = solidity.SERVER_JS
    monkeypatch.setattr(solidity, "SERVER_JS", liar)
    server = SolcServer()
    res = server.compile(GOOD, "A.sol")
    assert not res.ok and res.reason == "server_error" and "malformed" in res.errors[0]
    monkeypatch.setattr(solidity, "SERVER_JS", real)
    assert server.compile(GOOD, "A.sol").ok
    server.close()


@needs_solc
def test_analysis_writes_utf8_under_an_ascii_locale(tmp_path):
    code = (
        "import sys\nfrom hf_ext.codebc.solidity import analyze\n"
        "src = sys.stdin.read()\nres = analyze(src, 'U.sol')\nprint(res.ok, res.reason)"
    )
    source = "// Grüße, naïve café — ünïcödé\n" + GOOD
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONUTF8", "PYTHONIOENC"))}
    env.update(LC_ALL="C", LANG="C", PYTHONUTF8="0", PYTHONIOENCODING="utf-8")
    proc = subprocess.run([sys.executable, "-c", code], input=source, capture_output=True, text=True, env=env,
                          encoding="utf-8", timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "None"]


class _AllCompile:
    """A stand-in compile server: every file compiles."""

    def compile(self, source, name):
        return CompileResult(name, True)

    def close(self):
        pass


def test_vulnerability_rate_counts_high_and_medium_findings_of_analysed_files(monkeypatch):
    verdicts = {
        "high.sol": AnalysisResult("high.sol", True, counts={"High": 1, "Low": 2}),
        "high2.sol": AnalysisResult("high2.sol", True, counts={"High": 2, "Medium": 1}),
        "medium.sol": AnalysisResult("medium.sol", True, counts={"Medium": 1}),
        "low.sol": AnalysisResult("low.sol", True, counts={"Low": 3, "Informational": 5, "Optimization": 1}),
        "clean.sol": AnalysisResult("clean.sol", True, counts={}),
        "crash.sol": AnalysisResult("crash.sol", False, "analyser_crash", error="boom"),
    }
    monkeypatch.setattr(scoring, "analyze", lambda source, name: verdicts[name])
    s = scoring.score_sources({n: GOOD for n in verdicts}, {n: None for n in verdicts}, server=_AllCompile(), workers=1)
    assert s["analysed"] == 5  # the crashed analysis is not in the denominator
    assert s["vulnerable"] == 3  # High and Medium count; Low / Informational / Optimization do not (3 vs 2: asymmetric)
    assert s["vulnerability_rate"] == pytest.approx(3 / 5)  # of analysed files, not of all 6
    assert s["impact_counts"] == {"High": 3, "Low": 5, "Medium": 2, "Informational": 5, "Optimization": 1}


def test_an_analyser_that_raises_is_a_per_file_result(monkeypatch):
    def explode(source, name):
        raise RuntimeError("slither blew up")

    monkeypatch.setattr(scoring, "analyze", explode)
    s = scoring.score_sources({"a.sol": GOOD}, {"a.sol": None}, server=_AllCompile(), workers=1)
    assert s["analysed"] == 0 and s["files"]["a.sol"]["analysis"]["reason"] == "analyser_crash"


def test_a_broken_process_pool_falls_back_to_one_file_at_a_time(monkeypatch):
    from concurrent.futures.process import BrokenProcessPool

    def broken(sources, workers):
        raise BrokenProcessPool("a worker was killed")

    monkeypatch.setattr(scoring, "analyze_many", broken)
    monkeypatch.setattr(scoring, "analyze", lambda source, name: AnalysisResult(name, True, counts={"High": 1}))
    s = scoring.score_sources(
        {"a.sol": GOOD, "b.sol": GOOD}, {"a.sol": None, "b.sol": None}, server=_AllCompile(), workers=2
    )
    assert s["analysed"] == 2 and s["vulnerable"] == 2


def test_empty_folder_is_an_error_and_non_files_are_skipped_and_listed(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="no <Task>.txt_<k>.sol files"):
        scoring.score_folder(tmp_path, tmp_path)
    (tmp_path / "Dir.txt_0.sol").mkdir()
    (tmp_path / "Gone.txt_0.sol").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"skipped, not files: Dir.txt_0.sol, Gone.txt_0.sol"):
        scoring.score_folder(tmp_path, tmp_path)
    (tmp_path / "Real.txt_0.sol").write_text(GOOD)
    s = scoring.score_folder(tmp_path, tmp_path, analyse=False, server=_AllCompile())
    assert s["total"] == 1 and s["skipped_not_files"] == ["Dir.txt_0.sol", "Gone.txt_0.sol"]


def test_codebleu_components_and_the_empty_output_floor_are_reported(monkeypatch):
    parts = {"ngram_match_score": 0.1, "weighted_ngram_match_score": 0.2, "syntax_match_score": 0.3,
             "dataflow_match_score": 0.4}  # fmt: skip
    monkeypatch.setattr(scoring, "codebleu_scores", lambda refs, preds: [{"codebleu": 0.25, **parts} for _ in preds])
    s = scoring.score_sources({"a.sol": GOOD, "b.sol": GOOD}, {"a.sol": "ref", "b.sol": "ref"}, analyse=False,
                              server=_AllCompile())  # fmt: skip
    assert s["codebleu"] == pytest.approx(25.0)
    assert s["codebleu_components"] == pytest.approx({k: 100 * v for k, v in parts.items()})
    assert s["codebleu_empty_floor"] == 25.0
    assert "an empty output scores 25" in scoring.format_summary(s)


@pytest.mark.parametrize(
    "label,pattern,tag",
    [
        ({"ok": True, "vulnerable": True}, None, "bug"),  # Slither's verdict wins over the dataset label ...
        ({"ok": True, "vulnerable": False}, "reentrancy", "correct"),
        ({"ok": False, "vulnerable": False}, None, "correct"),  # ... unless Slither could not analyse it
        ({"ok": False, "vulnerable": False}, "reentrancy", "bug"),
    ],
)
def test_training_tag_is_slithers_verdict_else_the_dataset_label(label, pattern, tag):
    assert training_tag(label, pattern) == tag
