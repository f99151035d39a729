"""`hf-ext evaluate <method>`: dispatched to the method's registered evaluate script (its own flags, its own
--help), refused in one line for a method that has none. The per-method behaviour is in each method's
`test_*own_data*.py`."""

from __future__ import annotations

import dataclasses

import pytest

import hf_ext
from hf_ext.core import cli
from hf_ext.core.registry import MethodSpec, RegistryError


def test_a_method_without_evaluate_is_refused_in_one_line(monkeypatch, capsys):
    spec = dataclasses.replace(hf_ext.get_method("orca"), evaluate=None)
    monkeypatch.setattr(cli, "get_method", lambda name: spec)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["evaluate", "orca", "--model", "x", "--data", "y"])
    assert exit_.value.code == 2
    assert "has no evaluate command" in capsys.readouterr().err


def test_evaluate_reaches_the_methods_script_with_its_arguments(monkeypatch):
    seen = []
    spec = dataclasses.replace(hf_ext.get_method("orca"), evaluate="builtins:print")
    monkeypatch.setattr(cli, "get_method", lambda name: spec)
    monkeypatch.setattr(MethodSpec, "load", lambda self, entry: seen.append(entry) or (lambda argv: seen.append(argv)))
    assert cli.main(["evaluate", "orca", "--model", "m", "--data", "d.csv", "--baseline", "b"]) == 0
    assert seen == ["evaluate", ["--model", "m", "--data", "d.csv", "--baseline", "b"]]


def test_an_evaluate_entry_must_look_like_module_function():
    with pytest.raises(RegistryError, match="MethodSpec.evaluate"):
        dataclasses.replace(hf_ext.get_method("orca"), evaluate="no_colon")
    with pytest.raises(RegistryError, match="commands"):
        dataclasses.replace(hf_ext.get_method("orca"), commands={"evaluate": "a:b"})
