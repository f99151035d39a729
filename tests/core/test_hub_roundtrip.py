"""Every registered method's artifact goes to the test Hub and comes back by repo id, through `HF_ENDPOINT`:

- with hf_ext, through the method's own loader (`from_pretrained(repo_id)`, the estimator's or the table's);
- in a subprocess where `import hf_ext` fails (a meta-path blocker installed by `sitecustomize`), with plain
  transformers / PEFT / safetensors / datasets and `trust_remote_code=True`; the outputs must be identical, or the
  load must fail with an error naming what is missing (H2Tune's adapter, TinyAlign without faiss).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.hub_server import serving
from safetensors.numpy import load_file as load_np
from safetensors.numpy import save_file as save_np
from safetensors.torch import save_file

import hf_ext
from hf_ext.core.hub import build_push_folder, push_folder
from hf_ext.core.registry import list_methods

METHODS = [m.name for m in list_methods()]

BLOCKER = textwrap.dedent(
    """
    # installed by tests/core/test_hub_roundtrip.py: `import X` fails for X in $HF_EXT_TEST_BLOCK
    import os, sys
    from importlib.abc import MetaPathFinder

    class _Blocker(MetaPathFinder):
        blocked = {n for n in os.environ.get("HF_EXT_TEST_BLOCK", "").split(",") if n}

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.blocked:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
            return None

    sys.meta_path.insert(0, _Blocker())
    """
)

# What the child runs: `repo`, `inputs` (a safetensors file), `out` (where it writes its outputs) are given.
CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file
    job = json.loads(sys.argv[1])
    try:
        import hf_ext  # noqa: F401
        raise SystemExit("hf_ext must not be importable here")
    except ImportError:
        pass

    def flatten(out):
        flat = {}
        for key, value in out.items():
            if torch.is_tensor(value):
                flat[key] = value.detach().contiguous()
            elif isinstance(value, (tuple, list)):
                for i, v in enumerate(value):
                    if torch.is_tensor(v):
                        flat[f"{key}.{i}"] = v.detach().contiguous()
        return flat

    kind, repo = job["loader"], job["repo"]
    if kind == "auto":
        import transformers
        extra = {"subfolder": job["subfolder"]} if job.get("subfolder") else {}  # a part inside the repo
        model = getattr(transformers, job["auto"]).from_pretrained(repo, trust_remote_code=True, **extra).eval()
        with torch.no_grad():
            out = flatten(model(**load_file(job["inputs"])))
        out["__module__"] = torch.tensor([int(type(model).__module__.startswith("transformers_modules."))])
    elif kind == "peft":
        from peft import PeftModel
        from transformers import AutoConfig, AutoModelForCausalLM
        if job.get("base_subfolder_is_root"):
            base = AutoModelForCausalLM.from_pretrained(repo, trust_remote_code=True)
            model = PeftModel.from_pretrained(base, repo, subfolder=job["adapter_subfolder"])
        else:  # the base was built in code from its config with a fixed seed (an adapter repo holds no base weights)
            torch.manual_seed(job["base_seed"])
            base = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(repo))
            model = PeftModel.from_pretrained(base, repo)
        model.eval()
        with torch.no_grad():
            out = {"logits": model(**load_file(job["inputs"])).logits.contiguous()}
    elif kind == "gpmfs":
        from huggingface_hub import hf_hub_download
        from safetensors.numpy import load_file as load_np
        arrays = load_np(hf_hub_download(repo, "model.safetensors"))
        X = load_np(job["inputs"])["X"]
        label0 = np.sort(arrays["label_indices"][0][arrays["label_indices"][0] >= 0])
        out = {"global": torch.from_numpy(np.ascontiguousarray(X[:, np.sort(arrays["global_indices"])])),
               "label0": torch.from_numpy(np.ascontiguousarray(X[:, label0])),
               "W": torch.from_numpy(arrays["W"])}
    elif kind == "amplitudes":
        import datasets
        ds = datasets.load_dataset(repo, split="train").with_format("numpy")
        out = {k: torch.from_numpy(np.asarray(ds[k], dtype=np.float64)) for k in ("amplitude", "error", "alpha_prime")}
    save_file(out, job["out"])
    """
)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("roundtrip")
    with serving(tmp) as server:  # the client points at the loopback Hub (endpoint, online, private cache)
        server.tmp = tmp
        yield server


def _flatten(out) -> dict[str, torch.Tensor]:
    flat = {}
    for key, value in out.items():
        if torch.is_tensor(value):
            flat[key] = value.detach().contiguous()
        elif isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                if torch.is_tensor(v):
                    flat[f"{key}.{i}"] = v.detach().contiguous()
    return flat


def _run_child(hub, job: dict, block: tuple[str, ...] = ("hf_ext",)) -> subprocess.CompletedProcess:
    site = hub.tmp / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = dict(os.environ)
    env.update(
        HF_ENDPOINT=hub.url,
        HF_TOKEN="hf_fake",
        HF_HUB_OFFLINE="0",
        HF_DATASETS_OFFLINE="0",
        HF_EXT_TEST_BLOCK=",".join(block),
        HF_HOME=str(hub.tmp / f"hf_home_{job['repo'].replace('/', '_')}_{len(block)}"),
        PYTHONPATH=str(site),
    )  # replaces the checkout on the path: the child sees no hf_ext source either
    cwd = hub.tmp / "child_cwd"
    cwd.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(job)], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )


def _push(spec, folder: Path, repo_id: str) -> None:
    out = folder.parent / f"{folder.name}-upload"
    build_push_folder(spec, folder, out, repo_id=repo_id, allow_untrained=True)
    push_folder(spec, out, repo_id)


def _model_artifact(method: str, tmp: Path):
    spec = hf_ext.get_method(method)
    fx = spec.load("contract")()
    torch.manual_seed(0)
    artifact = fx.make_artifact(fx.make_config())
    folder = tmp / method
    fx.save_artifact(artifact, folder)
    return spec, fx, artifact, folder


def _assert_same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]), err_msg=key)


MODEL_METHODS = [m.name for m in list_methods() if m.kind == "model"]


@pytest.mark.parametrize("method", MODEL_METHODS)
def test_model_roundtrip_without_hf_ext(method, hub):
    spec, fx, artifact, folder = _model_artifact(method, hub.tmp)
    repo_id = f"tester/{method}"
    _push(spec, folder, repo_id)
    inputs = {k: v.contiguous() for k, v in dict(fx.example_inputs()).items() if torch.is_tensor(v)}
    save_file(inputs, hub.tmp / f"{method}-inputs.safetensors")
    reloaded = fx.load(repo_id).eval()  # the method's own loader, by repo id, through HF_ENDPOINT
    with torch.no_grad():
        want = _flatten(reloaded(**inputs))
        local = _flatten(artifact.eval()(**inputs))
    _assert_same({k: v.numpy() for k, v in want.items()}, {k: v.numpy() for k, v in local.items()})
    auto = next(iter(spec.auto_classes))
    job = {
        "loader": "auto",
        "auto": auto,
        "repo": repo_id,
        "inputs": str(hub.tmp / f"{method}-inputs.safetensors"),
        "out": str(hub.tmp / f"{method}-child.safetensors"),
    }
    # TBA's pose regressor shares its file with the DHNG; it must load without diffusers
    proc = _run_child(hub, job, block=("hf_ext", "diffusers") if method == "tba" else ("hf_ext",))
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = load_np(job["out"])
    assert got.pop("__module__")[0] == 1, "the model must come from the repo's remote code"
    _assert_same(got, {k: v.numpy() for k, v in want.items()})


def test_proto_evfl_party_encoders_roundtrip_without_hf_ext(hub):
    """The federation artifact holds each party's encoder in `parties/party-<k>/`: loadable by repo id and
    subfolder, with hf_ext (`load_federation`, what the Space uses) and without it (the subfolder's remote code)."""
    from hf_ext.proto_evfl.configuration_proto_evfl import ProtoEvflConfig, ProtoEvflPartyConfig
    from hf_ext.proto_evfl.inference import load_federation, save_federation
    from hf_ext.proto_evfl.modeling_proto_evfl import ProtoEvflForClassification, ProtoEvflPartyModel

    spec = hf_ext.get_method("proto_evfl")
    torch.manual_seed(0)
    parties = [ProtoEvflPartyModel(ProtoEvflPartyConfig(party_index=k)).eval() for k in range(2)]
    folder = save_federation(ProtoEvflForClassification(ProtoEvflConfig()), parties, hub.tmp / "federation", spec)
    _push(spec, folder, "tester/proto-evfl-federation")
    inputs = {"features": torch.randn(5, 32)}
    save_file(inputs, hub.tmp / "party-inputs.safetensors")
    _, loaded = load_federation("tester/proto-evfl-federation")
    with torch.no_grad():
        want = {k: v.numpy() for k, v in _flatten(loaded[1](**inputs)).items()}
        _assert_same(want, {k: v.numpy() for k, v in _flatten(parties[1](**inputs)).items()})
    job = {
        "loader": "auto",
        "auto": "AutoModel",
        "repo": "tester/proto-evfl-federation",
        "subfolder": "parties/party-1",
        "inputs": str(hub.tmp / "party-inputs.safetensors"),
        "out": str(hub.tmp / "party-child.safetensors"),
    }
    proc = _run_child(hub, job)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = load_np(job["out"])
    assert got.pop("__module__")[0] == 1, "the party encoder must come from the repo's remote code"
    _assert_same(got, want)


def test_codebc_base_and_adapter_roundtrip_without_hf_ext(hub):
    spec, fx, artifact, folder = _model_artifact("codebc", hub.tmp)
    _push(spec, folder, "tester/codebc")
    inputs = fx.example_inputs()
    save_file(inputs, hub.tmp / "codebc-inputs.safetensors")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    # as the card's "How to use": the base from the repo root, the adapter from its subfolder
    reloaded = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained("tester/codebc"), "tester/codebc", subfolder="adapter"
    )
    want = fx.outputs(reloaded, inputs)["logits"]
    np.testing.assert_array_equal(want.numpy(), fx.outputs(artifact, inputs)["logits"].numpy())
    job = {
        "loader": "peft",
        "repo": "tester/codebc",
        "base_subfolder_is_root": True,
        "adapter_subfolder": "adapter",
        "inputs": str(hub.tmp / "codebc-inputs.safetensors"),
        "out": str(hub.tmp / "codebc-child.safetensors"),
    }
    proc = _run_child(hub, job)
    assert proc.returncode == 0, proc.stderr[-4000:]
    np.testing.assert_array_equal(load_np(job["out"])["logits"], want.numpy())


def test_h2tune_adapter_refused_by_plain_peft(hub):
    """Plain PEFT must not silently build an ordinary LoRA from an H2Tune adapter (it did: logits off by 0.42)."""
    from hf_ext.h2tune.testing import BASE_SEED

    spec, fx, artifact, folder = _model_artifact("h2tune", hub.tmp)
    assert json.loads((folder / "adapter_config.json").read_text())["peft_type"] == "HF_EXT_H2TUNE"
    _push(spec, folder, "tester/h2tune")
    inputs = fx.example_inputs()
    save_file(inputs, hub.tmp / "h2tune-inputs.safetensors")
    reloaded = fx.load("tester/h2tune")  # with hf_ext: by repo id, identical
    assert type(reloaded.peft_config["default"]).__name__ == "H2TuneConfig"
    np.testing.assert_array_equal(
        fx.outputs(reloaded, inputs)["logits"].numpy(), fx.outputs(artifact, inputs)["logits"].numpy()
    )
    job = {
        "loader": "peft",
        "repo": "tester/h2tune",
        "base_seed": BASE_SEED,
        "inputs": str(hub.tmp / "h2tune-inputs.safetensors"),
        "out": str(hub.tmp / "h2tune-child.safetensors"),
    }
    proc = _run_child(hub, job)
    assert proc.returncode != 0, "plain PEFT loaded an H2Tune adapter (it would be an ordinary LoRA)"
    assert "KeyError: 'HF_EXT_H2TUNE'" in proc.stderr, proc.stderr[-3000:]
    assert not Path(job["out"]).exists()


def test_tinyalign_without_faiss_names_the_pip_line(hub):
    spec, fx, artifact, folder = _model_artifact("tinyalign", hub.tmp)
    _push(spec, folder, "tester/tinyalign-nofaiss")
    inputs = {k: v.contiguous() for k, v in dict(fx.example_inputs()).items() if torch.is_tensor(v)}
    save_file(inputs, hub.tmp / "ta-inputs.safetensors")
    job = {
        "loader": "auto",
        "auto": "AutoModelForImageTextToText",
        "repo": "tester/tinyalign-nofaiss",
        "inputs": str(hub.tmp / "ta-inputs.safetensors"),
        "out": str(hub.tmp / "ta-child.safetensors"),
    }
    proc = _run_child(hub, job, block=("hf_ext", "faiss"))
    assert proc.returncode != 0
    assert "pip install 'faiss-cpu>=1.15.1,<1.16'" in proc.stderr, proc.stderr[-3000:]


def test_gpmfs_selector_roundtrip(hub):
    spec = hf_ext.get_method("gpmfs")
    fx = spec.load("contract")()
    selector = fx.fit(fx.make_artifact(fx.make_config()))
    folder = hub.tmp / "gpmfs"
    fx.save_artifact(selector, folder)
    _push(spec, folder, "tester/gpmfs")
    X = np.ascontiguousarray(fx.example_inputs())
    reloaded = type(selector).from_pretrained("tester/gpmfs")  # the estimator's own loader, by repo id
    want = fx.outputs(reloaded, X)
    _assert_same(
        {k: want[k] for k in ("global", "label0", "W")},
        {k: v for k, v in fx.outputs(selector, X).items() if k in ("global", "label0", "W")},
    )
    save_np({"X": X}, hub.tmp / "gpmfs-inputs.safetensors")
    job = {
        "loader": "gpmfs",
        "repo": "tester/gpmfs",
        "inputs": str(hub.tmp / "gpmfs-inputs.safetensors"),
        "out": str(hub.tmp / "gpmfs-child.safetensors"),
    }
    proc = _run_child(hub, job)
    assert proc.returncode == 0, proc.stderr[-4000:]
    _assert_same(load_np(job["out"]), {k: np.asarray(want[k]) for k in ("global", "label0", "W")})


def test_amplitude_table_roundtrip(hub):
    from huggingface_hub import snapshot_download

    spec = hf_ext.get_method("amplitudes")
    fx = spec.load("contract")()
    table = fx.make_artifact(fx.make_config())
    table.push_to_hub("tester/amplitudes")
    folder = snapshot_download("tester/amplitudes", repo_type="dataset")
    reloaded = type(table).from_pretrained(folder)  # the table's own loader on the downloaded repo
    inputs = fx.example_inputs()
    _assert_same(fx.outputs(reloaded, inputs), fx.outputs(table, inputs))
    job = {"loader": "amplitudes", "repo": "tester/amplitudes", "out": str(hub.tmp / "amp-child.safetensors")}
    proc = _run_child(hub, job)
    assert proc.returncode == 0, proc.stderr[-4000:]
    want = table.dataset.with_format("numpy")
    _assert_same(
        load_np(job["out"]), {k: np.asarray(want[k], dtype=np.float64) for k in ("amplitude", "error", "alpha_prime")}
    )


def test_revision_pins_an_older_commit(hub, tmp_path):
    """`revision=<sha>` serves that commit's files after a newer push (the resolve and info routes honour it)."""
    from huggingface_hub import HfApi, hf_hub_download

    api = HfApi()
    api.create_repo("tester/rev", exist_ok=True)
    (tmp_path / "a.txt").write_text("v1")
    first = api.upload_folder(repo_id="tester/rev", folder_path=tmp_path).oid
    (tmp_path / "a.txt").write_text("v2")
    api.upload_folder(repo_id="tester/rev", folder_path=tmp_path)
    assert Path(hf_hub_download("tester/rev", "a.txt")).read_text() == "v2"
    assert Path(hf_hub_download("tester/rev", "a.txt", revision=first)).read_text() == "v1"
    assert [s.rfilename for s in api.model_info("tester/rev", revision=first).siblings] == ["a.txt"]
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError

    with pytest.raises(EntryNotFoundError):
        hf_hub_download("tester/rev", "missing.txt")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("tester/nope", "a.txt")


def test_every_method_has_a_roundtrip():
    covered = set(MODEL_METHODS) | {"codebc", "h2tune", "gpmfs", "amplitudes"}
    assert covered == set(METHODS), f"no Hub round trip for {set(METHODS) - covered}"


def test_tba_dhng_without_diffusers_names_the_pip_line(hub):
    """The DHNG shares its modeling file with the victim; without diffusers it fails naming the exact pip line."""
    from hf_ext.core.hub import save_artifact
    from hf_ext.tba.modeling_tba import TbaDhngModel
    from hf_ext.tba.testing import tiny_dhng_config, tiny_images

    spec = hf_ext.get_method("tba")
    torch.manual_seed(0)
    folder = save_artifact(TbaDhngModel(tiny_dhng_config()), hub.tmp / "tba-dhng")
    _push(spec, folder, "tester/tba-dhng")
    save_file({"pixel_values": tiny_images()["pixel_values"].contiguous()}, hub.tmp / "dhng-inputs.safetensors")
    job = {
        "loader": "auto",
        "auto": "AutoModel",
        "repo": "tester/tba-dhng",
        "inputs": str(hub.tmp / "dhng-inputs.safetensors"),
        "out": str(hub.tmp / "dhng-child.safetensors"),
    }
    proc = _run_child(hub, job, block=("hf_ext", "diffusers"))
    assert proc.returncode != 0
    assert "pip install 'diffusers>=0.42.1,<0.43'" in proc.stderr, proc.stderr[-3000:]
