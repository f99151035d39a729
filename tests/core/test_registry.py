"""MethodSpec validation and per-method CLI commands."""

from __future__ import annotations

import pytest

from hf_ext.core import cli
from hf_ext.core.registry import _REGISTRY, MethodSpec, RegistryError


def _spec(**kw):
    base = dict(
        name="toy_method",
        title="Toy: a test method",
        kind="numerics",
        summary="s",
        reproduce="json:dumps",
        demo="json:dumps",
        contract="json:dumps",
    )
    base.update(kw)
    return MethodSpec(**base)


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "Toy"},
        {"kind": "widget"},
        {"reproduce": "no_colon"},
        {"commands": {"train": "json:dumps"}},
        {"commands": {"score": "nocolon"}},
        {"kind": "model"},
    ],
)
def test_malformed_specs_are_rejected(bad):
    with pytest.raises(RegistryError):
        _spec(**bad)


def test_method_command_reaches_its_entry_point(monkeypatch, capsys):
    spec = _spec(commands={"echo": "builtins:print"})
    monkeypatch.setitem(_REGISTRY, spec.name, spec)
    assert spec.load("echo") is print
    assert cli.main(["toy_method", "echo", "--flag", "x"]) == 0
    assert capsys.readouterr().out.strip() == "['--flag', 'x']"
    with pytest.raises(RegistryError, match="no nothing entry point"):
        spec.load("nothing")
