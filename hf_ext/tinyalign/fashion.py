"""Fashion-MNIST with captions measured from the image, for TinyAlign in the pretrained setting.

The images come from Debian's `dataset-fashion-mnist` (`/usr/share/datasets/fashion-mnist/`, the four IDX files;
`apt-get install dataset-fashion-mnist`), read with numpy (no download). A caption is the class word plus three
attributes measured on the image, binned by terciles fitted on the memory split only: brightness of the item's
pixels (dark / grey / light), width of the item (narrow / regular / wide) and its area (small / medium / large), e.g.
`"a light wide pullover , large"`. Memory and train come from disjoint parts of the 60k training file, test from the
10k test file, so the three splits never share an image.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

FASHION_DIR = Path(os.environ.get("HF_EXT_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
FASHION_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
FASHION_WORDS = ("tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot")
BRIGHTNESS = ("dark", "grey", "light")
WIDTH = ("narrow", "regular", "wide")
AREA = ("small", "medium", "large")
FASHION_APT = "apt-get install dataset-fashion-mnist"


def read_idx(path: str | Path) -> np.ndarray:
    """An IDX file (gzipped or not) as a numpy array: magic `0x00 0x00 dtype ndim`, big-endian int32 sizes."""
    path = Path(path)
    raw = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">i4", count=ndim, offset=4).astype(int)
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path} holds {data.size} values for dimensions {dims.tolist()}: truncated?")
    return data.reshape(dims)


def load_fashion_mnist(root: str | Path = FASHION_DIR) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """`{"train": (images uint8 (60000, 28, 28), labels), "test": (10000 ...)}`; a clear error when missing."""
    root = Path(root)
    missing = [f for pair in FASHION_FILES.values() for f in pair if not (root / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"Fashion-MNIST is not installed in {root} (missing {missing}): {FASHION_APT}, or set "
            f"HF_EXT_FASHION_MNIST_DIR to a folder with the four IDX files"
        )
    return {
        split: (read_idx(root / img), read_idx(root / lab).astype(int)) for split, (img, lab) in FASHION_FILES.items()
    }


def measure_fashion(images: np.ndarray) -> dict[str, np.ndarray]:
    """Per image (`(N, H, W)` in [0, 1]): mean intensity of the item pixels (> 0.1), item bounding-box width in
    pixels, and item area (share of pixels > 0.1)."""
    item = images > 0.1
    area = item.mean(axis=(1, 2))
    brightness = (images * item).sum(axis=(1, 2)) / np.maximum(item.sum(axis=(1, 2)), 1)
    cols = item.any(axis=1)
    width = np.array([np.ptp(np.flatnonzero(c)) + 1 if c.any() else 0 for c in cols], dtype=np.float64)
    return {"brightness": brightness, "width": width, "area": area}


def fashion_caption(label: int, attrs: dict[str, float], edges: dict[str, np.ndarray]) -> str:
    b = BRIGHTNESS[int(np.searchsorted(edges["brightness"], attrs["brightness"]))]
    w = WIDTH[int(np.searchsorted(edges["width"], attrs["width"]))]
    a = AREA[int(np.searchsorted(edges["area"], attrs["area"]))]
    return f"a {b} {w} {FASHION_WORDS[label]} , {a}"


def load_fashion_captions(
    n_memory: int = 2000, n_train: int = 1000, n_test: int = 300, seed: int = 0, root: str | Path = FASHION_DIR
):
    """Fashion-MNIST as a `datasets.DatasetDict` with disjoint `memory`, `train` (both drawn without overlap from
    the training file) and `test` (from the test file) splits. Columns: `pixel_values` (28×28 in [0, 1]),
    `caption`, `label`, `index` (row in its IDX file)."""
    from datasets import Dataset, DatasetDict

    raw = load_fashion_mnist(root)
    train_x, train_y = raw["train"]
    test_x, test_y = raw["test"]
    if n_memory + n_train > len(train_y) or n_test > len(test_y) or min(n_memory, n_train, n_test) < 1:
        raise ValueError(
            f"split sizes must be >= 1 with memory + train <= {len(train_y)} and test <= {len(test_y)}, "
            f"got {n_memory}, {n_train}, {n_test}"
        )
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(train_y))
    picks = {
        "memory": ("train", np.sort(order[:n_memory])),
        "train": ("train", np.sort(order[n_memory : n_memory + n_train])),
        "test": ("test", np.sort(rng.permutation(len(test_y))[:n_test])),
    }
    images = {"train": train_x.astype(np.float32) / 255.0, "test": test_x.astype(np.float32) / 255.0}
    labels = {"train": train_y, "test": test_y}
    attrs = measure_fashion(images["train"][picks["memory"][1]])  # terciles from the memory split only
    edges = {k: np.quantile(v, [1 / 3, 2 / 3]) for k, v in attrs.items()}

    def split(name):
        file, ids = picks[name]
        x, y = images[file][ids], labels[file][ids]
        a = measure_fashion(x)
        return Dataset.from_dict(
            {
                "pixel_values": x.tolist(),
                "caption": [fashion_caption(int(y[i]), {k: v[i] for k, v in a.items()}, edges) for i in range(len(y))],
                "label": y.tolist(),
                "index": ids.tolist(),
            }
        )

    return DatasetDict({name: split(name) for name in picks})


__all__ = ["FASHION_WORDS", "load_fashion_captions", "load_fashion_mnist", "measure_fashion", "read_idx"]
