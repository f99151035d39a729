"""Hub artifact of a fitted [`GPMFSSelector`]: `config.json` + `model.safetensors`, and its use on `datasets`.

Layout of a saved folder (no pickle anywhere):
- `config.json`: the [`GPMFSConfig`] fields, `model_type = "hf_ext_gpmfs"`, and a `"fitted"` block (format version,
  `n_features_in`, `n_labels`, feature names, budget, personal cap, label-specific strength, objective history,
  and `weights_sha256`, the hash of `model.safetensors`, checked on load).
- `model.safetensors`: `W` (d x q), `intercept` (q), `ranking` (d), `global_indices`, `label_indices` and
  `personal_indices` (q x max size, padded with -1), `constant_features`.

A save writes both files into a fresh sibling folder and swaps it with the old folder in one step ([`swap_dir`]),
so a save killed at any instant leaves the old or the new complete artifact, never new weights with an old config.

Paper: [GPMFS](https://arxiv.org/abs/2504.12740).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hf_ext.core.integrity import CheckpointError, atomic_write_dir, clean_stale_saves, file_sha256
from hf_ext.core.integrity import verify_checksums as verify_checksums_file

from .config import MODEL_TYPE, GPMFSConfig

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
FORMAT_VERSION = 1


# A test hook: called with the name of each step of a save ("written", "swapped", "cleaned") so the kill-during-save
# test can stop a subprocess exactly at every step boundary as well as at random instants.
_SAVE_HOOK: Callable[[str], None] | None = None
ARTIFACT_FILES = (CONFIG_NAME, WEIGHTS_NAME)
# Files a save may replace in an existing folder: the artifact's own, plus what hf_ext.core writes beside them.
_REPLACEABLE = set(ARTIFACT_FILES) | {
    "README.md",
    "training_record.json",
    ".gitattributes",
    "selection.json",
    "hf_ext_checksums.json",
}


def _hook(step: str) -> None:
    if _SAVE_HOOK is not None:
        _SAVE_HOOK(step)


def _fsync_tree(folder: Path) -> None:
    for f in folder.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap_dir(out_dir: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Writes a whole artifact folder so that `out_dir` holds the old or the new complete artifact at every instant.

    `write(tmp)` fills a fresh sibling folder; it is fsynced, then swapped in by
    [`~hf_ext.core.hub.atomic_write_dir`] (one `renameat2(RENAME_EXCHANGE)`; where the exchange is unsupported two
    renames, whose one-step window is repaired by the next save or load). Leftovers of killed saves are removed by
    the next save.

    Raises:
        ValueError: `out_dir` is a file, or a folder holding files that are not part of an artifact (they would be
            lost by the swap).
    """
    out = Path(out_dir).absolute()
    if out.exists():
        if not out.is_dir():
            raise ValueError(f"save_directory {out} is a file; pass a folder")
        foreign = sorted(p.name for p in out.iterdir() if p.name not in _REPLACEABLE)
        if foreign:
            raise ValueError(
                f"save_directory {out} holds files that are not part of a GPMFS artifact "
                f"({foreign[:5]}); save into an empty or new folder"
            )

    def write_synced(tmp: Path) -> None:
        write(tmp)
        _fsync_tree(tmp)
        _hook("written")

    # the config also holds the weights' own SHA-256; the checksum file is what every hf_ext artifact carries
    atomic_write_dir(out, write_synced)
    _hook("swapped")
    _hook("cleaned")
    return out


def _pad(rows: list[np.ndarray]) -> np.ndarray:
    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), width), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def _unpad(matrix: np.ndarray) -> list[np.ndarray]:
    return [row[row >= 0].astype(np.int64) for row in matrix]


def save_pretrained(selector, save_directory: str | os.PathLike, extra_files: dict[str, str] | None = None) -> None:
    """Saves a fitted [`GPMFSSelector`] to `save_directory` (created if needed) in one atomic directory swap.

    Args:
        selector ([`GPMFSSelector`]): a fitted selector.
        save_directory (`str` or `os.PathLike`): target folder (an existing artifact there is replaced whole).
        extra_files (`dict[str, str]`, *optional*): more text files written in the same swap (e.g. the
            `selection.json` report of `hf-ext train gpmfs`); names must be in the replaceable set.
    """
    bad = sorted(set(extra_files or {}) - (_REPLACEABLE - set(ARTIFACT_FILES)))
    if bad:
        raise ValueError(f"extra_files: {bad} are not allowed; use {sorted(_REPLACEABLE - set(ARTIFACT_FILES))}")
    from safetensors.numpy import save_file
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(selector, "W_")
    names = getattr(selector, "feature_names_in_", None)
    config = selector.config.to_dict()
    config["fitted"] = {
        "format_version": FORMAT_VERSION,
        "n_features_in": int(selector.n_features_in_),
        "n_labels": int(selector.n_labels_),
        "feature_names_in": None if names is None else [str(n) for n in names],
        "budget": int(selector.budget_),
        "k_personal": int(selector.k_personal_),
        "n_iter": int(selector.n_iter_),
        "mu": float(selector.mu_),
        "label_specific_strength": float(selector.label_specific_strength_),
        "objective_history": [float(v) for v in selector.objective_history_],
    }
    tensors = {
        "W": np.ascontiguousarray(selector.W_, dtype=np.float64),
        "intercept": np.ascontiguousarray(selector.intercept_, dtype=np.float64),
        "ranking": selector.ranking_.astype(np.int64),
        "global_indices": selector.global_indices_.astype(np.int64),
        "label_indices": _pad(selector.label_indices_),
        "personal_indices": _pad(selector.personal_indices_),
        "constant_features": np.asarray(selector.constant_features_, dtype=np.int64),
    }

    def write(tmp: Path) -> None:
        save_file(tensors, str(tmp / WEIGHTS_NAME), metadata={"format": "np"})
        # The config names the hash of the weights written beside it: a load checks that they belong together.
        config["fitted"]["weights_sha256"] = file_sha256(tmp / WEIGHTS_NAME)
        with open(tmp / CONFIG_NAME, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2, sort_keys=True)
            f.write("\n")
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")

    swap_dir(save_directory, write)


def _resolve(name_or_path: str | os.PathLike, **hub_kwargs) -> tuple[Path, Path]:
    folder = Path(name_or_path)
    if not folder.exists() and folder.parent.is_dir() and any(folder.parent.glob(f".{folder.name}.old-*")):
        clean_stale_saves(folder.absolute())  # a fallback save was killed between its two renames: restore
    if folder.is_dir():
        return folder / CONFIG_NAME, folder / WEIGHTS_NAME
    if folder.exists():
        raise ValueError(f"{name_or_path!s} is a file; pass the folder that holds {CONFIG_NAME} and {WEIGHTS_NAME}")
    try:  # a Hub repo id; honours HF_HUB_OFFLINE and the local cache
        from huggingface_hub import hf_hub_download

        return tuple(Path(hf_hub_download(str(name_or_path), f, **hub_kwargs)) for f in (CONFIG_NAME, WEIGHTS_NAME))
    except Exception as err:  # noqa: BLE001 - every hub failure becomes one readable error
        raise ValueError(
            f"cannot load a GPMFS artifact from {name_or_path!s}: not a local folder, and the Hub "
            f"download failed ({type(err).__name__}: {err})"
        ) from err


def from_pretrained(name_or_path: str | os.PathLike, *, verify_checksums: bool = True, **hub_kwargs):
    """Loads a fitted [`GPMFSSelector`] from a folder written by [`save_pretrained`] or a Hub repo id.

    Args:
        name_or_path (`str` or `os.PathLike`): local folder or Hub repo id.
        verify_checksums (`bool`, *optional*, defaults to `True`): a local folder must carry
            `hf_ext_checksums.json` and match it; `False` is the explicit opt-out (the weights' own SHA-256 in
            `config.json` is checked either way).
        hub_kwargs: passed to `huggingface_hub.hf_hub_download` (`revision`, `cache_dir`, ...).

    Raises:
        ValueError: a missing, corrupt or inconsistent `config.json` / `model.safetensors`
            ([`~hf_ext.core.integrity.CheckpointError`] for a checksum mismatch or a missing checksum file).
    """
    from safetensors.numpy import load_file

    from .selector import GPMFSSelector

    config_path, weights_path = _resolve(name_or_path, **hub_kwargs)
    for path in (config_path, weights_path):
        if not path.is_file():
            raise ValueError(f"missing {path.name} in {path.parent}: not a saved GPMFS artifact")
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"corrupt {CONFIG_NAME} in {config_path.parent}: {err}") from err
    if not isinstance(raw, dict) or raw.get("model_type") != MODEL_TYPE or not isinstance(raw.get("fitted"), dict):
        raise ValueError(
            f"{config_path} is not a fitted GPMFS config (model_type must be {MODEL_TYPE!r} and a "
            "'fitted' block is required)"
        )
    fitted = raw.pop("fitted")
    if fitted.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{config_path}: unsupported format_version {fitted.get('format_version')!r}")
    config = GPMFSConfig.from_dict(raw)
    expected = fitted.get("weights_sha256")
    if expected is not None and file_sha256(weights_path) != expected:
        raise CheckpointError(
            f"{weights_path}: content hash differs from the weights_sha256 in {CONFIG_NAME} (a corrupt "
            "or mixed artifact)"
        )
    try:
        tensors = load_file(str(weights_path))
    except Exception as err:  # noqa: BLE001 - SafetensorError does not derive from ValueError
        raise ValueError(f"corrupt {WEIGHTS_NAME} in {weights_path.parent}: {err}") from err
    required = {"W", "intercept", "ranking", "global_indices", "label_indices", "personal_indices", "constant_features"}
    if required - set(tensors):
        raise ValueError(f"{weights_path} lacks tensors {sorted(required - set(tensors))}")
    if set(tensors) - required:
        raise ValueError(
            f"{weights_path} holds unexpected tensors {sorted(set(tensors) - required)} (not a GPMFS "
            f"artifact of format {FORMAT_VERSION}); expected exactly {sorted(required)}"
        )
    d, q = int(fitted["n_features_in"]), int(fitted["n_labels"])
    W = tensors["W"]
    if W.shape != (d, q) or tensors["intercept"].shape != (q,) or tensors["label_indices"].shape[0] != q:
        raise ValueError(f"{weights_path}: tensor shapes {W.shape} do not match n_features_in={d}, n_labels={q}")
    for key in ("ranking", "global_indices", "label_indices", "personal_indices", "constant_features"):
        t = tensors[key]
        lowest = -1 if key in ("label_indices", "personal_indices") else 0  # -1 pads ragged rows
        if t.size and (t.max() >= d or t.min() < lowest):
            raise ValueError(f"{weights_path}: {key} holds indices outside [0, {d})")

    if Path(name_or_path).is_dir():  # the checksum file every hf_ext artifact carries: mandatory unless opted out
        verify_checksums_file(Path(name_or_path), require=verify_checksums)
    sel = GPMFSSelector.from_config(config)
    sel.n_features_in_ = d
    if fitted.get("feature_names_in") is not None:
        sel.feature_names_in_ = np.asarray(fitted["feature_names_in"], dtype=object)
    sel.W_, sel.intercept_ = W, tensors["intercept"]
    sel.n_labels_, sel.n_iter_, sel.mu_ = q, int(fitted["n_iter"]), float(fitted["mu"])
    sel.objective_history_ = list(fitted["objective_history"])
    sel.constant_features_ = tensors["constant_features"]
    sel.budget_, sel.k_personal_ = int(fitted["budget"]), int(fitted["k_personal"])
    sel.feature_importances_ = np.linalg.norm(W, axis=1)
    sel.ranking_, sel.global_indices_ = tensors["ranking"], tensors["global_indices"]
    sel.label_indices_ = _unpad(tensors["label_indices"])
    sel.personal_indices_ = _unpad(tensors["personal_indices"])
    sel.label_specific_strength_ = float(fitted["label_specific_strength"])
    return sel


# ------------------------------------------------------------------------------------------- datasets integration
def dataset_transform(
    selector, input_column: str = "features", output_column: str | None = None, label: int | None = None
) -> Callable[[dict], dict]:
    """A batched function for `Dataset.map` that keeps the selected entries of a vector column.

    Args:
        selector ([`GPMFSSelector`]): fitted (or loaded) selector.
        input_column (`str`, defaults to `"features"`): column holding each sample's feature vector.
        output_column (`str`, *optional*): where to write the selection (defaults to `input_column`).
        label (`int`, *optional*): use label `label`'s set instead of the global set.

    Example:

    ```python
    >>> sel = GPMFSSelector.from_pretrained("runs/gpmfs/selector")
    >>> ds = ds.map(dataset_transform(sel), batched=True)
    ```
    """
    idx = selector.get_support(indices=True, label=label)
    d = selector.n_features_in_
    out = output_column or input_column

    def fn(batch: dict[str, Any]) -> dict[str, Any]:
        X = np.asarray(batch[input_column], dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != d:
            raise ValueError(f"{input_column}: expected vectors of length {d}, got shape {X.shape}")
        return {out: X[:, idx].tolist()}

    return fn


def select_dataset_columns(dataset, selector, label: int | None = None, keep: tuple[str, ...] = ()):
    """Keeps the selected feature columns (by `feature_names_in_`) of a one-column-per-feature `datasets.Dataset`,
    plus the columns named in `keep` (labels, ids)."""
    names = getattr(selector, "feature_names_in_", None)
    if names is None:
        raise ValueError("selector has no feature_names_in_ (fit it on a DataFrame); use dataset_transform instead")
    chosen = [str(names[i]) for i in selector.get_support(indices=True, label=label)]
    missing = [c for c in chosen + list(keep) if c not in dataset.column_names]
    if missing:
        raise ValueError(f"dataset lacks columns {missing[:5]}")
    return dataset.select_columns(chosen + [c for c in keep if c not in chosen])
