"""The user's own data: read through 🤗 Datasets, checked against the method's documented schema, fingerprinted for
the training record.

Every `hf-ext train <method> --data SOURCE` and `hf-ext evaluate <method> --data SOURCE` reads its table with
[`load_user_data`]. `SOURCE` is one of:

- a local file: `.csv`, `.tsv`, `.json` / `.jsonl`, `.parquet` (read with `load_dataset("csv" | "json" |
  "parquet", data_files=...)`);
- a local folder: `train.*` / `validation.*` / `test.*` files become those splits; a folder of class sub-folders of
  images is read with `load_dataset("imagefolder")`;
- a Hub dataset id (`owner/name`, optionally `owner/name:config`), read with `load_dataset(id)`; with
  `HF_HUB_OFFLINE=1` only a cached copy works, and the error says so.

A method declares its columns as a [`DataSchema`]; [`DataSchema.check`] names every missing or ill-typed column at
once, before any training starts. [`dataset_entry`] is what the training record keeps about the data: where it came
from, its size and a fingerprint, so a card says exactly what an artifact was trained on.

```python
from hf_ext.core.user_data import Column, DataSchema

schema = DataSchema(
    (Column("dwell_time", "float", "seconds on the item"), Column("clicked", "int", "1 if clicked")),
    description="one row per impression",
)
print(schema.to_markdown())
```
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ColumnType = Literal["int", "float", "number", "str", "bool", "image", "list[float]", "list[int]", "list[str]", "any"]

SUFFIX_BUILDERS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
}
SPLIT_NAMES = ("train", "validation", "test")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


class UserDataError(ValueError):
    """The user's data cannot be read, or does not have the columns the method needs (the message names them)."""


@dataclass(frozen=True)
class Column:
    """One column a method reads.

    Args:
        name (`str`): the column name in the user's table.
        type (`str`): `"int"`, `"float"` (an int column is accepted too), `"number"`, `"str"`, `"bool"`, `"image"`,
            `"list[float]"`, `"list[int]"`, `"list[str]"` or `"any"`.
        description (`str`): what the column holds, for the docs and the error message.
        required (`bool`, defaults to `True`): a missing optional column is filled by the method's default.
    """

    name: str
    type: ColumnType = "any"
    description: str = ""
    required: bool = True


@dataclass(frozen=True)
class DataSchema:
    """The columns a method reads from the user's table (typed data: the docs table and the checks come from it).

    Args:
        columns (`tuple[Column, ...]`): the columns.
        description (`str`): one line on what a row is.
        prefixes (`tuple[str, ...]`): column-name prefixes matched as groups (e.g. `"f_"` for a feature matrix);
            [`DataSchema.check`] requires at least one column with each.
    """

    columns: tuple[Column, ...]
    description: str = ""
    prefixes: tuple[Column, ...] = field(default_factory=tuple)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def to_markdown(self) -> str:
        """The schema as a Markdown table (what each method's docs page shows)."""
        rows = ["column | type | required | what it holds", "--- | --- | --- | ---"]
        for c in self.columns:
            rows.append(f"`{c.name}` | {c.type} | {'yes' if c.required else 'no'} | {c.description}")
        for c in self.prefixes:
            rows.append(f"`{c.name}*` | {c.type} | yes (one or more) | {c.description}")
        return "\n".join(rows)

    def check(self, data, *, source: str = "the data") -> None:
        """Raises [`UserDataError`] naming every missing or ill-typed column of `data` (a `datasets.Dataset`, a
        `DatasetDict` — each split is checked — or a mapping of column name to values)."""
        splits = _splits(data)
        problems: list[str] = []
        for split, table in splits.items():
            where = f"{source}" + (f" (split {split!r})" if split else "")
            columns = _column_names(table)
            missing = [c.name for c in self.columns if c.required and c.name not in columns]
            for prefix in self.prefixes:
                if not any(name.startswith(prefix.name) for name in columns):
                    missing.append(f"{prefix.name}* ({prefix.description or 'one or more'})")
            if missing:
                problems.append(f"{where} has no column {', '.join(repr(m) for m in missing)}")
            for c in self.columns:
                if c.name in columns and not _type_ok(table, c):
                    problems.append(f"{where}: column {c.name!r} should be {c.type}, found {_type_name(table, c.name)}")
            for prefix in self.prefixes:
                for name in (n for n in columns if n.startswith(prefix.name)):
                    if not _type_ok(table, Column(name, prefix.type)):
                        problems.append(
                            f"{where}: column {name!r} should be {prefix.type}, found {_type_name(table, name)}"
                        )
        if problems:
            have = ", ".join(sorted(_column_names(next(iter(splits.values())))))
            raise UserDataError(
                "; ".join(problems)
                + f". The table has columns [{have}]; the method reads: "
                + ", ".join(f"{c.name} ({c.type}{'' if c.required else ', optional'})" for c in self.columns)
                + "".join(f", {p.name}* ({p.type})" for p in self.prefixes)
            )


def _splits(data) -> dict[str | None, Any]:
    try:
        from datasets import DatasetDict
    except ImportError:  # pragma: no cover - datasets ships with every method extra
        DatasetDict = ()  # noqa: N806
    if DatasetDict and isinstance(data, DatasetDict):
        return dict(data.items())
    return {None: data}


def _column_names(table) -> list[str]:
    if hasattr(table, "column_names"):
        return list(table.column_names)
    return list(table.keys())


def _feature_kind(table, name: str) -> str | None:
    """The `datasets` feature's dtype (`"int64"`, `"string"`, `"image"`, `"list"` ...), or `None` for a mapping."""
    features = getattr(table, "features", None)
    if features is None or name not in features:
        return None
    feature = features[name]
    dtype = getattr(feature, "dtype", None)
    if type(feature).__name__ == "Image":
        return "image"
    if type(feature).__name__ in ("Sequence", "List", "LargeList") or isinstance(feature, list):
        inner = getattr(feature, "feature", None) or (feature[0] if isinstance(feature, list) else None)
        return f"list[{getattr(inner, 'dtype', 'any')}]"
    if type(feature).__name__ == "ClassLabel":
        return "int64"
    return dtype


def _python_kind(values) -> str:
    sample = [v for v in list(values)[:50] if v is not None]
    if not sample:
        return "null"
    kinds = {type(v).__name__ for v in sample}
    return kinds.pop() if len(kinds) == 1 else "mixed(" + ",".join(sorted(kinds)) + ")"


def _type_name(table, name: str) -> str:
    kind = _feature_kind(table, name)
    return kind if kind is not None else _python_kind(table[name])


INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOATS = ("float16", "float32", "float64", "bfloat16")


def _type_ok(table, column: Column) -> bool:
    want = column.type
    if want == "any":
        return True
    kind = _feature_kind(table, column.name)
    if kind is None:  # a plain mapping of lists
        kind = {"int": "int64", "float": "float64", "str": "string", "bool": "bool"}.get(
            _python_kind(table[column.name])
        )
        if kind is None:
            return want.startswith("list") or want == "image"
    if want == "int":
        return kind in INTS or kind == "bool"
    if want in ("float", "number"):
        return kind in INTS + FLOATS or kind == "bool"
    if want == "str":
        return kind in ("string", "large_string")
    if want == "bool":
        return kind == "bool" or kind in INTS
    if want == "image":
        return kind == "image" or kind in ("string", "large_string")  # an image path column is fine
    if want.startswith("list["):
        inner = want[5:-1]
        if not kind.startswith("list["):
            return False
        got = kind[5:-1]
        if inner == "float":
            return got in INTS + FLOATS
        if inner == "int":
            return got in INTS
        return got in ("string", "large_string")
    return False


def is_hub_id(source: str) -> bool:
    """`owner/name` (optionally `:config`) that is not a local path: what [`load_user_data`] reads from the Hub."""
    head = source.split(":", 1)[0]
    parts = head.split("/")
    return len(parts) == 2 and all(p and not p.startswith(".") for p in parts) and not Path(head).exists()


def load_user_data(source: str | os.PathLike, *, schema: DataSchema | None = None, split: str | None = None):
    """Reads the user's data set with 🤗 Datasets and checks it against `schema`.

    Args:
        source (`str` or `os.PathLike`): a file, a folder or a Hub dataset id (see the module docstring).
        schema ([`DataSchema`], *optional*): checked on every split before anything else happens.
        split (`str`, *optional*): return this split only (a `Dataset`); default: every split (a `DatasetDict`).

    Returns:
        `datasets.DatasetDict` (or `datasets.Dataset` with `split`).

    Raises:
        [`UserDataError`]: the source does not exist, cannot be parsed, lacks the split or a schema column.
    """
    from datasets import DatasetDict, load_dataset

    text = os.fspath(source)
    path = Path(text).expanduser()
    try:
        if path.is_file():
            builder = SUFFIX_BUILDERS.get(path.suffix.lower())
            if builder is None:
                raise UserDataError(
                    f"{path}: cannot read a {path.suffix or 'suffix-less'} file; use one of "
                    + ", ".join(SUFFIX_BUILDERS)
                )
            kwargs = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}
            data = load_dataset(builder, data_files={"train": str(path)}, **kwargs)
        elif path.is_dir():
            data = _load_folder(path, load_dataset)
        elif is_hub_id(text):
            name, _, config = text.partition(":")
            data = load_dataset(name, config or None)
        else:
            raise UserDataError(
                f"data {text!r} not found: it is neither a file, a folder nor a Hub dataset id (owner/name). Pass a "
                "CSV / JSON / JSONL / Parquet file, a folder with train/validation/test files or image class "
                "folders, or a Hub id."
            )
    except UserDataError:
        raise
    except (FileNotFoundError, ConnectionError, OSError) as err:
        offline = " (HF_HUB_OFFLINE=1: only a cached copy can be read)" if os.environ.get("HF_HUB_OFFLINE") else ""
        raise UserDataError(f"cannot read data {text!r}{offline}: {err}") from None
    except Exception as err:  # datasets' own parse errors (DatasetGenerationError, ArrowInvalid ...)
        if type(err).__name__ in (
            "DatasetNotFoundError",
            "DatasetGenerationError",
            "ArrowInvalid",
            "DataFilesNotFoundError",
        ):
            raise UserDataError(f"cannot read data {text!r}: {type(err).__name__}: {err}") from None
        raise
    if not isinstance(data, DatasetDict):
        data = DatasetDict({"train": data})
    if schema is not None:
        schema.check(data, source=text)
    if split is not None:
        if split not in data:
            raise UserDataError(f"data {text!r} has no split {split!r} (it has {sorted(data)})")
        return data[split]
    return data


def _load_folder(path: Path, load_dataset):
    files: dict[str, str] = {}
    for split in SPLIT_NAMES:
        for suffix in SUFFIX_BUILDERS:
            candidate = path / f"{split}{suffix}"
            if candidate.is_file():
                files[split] = str(candidate)
                break
    if files:
        builders = {SUFFIX_BUILDERS[Path(f).suffix.lower()] for f in files.values()}
        if len(builders) > 1:
            raise UserDataError(f"{path}: split files mix formats {sorted(builders)}; use one")
        return load_dataset(builders.pop(), data_files=files)
    # an `imagefolder`: class sub-folders, or images beside a `metadata.csv` / `metadata.jsonl` (the `datasets`
    # convention for captions and other per-image columns), or a flat folder of images
    metadata = any((path / f"metadata{s}").is_file() for s in (".csv", ".jsonl", ".parquet"))
    if metadata or any(p.is_dir() or p.suffix.lower() in IMAGE_SUFFIXES for p in path.iterdir()):
        return load_dataset("imagefolder", data_dir=str(path))
    raise UserDataError(
        f"{path}: a data folder needs train/validation/test files ({', '.join(SUFFIX_BUILDERS)}), image class "
        "sub-folders, or images (with a metadata.csv / metadata.jsonl for per-image columns)"
    )


def split_data(data, *, validation: float = 0.1, test: float = 0.1, seed: int = 0):
    """`train` / `validation` / `test` splits: the user's own where present, else a seeded split of `train`.

    The split is deterministic in `seed`, and recorded (see [`dataset_entry`]), so an evaluation later uses the same
    test rows.
    """
    from datasets import DatasetDict

    if not isinstance(data, DatasetDict):
        data = DatasetDict({"train": data})
    out = dict(data.items())
    if "train" not in out:
        raise UserDataError(f"the data has no 'train' split (it has {sorted(out)})")
    need = {s: frac for s, frac in (("test", test), ("validation", validation)) if s not in out and frac > 0}
    if need:
        import numpy as np

        train = out["train"]
        n = len(train)
        counts = {s: max(1, round(n * frac)) for s, frac in need.items()}
        if n - sum(counts.values()) < 1:
            raise UserDataError(
                f"the data has {n} rows; splitting off {', '.join(f'{c} {s}' for s, c in counts.items())} rows "
                "leaves none to train on (add rows, or pass your own validation/test splits)"
            )
        order = np.random.default_rng(seed).permutation(n)
        start = 0
        for split, count in counts.items():
            out[split] = train.select(sorted(order[start : start + count].tolist()))
            start += count
        out["train"] = train.select(sorted(order[start:].tolist()))
    return DatasetDict(out)


def fingerprint(source: str | os.PathLike, data=None) -> str:
    """A short content hash: of the file(s) for a local source, else the `datasets` fingerprint."""
    path = Path(os.fspath(source)).expanduser()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.is_file() else []
    if files:
        h = hashlib.sha256()
        for f in files:
            h.update(f.relative_to(path if path.is_dir() else path.parent).as_posix().encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        return "sha256:" + h.hexdigest()[:16]
    if data is not None:
        splits = _splits(data)
        return "datasets:" + ",".join(str(getattr(t, "_fingerprint", "?")) for t in splits.values())
    return "unknown"


def dataset_entry(source: str | os.PathLike, data=None, *, name: str | None = None, description: str = "") -> dict:
    """What a training record keeps about the user's data: name, Hub id (when it is one), local path, rows per split
    and a fingerprint."""
    text = os.fspath(source)
    is_hub = is_hub_id(text)
    entry: dict[str, Any] = {
        "name": name or (text.split(":", 1)[0] if is_hub else Path(text).name),
        "hub_id": text.split(":", 1)[0] if is_hub else None,
        "source": text if is_hub else str(Path(text).expanduser().resolve()),
        "fingerprint": fingerprint(text, data),
    }
    if data is not None:
        entry["rows"] = {str(k or "train"): len(v) for k, v in _splits(data).items()}
    if description:
        entry["description"] = description
    return entry


def require_columns(table, names: Sequence[str], *, source: str = "the data") -> None:
    """A quick check for ad-hoc columns (e.g. a `--label_column` the user named)."""
    have = _column_names(table)
    missing = [n for n in names if n not in have]
    if missing:
        raise UserDataError(f"{source} has no column {', '.join(map(repr, missing))} (it has {sorted(have)})")
