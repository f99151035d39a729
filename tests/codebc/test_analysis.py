"""Slither through the solc-js shim, and the SWC injections it labels."""

from __future__ import annotations

import logging

import pytest

from hf_ext.codebc.data import released_outputs_dir
from hf_ext.codebc.inject import EXPECTED_DETECTORS, PATTERNS, inject, injected_patterns
from hf_ext.codebc.solidity import SHIM, analyze, toolchain_problem

pytestmark = pytest.mark.skipif(toolchain_problem() is not None, reason=f"{toolchain_problem()}")
logging.getLogger("CryticCompile").setLevel(logging.CRITICAL)

HOST = """pragma solidity ^0.8.0;
contract Vault {
    uint256 public total;
    function add(uint256 a, uint256 b) public pure returns (uint256) {
        return a * b + 1;
    }
}"""


def test_shim_answers_version_and_standard_json():
    import json
    import subprocess

    out = subprocess.run([str(SHIM), "--version"], capture_output=True, text=True, check=True).stdout
    assert "0.8.37" in out
    req = {
        "language": "Solidity",
        "sources": {"a.sol": {"content": HOST}},
        "settings": {"outputSelection": {"*": {"*": ["abi"]}}},
    }
    res = json.loads(
        subprocess.run(
            [str(SHIM), "--standard-json"], input=json.dumps(req), capture_output=True, text=True, check=True
        ).stdout
    )
    assert "Vault" in res["contracts"]["a.sol"]


def test_slither_on_a_released_output_matches_the_released_log():
    path = released_outputs_dir() / "Address.txt_2.sol"
    a = analyze(path.read_text(), path.name)
    assert a.ok and a.counts["High"] == 3  # the released human-summary says High 3
    assert {"arbitrary-send-eth", "controlled-delegatecall"} <= a.checks and a.vulnerable


def test_injected_patterns_are_flagged_by_slither_and_the_host_is_clean():
    clean = analyze(HOST)
    assert clean.ok and not clean.vulnerable
    code = inject(inject(HOST, "reentrancy", seed=1), "tx_origin", seed=1)
    a = analyze(code)
    assert a.ok and a.vulnerable
    assert EXPECTED_DETECTORS["reentrancy"] | EXPECTED_DETECTORS["tx_origin"] <= a.checks
    assert a.counts["High"] >= 1 and a.counts["Medium"] >= 1


def test_injection_recognisers():
    for i, p in enumerate(PATTERNS):
        code = inject(HOST, p, seed=i)
        assert injected_patterns(code) == {p}, p
        assert "a * b" in code  # the host is untouched apart from the insertion
    assert injected_patterns(HOST) == set()
    with pytest.raises(ValueError, match="no contract body"):
        inject("pragma solidity ^0.8.0;\ninterface I { function f() external; }", "reentrancy")
    with pytest.raises(ValueError, match="unknown pattern"):
        inject(HOST, "overflow")


def test_non_compiling_source_is_a_result_not_a_crash():
    a = analyze("pragma solidity ^0.8.0;\ncontract A { function f( }")
    assert not a.ok and a.reason == "compile" and a.error


def test_server_path_gives_the_shim_paths_verdicts_and_starts_no_solc_per_file(monkeypatch):
    """The compile-server path (default) hands Slither what the shim path does: same counts, checks and findings on
    a released output with 3 High findings; a compile failure is a `compile` result as on the shim path
    (`test_non_compiling_source_is_a_result_not_a_crash`); it never runs the shim per file."""
    import subprocess

    from hf_ext.codebc import solidity

    src = (released_outputs_dir() / "Address.txt_2.sol").read_text()
    bad = "pragma solidity ^0.8.0;\ncontract A { function f() public { y = 1; } }"  # parses, fails name resolution
    shim = {"A.sol": analyze(src, "A.sol", compiler="shim")}
    solidity._solc_version()  # asked once per process (crytic-compile's own parser of `solc --version`)
    real_popen = subprocess.Popen
    calls = []

    def spy(cmd, *a, **kw):
        calls.append(cmd)
        return real_popen(cmd, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", spy)
    with solidity.SolcServer() as server:
        got = {n: analyze(s, n, server=server) for n, s in (("A.sol", src), ("B.sol", bad))}
    assert not [c for c in calls if str(SHIM) in " ".join(map(str, c))]
    for n in shim:
        assert (got[n].ok, got[n].reason, got[n].counts, got[n].checks) == (
            shim[n].ok, shim[n].reason, shim[n].counts, shim[n].checks)  # fmt: skip
        assert [f["description"] for f in got[n].findings] == [f["description"] for f in shim[n].findings]
    assert got["A.sol"].counts["High"] == 3 and got["B.sol"].reason == "compile"
    with pytest.raises(ValueError, match="compiler"):
        analyze(src, compiler="native")
