"""Hub artifacts: atomic saves, checkpoint verification, the push folder (model + card + Space) and the push itself.

Every registered model class writes safetensors, `config.json` with `auto_map` and its modeling code (see
[`~hf_ext.core.registry.register_method`]), so a pushed repo loads with `trust_remote_code=True` on a machine
without hf_ext, and with plain `AutoModel.from_pretrained` where hf_ext is imported.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .registry import MethodSpec

SPACE_FILES = ("app.py", "README.md", "requirements.txt")


class CheckpointError(ValueError):
    """A saved artifact is missing a file, truncated or otherwise unreadable."""


def _check_safetensors(path: Path) -> None:
    """Reads the safetensors header and checks that the data section is complete (no torch involved)."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) < 8:
                raise CheckpointError(f"{path} is truncated: {size} bytes, not even a safetensors header")
            (header_len,) = struct.unpack("<Q", raw)
            if header_len > size - 8:
                raise CheckpointError(f"{path} is truncated or not a safetensors file (header claims {header_len} bytes)")
            header = json.loads(f.read(header_len))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path} has a corrupt safetensors header: {err}") from None
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    needed = 8 + header_len + (max(ends) if ends else 0)
    if size < needed:
        raise CheckpointError(f"{path} is truncated: {size} bytes on disk, the header needs {needed}")


def verify_checkpoint(path: str | os.PathLike) -> None:
    """Raises [`CheckpointError`] naming the problem if a local artifact folder is incomplete or corrupt.

    Hub ids (anything that is not a local folder) pass through untouched.

    Args:
        path (`str` or `os.PathLike`): the folder given to `from_pretrained`.
    """
    folder = Path(path)
    if not folder.is_dir():
        return
    config = folder / "config.json"
    if not config.is_file():
        raise CheckpointError(f"{folder} has no config.json: not a saved hf_ext artifact")
    try:
        json.loads(config.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{config} is not valid JSON: {err}") from None
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (folder / "model.safetensors").is_file():
        shards = ["model.safetensors"]
    elif any(folder.glob("*.bin")) or any(folder.glob("*.pt")):
        raise CheckpointError(f"{folder} holds pickle weights; hf_ext loads safetensors only")
    else:
        shards = []  # config-only artifacts (estimators, tables) have no weights file
    for shard in shards:
        if not (folder / shard).is_file():
            raise CheckpointError(f"{folder} is missing weights file {shard}")
        _check_safetensors(folder / shard)


def atomic_write_dir(out_dir: str | os.PathLike, write: Callable[[Path], Any]) -> Path:
    """Calls `write(tmp_dir)` and moves the result into place only when it succeeded.

    A crash or an exception mid-save leaves any previous artifact at `out_dir` untouched.
    """
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        write(tmp)
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def save_artifact(model: Any, out_dir: str | os.PathLike, spec: MethodSpec | None = None, **card_kwargs) -> Path:
    """Saves a model atomically: safetensors weights, config with `auto_map`, modeling code and (with `spec`) the
    rendered model card as `README.md`.

    Args:
        model (`PreTrainedModel` or any object with `save_pretrained`): what to save.
        out_dir (`str` or `os.PathLike`): destination folder; replaced only once the new save is complete.
        spec ([`MethodSpec`], *optional*): the method, to render the card.
        card_kwargs: passed to [`~hf_ext.core.cards.render_card`].
    """

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp)
        if spec is not None:
            from .cards import render_card

            render_card(spec, **card_kwargs).save(tmp / "README.md")

    return atomic_write_dir(out_dir, write)


def write_space_folder(spec: MethodSpec, out_dir: str | os.PathLike, *, model_repo_id: str | None = None,
                       wheel: str | os.PathLike | None = None) -> Path:
    """Copies `spaces/<method>/` into `out_dir`, pointing its front-matter `models:` at the pushed model repo; with
    `wheel`, copies the hf_ext wheel to `wheels/` (what the Space's requirements.txt installs)."""
    from huggingface_hub import SpaceCard

    src = spec.space_dir
    missing = [f for f in SPACE_FILES if not (src / f).is_file()]
    if missing:
        raise FileNotFoundError(f"Space folder {src} is missing {missing}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in SPACE_FILES:
        shutil.copy2(src / name, out / name)
    if wheel is not None:
        (out / "wheels").mkdir(exist_ok=True)
        shutil.copy2(wheel, out / "wheels" / Path(wheel).name)
    if model_repo_id:
        card = SpaceCard.load(out / "README.md")
        card.data.models = [model_repo_id]
        card.save(out / "README.md")
    return out


def build_push_folder(
    spec: MethodSpec, artifact_dir: str | os.PathLike, out_dir: str | os.PathLike, *, repo_id: str,
    allow_untrained: bool = False, wheel: str | os.PathLike | None = None, **card_kwargs
) -> Path:
    """Writes the exact folder `hf-ext push` uploads: the artifact files, a `README.md` model card rendered from the
    artifact's training record (see [`~hf_ext.core.cards.render_artifact_card`]; without a record it is refused
    unless `allow_untrained`), and `spaces/<method>/` ready to push as a Gradio Space."""
    from .cards import render_artifact_card

    verify_checkpoint(artifact_dir)
    src = Path(artifact_dir)
    card = render_artifact_card(spec, src, repo_id=repo_id, allow_untrained=allow_untrained, **card_kwargs)

    def write(tmp: Path) -> None:
        for item in src.iterdir():
            if item.name.startswith(".") or item.name == "spaces":
                continue
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, tmp / item.name)
        card.save(tmp / "README.md")
        write_space_folder(spec, tmp / "spaces" / spec.name, model_repo_id=repo_id, wheel=wheel)

    return atomic_write_dir(out_dir, write)


def push_folder(
    spec: MethodSpec, folder: str | os.PathLike, repo_id: str, *, space_repo_id: str | None = None,
    token: str | None = None, private: bool | None = None, commit_message: str | None = None,
) -> dict[str, str]:
    """Uploads a folder made by [`build_push_folder`]: the model repo, and the Space when `space_repo_id` is set.

    Uses `HfApi.create_repo` + `upload_folder`; the endpoint comes from `HF_ENDPOINT` as usual.
    """
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    folder = Path(folder)
    message = commit_message or f"Upload {spec.name} with hf_ext"
    api.create_repo(repo_id, private=private, exist_ok=True)
    info = api.upload_folder(repo_id=repo_id, folder_path=folder, ignore_patterns=["spaces/**"], commit_message=message)
    urls = {"model": str(info.commit_url)}
    if space_repo_id:
        api.create_repo(space_repo_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
        info = api.upload_folder(
            repo_id=space_repo_id, repo_type="space", folder_path=folder / "spaces" / spec.name, commit_message=message
        )
        urls["space"] = str(info.commit_url)
    return urls
