"""The optional real-data loaders (an npm `node_modules` folder, the slither-analyzer sdist's labelled detector
tests) on small folders built here, and Slither over a process pool giving the sequential results."""

from __future__ import annotations

import io
import logging
import tarfile

import pytest

from hf_ext.codebc import external
from hf_ext.codebc.solidity import analyze, analyze_many, toolchain_problem
from hf_ext.codebc.testing import write_npm_package

logging.getLogger("CryticCompile").setLevel(logging.CRITICAL)
BODY = "contract {name} {{\n    uint256 public total; // a counter\n    function f() public {{ total = 1; }}\n}}\n"


def test_npm_loader_keeps_08_single_pragma_files_with_their_licence(tmp_path, monkeypatch):
    nm = tmp_path / "node_modules"
    write_npm_package(
        nm,
        "solmate",
        "AGPL-3.0-only",
        {
            "src/Vault.sol": "pragma solidity ^0.8.0;\n" + BODY.format(name="Vault"),
            "src/Old.sol": "pragma solidity ^0.6.0;\n" + BODY.format(name="Old"),
            "src/Two.sol": "pragma solidity ^0.8.0;\npragma solidity >=0.8.0;\n" + BODY.format(name="Two"),
            "src/test/VaultTest.sol": "pragma solidity ^0.8.0;\n" + BODY.format(name="VaultTest"),
            "src/Address.sol": "pragma solidity ^0.8.0;\n" + BODY.format(name="Address"),  # a benchmark name: leaky
        },
    )
    write_npm_package(
        nm,
        "@openzeppelin/contracts",
        "MIT",
        {"Pausable.sol": "pragma solidity ^0.8.0;\n" + BODY.format(name="Pausable")},
    )
    got = external.load_npm_contracts(nm)
    assert [c.source for c in got] == ["solmate@1.0.0:src/Vault.sol"]
    assert got[0].licence == "AGPL-3.0-only" and got[0].comments == ["a counter"] and "//" not in got[0].code
    assert external.licences(got) == {"solmate@1.0.0": "AGPL-3.0-only"}
    assert {c.source for c in external.load_npm_contracts(nm, only_08=False)} == {
        "solmate@1.0.0:src/Vault.sol",
        "solmate@1.0.0:src/Old.sol",
    }
    monkeypatch.delenv(external.NPM_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match=external.NPM_ENV):
        external.load_npm_contracts()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        external.load_npm_contracts(tmp_path / "nope")


def _add(tar, name, text):
    data = text.encode()
    info = tarfile.TarInfo(f"slither_analyzer-0.0.0/tests/e2e/detectors/{name}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def test_slither_sdist_labels_follow_the_detector_impact_and_its_snapshot(tmp_path):
    sdist = tmp_path / "slither_analyzer-0.0.0.tar.gz"
    src = "pragma solidity ^0.8.0;\n// comment\ncontract T { }\n"
    with tarfile.open(sdist, "w:gz") as tar:
        for arg, ver, file in (
            ("tx-origin", "0.8.0", "found"),
            ("tx-origin", "0.8.0", "clean"),
            ("naming-convention", "0.8.0", "lowfind"),
            ("suicidal", "0.7.6", "orphan"),
        ):
            _add(tar, f"test_data/{arg}/{ver}/{file}.sol", src.replace("T", file))
        _add(tar, "snapshots/detectors__detector_TxOrigin_0_8_0_found_sol__0.txt", "T uses tx.origin\n")
        _add(tar, "snapshots/detectors__detector_TxOrigin_0_8_0_clean_sol__0.txt", "")
        _add(tar, "snapshots/detectors__detector_NamingConvention_0_8_0_lowfind_sol__0.txt", "bad name\n")
    got = {c.path.split("/")[-1]: c for c in external.load_slither_labelled(sdist)}
    assert set(got) == {"found.sol", "clean.sol", "lowfind.sol"}  # the file no snapshot names is not labelled
    assert got["found.sol"].tag == "bug" and got["found.sol"].impact == "Medium"  # tx-origin is Medium
    assert got["clean.sol"].tag == "correct"  # a High/Medium detector that found nothing
    assert got["lowfind.sol"].tag == "correct"  # an Informational finding is not a vulnerability
    assert "// comment" not in got["found.sol"].code and got["found.sol"].solc == "0.8.0"
    folder = tmp_path / "x"
    with tarfile.open(sdist) as tar:
        tar.extractall(folder, filter="data")
    assert [c.tag for c in external.load_slither_labelled(folder)] == [c.tag for c in got.values()]


def test_the_process_pool_returns_every_file_in_input_order(tmp_path, monkeypatch):
    # spawned workers see an empty solc folder, so each answers at once (no Slither import): the pool mechanics
    monkeypatch.setenv("HF_EXT_SOLC_DIR", str(tmp_path))
    names = [f"f{i}.sol" for i in (3, 1, 2, 0)]
    got = analyze_many({n: "contract A {}" for n in names}, workers=2)
    assert list(got) == names and [r.name for r in got.values()] == names
    assert all(r.reason == "solc_missing" and str(tmp_path) in r.error for r in got.values())


@pytest.mark.slow
@pytest.mark.skipif(toolchain_problem() is not None, reason=f"{toolchain_problem()}")
def test_parallel_slither_gives_the_sequential_results_in_order():
    # ~30 s under load (6 Slither runs); the fast test above covers the pool and the order
    from hf_ext.codebc.inject import inject

    host = "pragma solidity ^0.8.0;\n" + BODY.format(name="Vault")
    sources = {
        "bad.sol": inject(host, "tx_origin", seed=0),
        "clean.sol": host,
        "broken.sol": "pragma solidity ^0.8.0;\ncontract B { function f( }",
    }
    seq = {n: analyze(s, n) for n, s in sources.items()}
    par = analyze_many(sources, workers=2)
    assert list(par) == list(sources)
    for n in sources:
        assert (par[n].ok, par[n].reason, par[n].counts, par[n].checks) == (
            seq[n].ok,
            seq[n].reason,
            seq[n].counts,
            seq[n].checks,
        ), n
    assert par["bad.sol"].vulnerable and not par["clean.sol"].vulnerable and par["broken.sol"].reason == "compile"
    with pytest.raises(ValueError, match="workers"):
        analyze_many(sources, workers=0)
