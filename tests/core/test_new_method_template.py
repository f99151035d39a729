"""An eleventh method is one folder: scaffolded from `templates/method/` into a temporary folder, it registers on
import and passes the whole method contract, its train script saves a loadable artifact with a training record,
and its reproduction prints its rule first and writes results.json — touching nothing outside that folder."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.contract import run_contract_check

import hf_ext
from hf_ext.core import registry

REPO_ROOT = Path(__file__).resolve().parents[2]


def _scaffold_module():
    spec = importlib.util.spec_from_file_location("new_method", REPO_ROOT / "scripts" / "new_method.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture
def eleventh(tmp_path, monkeypatch):
    before = _git_status()
    target = _scaffold_module().scaffold("eleventh", tmp_path / "ext")
    monkeypatch.syspath_prepend(str(tmp_path / "ext"))
    import eleventh  # noqa: F401  (registers the method)

    yield hf_ext.get_method("eleventh"), target
    registry._REGISTRY.pop("eleventh", None)
    for name in [m for m in sys.modules if m == "eleventh" or m.startswith("eleventh.")]:
        del sys.modules[name]
    assert _git_status() == before, "scaffolding or testing the new method changed files in the checkout"


def test_template_method_passes_the_contract(eleventh, tmp_path, capsys):
    spec, target = eleventh
    assert spec.kind == "model" and spec.card_file == target / "model_card.md"
    assert not any("mymethod" in p.name or "mymethod" in p.read_text() for p in target.rglob("*.py"))
    fx = spec.load("contract")()
    for check in spec.contract_checks:
        run_contract_check(spec, fx, check, tmp_path / check, capsys)


def test_template_method_trains_and_reproduces(eleventh, tmp_path, capsys):
    spec, _ = eleventh
    from transformers import AutoModel

    out = spec.load("train")(
        ["--output_dir", str(tmp_path / "run"), "--max_steps", "3", "--report_to", "none", "--use_cpu", "true"]
    )
    record = json.loads((out / "training_record.json").read_text())
    assert record["method"] == "eleventh" and record["metrics"][0]["name"] == "MSE"
    assert type(AutoModel.from_pretrained(out)).__name__ == "EleventhModel"
    result = spec.load("reproduce")(["--output_dir", str(tmp_path / "repro")])
    printed = capsys.readouterr().out
    assert printed.index("[rule]") < printed.index("paired difference")  # the rule is printed before the run
    saved = json.loads((tmp_path / "repro" / "results.json").read_text())
    assert saved["verdicts"][0]["verdict"] == result["verdicts"][0]["verdict"]
    assert saved["verdicts"][0]["verdict"] in ("confirmed", "refuted", "inconclusive", "premise absent")


def test_scaffold_refuses_bad_names(tmp_path):
    scaffold = _scaffold_module().scaffold
    with pytest.raises(ValueError, match="lowercase identifier"):
        scaffold("Bad-Name", tmp_path)
    scaffold("ok", tmp_path)
    with pytest.raises(FileExistsError):
        scaffold("ok", tmp_path)
