"""A missing optional dependency stops every entry point at the door with the pip line that fixes it, and no
traceback; `hf-ext list` shows each method's installed and missing extras."""

from __future__ import annotations

import sys

import pytest

from hf_ext.core.cli import main
from hf_ext.core.extras import check_extras, extra_distributions, missing_for_extra
from hf_ext.core.lazy import MissingExtraError


def test_extra_distributions_follow_self_references():
    dists = extra_distributions("h2tune")
    assert "peft" in dists and "flwr" in dists  # flwr comes through hf_ext[federated]
    assert "torch" not in dists  # the core is not an extra


@pytest.mark.parametrize(
    ("argv", "blocked", "pip_line"),
    [
        (["reproduce", "fede4rag"], "tenseal", "hf_ext[fede4rag]"),
        (["train", "fede4rag"], "tenseal", "hf_ext[fede4rag]"),
        (["fede4rag", "reproduce"], "tenseal", "hf_ext[fede4rag]"),
        (["demo", "orca"], "gradio", "hf_ext[orca,spaces]"),
        (["push", "gpmfs", "--repo_id", "me/g", "--dry_run", "--out", "o"], "river", "hf_ext[gpmfs]"),
        (["train", "h2tune", "--output_dir", "o"], "peft", "hf_ext[h2tune]"),
        (["evaluate", "fede4rag", "--model", "m", "--data", "d.csv"], "tenseal", "hf_ext[fede4rag]"),
        (["evaluate", "gpmfs", "--model", "m", "--data", "d.csv"], "river", "hf_ext[gpmfs]"),
    ],
)
def test_entry_points_stop_with_the_pip_line(argv, blocked, pip_line, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, blocked, None)  # `import blocked` now fails, as if not installed
    extras = pip_line.split("[")[1].rstrip("]").split(",")
    assert any(blocked in missing_for_extra(extra) for extra in extras)
    code = main(argv)
    err = capsys.readouterr().err
    assert code in (1, 2)
    assert f"pip install '{pip_line}'" in err and blocked in err
    assert "Traceback" not in err
    assert not any(tmp_path.iterdir()), "the command did work before stopping"


def test_check_extras_passes_when_installed_and_names_the_module_when_not(monkeypatch):
    check_extras("orca")  # installed in the test venv
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(MissingExtraError, match=r"sklearn.*pip install 'hf_ext\[orca\]'"):
        check_extras("orca")


def test_list_shows_installed_and_missing_extras(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tenseal", None)
    assert main(["list"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "installed" in lines["orca"]
    assert "missing tenseal" in lines["fede4rag"] and "pip install 'hf_ext[fede4rag]'" in lines["fede4rag"]
