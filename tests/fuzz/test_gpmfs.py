"""Bad input to GPMFS's public entry points (config, selector, meta-estimator, artifact, `hf-ext gpmfs fit`,
reproduce arguments): each raises its expected error with a message naming the field and the allowed range."""

import json

import numpy as np
import pytest

from hf_ext.core.testing import BadInput, assert_clear_error
from hf_ext.gpmfs.config import GPMFSConfig
from hf_ext.gpmfs.estimator import GPMFSMultiLabelClassifier
from hf_ext.gpmfs.selector import GPMFSSelector

RNG = np.random.default_rng(0)
X = RNG.random((30, 6))
Y = (RNG.random((30, 3)) < 0.5).astype(int)
Y[0] = 1
Y[1] = 0


def _fitted():
    return GPMFSSelector(budget=3, max_iter=3).fit(X, Y)


def _with_nan():
    Z = X.copy()
    Z[3, 2] = np.nan
    return Z


def _save_then(tmp_factory, mutate):
    def call():
        path = tmp_factory()
        _fitted().save_pretrained(path)
        mutate(path)
        GPMFSSelector.from_pretrained(path)

    return call


_TMP_DIRS = []


def _tmp():
    import tempfile
    from pathlib import Path

    _TMP_DIRS.append(tempfile.mkdtemp(prefix="gpmfs_fuzz_"))
    return Path(_TMP_DIRS[-1]) / "art"


@pytest.fixture(scope="module", autouse=True)
def _remove_tmp_dirs():
    yield
    import shutil

    for d in _TMP_DIRS:
        shutil.rmtree(d, ignore_errors=True)


def _edit_config(path, **changes):
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(changes)
    (path / "config.json").write_text(json.dumps(cfg))


def _add_tensor(path):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(path / "model.safetensors"))
    tensors["extra"] = np.zeros(3)
    save_file(tensors, str(path / "model.safetensors"))
    cfg = json.loads((path / "config.json").read_text())
    del cfg["fitted"]["weights_sha256"]  # past the hash: the tensor check itself must catch it
    (path / "config.json").write_text(json.dumps(cfg))


def _csv(text):
    path = _tmp().with_suffix(".csv")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def _loaded_with(**changes):
    """A saved selector whose config.json was edited by hand (the strict config checks run on load too)."""
    return _save_then(_tmp, lambda path: _edit_config(path, **changes))


def _fit_cli(*args):
    from hf_ext.gpmfs.train import main

    return lambda: main(list(args) + ["--output", str(_tmp())])


def _wide_csv():
    return _csv(",".join(f"f{i}" for i in range(1_000_000)) + "\n" + ",".join("0" for _ in range(1_000_000)) + "\n")


CASES = [
    # config
    BadInput("alpha NaN", lambda: GPMFSConfig(alpha=float("nan")), r"alpha.*finite number >= 0"),
    BadInput("negative lam", lambda: GPMFSConfig(lam=-1.0), r"lam.*>= 0"),
    BadInput("theta above 1", lambda: GPMFSConfig(theta=1.5), r"theta.*\[0, 1\]"),
    BadInput("budget zero", lambda: GPMFSConfig(budget=0), r"budget.*int >= 1 or a float in \(0, 1\]"),
    BadInput("budget fraction above 1", lambda: GPMFSConfig(budget=1.5), r"budget.*\(0, 1\]"),
    BadInput("k_neighbors zero", lambda: GPMFSConfig(k_neighbors=0), r"k_neighbors.*>= 1"),
    BadInput("unknown config key", lambda: GPMFSConfig.from_dict({"budgett": 3}), r"unknown fields \['budgett'\]"),
    BadInput("foreign model_type", lambda: GPMFSConfig.from_dict({"model_type": "bert"}), r"model_type"),
    # selector fit / transform
    BadInput("NaN in X", lambda: GPMFSSelector().fit(_with_nan(), Y), r"NaN"),
    BadInput("empty X", lambda: GPMFSSelector().fit(np.empty((0, 6)), np.empty((0, 3))), r"0 sample"),
    BadInput("one sample", lambda: GPMFSSelector().fit(X[:1], Y[:1]), r"1 sample"),
    BadInput("1-D X", lambda: GPMFSSelector().fit(X[:, 0], Y), r"2D array"),
    BadInput("y rows differ", lambda: GPMFSSelector().fit(X, Y[:10]), r"y has 10 rows but X has 30"),
    BadInput("non-binary y", lambda: GPMFSSelector().fit(X, Y * 3), r"binary \(0/1\)"),
    BadInput(
        "label without positives",
        lambda: GPMFSSelector().fit(X, np.c_[Y, np.zeros(30)]),
        r"label\(s\) \[3\] have no positive",
    ),
    BadInput("budget above d", lambda: GPMFSSelector(budget=7).fit(X, Y), r"budget=7 is larger.*d=6"),
    BadInput(
        "10^6 columns",
        lambda: GPMFSSelector().fit(np.zeros((3, 1_000_000), dtype=np.float32), Y[:3]),
        r"1000000 features.*at most 5000",
    ),
    BadInput("transform wrong width", lambda: _fitted().transform(X[:, :4]), r"4 features.*expecting 6"),
    BadInput(
        "label index out of range", lambda: _fitted().transform(X, label=3), r"label must be an integer in \[0, 3\)"
    ),
    BadInput("with_selection unknown key", lambda: _fitted().with_selection(alpha=2.0), r"only changes"),
    # meta-estimator
    BadInput("classifier NaN in X", lambda: GPMFSMultiLabelClassifier().fit(_with_nan(), Y), r"NaN"),
    BadInput("classifier 3-D y", lambda: GPMFSMultiLabelClassifier().fit(X, Y[:, :, None]), r"y must be 1-D or 2-D"),
    BadInput(
        "classifier non-binary 2-D y",
        lambda: GPMFSMultiLabelClassifier().fit(X, Y * 2),
        r"binary \(0/1\) label indicator",
    ),
    BadInput(
        "classifier selector type",
        lambda: GPMFSMultiLabelClassifier(selector="gpmfs").fit(X, Y),
        r"selector must be a GPMFSSelector",
        TypeError,
    ),
    # artifact
    BadInput(
        "artifact unknown config key",
        _save_then(_tmp, lambda p: _edit_config(p, embed_dimm=8)),
        r"unknown fields \['embed_dimm'\]",
    ),
    BadInput(
        "artifact missing weights",
        _save_then(_tmp, lambda p: (p / "model.safetensors").unlink()),
        r"missing model.safetensors",
    ),
    BadInput(
        "artifact flipped weights byte",
        _save_then(
            _tmp, lambda p: (p / "model.safetensors").write_bytes((p / "model.safetensors").read_bytes()[:-1] + b"\x00")
        ),
        r"content hash differs",
    ),
    # strict config (issue 38): types and ranges at construction, naming the field ...
    BadInput("alpha as a string", lambda: GPMFSConfig(alpha="1"), r"alpha.*finite number >= 0"),
    BadInput("k_neighbors as a float", lambda: GPMFSConfig(k_neighbors=5.0), r"k_neighbors.*integer >= 1"),
    BadInput("fit_intercept as a string", lambda: GPMFSConfig(fit_intercept="yes"), r"fit_intercept.*bool"),
    BadInput("theta None", lambda: GPMFSConfig(theta=None), r"theta.*\[0, 1\]"),
    BadInput("sigma zero", lambda: GPMFSConfig(sigma=0.0), r"sigma.*> 0"),
    BadInput("negative seed", lambda: GPMFSConfig(seed=-1), r"seed.*\[0, 2\*\*32\)"),
    BadInput("budget True", lambda: GPMFSConfig(budget=True), r"budget.*int >= 1"),
    # ... and on load (config.json edited by hand)
    BadInput("loaded theta as a string", _loaded_with(theta="0.5"), r"theta.*\[0, 1\]"),
    BadInput("loaded max_iter 0", _loaded_with(max_iter=0), r"max_iter.*integer >= 1"),
    BadInput("loaded budget 2.5", _loaded_with(budget=2.5), r"budget.*float in \(0, 1\]"),
    BadInput("loaded negative tol", _loaded_with(tol=-1e-4), r"tol.*> 0"),
    BadInput("loaded unknown field", _loaded_with(thta=0.5), r"unknown fields \['thta'\]"),
    BadInput("artifact unexpected tensor", _save_then(_tmp, _add_tensor), r"unexpected tensors \['extra'\]"),
    BadInput(
        "save onto a foreign folder",
        lambda: _fitted().save_pretrained(
            (lambda d: (d.mkdir(parents=True), (d / "notes.txt").write_text("x"), d)[2])(_tmp())
        ),
        r"not part of a GPMFS artifact",
    ),
    # hf-ext gpmfs fit
    BadInput(
        "fit budget out of range",
        _fit_cli("--csv", _csv("a,b,y\n1,2,0\n3,4,1\n"), "--budget", "150%"),
        r"--budget must be.*\(0, 100\]%",
    ),
    BadInput(
        "fit theta out of range",
        _fit_cli("--csv", _csv("a,b,y\n1,2,0\n3,4,1\n"), "--theta", "2"),
        r"--theta must be in \[0, 1\]",
    ),
    BadInput(
        "train theta NaN (dashed flag)",
        _fit_cli("--csv", _csv("a,b,y\n1,2,0\n3,4,1\n"), "--theta", "nan"),
        r"--theta must be in \[0, 1\]",
    ),
    BadInput("train negative seed", _fit_cli("--csv", _csv("a,b,y\n1,2,0\n3,4,1\n"), "--seed", "-1"), r"--seed"),
    BadInput("fit empty csv", _fit_cli("--csv", _csv("")), r"--data: .* is empty"),
    BadInput(
        "fit missing label column",
        _fit_cli("--csv", _csv("a,b,y\n1,2,0\n3,4,1\n"), "--labels", "z"),
        r"label_columns: \['z'\] are not columns",
    ),
    BadInput(
        "fit NaN feature",
        _fit_cli("--csv", _csv("a,b,y\n1,,0\n3,4,1\n2,2,1\n"), "--labels", "y"),
        r"\['b'\] have missing values",
    ),
    BadInput(
        "fit text feature",
        _fit_cli("--csv", _csv("a,b,y\n1,x,0\n3,4,1\n"), "--labels", "y"),
        r"column 'b' should be number, found (large_)?string",
    ),
    BadInput("fit 10^6-column csv", lambda: _fit_cli("--csv", _wide_csv())(), r"1000000 columns.*at most 5000"),
    # reproduce arguments
    BadInput(
        "reproduce negative seed",
        lambda: __import__("hf_ext.gpmfs.reproduce", fromlist=["main"]).main(["--seed", "-1", "--out", str(_tmp())]),
        r"--seed must be an integer in \[0, 2\*\*32\)",
    ),
    BadInput(
        "reproduce unknown dataset",
        lambda: __import__("hf_ext.gpmfs.reproduce", fromlist=["main"]).main(
            ["--datasets", "mnist", "--out", str(_tmp())]
        ),
        r"--datasets: unknown \['mnist'\]",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_gets_a_clear_error(case):
    assert_clear_error(case)


def test_enough_cases():
    assert len(CASES) >= 20
    assert len({c.name for c in CASES}) == len(CASES)
