"""The contract every registered method passes, with the checks that make sense for its kind.

A method that is not registered, or whose fixture lacks a piece its kind needs, fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.contract import run_contract_check

import hf_ext
from hf_ext.core.registry import list_methods

REPO_ROOT = Path(__file__).resolve().parents[1]

METHODS = [m.name for m in list_methods()]
CASES = [(m.name, check) for m in list_methods() for check in m.contract_checks]


def test_every_method_subpackage_is_registered():
    subpackages = sorted(
        p.name for p in (REPO_ROOT / "hf_ext").iterdir() if (p / "__init__.py").is_file() and p.name != "core"
    )
    assert subpackages, "no method subpackages found"
    assert sorted(METHODS) == subpackages


@pytest.fixture(scope="module")
def fixtures():
    return {m.name: m.load("contract")() for m in list_methods()}


@pytest.mark.parametrize("method,check", CASES, ids=[f"{m}-{c}" for m, c in CASES])
def test_contract(method, check, fixtures, tmp_path, capsys):
    run_contract_check(hf_ext.get_method(method), fixtures[method], check, tmp_path, capsys)
