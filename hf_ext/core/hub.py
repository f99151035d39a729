"""Hub artifacts: atomic saves, checkpoint verification, the push folder (model + card + Space) and the push itself.

- Saves ([`atomic_write_dir`]) swap a finished temporary folder with the artifact in one atomic exchange, so the
  path holds the old or the new complete artifact at every instant, and record the sha256 of every weight/table file
  in [`CHECKSUMS_FILE`]; [`verify_checkpoint`] checks them (and headers, sizes, `model_type`) before a load.
- Pushes upload an allow-list ([`PUSH_ALLOWED`], [`select_push_files`]): everything else (secrets, pickles, logs,
  hidden files, symlinks leaving the folder) is refused and listed.

Every registered model class writes safetensors, `config.json` with `auto_map` and its modeling code (see
[`~hf_ext.core.registry.register_method`]), so a pushed repo loads with `trust_remote_code=True` on a machine
without hf_ext, and with plain `AutoModel.from_pretrained` where hf_ext is imported.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import shutil
from pathlib import Path
from typing import Any

from .integrity import (  # noqa: F401 (re-exported: the integrity layer used to live here)
    CHECKSUMS_FILE,
    HASHED_SUFFIXES,
    CheckpointError,
    MissingChecksumsError,
    atomic_write_dir,
    clean_stale_saves,
    file_sha256,
    verify_checkpoint,
    verify_checksums,
    write_checksums,
)
from .registry import MethodSpec

SPACE_FILES = ("app.py", "README.md", "requirements.txt")


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


def write_space_folder(
    spec: MethodSpec,
    out_dir: str | os.PathLike,
    *,
    model_repo_id: str | None = None,
    wheel: str | os.PathLike | None = None,
) -> Path:
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
        named = f"./wheels/{Path(wheel).name}"
        if named not in (src / "requirements.txt").read_text():
            raise PushRefusedError(
                f"the Space's requirements.txt installs a different hf_ext wheel than {Path(wheel).name} (it must "
                f"name {named}); build the wheel of this hf_ext version or edit {src / 'requirements.txt'}"
            )
        (out / "wheels").mkdir(exist_ok=True)
        shutil.copy2(wheel, out / "wheels" / Path(wheel).name)
    if model_repo_id:
        card = SpaceCard.load(out / "README.md")
        card.data.models = [model_repo_id]
        card.save(out / "README.md")
    return out


# ---- what a push may upload -------------------------------------------------------------------------------------

# File names (any folder depth) that go into a model repo; everything else is refused and listed.
PUSH_ALLOWED = (
    # weights (safetensors only) and their index
    "*.safetensors",
    "model.safetensors.index.json",
    # configs and modeling code (remote code)
    "config.json",
    "generation_config.json",
    "*.py",
    # tokenizers and processors
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "chat_template.jinja",
    "chat_template.json",
    "preprocessor_config.json",
    "processor_config.json",
    # PEFT adapters (adapter_model.safetensors is matched above)
    "adapter_config.json",
    # sentence-transformers module files (FedE4RAG's retriever)
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    # the card, tables, and what hf_ext records about the artifact
    "README.md",
    "*.arrow",
    "*.parquet",
    "dataset_info.json",
    "dataset_dict.json",
    "state.json",
    "training_record.json",
    "metrics.json",  # a train command's summary (FedE4RAG, Proto-EVFL): numbers the record also holds
    CHECKSUMS_FILE,
    "client.json",
)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".dill", ".npy", ".npz", ".h5")


_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")


def check_repo_id(repo_id: str, flag: str = "--repo_id") -> str:
    """`repo_id` if it is a well-formed Hub id (`name` or `namespace/name`), else [`PushRefusedError`] naming `flag`.

    Refused: path parts (`..`, a leading `/`, more than one `/`), `--` / `..` inside a name, characters outside
    letters, digits, `-`, `_`, `.`, and names ending in `.git` — what `huggingface_hub` would reject later, or
    what could escape a folder when the id becomes a path.
    """
    if not isinstance(repo_id, str) or not _REPO_ID.fullmatch(repo_id):
        raise PushRefusedError(f"{flag} {repo_id!r} is not a Hub repo id (expected 'name' or 'namespace/name')")
    if any(bad in repo_id for bad in ("--", "..")) or repo_id.endswith((".git", "-", ".")):
        raise PushRefusedError(f"{flag} {repo_id!r} is not a Hub repo id ('--', '..', a trailing '.git' or '-')")
    return repo_id


class PushRefusedError(ValueError):
    """A push folder would hold nothing loadable (every file refused) or its source is not a folder."""


def select_push_files(artifact_dir: str | os.PathLike) -> tuple[list[str], list[tuple[str, str]]]:
    """Splits an artifact folder into what may be uploaded and what is refused (with the reason).

    Refused: hidden files and folders (`.env`, `.git`, `logs/.env`), pickles (`*.bin`, `*.pt`, `*.pkl`,
    `training_args.bin`, ...), symlinks that leave the folder, and any name not in [`PUSH_ALLOWED`] (`token`,
    `secrets.json`, `id_rsa`, stray CSVs, logs). A symlink that stays inside the folder is uploaded as the file it
    points to.

    Returns:
        `(allowed, refused)`: POSIX paths relative to the folder, sorted; `refused` pairs each path with why.
    """
    src = Path(artifact_dir)
    if not src.is_dir():
        raise PushRefusedError(f"{src} is not an artifact folder")
    root = src.resolve()
    allowed: list[str] = []
    refused: list[tuple[str, str]] = []

    def walk(folder: Path) -> None:
        for item in sorted(folder.iterdir()):
            rel = item.relative_to(src).as_posix()
            if item.name.startswith("."):
                refused.append((rel, "hidden file or folder"))
                continue
            if folder == src and item.name == "spaces":
                refused.append((rel, "the Space is built from spaces/<method>/, not the artifact"))
                continue
            if item.is_symlink():
                try:
                    target = item.resolve(strict=True)
                except (RuntimeError, OSError) as err:  # a loop (ELOOP) or a dangling link
                    loop = isinstance(err, RuntimeError) or getattr(err, "errno", None) == errno.ELOOP
                    raise PushRefusedError(
                        f"{src}: {rel} is a {'symlink loop' if loop else 'dangling symlink'} "
                        f"(-> {os.readlink(item)}); remove it and push again"
                    ) from None
                if root != target and root not in target.parents:
                    refused.append((rel, f"symlink leaving the artifact folder (-> {os.readlink(item)})"))
                    continue
                if item.is_dir():  # not followed: a link to an enclosing folder would recurse forever
                    refused.append((rel, "symlinked folder (not followed)"))
                    continue
            if item.is_dir():
                walk(item)
            elif not item.is_file():
                refused.append((rel, "not a regular file"))
            elif item.suffix.lower() in PICKLE_SUFFIXES:
                refused.append((rel, "pickle-capable format; hf_ext publishes safetensors only"))
            elif any(fnmatch.fnmatchcase(item.name, pattern) for pattern in PUSH_ALLOWED):
                allowed.append(rel)
            else:
                refused.append((rel, "not a weights/config/code/tokenizer/adapter/card/table file"))

    walk(src)
    return allowed, refused


def artifact_parts(artifact_dir: str | os.PathLike) -> list[Path]:
    """The parts of a multi-part artifact: a folder with no `config.json` of its own whose immediate subfolders are
    saved artifacts (FL-LLaMA's `client/` and `server/`, published together so a Space can load both); `[]` for an
    ordinary artifact (a `config.json` at its root) or a folder that is neither."""
    src = Path(artifact_dir)
    if not src.is_dir() or (src / "config.json").is_file():
        return []
    return sorted(
        p
        for p in src.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name != "spaces" and (p / "config.json").is_file()
    )


def build_push_folder(
    spec: MethodSpec,
    artifact_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    repo_id: str,
    allow_untrained: bool = False,
    wheel: str | os.PathLike | None = None,
    **card_kwargs,
) -> Path:
    """Writes the exact folder `hf-ext push` uploads: the allowed artifact files (see [`select_push_files`]), a
    `README.md` model card rendered from the artifact's training record (see
    [`~hf_ext.core.cards.render_artifact_card`]; without a record it is refused unless `allow_untrained`), and
    `spaces/<method>/` ready to push as a Gradio Space. Refused files are not copied (`hf-ext push` lists them with
    [`select_push_files`]); [`push_manifest`] lists what the folder uploads."""
    from .cards import render_artifact_card
    from .records import RECORD_FILE

    src = Path(artifact_dir)
    parts = artifact_parts(src)
    for folder in parts or [src]:  # every part is checked like a whole artifact
        verify_checkpoint(folder)
    allowed, _ = select_push_files(src)
    if not any(
        name.endswith((".safetensors", ".arrow", ".parquet")) or name.endswith("config.json") for name in allowed
    ):
        raise PushRefusedError(f"{src} holds no weights, tables or config.json that may be pushed")
    # the root's training record, else (a multi-part artifact) the first part's: each part saves the run's
    card_source = next((p for p in (src, *parts) if (p / RECORD_FILE).is_file()), src)
    card = render_artifact_card(spec, card_source, repo_id=repo_id, allow_untrained=allow_untrained, **card_kwargs)

    def write(tmp: Path) -> None:
        for rel in allowed:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / rel, tmp / rel)  # follows in-folder symlinks: the upload holds real files
        card.save(tmp / "README.md")
        write_space_folder(spec, tmp / "spaces" / spec.name, model_repo_id=repo_id, wheel=wheel)

    # The card changes README.md only (not hashed); the copied checksum file still describes the weights.
    return atomic_write_dir(out_dir, write, checksums=False)


def push_manifest(folder: str | os.PathLike, spec: MethodSpec) -> dict[str, list[str]]:
    """The exact files [`push_folder`] uploads from a push folder: `{"model": [...], "space": [...]}`."""
    folder = Path(folder)
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    space_prefix = f"spaces/{spec.name}/"
    return {
        "model": [f for f in files if not f.startswith("spaces/")],
        "space": [f[len(space_prefix) :] for f in files if f.startswith(space_prefix)],
    }


def push_folder(
    spec: MethodSpec,
    folder: str | os.PathLike,
    repo_id: str,
    *,
    space_repo_id: str | None = None,
    token: str | None = None,
    private: bool | None = None,
    commit_message: str | None = None,
) -> dict[str, str]:
    """Uploads a folder made by [`build_push_folder`]: the model repo, and the Space when `space_repo_id` is set.

    Uses `HfApi.create_repo` + `upload_folder`; the endpoint comes from `HF_ENDPOINT` as usual.
    """
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(token=token)
    folder = Path(folder)
    message = commit_message or f"Upload {spec.name} with hf_ext"
    files = push_manifest(folder, spec)
    # One explicit operation per listed file: the upload is exactly the printed list, nothing a pattern could add.
    api.create_repo(repo_id, private=private, exist_ok=True)
    ops = [CommitOperationAdd(path_in_repo=f, path_or_fileobj=str(folder / f)) for f in files["model"]]
    info = api.create_commit(repo_id=repo_id, operations=ops, commit_message=message)
    urls = {"model": str(info.commit_url)}
    if space_repo_id:
        api.create_repo(space_repo_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
        space = folder / "spaces" / spec.name
        ops = [CommitOperationAdd(path_in_repo=f, path_or_fileobj=str(space / f)) for f in files["space"]]
        info = api.create_commit(repo_id=space_repo_id, repo_type="space", operations=ops, commit_message=message)
        urls["space"] = str(info.commit_url)
    return urls
