"""The scoring pipeline on the authors' released CodeLlama outputs, and per-file failure reporting."""

from __future__ import annotations

import json

import pytest

from hf_ext.codebc import scoring
from hf_ext.codebc.data import released_outputs_dir
from hf_ext.codebc.metrics import bleu, bleu_tokens, codebleu_scores, wilson_interval
from hf_ext.codebc.solidity import SolcServer, toolchain_problem

pytestmark = pytest.mark.skipif(toolchain_problem() is not None, reason=f"{toolchain_problem()}")


def test_released_codellama_outputs_reproduce_the_three_figures(capsys):
    summary = scoring.main(["--predictions", str(released_outputs_dir()), "--no-analyse", "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["total"] == summary["total"] == 205
    assert round(printed["bleu"], 2) == 51.00
    assert round(printed["codebleu"], 2) == 53.73
    assert printed["compiled"] == 90
    for key in ("bleu", "codebleu", "compiled", "total", "vulnerability_rate"):
        assert key in printed


def test_compile_verdicts_match_the_released_compilable_folder():
    folder = released_outputs_dir()
    released_ok = {p.name.removesuffix("_.txt") + "" for p in (folder / "compilable").iterdir()}
    with SolcServer() as server:
        for path in sorted(folder.glob("*.sol"))[:40]:
            res = server.compile(path.read_text(), path.name)
            assert res.ok == (path.stem in released_ok), (path.name, res.errors[:1])
            assert res.ok or res.reason in {"syntax", "type", "declaration", "other"}


def test_bleu_uses_whitespace_tokens_and_smoothing():
    assert bleu_tokens("a  b\n") == ["a", " ", " ", "b", "\n"]
    assert bleu("pragma solidity ^0.8.20;", "pragma solidity ^0.8.20;") == pytest.approx(1.0)
    # one shared unigram only: method1 smoothing keeps the score positive but tiny
    assert 0 < bleu("contract A { }", "library B ( )") < 0.2


def test_codebleu_is_deterministic_and_one_on_identical_code():
    ref = (
        "pragma solidity ^0.8.20;\ncontract A {\n    function f(uint a) public pure returns (uint) { return a * 2; }\n}"
    )
    a = codebleu_scores([ref], [ref])
    b = codebleu_scores([ref], [ref])
    assert a == b and a[0]["codebleu"] == pytest.approx(1.0)


def test_bad_files_are_reported_per_file_and_scoring_goes_on(tmp_path):
    (tmp_path / "Context.txt_0.sol").write_text(
        "pragma solidity ^0.8.20;\nabstract contract Context {\n"
        "    function _msgSender() internal view virtual returns (address) {\n        return msg.sender;\n    }\n}\n"
    )
    (tmp_path / "Context.txt_1.sol").write_text("pragma solidity ^0.8.20;\ncontract C { function f( }\n")
    (tmp_path / "Context.txt_2.sol").write_text("pragma solidity ^0.4.24;\ncontract C { }\n")
    (tmp_path / "NoSuchTask.txt_0.sol").write_text("pragma solidity ^0.8.0;\ncontract D { }\n")
    (tmp_path / "Context.txt_3.sol").write_bytes(b"\xff\xfe not utf-8")
    s = scoring.score_folder(tmp_path, analyse=False)
    files = s["files"]
    assert s["total"] == 5 and s["compiled"] == 2
    assert files["Context.txt_0.sol"]["compiled"] and files["Context.txt_0.sol"]["bleu"] > 30
    assert files["Context.txt_1.sol"]["compile_reason"] == "syntax"
    assert files["Context.txt_2.sol"]["compile_reason"] == "version_pragma"
    assert files["Context.txt_3.sol"]["compile_reason"] == "unreadable"
    assert "no reference" in files["NoSuchTask.txt_0.sol"]["reference"] and "bleu" not in files["NoSuchTask.txt_0.sol"]
    assert s["scored"] == 3


def test_node_missing_is_a_per_file_reason(monkeypatch):
    from hf_ext.codebc import solidity

    monkeypatch.setenv("HF_EXT_NODE", "/nonexistent/node")
    monkeypatch.setattr(solidity, "node_executable", lambda: None)
    res = SolcServer().compile("pragma solidity ^0.8.0; contract A {}", "A.sol")
    assert not res.ok and res.reason == "node_missing" and "node" in res.errors[0]
    a = solidity.analyze("pragma solidity ^0.8.0; contract A {}", "A.sol")
    assert not a.ok and a.reason == "node_missing"


def test_missing_predictions_folder_is_a_clear_cli_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        scoring.main(["--predictions", str(tmp_path / "nope")])
    assert err.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_wilson_interval():
    lo, hi = wilson_interval(90, 205)
    assert lo < 90 / 205 < hi and 0.37 < lo < 0.38 and 0.50 < hi < 0.51
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.slow
def test_released_outputs_vulnerability_rate_matches_the_released_slither_logs():
    # 90 Slither runs (~2-4 min); the fast tests cover Slither on single files
    s = scoring.score_folder(released_outputs_dir(), analyse=True)
    assert s["analysed"] == 90 and s["vulnerable"] == 6  # 6.7 % of compiled files with a High/Medium finding


def test_a_compile_that_hangs_is_a_timeout_result_and_the_server_restarts(monkeypatch, tmp_path):
    from hf_ext.codebc import solidity

    hanging = tmp_path / "hang.js"  # says it is ready, then never answers a request
    hanging.write_text('console.log(JSON.stringify({ready: true, version: "hang"})); setInterval(() => {}, 1000);\n')
    real = solidity.SERVER_JS
    monkeypatch.setattr(solidity, "SERVER_JS", hanging)
    server = SolcServer(timeout=1.0)
    res = server.compile("pragma solidity ^0.8.0; contract A {}", "A.sol")
    assert not res.ok and res.reason == "timeout" and "1 s" in res.errors[0]
    monkeypatch.setattr(solidity, "SERVER_JS", real)
    server.timeout = 300.0  # the real compile below must not race a 1 s deadline on a loaded machine
    assert server.compile("pragma solidity ^0.8.0; contract A {}", "A.sol").ok  # a fresh server for the next file
    server.close()


def test_codebleu_scores_each_file_alone_when_one_crashes_the_worker(monkeypatch, tmp_path):
    from hf_ext.codebc import metrics

    fake = tmp_path / "worker.py"  # a stand-in worker that dies on one input, as a parser crash would
    fake.write_text(
        "import json, sys\npairs = json.load(sys.stdin)\n"
        "if any('CRASH' in p for _, p in pairs):\n    sys.exit(3)\n"
        "json.dump([{'codebleu': len(p) / 100} for _, p in pairs], sys.stdout)\n"
    )
    monkeypatch.setattr(metrics, "CODEBLEU_WORKER", fake)
    assert codebleu_scores(["r", "r", "r"], ["ab", "CRASH", "abcd"]) == [{"codebleu": 0.02}, None, {"codebleu": 0.04}]
    assert codebleu_scores(["r"], ["abc"]) == [{"codebleu": 0.03}]
