"""Fixtures the CodeBC test modules share."""

from __future__ import annotations

import pytest

CODE = "pragma solidity ^0.8.0;\ncontract A {\n    function f(uint a) public pure returns (uint) { return a * 2; }\n}"


@pytest.fixture(scope="module")
def tok():
    """A tiny byte-level BPE with the CodeBC tokens, trained on three small contracts."""
    from hf_ext.codebc.tokenizer import train_tokenizer

    corpus = [CODE, CODE.replace("A", "B"), "pragma solidity ^0.6.0;\ncontract Token { uint256 total; }"] * 5
    return train_tokenizer(corpus, vocab_size=300, min_frequency=1)
