"""CodeBC stage 0 (continued pretraining on permissive Solidity): the licence allow-list, the leakage filter, the
split, the training and its clock, the completions and their solc-js verdicts, and `hf-ext reproduce codebc --stage0`
end to end on a fake `node_modules` folder and a tiny LLaMA."""

from __future__ import annotations

import math

import pytest

from hf_ext.codebc import stage0
from hf_ext.codebc.data import Contract, is_leaky
from hf_ext.codebc.solidity import toolchain_problem
from hf_ext.codebc.testing import write_npm_package

needs_solc = pytest.mark.skipif(toolchain_problem() is not None, reason=f"{toolchain_problem()}")


def counter(name: str, k: int) -> str:
    return (
        f"pragma solidity ^0.8.20;\n\ncontract {name} {{\n    uint256 public count;\n"
        f"    mapping(address => uint256) public owed;\n\n    function add(uint256 x) external {{\n"
        f"        count += x * {k + 1};\n        owed[msg.sender] += x;\n    }}\n\n"
        f"    function reset() external {{\n        count = {k};\n    }}\n}}\n"
    )


PERMISSIVE = [f"Counter{k}" for k in range(12)]


@pytest.fixture(scope="module")
def npm(tmp_path_factory):
    """A node_modules folder: 12 good MIT files plus one file per drop reason, an AGPL and a BUSL package, a dual
    `MIT OR Apache-2.0` package and an OpenZeppelin package."""
    nm = tmp_path_factory.mktemp("stage0") / "node_modules"
    files = {f"src/{n}.sol": "// SPDX-License-Identifier: MIT\n" + counter(n, k) for k, n in enumerate(PERMISSIVE)}
    files.update({
        "src/Old.sol": counter("Old", 1).replace("^0.8.20", "^0.6.0"),  # old pragma
        "src/Leaky.sol": "// adapted from OpenZeppelin\n" + counter("Leaky", 2),  # leakage: names OpenZeppelin
        "src/Named.sol": counter("Address", 3),  # leakage: declares a Blockchain-HumanEval task name
        "src/BuslHeader.sol": "// SPDX-License-Identifier: BUSL-1.1\n" + counter("BuslHeader", 4),
        "lib/other/Vendored.sol": counter("Vendored", 5),  # another project's copy inside the package
        "src/copy/Counter0.sol": "// SPDX-License-Identifier: MIT\n" + counter("Counter0", 0),  # duplicate
    })  # fmt: skip
    write_npm_package(nm, "good", "MIT", files)
    write_npm_package(nm, "dual", "(MIT OR Apache-2.0)", {"src/Dual.sol": counter("Dual", 6)})
    write_npm_package(nm, "agpl", "AGPL-3.0-only", {"src/A1.sol": counter("A1", 7), "src/A2.sol": counter("A2", 8)})
    write_npm_package(nm, "busl", "BUSL-1.1", {"src/B1.sol": counter("B1", 9)})
    write_npm_package(nm, "@openzeppelin/contracts", "MIT", {"Pausable.sol": counter("Pausable", 10)})
    return nm


@pytest.mark.parametrize(
    ("expression", "ok"),
    [("MIT", True), ("ISC", True), ("Apache-2.0", True), ("MIT OR Apache-2.0", True), ("(MIT OR GPL-3.0)", True),
     ("MIT or Apache-2.0", True), ("MIT AND GPL-3.0", False), ("AGPL-3.0-only", False), ("BUSL-1.1", False),
     ("GPL-3.0", False), ("UNLICENSED", False), ("SEE LICENSE IN LICENSE", False), ("?", False), (None, False)],
)  # fmt: skip
def test_licence_allow_list_reads_spdx_expressions(expression, ok):
    assert stage0.licence_allowed(expression) is ok


def test_licence_filter_drops_exactly_the_non_permissive_files(npm):
    kept, stats = stage0.filter_corpus(npm)
    sources = sorted(c.source.split(":")[0] + ":" + c.source.split(":")[1] for c in kept)
    want = sorted([f"good@1.0.0:src/{n}.sol" for n in PERMISSIVE] + ["dual@1.0.0:src/Dual.sol"])
    assert sources == want
    assert stats["dropped"] == {"licence": 3, "licence_spdx": 1, "vendored": 1, "old_pragma": 1, "leaky": 2,
                                "duplicate": 1}  # fmt: skip
    assert stats["packages"]["agpl@1.0.0"] == {"licence": "AGPL-3.0-only", "allowed": False, "kept": 0}
    assert stats["packages"]["busl@1.0.0"]["allowed"] is False
    assert stats["packages"]["dual@1.0.0"] == {"licence": "(MIT OR Apache-2.0)", "allowed": True, "kept": 1}
    assert not any("openzeppelin" in k for k in stats["packages"])  # never even read
    assert stats["kept"] == 13 and stats["files_seen"] == sum(stats["dropped"].values()) + 13


def test_leaky_files_never_reach_train_or_heldout(npm):
    corpus = stage0.load_corpus(npm, heldout_fraction=0.4)
    names = {c.source.rsplit("/", 1)[-1] for c in corpus.train + corpus.heldout}
    assert not names & {"Leaky.sol", "Named.sol", "Pausable.sol"}
    assert not any(is_leaky(c.raw) for c in corpus.train + corpus.heldout)
    assert is_leaky(counter("Address", 3))  # the filter itself is what removed it (a task name)


def test_split_is_deterministic_disjoint_and_keeps_file_copies_together(npm):
    a, b = stage0.load_corpus(npm, 0.4), stage0.load_corpus(npm, 0.4)
    assert [c.source for c in a.train] == [c.source for c in b.train]
    assert [c.source for c in a.heldout] == [c.source for c in b.heldout]
    assert a.train and a.heldout and not {c.source for c in a.train} & {c.source for c in a.heldout}
    assert len(a.train) + len(a.heldout) == a.stats["kept"]
    many = [Contract("x", [], "x", source=f"p@1:src/F{i}.sol") for i in range(400)]
    train, held = stage0.split_corpus(many, 0.1)
    assert 20 <= len(held) <= 60 and len(train) + len(held) == 400
    wider = stage0.split_corpus(many, 0.2)[1]
    assert {c.source for c in held} <= {c.source for c in wider}  # a larger fraction only adds files
    assert stage0.split_key("p@1:src/utils/Lib.sol") == stage0.split_key("q@2:lib/x/Lib.sol")
    with pytest.raises(ValueError, match="heldout_fraction"):
        stage0.split_corpus(many, 1.0)


def test_missing_corpus_names_the_make_target_and_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(stage0.STAGE0_NPM_ENV, raising=False)
    for where in (None, tmp_path / "nope"):
        with pytest.raises(FileNotFoundError) as err:
            stage0.load_corpus(where)
        assert "make codebc-stage0-data" in str(err.value) and "HF_EXT_CODEBC_STAGE0_NPM" in str(err.value)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny random LLaMA with a BPE trained on the counter contracts (the project's offline stand-in base)."""
    from hf_ext.codebc.presets import save_tiny_causal_lm

    folder = tmp_path_factory.mktemp("tiny")
    return save_tiny_causal_lm(folder, [counter(f"C{k}", k) for k in range(20)], hidden_size=32, layers=2)


def _load(folder):
    from hf_ext.codebc.train_contracts import load_base

    model, tok, _ = load_base(str(folder))
    return model, tok


def test_training_on_the_corpus_lowers_heldout_nll(tiny, tmp_path):
    model, tok = _load(tiny)
    train = [counter(f"Train{k}", k) for k in range(16)]
    held = [counter(f"Held{k}", 20 + k) for k in range(4)]
    before = [x for x, _ in stage0.contract_nll(model, tok, held, 64)]
    got = stage0.train_stage0(model, tok, train, minutes=10, max_steps=30, learning_rate=1e-2, batch_size=4,
                              block_size=64, output_dir=str(tmp_path), logging_steps=5)  # fmt: skip
    after = [x for x, _ in stage0.contract_nll(model, tok, held, 64)]
    assert all(a < b - 0.5 for a, b in zip(after, before)), (before, after)  # every held-out contract, by far
    assert got["steps"] == 30 and got["stopped_by"] == "max_steps" and got["tokens"] == 30 * 4 * 64
    assert len(got["loss_curve"]) == 6 and got["loss_curve"][-1]["loss"] < got["loss_curve"][0]["loss"]


def test_the_wall_clock_stops_training_and_records_the_steps(tiny, tmp_path):
    model, tok = _load(tiny)
    got = stage0.train_stage0(model, tok, [counter(f"T{k}", k) for k in range(8)], minutes=1e-9, max_steps=500,
                              learning_rate=1e-3, batch_size=2, block_size=32, output_dir=str(tmp_path))  # fmt: skip
    assert got["stopped_by"] == "clock" and got["steps"] == 1 and got["tokens"] == 64
    assert got["seconds_per_step"] is not None and got["seconds_per_step"] > 0


def test_balanced_end_ignores_braces_in_strings_and_comments():
    assert stage0.balanced_end("x = 1; }\nuint y; }") == len("x = 1; }")
    assert stage0.balanced_end('s = "}"; // }\n /* } */ f() { } }') == len('s = "}"; // }\n /* } */ f() { } }')
    assert stage0.balanced_end("function f() { return; }") is None  # still inside the contract
    assert stage0.completion_prompt(counter("Z", 1)) == "pragma solidity ^0.8.20;\n\ncontract Z {"
    assert stage0.completion_prompt("contract A { }") is None  # no pragma: nothing to start from


def test_completion_stops_when_the_braces_balance(tiny):
    model, tok = _load(tiny)
    forced = tok("\n    uint256 a;\n}\ncontract B {\n    uint256 b;\n}", add_special_tokens=False)["input_ids"]
    prompt = "pragma solidity ^0.8.20;\n\ncontract A {"
    (got,) = stage0.complete(model, tok, [prompt], max_new_tokens=len(forced), batch_size=1, forced_ids=forced)
    assert got["balanced"] and got["file"] == prompt + "\n    uint256 a;\n}"
    assert "contract B" not in got["generated"]  # generation itself stopped at the brace, not only the cut
    (free,) = stage0.complete(model, tok, [prompt], max_new_tokens=5, batch_size=1)
    assert free["file"].startswith(prompt)


@needs_solc
def test_parser_pass_and_compile_follow_solc_js():
    from hf_ext.codebc.solidity import SolcServer

    good = counter("Good", 1)
    with SolcServer() as server:
        got = stage0.judge(server, {"good.sol": good, "syntax.sol": good.replace("count = 1;", "count = ;"),
                                    "type.sol": good.replace("count = 1;", 'count = "one";')})  # fmt: skip
        assert got["good.sol"] == {"parses": True, "compiles": True, "reason": None}
        assert got["syntax.sol"] == {"parses": False, "compiles": False, "reason": "syntax"}
        assert got["type.sol"] == {"parses": True, "compiles": False, "reason": "type"}
        assert stage0.self_contained(Contract(good, [], good, source="p@1:G.sol"), server)
        imported = 'import "./Other.sol";\n' + good
        assert not stage0.self_contained(Contract(imported, [], imported, source="p@1:I.sol"), server)


@needs_solc
def test_reproduce_stage0_prints_rules_first_and_writes_schema_valid_results(npm, tiny, tmp_path, capsys):
    from hf_ext.codebc import reproduce
    from hf_ext.core.results_schema import load_results

    out = tmp_path / "run"
    argv = ["--stage0", "--npm", str(npm), "--base", str(tiny), "--out", str(out), "--max_steps", "4",
            "--block_size", "32", "--heldout", "3", "--heldout_fraction", "0.4", "--new_tokens", "12",
            "--humaneval_tasks", "1", "--learning_rate", "1e-2", "--logging_steps", "2", "--device", "cpu"]  # fmt: skip
    got = reproduce.main(argv)
    text = capsys.readouterr().out
    rule, corpus, training = (text.index(s) for s in ("[rule] Stage 0 lowers", "[stage0] corpus", "[stage0] train"))
    assert rule < corpus < training
    assert text.count("[rule]") == 3
    saved = load_results(out / "results.json")
    assert saved["scale"] == "stage0" and saved["command"].startswith("hf-ext reproduce codebc --stage0")
    assert "--npm" not in saved["command"] and "--max_steps 4" in saved["command"]
    assert saved["corpus"]["packages"]["agpl@1.0.0"]["allowed"] is False
    assert saved["corpus"]["dropped"]["licence"] == 3 and saved["corpus"]["train_tokens"] > 0
    assert [v["verdict"] for v in got["verdicts"]][0] in ("confirmed", "refuted", "inconclusive")
    n = saved["corpus"]["completion_contracts"]
    assert 2 <= n <= 3 and len(saved["evaluation"]["stage0"]["completions"]) == n
    assert len(saved["evaluation"]["base"]["nll"]) == saved["corpus"]["heldout_files"]
    assert all(math.isfinite(x) for x in saved["evaluation"]["base"]["nll"])
    assert saved["training"]["steps"] == 4 and (out / "results.md").is_file()
    assert (out / "model" / "model.safetensors").is_file() and len(list((out / "completions" / "base").iterdir())) == n
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(out / "model")  # the base of later stages loads back


def test_bad_knobs_fail_before_any_work(tmp_path):
    from hf_ext.codebc import reproduce

    with pytest.raises(ValueError, match="--minutes"):
        reproduce.main(["--stage0", "--minutes", "0", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="--block_size"):
        reproduce.main(["--stage0", "--block_size", "4", "--out", str(tmp_path)])
    assert not any(tmp_path.iterdir())


def _evaluation(nll, parses):
    return {"nll": nll, "completions": [{"parses": p, "compiles": False} for p in parses]}


def test_completion_verdicts_need_the_nll_premise():
    from hf_ext.codebc.reproduce_stage0 import decide

    base = _evaluation([2.0 + 0.01 * i for i in range(20)], [False] * 20)
    better = _evaluation([1.0 + 0.01 * i for i in range(20)], [True] * 20)
    verdicts, diffs = decide(base, better)
    assert [v["verdict"] for v in verdicts] == ["confirmed", "confirmed", "inconclusive"]
    assert diffs["nll"]["mean"] == pytest.approx(-1.0) and diffs["parse"]["mean"] == pytest.approx(1.0)
    # the same completions after a stage 0 that made held-out NLL worse: no completion verdict is read
    worse = _evaluation([3.0 + 0.01 * i for i in range(20)], [True] * 20)
    verdicts, _ = decide(base, worse)
    assert [v["verdict"] for v in verdicts] == ["refuted", "premise absent", "premise absent"]
