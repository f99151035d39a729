"""Hub-native amplitude tables: a `datasets` builder, a saved folder (`config.json` + `save_to_disk`), a dataset card
and `push_to_hub`.

Each row is one amplitude at one kinematic point:

| column | type | meaning |
|---|---|---|
| `n` | int32 | external particles (N scalars, or n gluons) |
| `polygon` | int32 | size of the polygon of the planar variables (N, or 2n for gluons) |
| `alpha_prime` | float64 | α′ |
| `theory` | string | `tr_phi3`, `field_theory`, `bosonic`, `superstring`, `gluon_*` (see the config) |
| `x_labels`, `x` | list | planar variables X_{i,j} of the polygon |
| `polarisation` | list float64 | gluons: ε_i.ε_j (i < j), then ε_i.k_j (i != j); empty for scalars |
| `amplitude` | float64 | A_N (no α′^{N-3}), field theory, or the gluon Laurent coefficient L = α′^n Res |
| `method` | string | evaluator |
| `error` | float64 | its estimated absolute error |

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import numpy as np

from hf_ext.core.integrity import CheckpointError

from .config import AmplitudeTableConfig
from .field_theory import field_theory_amplitude, triangulations
from .gluons import GluonKinematics, type_i_four_gluon, ym3
from .kinematics import planar_variables, random_planar_kinematics, x_labels
from .residues import laurent_coefficient
from .stringy import stringy_amplitude
from .superstring import scaffolded_bosonic_amplitude, superstring_amplitude
from .symmetric_determinant import determinant_laurent

CONFIG_NAME = "config.json"
DATASET_DIR = "dataset"
CARD_NAME = "README.md"
PARQUET_FILE = "data/train-00000-of-00001.parquet"  # the Hub's standard layout: `load_dataset(repo_id)` reads it
FORMAT_VERSION = 1
TABLE_TYPE = "hf_ext_amplitudes_table"
FEATURES = datasets.Features(
    {
        "n": datasets.Value("int32"),
        "polygon": datasets.Value("int32"),
        "alpha_prime": datasets.Value("float64"),
        "theory": datasets.Value("string"),
        "x_labels": datasets.List(datasets.Value("string")),
        "x": datasets.List(datasets.Value("float64")),
        "polarisation": datasets.List(datasets.Value("float64")),
        "amplitude": datasets.Value("float64"),
        "method": datasets.Value("string"),
        "error": datasets.Value("float64"),
    }
)


def _rng(config: AmplitudeTableConfig, *key: int) -> np.random.Generator:
    return np.random.default_rng([config.seed, *key])


def _scalar_rows(config: AmplitudeTableConfig, theory: str, N: int, k_alpha: int, alpha: float) -> list[dict]:
    if theory in ("bosonic", "superstring") and N % 2:
        return []
    # the same points for tr_phi3 and field_theory (rows pair up); scaffolded theories draw their own
    rng = _rng(config, 0 if theory in ("tr_phi3", "field_theory") else 1, N, k_alpha)
    X = random_planar_kinematics(N, config.samples, rng=rng, low=config.x_low, high=config.x_high)
    if theory == "tr_phi3":
        ev = stringy_amplitude(X, alpha, N, method=config.method)
        value, error, method = ev.value, ev.error, ev.method
    elif theory == "field_theory":
        value = field_theory_amplitude(X, N)
        error = 4 * np.finfo(np.float64).eps * len(triangulations(N)) * np.abs(value)
        method = "triangulations"
    else:
        odd = np.array([i % 2 == 1 and j % 2 == 1 for i, j in planar_variables(N)])
        X[:, odd] += 1.0 / alpha  # shift -1 on X_oo: keep every shifted integral convergent
        fn = scaffolded_bosonic_amplitude if theory == "bosonic" else superstring_amplitude
        method = "closed_form" if N == 4 and config.method == "auto" else config.method
        ev = fn(X, alpha, N // 2, method=method)
        value, error, method = ev.value, ev.error, f"{theory}:{ev.method}"
    labels = x_labels(N)
    return [
        {
            "n": N,
            "polygon": N,
            "alpha_prime": alpha,
            "theory": theory,
            "x_labels": labels,
            "x": X[r].tolist(),
            "polarisation": [],
            "amplitude": float(value[r]),
            "method": method,
            "error": float(error[r]),
        }
        for r in range(len(X))
    ]


def _gluon_rows(config: AmplitudeTableConfig, theory: str, n: int, k_alpha: int, alpha: float) -> list[dict]:
    rng = _rng(config, 2, n, k_alpha)
    rows = []
    for _ in range(config.samples):
        bound = n >= 4 and theory != "gluon_continued"  # the continuation needs no tachyon bound
        kin = GluonKinematics.random(
            n, rng, config.x_low, config.x_high, min_channel=config.x_low + 1.0 / alpha if bound else None
        )
        if theory == "gluon_determinant":
            value = determinant_laurent(kin, alpha)
            coarse = determinant_laurent(kin, alpha, nodes=28)  # the error estimate of laurent_coefficient
            error, method = max(abs(value - coarse), 1e-14 * abs(value)), "symmetric_determinant"
        elif theory == "gluon_continued":
            value, error, method = _continued(kin, alpha)
        elif theory == "gluon_type_i":
            value = -4 * alpha**2 * ym3(kin) if n == 3 else type_i_four_gluon(kin, alpha)
            error, method = 64 * np.finfo(np.float64).eps * abs(value), "closed_form"
        else:
            ev = laurent_coefficient(kin, alpha, "super" if theory == "gluon_super" else "bosonic")
            value, error, method = float(ev.value), float(ev.error), ev.method
        rows.append(
            {
                "n": n,
                "polygon": 2 * n,
                "alpha_prime": alpha,
                "theory": theory,
                "x_labels": x_labels(2 * n),
                "x": kin.X.tolist(),
                "polarisation": kin.polarisation_data().tolist(),
                "amplitude": float(value),
                "method": method,
                "error": float(error),
            }
        )
    return rows


def _continued(kin: GluonKinematics, alpha: float) -> tuple[float, float, str]:
    """The continued superstring coefficient with an error estimate from a second, coarser rule."""
    if kin.n == 3:
        ev = laurent_coefficient(kin, alpha, "super")
        return float(ev.value), float(ev.error), "residue"
    if kin.n == 4:
        from .alpha_expansion import continued_four_gluon

        value = continued_four_gluon(kin, alpha).real
        return value, 1e-11 * abs(value), "continued_laurent"  # row 16 of reproduce: 7e-13 measured
    from .five_gluons_continued import continued_five_gluon

    value = continued_five_gluon(kin, alpha).real
    coarse = continued_five_gluon(kin, alpha, delta=0.02, panel=10).real
    return value, max(abs(value - coarse), 1e-14 * abs(value)), "continued_laurent_sectors"


def generate_rows(config: AmplitudeTableConfig) -> Iterator[dict[str, Any]]:
    """Yields the table's rows (vectorised per (theory, size, α′) block)."""
    for theory in config.theories:
        gluon = theory.startswith("gluon")
        for size in config.gluons if gluon else config.points:
            for k_alpha, alpha in enumerate(config.alphas):
                yield from (_gluon_rows if gluon else _scalar_rows)(config, theory, size, k_alpha, alpha)


# ------------------------------------------------------------------------------------------------ datasets builder
@dataclass
class AmplitudeBuilderConfig(datasets.BuilderConfig):
    """A `datasets.BuilderConfig` carrying an [`AmplitudeTableConfig`] as a JSON-ready dict (`table`)."""

    table: dict | None = None

    def __post_init__(self):
        super().__post_init__()
        self.table = AmplitudeTableConfig.from_dict(dict(self.table or {})).to_dict()


class AmplitudeTableBuilder(datasets.GeneratorBasedBuilder):
    """`datasets` builder of amplitude tables (one `train` split).

    Example:

    ```python
    >>> builder = AmplitudeTableBuilder(table=AmplitudeTableConfig(samples=2).to_dict(), cache_dir="/tmp/amp")
    >>> builder.download_and_prepare()
    >>> ds = builder.as_dataset("train")
    ```
    """

    BUILDER_CONFIG_CLASS = AmplitudeBuilderConfig

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description="Stringy Tr(φ³), scaffolded bosonic / superstring and gluon amplitudes at sampled "
            "kinematics (hf_ext.amplitudes; arXiv:2504.21676).",
            features=FEATURES,
            homepage="https://arxiv.org/abs/2504.21676",
            license="apache-2.0",
        )

    def _split_generators(self, dl_manager):
        return [datasets.SplitGenerator(name=datasets.Split.TRAIN, gen_kwargs={})]

    def _generate_examples(self):
        config = AmplitudeTableConfig.from_dict(self.config.table)
        for i, row in enumerate(generate_rows(config)):
            yield datasets.builder.Key(0, i), row


def build_dataset(config: AmplitudeTableConfig, cache_dir: str | os.PathLike | None = None) -> datasets.Dataset:
    """Runs [`AmplitudeTableBuilder`] and returns the `train` split (in memory when `cache_dir` is None)."""
    tmp = None
    if cache_dir is None:
        tmp = tempfile.mkdtemp(prefix="hf_ext_amplitudes_")
        cache_dir = tmp
    try:
        builder = AmplitudeTableBuilder(table=config.to_dict(), cache_dir=str(cache_dir))
        builder.download_and_prepare()
        ds = builder.as_dataset(split="train", in_memory=tmp is not None)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return ds


# ------------------------------------------------------------------------------------------------ card
CARD_TEMPLATE = """---
{{ card_data }}
---

# {{ pretty_name }}

Amplitude tables computed with `hf_ext.amplitudes`, a verified numerics library for
*Superstring amplitudes meet surfaceology* ([arXiv:{{ arxiv_id }}](https://arxiv.org/abs/{{ arxiv_id }})).
{{ n_rows }} rows; theories: {{ theories }}; α′ in {{ alphas }}.

## Columns

| column | meaning |
|---|---|
| `n` | external particles (N scalars, or n gluons) |
| `polygon` | size of the polygon of the planar variables (N, or 2n for gluons) |
| `alpha_prime` | α′ |
| `theory` | see below |
| `x_labels`, `x` | planar variables X_ij = (p_i + ... + p_{j-1})^2 |
| `polarisation` | gluons: ε_i.ε_j (i < j) then ε_i.k_j (i != j), row-major; empty for scalars |
| `amplitude` | the value (A_N without α′^(N-3); gluons: L = α′^n × residue) |
| `method` | evaluator (`closed_form`, `curve`, `residue_gauss_jacobi`, ...) |
| `error` | its estimated absolute error |

Theories: `tr_phi3` (stringy A_N), `field_theory` (sum over cubic diagrams, independent of α′; its rows share the
`tr_phi3` rows' kinematics), `bosonic` and `superstring` (scaffolded 2n scalars), `gluon_super` and
`gluon_bosonic` (Laurent coefficients on the scaffolding residues), `gluon_type_i` (closed form).

## Conventions

Planar variables with X_{i,i+1} = X_{1,N} = 0; s_ab = 2 p_a.p_b, metric mostly minus; scaffolding pairs
(2i-1, 2i) with ε_i ≅ p_{2i}; the superstring uses pair 1 in the (-1) picture (the reduced Pfaffian over the other
2n-2 labels, (2n-3)!! shifted Tr φ³ terms). These were rebuilt from first principles and may differ from the
paper's (pairs (2i, 2i+1), α′^(N-3) normalisation).

## Generation

```python
{{ config_json }}
```

{{ kinematics }}
"""

RANDOM_KINEMATICS = """\
Kinematics are uniform in [x_low, x_high] (the Euclidean region, where the integrals converge); scaffolded rows
add 1/α′ to the odd-odd planar variables and 4- and 5-gluon rows to the channels (k_i + k_{i+1})^2, so every
shifted integral
converges."""


def dataset_card(config: AmplitudeTableConfig, n_rows: int, repo_id: str | None = None, kinematics: str | None = None):
    """The `huggingface_hub.DatasetCard` of a table, rendered from [`CARD_TEMPLATE`] (`kinematics`: where the
    kinematic points came from, when not from the config's random sampling)."""
    from huggingface_hub import DatasetCard, DatasetCardData

    size = "n<1K" if n_rows < 1000 else "1K<n<10K" if n_rows < 10_000 else "10K<n<100K"
    data = DatasetCardData(
        license="apache-2.0",
        tags=["hf_ext", "physics", "scattering-amplitudes", "string-theory", "arxiv:2504.21676"],
        pretty_name="Stringy Tr(φ³) and superstring amplitude tables",
        size_categories=[size],
        task_categories=["tabular-regression"],
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*.parquet"}]}],
    )
    return DatasetCard.from_template(
        data,
        template_str=CARD_TEMPLATE,
        pretty_name=data.pretty_name,
        arxiv_id="2504.21676",
        n_rows=n_rows,
        theories=", ".join(config.theories),
        alphas=", ".join(f"{a:g}" for a in config.alphas),
        config_json=json.dumps(config.to_dict(), indent=2) + ("\n# repo: " + repo_id if repo_id else ""),
        kinematics=f"Kinematics: {kinematics} (samples = its row count; x_low, x_high and seed are unused)."
        if kinematics
        else RANDOM_KINEMATICS,
    )


# ------------------------------------------------------------------------------------------------ artifact
class AmplitudeTable:
    """A computed table with its config: what `hf-ext` saves, loads and pushes.

    Args:
        config ([`AmplitudeTableConfig`]): how the table was generated.
        dataset (`datasets.Dataset`, *optional*): the rows; computed with [`AmplitudeTableBuilder`] if omitted.
        kinematics (`str`, *optional*): where the rows' kinematics came from when not from the config's random
            sampling (the user's data: `hf-ext train amplitudes`); said in the dataset card.
    """

    def __init__(
        self, config: AmplitudeTableConfig, dataset: datasets.Dataset | None = None, kinematics: str | None = None
    ):
        if not isinstance(config, AmplitudeTableConfig):
            raise ValueError(f"config must be an AmplitudeTableConfig, got {type(config).__name__}")
        self.config = config
        self.dataset = build_dataset(config) if dataset is None else dataset
        self.kinematics = kinematics

    @classmethod
    def from_config(cls, config: AmplitudeTableConfig) -> AmplitudeTable:
        return cls(config)

    def card(self, repo_id: str | None = None):
        return dataset_card(self.config, len(self.dataset), repo_id, self.kinematics)

    def save_pretrained(self, save_directory: str | os.PathLike) -> Path:
        """Writes `config.json`, `dataset/` (`Dataset.save_to_disk`), `data/train-00000-of-00001.parquet` (the
        Hub's dataset layout, so the folder is a loadable dataset repo as uploaded) and the card `README.md`.

        One atomic directory swap ([`~hf_ext.core.hub.atomic_write_dir`]): the folder is written complete under a
        temporary sibling name, its files' SHA-256 go into `config.json`, and the temporary folder and
        `save_directory` are exchanged in one `renameat2(RENAME_EXCHANGE)` (two renames where the file system
        cannot; a save killed between them is repaired by the next save). Leftovers of killed saves are removed
        first."""
        from hf_ext.core.integrity import atomic_write_dir

        folder = Path(save_directory)
        if os.path.lexists(folder) and (
            not folder.is_dir() or (any(folder.iterdir()) and not (folder / CONFIG_NAME).is_file())
        ):
            raise ValueError(
                f"{folder} exists and is neither empty nor a saved amplitude table; refusing to replace it"
            )

        def write(tmp: Path) -> None:
            self.dataset.save_to_disk(str(tmp / DATASET_DIR))
            (tmp / PARQUET_FILE).parent.mkdir(parents=True)
            self.dataset.to_parquet(str(tmp / PARQUET_FILE))
            self.card().save(tmp / CARD_NAME)
            meta = {
                "table_type": TABLE_TYPE,
                "format_version": FORMAT_VERSION,
                "n_rows": len(self.dataset),
                "config": self.config.to_dict(),
                "arxiv": "https://arxiv.org/abs/2504.21676",
                "sha256": _hashes(tmp),
            }
            (tmp / CONFIG_NAME).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")

        # config.json lists every file's SHA-256; the checksum file (Arrow and Parquet files) is what every hf_ext
        # artifact carries, verified on load too
        atomic_write_dir(folder, write)
        return folder

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, *, verify_checksums: bool = True) -> AmplitudeTable:
        """Loads a folder written by [`save_pretrained`].

        Args:
            path (`str` or `os.PathLike`): the table folder.
            verify_checksums (`bool`, *optional*, defaults to `True`): the folder must carry `hf_ext_checksums.json`
                and match it; `False` is the explicit opt-out (the SHA-256 list in `config.json` is checked either
                way).

        Raises:
            ValueError: a missing or corrupt `config.json`, a foreign table type, or a dataset whose columns or
                length do not match.
        """
        folder = Path(path)
        cfg_file = folder / CONFIG_NAME
        if not cfg_file.is_file() or not (folder / DATASET_DIR).is_dir():
            raise ValueError(f"{folder} is not a saved amplitude table (needs {CONFIG_NAME} and {DATASET_DIR}/)")
        try:
            meta = json.loads(cfg_file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"corrupt {cfg_file}: {err}") from err
        if not isinstance(meta, dict) or meta.get("table_type") != TABLE_TYPE:
            raise ValueError(f"{cfg_file} is not an hf_ext amplitude table (table_type must be {TABLE_TYPE!r})")
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{cfg_file}: unsupported format_version {meta.get('format_version')!r}")
        try:
            config = AmplitudeTableConfig.from_dict(meta["config"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{cfg_file}: invalid table config ({err})") from None
        # validate every stored file against its hash before any row is read: a corrupted Arrow file would
        # otherwise be memory-mapped and crash the process (segfault) when its rows are decoded
        expected = meta.get("sha256")
        if not isinstance(expected, dict) or not expected:
            raise ValueError(f"{cfg_file} has no file hashes (sha256); re-save the table with this version")
        actual = _hashes(folder)
        missing = sorted(set(expected) - set(actual))
        extra = sorted(set(actual) - set(expected))
        changed = sorted(k for k in set(expected) & set(actual) if expected[k] != actual[k])
        if missing or extra or changed:
            raise CheckpointError(
                f"{folder} is corrupted or was modified after saving: "
                + "; ".join(
                    f"{what}: {', '.join(names)}"
                    for what, names in (("missing", missing), ("unexpected", extra), ("hash mismatch", changed))
                    if names
                )
            )
        from hf_ext.core.integrity import verify_checksums as verify_checksums_file

        verify_checksums_file(folder, require=verify_checksums)
        n_rows = meta.get("n_rows")
        if not isinstance(n_rows, int) or n_rows < 0:
            raise ValueError(f"{cfg_file}: n_rows must be a non-negative integer, got {n_rows!r}")
        try:
            ds = datasets.load_from_disk(str(folder / DATASET_DIR))
        except Exception as err:  # noqa: BLE001  (any reader error becomes one clear message)
            raise ValueError(f"{folder / DATASET_DIR} cannot be read as a dataset: {err}") from None
        if ds.features != FEATURES:
            raise ValueError(f"{folder / DATASET_DIR}: schema {ds.features} does not match the table schema {FEATURES}")
        if len(ds) != n_rows:
            raise ValueError(f"{folder / DATASET_DIR}: {len(ds)} rows, {CONFIG_NAME} says {n_rows}")
        return cls(config, ds)

    def push_to_hub(self, repo_id: str, *, private: bool = False, token: str | None = None, via: str = "folder") -> str:
        """Pushes the table as a Hub dataset repo with its card.

        Args:
            repo_id (`str`): dataset repo id.
            private (`bool`): create it private.
            token (`str`, *optional*): Hub token (defaults to the logged-in one / `HF_TOKEN`).
            via (`str`): `"folder"` (default: `HfApi.upload_folder` of a [`save_pretrained`] folder with
                `repo_type="dataset"`: parquet under `data/`, the card, `config.json` and the `save_to_disk` copy)
                or `"datasets"` (`Dataset.push_to_hub`, then the card). The second needs a Hub with LFS uploads
                and the `tree` API, which the local test server (`tests/helpers/hub_server.py`) lacks.

        Returns:
            The dataset repo URL.
        """
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        url = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        if via == "datasets":
            self.dataset.push_to_hub(repo_id, private=private, token=token)
            card = self.card(repo_id)
            card.push_to_hub(repo_id, repo_type="dataset", token=token)
        elif via == "folder":
            with tempfile.TemporaryDirectory() as tmp:
                folder = self.save_pretrained(Path(tmp) / "table")
                api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="dataset")
        else:
            raise ValueError(f"via must be 'datasets' or 'folder', got {via!r}")
        return str(url)


# ------------------------------------------------------------------------------------------------ atomic saves
def _hashes(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under `dataset/` and `data/` (relative POSIX paths)."""
    import hashlib

    out = {}
    for sub in (DATASET_DIR, Path(PARQUET_FILE).parts[0]):
        root = folder / sub
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            if path.is_file() or path.is_symlink():
                digest = hashlib.sha256()
                with open(path, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        digest.update(chunk)
                out[path.relative_to(folder).as_posix()] = digest.hexdigest()
    return out
