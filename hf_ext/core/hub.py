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

import fnmatch
import hashlib
import json
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .registry import MethodSpec

SPACE_FILES = ("app.py", "README.md", "requirements.txt")

CHECKSUMS_FILE = "hf_ext_checksums.json"
# Files whose bytes are hashed at save time and checked on load: weights and tables.
HASHED_SUFFIXES = (".safetensors", ".arrow", ".parquet")


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
                raise CheckpointError(
                    f"{path} is truncated or not a safetensors file (header claims {header_len} bytes)"
                )
            header = json.loads(f.read(header_len))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path} has a corrupt safetensors header: {err}") from None
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    needed = 8 + header_len + (max(ends) if ends else 0)
    if size < needed:
        raise CheckpointError(f"{path} is truncated: {size} bytes on disk, the header needs {needed}")


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _hashed_files(folder: Path) -> list[str]:
    """Weight and table files under `folder` (POSIX paths relative to it), hidden entries skipped."""
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file() or path.is_symlink():
            continue
        if path.suffix in HASHED_SUFFIXES:
            out.append(rel.as_posix())
    return out


def write_checksums(folder: str | os.PathLike) -> Path:
    """Writes [`CHECKSUMS_FILE`]: the sha256 of every weight / table file of an artifact folder.

    `verify_checkpoint` recomputes them on load, so flipped or truncated bytes and deleted files (a TinyAlign bank,
    an adapter, an Arrow table) are errors before any tensor is read. Called by [`atomic_write_dir`] on the finished
    temporary folder and by every registered model class's `save_pretrained`.
    """
    folder = Path(folder)
    files = {rel: file_sha256(folder / rel) for rel in _hashed_files(folder)}
    text = json.dumps({"algorithm": "sha256", "files": files}, indent=2, sort_keys=True) + "\n"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{CHECKSUMS_FILE}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, folder / CHECKSUMS_FILE)
    return folder / CHECKSUMS_FILE


def verify_checksums(folder: str | os.PathLike) -> bool:
    """Checks every file listed in [`CHECKSUMS_FILE`] exists and has its recorded sha256.

    Returns `False` when the folder has no checksum file (an artifact saved before checksums, or by other tools),
    `True` when every listed file matches; raises [`CheckpointError`] naming the first bad file otherwise.
    """
    folder = Path(folder)
    manifest = folder / CHECKSUMS_FILE
    if not manifest.is_file():
        return False
    try:
        files = json.loads(manifest.read_text())["files"]
        if not isinstance(files, dict):
            raise TypeError
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        raise CheckpointError(
            f"{manifest} is corrupt: expected {{'algorithm': 'sha256', 'files': {{path: hex}}}}"
        ) from None
    missing = sorted(rel for rel in files if not (folder / rel).is_file())
    if missing:
        raise CheckpointError(f"{folder} is missing {missing} (listed in {CHECKSUMS_FILE}): incomplete artifact")
    for rel, expected in sorted(files.items()):
        got = file_sha256(folder / rel)
        if got != expected:
            raise CheckpointError(
                f"{folder / rel} is corrupt: sha256 {got[:12]}… does not match the "
                f"{expected[:12]}… recorded in {CHECKSUMS_FILE} when it was saved"
            )
    return True


def verify_checkpoint(path: str | os.PathLike, *, model_type: str | None = None) -> None:
    """Raises [`CheckpointError`] naming the problem if a local artifact folder is incomplete or corrupt.

    Checks `config.json` (present, valid JSON, and `model_type` equal to `model_type` when given), the safetensors
    headers and sizes, and the sha256 of every weight/table file recorded in [`CHECKSUMS_FILE`]. Hub ids (anything
    that is not a local folder) pass through untouched.

    Args:
        path (`str` or `os.PathLike`): the folder given to `from_pretrained`.
        model_type (`str`, *optional*): the `model_type` the loading class expects; another method's (or
            architecture's) `config.json` is then an error instead of a randomly initialised model.
    """
    folder = Path(path)
    if not folder.is_dir():
        return
    config = folder / "config.json"
    if not config.is_file():
        raise CheckpointError(f"{folder} has no config.json: not a saved hf_ext artifact")
    try:
        config_dict = json.loads(config.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{config} is not valid JSON: {err}") from None
    if model_type is not None and isinstance(config_dict, dict) and config_dict.get("model_type") != model_type:
        raise CheckpointError(
            f"{config} has model_type={config_dict.get('model_type')!r}, but this class loads "
            f"model_type={model_type!r}: another model's artifact"
        )
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
    verify_checksums(folder)


# ---- atomic directory saves ------------------------------------------------------------------------------------

_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swaps two paths (Linux `renameat2(RENAME_EXCHANGE)`, macOS `renamex_np(RENAME_SWAP)`); returns
    `False` where the platform or file system cannot, so the caller falls back to two renames."""
    import ctypes
    import errno
    import sys

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
            rc = libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), _RENAME_EXCHANGE)  # -100: AT_FDCWD
        elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
            rc = libc.renamex_np(os.fsencode(a), os.fsencode(b), 0x2)  # RENAME_SWAP
        else:
            return False
    except OSError:
        return False
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(err, f"cannot swap {a} and {b}: {os.strerror(err)}")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # a save of this very process (another thread) may be in flight
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_saves(out_dir: str | os.PathLike) -> list[Path]:
    """Removes what a killed save of `out_dir` left beside it (`.<name>.tmp-*`, `.<name>.old-*`).

    A leftover of a save whose process is still alive is left alone (a concurrent save). An `.old-*` copy is the
    complete previous artifact, so when `out_dir` itself is missing (a save killed between the two renames of the
    fallback path) it is moved back instead of deleted. Returns the paths it removed or restored.
    """
    out = Path(out_dir)
    if not out.parent.is_dir():
        return []
    pattern = re.compile(rf"\.{re.escape(out.name)}\.(tmp|old)-(?:(\d+)-)?.*")
    done = []
    for item in sorted(out.parent.iterdir()):
        m = pattern.fullmatch(item.name)
        if m is None:
            continue
        kind, pid = m.group(1), m.group(2)
        if kind == "old" and pid is None:  # the old `.name.old-PID` spelling
            pid = item.name.rsplit("-", 1)[-1] if item.name.rsplit("-", 1)[-1].isdigit() else None
        if pid is not None and _pid_alive(int(pid)):
            continue
        if kind == "old" and not os.path.lexists(out):
            os.replace(item, out)
        elif item.is_dir() and not item.is_symlink():
            shutil.rmtree(item, ignore_errors=True)
        else:
            item.unlink(missing_ok=True)
        done.append(item)
    return done


def atomic_write_dir(out_dir: str | os.PathLike, write: Callable[[Path], Any], *, checksums: bool = True) -> Path:
    """Calls `write(tmp_dir)` and swaps the result into place only when it succeeded.

    At every instant `out_dir` holds either the previous complete artifact or the new complete one: the finished
    temporary folder and `out_dir` are exchanged in one atomic `renameat2(RENAME_EXCHANGE)` (Linux; `RENAME_SWAP`
    on macOS), after which the temporary name holds the old artifact and is deleted. Where the file system cannot
    exchange, two renames are used and a save killed between them is repaired by the next save of the same path
    ([`clean_stale_saves`] moves the old copy back). Leftovers of killed saves are removed before each save.

    Args:
        out_dir (`str` or `os.PathLike`): the artifact folder.
        write (`Callable[[Path], Any]`): fills the (empty) temporary folder.
        checksums (`bool`, *optional*, defaults to `True`): write [`CHECKSUMS_FILE`] for the finished folder.
    """
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_saves(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    try:
        write(tmp)
        if checksums:
            write_checksums(tmp)
        if not os.path.lexists(out):
            os.replace(tmp, out)
            return out
        if not _exchange(tmp, out):
            old = out.with_name(f".{out.name}.old-{os.getpid()}-{tmp.name.rsplit('-', 1)[-1]}")
            os.replace(out, old)
            try:
                os.replace(tmp, out)  # a kill right here is repaired by the next save (clean_stale_saves)
            except BaseException:
                os.replace(old, out)
                raise
            tmp = old
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(tmp, ignore_errors=True)  # now the previous artifact
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
    CHECKSUMS_FILE,
    "client.json",
)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".dill", ".npy", ".npz", ".h5")


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
                target = item.resolve()
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
