"""The released H2Tune artifact: one client's base decoder plus its H2Tune adapter in one pushable folder.

Layout (what `hf-ext push h2tune` expects: a `config.json` and safetensors at the root):

```
artifact/
  config.json, model.safetensors   the client's base decoder, unmodified by the adapter
  adapter/                         adapter_config.json (peft_type HF_EXT_H2TUNE) + adapter_model.safetensors
  client.json                      the client's spec (family, depth, width, rank, task)
  training_record.json             written by the reproduction (what the card is rendered from)
  hf_ext_checksums.json            sha256 of every safetensors file (adapter/ has its own too)
```

The adapter sits in `adapter/`, not beside the base's `config.json`: transformers would otherwise attach it while
loading the base, and `PeftModel` would add it a second time. Load with

```python
import hf_ext  # maps peft_type HF_EXT_H2TUNE to H2TuneConfig (plain PEFT refuses it with a KeyError)
base = AutoModelForCausalLM.from_pretrained(folder_or_repo)
model = PeftModel.from_pretrained(base, folder_or_repo, subfolder="adapter")  # or f"{folder}/adapter"
```

Both the root and `adapter/` hold an `hf_ext_checksums.json`; loading the adapter verifies its own (see `config.py`),
[`load_release`] verifies both.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

BASE_IN_ROOT = "the base decoder in this folder's root (config.json + model.safetensors)"


def save_release(peft_model, out_dir: str | Path, client_spec: dict | None = None) -> Path:
    """Writes base (root) + adapter (`adapter/`) of `peft_model` to `out_dir` atomically (see the module docstring).

    Args:
        peft_model (`PeftModel`): a model with an H2Tune (or plain LoRA) adapter named "default".
        out_dir (`str` or `Path`): the artifact folder (replaced as a whole, never half-written).
        client_spec (`dict`, *optional*): written as `client.json`.
    """
    from hf_ext.core.hub import atomic_write_dir

    def write(tmp: Path) -> None:
        model = copy.deepcopy(peft_model)
        model.peft_config["default"].base_model_name_or_path = None
        model.save_pretrained(tmp / "adapter")
        base = model.unload()  # the base decoder without the LoRA wrappers (weights untouched: nothing merged)
        base.name_or_path = ""
        base.save_pretrained(tmp)
        if client_spec is not None:
            (tmp / "client.json").write_text(json.dumps(client_spec, indent=2))

    return atomic_write_dir(out_dir, write)


def release_from_client(client_folder: str | Path, out_dir: str | Path) -> Path:
    """The release layout from a client folder saved by `H2TuneClient.save_artifact` (`base/`, `adapter/`,
    `client.json`): base files to the root, the adapter to `adapter/`; atomic, checksummed."""
    import shutil

    from hf_ext.core.hub import CHECKSUMS_FILE, atomic_write_dir

    src = Path(client_folder)
    for part in ("base/config.json", "adapter/adapter_config.json"):
        if not (src / part).is_file():
            raise FileNotFoundError(f"{src} has no {part}: not a saved H2Tune client (H2TuneClient.save_artifact)")

    def write(tmp: Path) -> None:
        for item in (src / "base").iterdir():
            if item.is_file() and item.name not in ("README.md", "training_record.json", CHECKSUMS_FILE):
                shutil.copyfile(item, tmp / item.name)
        shutil.copytree(src / "adapter", tmp / "adapter", ignore=shutil.ignore_patterns("training_record.json"))
        config = json.loads((tmp / "adapter" / "adapter_config.json").read_text())
        config["base_model_name_or_path"] = None  # the base is this folder's root, not a path on the saving machine
        (tmp / "adapter" / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
        if (src / "client.json").is_file():
            shutil.copyfile(src / "client.json", tmp / "client.json")

    return atomic_write_dir(out_dir, write)


def load_release(folder: str | Path, *, verify_checksums: bool = True):
    """The `PeftModel` saved by [`save_release`] (base from the root, adapter from `adapter/`).

    Args:
        folder (`str` or `Path`): the release folder.
        verify_checksums (`bool`, defaults to `True`): check the folder's `hf_ext_checksums.json` (base weights and
            adapter) and the adapter's own before loading; a missing or mismatching one is a
            [`~hf_ext.core.hub.CheckpointError`]. `False` is the explicit opt-out.
    """
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    import hf_ext.h2tune  # noqa: F401  (registers the peft_type)
    from hf_ext.core.hub import verify_checksums as verify
    from hf_ext.core.integrity import CHECKSUMS_FILE, MissingChecksumsError

    folder = Path(folder)
    if verify_checksums and not verify(folder):
        raise MissingChecksumsError(
            f"H2Tune release {folder} has no {CHECKSUMS_FILE}, so its integrity cannot be checked: re-save it "
            "with hf_ext (save_release / release_from_client), or load it unchecked with verify_checksums=False"
        )
    base = AutoModelForCausalLM.from_pretrained(folder)
    return PeftModel.from_pretrained(base, folder / "adapter", verify_checksums=verify_checksums)


def save_adapter(peft_model, out_dir: str | Path) -> Path:
    """`peft_model.save_pretrained(out_dir)`, atomically: `out_dir` holds the previous complete adapter or the new
    one, never a half-written folder (a kill mid-save leaves the old one), with its `hf_ext_checksums.json`."""
    from hf_ext.core.hub import atomic_write_dir

    return atomic_write_dir(out_dir, lambda tmp: peft_model.save_pretrained(tmp))


__all__ = ["load_release", "release_from_client", "save_adapter", "save_release"]
