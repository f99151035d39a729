"""Comment stripping (the official bug fixed), OpenZeppelin leakage, Blockchain-HumanEval loading."""

from __future__ import annotations

import pytest

from hf_ext.codebc import data
from hf_ext.codebc.data import humaneval_reference, humaneval_tasks, is_leaky, strip_comments


def test_strip_comments_keeps_multiplication_lines():
    code, comments = strip_comments(
        "pragma solidity ^0.8.0;\n// a counter\ncontract C {\n    /**\n     * @dev doubles\n     */\n"
        "    function f(uint a, uint b) public pure returns (uint) {\n        return a * b; // product\n    }\n"
        '    string s = "// not a comment /* either */";\n}\n\n'
    )
    assert "return a * b;" in code  # the official stripper deleted every line containing '*'
    assert '"// not a comment /* either */"' in code
    assert comments == ["a counter", "@dev doubles", "product"]
    assert "\n\n" not in code and "//" not in code.replace('"// not', "")


def test_humaneval_has_41_tasks_with_references():
    tasks = humaneval_tasks()
    assert len(tasks) == 41 and "Address" in tasks and "draft-IERC6093" in tasks
    assert "library Address" in humaneval_reference("Address")


def test_no_training_contract_leaks_openzeppelin_or_a_benchmark_reference():
    corpus = data.load_secure_contracts()
    assert len(corpus) > 800
    assert not any(is_leaky(c.raw) for c in corpus)
    # no benchmark reference body appears in the training code
    # (any 3 consecutive reference lines, even a partial first line)
    train_text = "\n".join(ln.strip() for c in corpus for ln in c.code.splitlines())
    for task in humaneval_tasks():
        lines = [ln.strip() for ln in humaneval_reference(task).splitlines() if len(ln.strip()) > 25]
        for i in range(len(lines) - 2):
            assert "\n".join(lines[i : i + 3]) not in train_text, task
    assert is_leaky("// OpenZeppelin Contracts v4.4.1 (utils/Context.sol)\nabstract contract X {}")
    assert is_leaky("library Address { }") and not is_leaky("library AddressBook { }")


def test_missing_data_names_the_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        data.humaneval_tasks()


def test_heldout_rows_and_their_hosts_never_reach_training_pretraining_or_ci():
    import random

    from hf_ext.codebc.data import Contract
    from hf_ext.codebc.pipeline import heldout_codes, pretraining_texts, split_by_host

    hosts = [f"contract H{i} {{}}" for i in range(12)]
    rows = [{"contract": Contract(h, "", h), "host": h, "pattern": None} for h in hosts]
    rows += [
        {"contract": Contract(h + f" // {p}", "", h), "host": h, "pattern": p}
        for h in hosts[:6]
        for p in ("reentrancy", "tx_origin")
    ]
    train, test = split_by_host(rows, random.Random(0))
    assert len(train) + len(test) == len(rows) and len(test) >= 2
    assert {r["host"] for r in train}.isdisjoint({r["host"] for r in test})  # a host and its copies: one side
    held = heldout_codes(test)
    assert {r["contract"].code for r in train}.isdisjoint(held)
    corpus = [Contract(h, "", h) for h in hosts]
    texts = pretraining_texts(corpus, held)
    assert set(texts).isdisjoint(held) and len(texts) == len(hosts) - len({r["host"] for r in test})
