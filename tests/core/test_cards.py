"""Cards rendered from the artifact: an untrained artifact says so (or is refused), a trained one's `model-index`
equals its training record, Hub dataset ids only where real, the paper's BibTeX; and `hf-ext push` never trains."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
from helpers.hub_server import MockHub
from huggingface_hub import ModelCard

import hf_ext
from hf_ext.core.cards import bibtex, render_artifact_card, render_card
from hf_ext.core.cli import main as cli_main
from hf_ext.core.hub import save_artifact
from hf_ext.core.records import load_training_record, save_training_record
from hf_ext.orca import OrcaModel
from hf_ext.orca.testing import tiny_config

SPEC = hf_ext.get_method("orca")
METRICS = [
    {
        "name": "DT macro-F1",
        "type": "f1",
        "value": 0.2375,
        "split": "test",
        "dataset": "synthetic-causal-dwell",
        "higher_is_better": True,
    },
    {
        "name": "CTR AUC",
        "type": "roc_auc",
        "value": 0.6316,
        "split": "test",
        "dataset": "synthetic-causal-dwell",
        "higher_is_better": True,
    },
    {
        "name": "DT MAE (s)",
        "type": "mae",
        "value": 68.7,
        "split": "test",
        "dataset": "synthetic-causal-dwell",
        "higher_is_better": False,
    },
]


@pytest.fixture(scope="module")
def random_init(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    return save_artifact(OrcaModel(tiny_config()), tmp_path_factory.mktemp("art") / "orca")


@pytest.fixture(scope="module")
def trained(random_init, tmp_path_factory) -> Path:
    art = tmp_path_factory.mktemp("trained") / "orca"
    shutil.copytree(random_init, art)
    save_training_record(
        art,
        method="orca",
        command="hf-ext reproduce orca",
        metrics=METRICS,
        datasets=[
            {"name": "synthetic-causal-dwell", "hub_id": None},
            {"name": "tenrec-qk", "hub_id": "someone/tenrec-qk"},
        ],
        config={"backbone": "ple", "shortcut_strength": 1.0, "epochs": 4},
        notes="quick scale, seed 0",
    )
    return art


@pytest.fixture()
def hub_env(tmp_path, monkeypatch):
    with MockHub(tmp_path / "store") as hub:
        for key, value in {
            "HF_ENDPOINT": hub.url,
            "HF_TOKEN": "hf_fake",
            "HF_HUB_OFFLINE": "0",
            "HF_HOME": str(tmp_path / "hf_home"),
        }.items():
            monkeypatch.setenv(key, value)
        import huggingface_hub.constants as constants

        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        import huggingface_hub.hf_api as hf_api

        monkeypatch.setattr(hf_api.api, "endpoint", hub.url)  # the module-level client (`file_exists`) kept the old one
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(
            constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}"
        )
        yield hub


def _push(artifact: Path, repo_id: str, *extra: str) -> int:
    return cli_main(["push", "orca", "--repo-id", repo_id, "--from", str(artifact), *extra])


def test_untrained_artifact_is_refused_without_flag(random_init, tmp_path):
    with pytest.raises(SystemExit, match="--allow-untrained"):  # one line naming the flag, no traceback
        _push(random_init, "tester/orca", "--dry-run", "--out", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists(), "a refused push must write nothing"


def test_pushed_random_init_card_says_so(random_init, hub_env):
    assert _push(random_init, "tester/orca-random", "--allow-untrained") == 0
    card = ModelCard.load("tester/orca-random")  # downloaded back through the test Hub's resolve route
    assert "untrained (random initialisation)" in card.text
    assert "untrained" in card.data.tags
    assert card.data.eval_results is None, "an untrained artifact must carry no model-index results"
    # the hand-written reproduction table is labelled as the method's, not this artifact's
    assert "not this artifact's numbers" in card.text and "## Reproduction (as measured)" not in card.text
    assert "## This artifact" not in card.text


def test_pushed_trained_card_model_index_equals_record(trained, hub_env):
    assert _push(trained, "tester/orca-trained") == 0
    card = ModelCard.load("tester/orca-trained")
    record = load_training_record(trained)
    got = [
        (r.metric_name, r.metric_type, r.metric_value, r.dataset_split, r.dataset_name) for r in card.data.eval_results
    ]
    want = [(m["name"], m["type"], m["value"], m["split"], m["dataset"]) for m in record["metrics"]]
    assert got == want
    assert card.data.model_name == "orca-trained"
    assert card.data.datasets == ["someone/tenrec-qk"], "only real Hub dataset ids go into the metadata"
    assert "untrained" not in card.text.lower()
    assert "hf-ext reproduce orca" in card.text and '"backbone": "ple"' in card.text
    assert "DT MAE (s) | 68.7 | test | synthetic-causal-dwell | no" in card.text


def test_base_model_and_bibtex(trained, tmp_path):
    art = tmp_path / "adapter"
    shutil.copytree(trained, art)
    record = load_training_record(art)
    save_training_record(
        art, method="orca", base_model="someone/base-llama", metrics=record["metrics"], datasets=record["datasets"]
    )
    card = render_artifact_card(SPEC, art, repo_id="tester/x")
    assert card.data.base_model == "someone/base-llama"
    entry = bibtex(SPEC)
    assert entry.startswith("@misc{orca2025,") and "eprint = {2508.16573}" in entry and SPEC.title in entry
    assert entry in card.text
    # authors only where the spec has the full list
    assert "author = {Cao, Qu and Dong, Jin" in bibtex(hf_ext.get_method("amplitudes"))


def test_record_of_another_method_is_refused(trained, tmp_path):
    art = tmp_path / "a"
    shutil.copytree(trained, art)
    save_training_record(art, method="gpmfs")
    with pytest.raises(ValueError, match="for method 'gpmfs', not 'orca'"):
        render_artifact_card(SPEC, art, repo_id="tester/x")


def test_optional_remote_dependencies_are_named_with_pip_line():
    card = render_card(hf_ext.get_method("tinyalign"), repo_id="tester/ta")
    assert "pip install 'faiss-cpu>=1.15.1,<1.16'" in card.text
    card = render_card(hf_ext.get_method("tba"), repo_id="tester/tba")
    assert "pip install 'diffusers>=0.42.1,<0.43'" in card.text


def test_push_never_trains(tmp_path, monkeypatch, capsys):
    """Without a saved artifact push stops at once with the command that makes one (it used to train for 12 min)."""
    monkeypatch.setenv("HF_EXT_HOME", str(tmp_path / "empty"))

    def no_training(*args, **kwargs):
        raise AssertionError("push must never train")

    monkeypatch.setattr(type(SPEC), "load", lambda self, entry: no_training)
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["push", "orca", "--repo-id", "tester/orca", "--dry-run", "--out", str(tmp_path / "out")])
    message = str(exit_info.value.code)
    assert "push never trains" in message and "`hf-ext reproduce orca`" in message
    assert str(tmp_path / "empty" / "orca" / "artifact") in message
    assert not (tmp_path / "out").exists()
    assert os.listdir(tmp_path) == ["empty"] or not (tmp_path / "empty").exists()


@pytest.mark.parametrize(
    "method, remote_file, package", [("tinyalign", "memory.py", "faiss-cpu"), ("tba", "modeling_tba.py", "diffusers")]
)
def test_card_pip_line_is_the_remote_codes_and_the_extras(method, remote_file, package):
    """The card's optional-import line is the one the remote code's ImportError prints, and pins the same range
    as the method's extra in hf_ext's metadata (so card, error and install agree)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    from hf_ext.core.cards import REMOTE_CODE_EXTRAS

    pip = REMOTE_CODE_EXTRAS[method][0]
    assert pip in render_card(hf_ext.get_method(method), repo_id="tester/x").text
    assert pip in (Path(hf_ext.__file__).parent / method / remote_file).read_text()
    card_req = Requirement(pip.removeprefix("pip install ").strip("'"))
    extra = method.replace("_", "-")
    declared = [
        Requirement(r)
        for r in metadata.requires("hf_ext")
        if Requirement(r).name == package and Requirement(r).marker and Requirement(r).marker.evaluate({"extra": extra})
    ]
    assert declared and declared[0].specifier == card_req.specifier, (declared, card_req)


def test_card_names_the_pip_line_for_loading_without_hf_ext():
    from hf_ext.core.cards import core_requirement

    torch_req, transformers_req = core_requirement("torch", "?"), core_requirement("transformers", "?")
    import re

    # the lower bound first, as people write it (and as the README and requirements.txt do)
    assert re.fullmatch(r"torch>=[\d.]+,<[\d.]+", torch_req), torch_req
    assert re.fullmatch(r"transformers>=[\d.]+,<[\d.]+", transformers_req), transformers_req
    line = f"pip install '{torch_req}' '{transformers_req}'"
    assert line in render_card(SPEC, repo_id="tester/x").text  # a remote-code model
    # H2Tune needs hf_ext itself: the card says so instead of offering remote code
    h2 = render_card(hf_ext.get_method("h2tune"), repo_id="tester/h2").text
    assert line not in h2 and "HF_EXT_H2TUNE" in h2
    assert core_requirement("no-such-package", "fallback") == "fallback"


def _adapter_folder(root: Path, base_ref: str) -> None:
    (root / "client-0" / "adapter").mkdir(parents=True)
    (root / "client-0" / "adapter" / "adapter_config.json").write_text(
        '{"peft_type": "LORA", "base_model_name_or_path": "' + base_ref + '"}'
    )


def test_base_model_inferred_from_the_adapters(trained, tmp_path, monkeypatch):
    from hf_ext.core.cards import infer_base_models

    art = tmp_path / "hub-base"
    shutil.copytree(trained, art)
    _adapter_folder(art, "someone/base-llama")
    assert infer_base_models(art) == ["someone/base-llama"]
    card = render_artifact_card(SPEC, art, repo_id="tester/x")
    assert card.data.base_model == "someone/base-llama" and "Base model: `someone/base-llama`" in card.text
    # a record's own base_model wins over what the adapters say
    record = load_training_record(art)
    save_training_record(
        art, method="orca", base_model="other/base", metrics=record["metrics"], datasets=record["datasets"]
    )
    assert render_artifact_card(SPEC, art, repo_id="tester/x").data.base_model == "other/base"

    # a base built in code (a local folder) names no Hub base
    local = tmp_path / "local-base"
    shutil.copytree(trained, local)
    (tmp_path / "tiny").mkdir()
    _adapter_folder(local, str(tmp_path / "tiny"))
    assert infer_base_models(local) == []
    assert render_artifact_card(SPEC, local, repo_id="tester/x").data.base_model is None

    # the local cache of a real pretrained backbone maps to its Hub id
    monkeypatch.setenv("HF_EXT_SMOLLM2_DIR", str(tmp_path / "tiny"))
    assert infer_base_models(local) == ["HuggingFaceTB/SmolLM2-135M-Instruct"]
