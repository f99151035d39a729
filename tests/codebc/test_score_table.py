"""`hf-ext codebc score` prints a per-file table of verdicts and findings without `--json` (issue 37): which file
failed, why, and which Slither detector fired at which impact."""

from __future__ import annotations

import pytest

from hf_ext.codebc import scoring
from hf_ext.codebc.solidity import toolchain_problem

needs_solc = pytest.mark.skipif(toolchain_problem() is not None, reason=f"{toolchain_problem()}")

CONTEXT = (
    "pragma solidity ^0.8.20;\nabstract contract Context {\n"
    "    function _msgSender() internal view virtual returns (address) {\n        return msg.sender;\n    }\n}\n"
)
BROKEN = "pragma solidity ^0.8.20;\ncontract C { function f( }\n"
WALLET = (
    "// SPDX-License-Identifier: MIT\npragma solidity ^0.8.20;\n"
    "contract Wallet {\n    address public owner = msg.sender;\n"
    "    function drain(address payable to) external {\n        require(tx.origin == owner);\n"
    '        to.call{value: address(this).balance}("");\n    }\n}\n'
)


def _rows(text: str) -> dict[str, str]:
    """The table's rows by file name (the lines that start with a file name)."""
    return {line.split()[0]: line for line in text.splitlines() if line.split() and line.split()[0].endswith(".sol")}


def test_table_names_each_files_verdict_and_findings():
    summary = {
        "files": {
            "A.txt_0.sol": {"compiled": False, "compile_reason": "syntax", "compile_errors": ["ParserError: Expected"]},
            "B.txt_0.sol": {
                "compiled": True,
                "bleu": 12.345,
                "codebleu": 30.0,
                "analysis": {
                    "ok": True,
                    "counts": {"High": 1, "Medium": 2},
                    "checks": ["arbitrary-send-eth", "tx-origin"],
                    "findings": [
                        {"check": "arbitrary-send-eth", "impact": "High"},
                        {"check": "tx-origin", "impact": "Medium"},
                    ],
                },
            },
            "C.txt_0.sol": {"compiled": True, "analysis": {"ok": True, "counts": {"Low": 1}, "findings": []}},
            "D.txt_0.sol": {"compiled": True, "analysis": {"ok": False, "reason": "analyser_crash", "error": "boom"}},
            "E.txt_0.sol": {"compiled": True, "reference": "no reference for task 'E'"},
        }
    }
    rows = _rows(scoring.format_files(summary))
    assert set(rows) == set(summary["files"])
    assert "not compiled (syntax)" in rows["A.txt_0.sol"] and "ParserError: Expected" in rows["A.txt_0.sol"]
    assert "vulnerable" in rows["B.txt_0.sol"] and "12.35" in rows["B.txt_0.sol"] and "30.00" in rows["B.txt_0.sol"]
    assert "arbitrary-send-eth (High), tx-origin (Medium)" in rows["B.txt_0.sol"]
    assert " clean " in rows["C.txt_0.sol"] and rows["C.txt_0.sol"].endswith("none")  # a Low finding is not a vuln
    assert "compiled, not analysed (analyser_crash)" in rows["D.txt_0.sol"] and "boom" in rows["D.txt_0.sol"]
    assert rows["E.txt_0.sol"].split()[1] == "compiled" and "no reference for task 'E'" in rows["E.txt_0.sol"]


def test_findings_keep_each_detector_once_at_its_highest_impact():
    got = scoring._findings(
        [
            {"check": "tx-origin", "impact": "Medium"},
            {"check": "solc-version", "impact": "Informational"},
            {"check": "tx-origin", "impact": "High"},
            {"check": "arbitrary-send-eth", "impact": "High"},
        ]
    )
    assert got == [
        {"check": "arbitrary-send-eth", "impact": "High"},
        {"check": "tx-origin", "impact": "High"},
        {"check": "solc-version", "impact": "Informational"},
    ]


@needs_solc
def test_score_prints_the_table_without_json(tmp_path, capsys):
    (tmp_path / "Context.txt_0.sol").write_text(CONTEXT)
    (tmp_path / "Context.txt_1.sol").write_text(BROKEN)
    scoring.main(["--predictions", str(tmp_path), "--no-analyse"])
    out = capsys.readouterr().out
    rows = _rows(out)
    assert rows["Context.txt_0.sol"].split()[1] == "compiled"
    assert "not compiled (syntax)" in rows["Context.txt_1.sol"] and "ParserError" in rows["Context.txt_1.sol"]
    assert "compiled: 1/2" in out  # the summary follows the table
    scoring.main(["--predictions", str(tmp_path), "--no-analyse", "--no-files"])
    assert _rows(capsys.readouterr().out) == {}


@needs_solc
def test_table_shows_slithers_findings_of_a_vulnerable_file(tmp_path, capsys):
    (tmp_path / "Wallet.txt_0.sol").write_text(WALLET)
    scoring.main(["--predictions", str(tmp_path), "--workers", "1"])
    row = _rows(capsys.readouterr().out)["Wallet.txt_0.sol"]
    assert " vulnerable " in row and "tx-origin (Medium)" in row and "no reference for task 'Wallet'" in row
