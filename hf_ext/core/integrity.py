"""Integrity of saved artifacts: sha256 checksums of every weight / table file, checkpoint verification, and atomic
folder saves. The lowest layer of `hf_ext.core` (it imports nothing else from hf_ext).

- [`write_checksums`] records the sha256 of every weight/table file in [`CHECKSUMS_FILE`]; [`verify_checksums`] and
  [`verify_checkpoint`] check them before a load. Checksums are **mandatory**: a folder without [`CHECKSUMS_FILE`]
  is an error unless the caller opts out explicitly (`require=False`, or `hf_ext_verify_checksums=False` in a
  registered class's `from_pretrained`).
- [`atomic_write_dir`] swaps a finished temporary folder with the artifact in one atomic exchange, so the path holds
  the old or the new complete artifact at every instant.
"""

from __future__ import annotations

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


class MissingChecksumsError(CheckpointError):
    """An artifact folder has no [`CHECKSUMS_FILE`], so its weights cannot be verified."""


def verify_checksums(folder: str | os.PathLike, *, require: bool = True) -> bool:
    """Checks every file listed in [`CHECKSUMS_FILE`] exists and has its recorded sha256.

    Args:
        folder (`str` or `os.PathLike`): the artifact folder.
        require (`bool`, *optional*, defaults to `True`): a missing [`CHECKSUMS_FILE`] raises
            [`MissingChecksumsError`]; with `require=False` (an explicit opt-out, for folders written by other
            tools) it returns `False` instead.

    Returns `True` when every listed file matches; raises [`CheckpointError`] naming the first bad file otherwise.
    """
    folder = Path(folder)
    manifest = folder / CHECKSUMS_FILE
    if not manifest.is_file():
        if require:
            raise MissingChecksumsError(
                f"{folder} has no {CHECKSUMS_FILE}: its weights cannot be verified (save it with hf_ext, or opt out "
                f"explicitly: from_pretrained(..., hf_ext_verify_checksums=False) / verify_checksums(require=False))"
            )
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


def verify_checkpoint(
    path: str | os.PathLike, *, model_type: str | None = None, require_checksums: bool = True
) -> None:
    """Raises [`CheckpointError`] naming the problem if a local artifact folder is incomplete or corrupt.

    Checks `config.json` (present, valid JSON, and `model_type` equal to `model_type` when given), the safetensors
    headers and sizes, and the sha256 of every weight/table file recorded in [`CHECKSUMS_FILE`]. Hub ids (anything
    that is not a local folder) pass through untouched.

    Args:
        path (`str` or `os.PathLike`): the folder given to `from_pretrained`.
        model_type (`str`, *optional*): the `model_type` the loading class expects; another method's (or
            architecture's) `config.json` is then an error instead of a randomly initialised model.
        require_checksums (`bool`, *optional*, defaults to `True`): a folder without [`CHECKSUMS_FILE`] is an
            error ([`MissingChecksumsError`]); `False` is the explicit opt-out.
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
    verify_checksums(folder, require=require_checksums)


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
