"""The data side of `hf-ext reproduce orca`'s synthetic sweep: the generator configurations of one (s, seed) cell,
their frames and exact posteriors (cached per process), and the reference rows (oracle, oracle@train, trivial) that
need no training, so that the main process can compute them while the workers train."""

from __future__ import annotations

import functools
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from .data import to_model_features
from .families import get_family
from .metrics import ctr_dt_heatmap
from .report import score

IID_TEST_SEED, SHIFT_TEST_SEED = 10_000, 20_000


def _configs(run, strength: float, seed: int):
    """Training, validation, i.i.d. test and shifted test configurations of one (s, seed) cell."""
    fam = get_family(run.family)
    train = fam.make_config(run.num_users, run.num_items, run.num_impressions, strength, seed)
    val = fam.test_config(train, max(run.num_impressions // 8, 2_000), 5_000 + seed, strength)
    iid = fam.test_config(train, run.test_impressions, IID_TEST_SEED, strength)
    shift = fam.test_config(train, run.test_impressions, SHIFT_TEST_SEED, run.test_strength)
    return train, val, iid, shift


def _family_of(cfg):
    return get_family("reliance" if type(cfg).__name__ == "RelianceOrcaConfig" else "spurious")


@functools.lru_cache(maxsize=4)
def _frame(cfg):
    fam = _family_of(cfg)
    ds = fam.generate(cfg)
    return ds, to_model_features(ds, fam.field_names, fam.vocab_sizes(cfg))


@functools.lru_cache(maxsize=8)
def _oracle(cfg, data_cfg):
    """The posterior of generator `cfg` on the rows of the data set drawn from `data_cfg` (cached: the test sets
    are shared by every seed)."""
    return _family_of(cfg).oracle(cfg, _columns(_frame(data_cfg)[0]))


def _columns(ds) -> dict[str, np.ndarray]:
    return dict(ds.with_format("numpy")[:])


def _references(run, strength: float, seed: int) -> dict:
    """Oracle, oracle@train and trivial rows of one (s, seed) on both tests."""
    from .configuration_orca import ORCA_BIN_SECONDS

    train_cfg, _, iid_cfg, shift_cfg = _configs(run, strength, seed)
    train = _columns(_frame(train_cfg)[0])
    clicked = train["click"] == 1
    prior = np.bincount(train["dwell_bin"][clicked], minlength=len(ORCA_BIN_SECONDS)) / clicked.sum()
    out: dict = {}
    for name, cfg in (("iid", iid_cfg), ("shifted", shift_cfg)):
        test = _columns(_frame(cfg)[0])
        n = len(test["click"])
        oracle = _oracle(cfg, cfg)
        out[("oracle", name)] = score(test, oracle["click_probs"], oracle["dt_probs"], ORCA_BIN_SECONDS)
        if name == "shifted":
            at_train = _oracle(train_cfg, cfg)
            out[("oracle@train", name)] = score(test, at_train["click_probs"], at_train["dt_probs"], ORCA_BIN_SECONDS)
        out[("trivial", name)] = score(test, np.full(n, clicked.mean()), np.tile(prior, (n, 1)), ORCA_BIN_SECONDS)
        if name == "shifted" and strength == max(run.strengths) and seed == run.seeds[0]:
            rows = test["click"] == 1
            out["heatmap"] = ctr_dt_heatmap(oracle["click_probs"][rows], test["dwell_bin"][rows])
    return out


def all_references(run) -> dict:
    """`{(s, seed): reference rows}` of every cell, in sweep order."""
    return {(s, seed): _references(run, s, seed) for s in run.strengths for seed in run.seeds}


def references_alongside(run) -> Future:
    """[`all_references`] started in a thread of this process when the training jobs run in worker processes (the
    main process only waits on them, so the references take an otherwise idle core instead of delaying the pool);
    computed at once otherwise (in-process jobs would share and evict this process's frame cache). The same numbers
    either way: every reference is a deterministic function of its configuration."""
    if run.workers > 1:
        pool = ThreadPoolExecutor(1, thread_name_prefix="orca-references")
        future = pool.submit(all_references, run)
        pool.shutdown(wait=False)  # the thread ends with its one task
        return future
    done: Future = Future()
    done.set_result(all_references(run))
    return done
