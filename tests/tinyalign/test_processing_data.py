"""The image processor (resize, channels, normalisation), the `ProcessorMixin` round trip through `AutoProcessor`,
Fashion-MNIST from IDX files with measured captions, the exact retrieval cache, and `hf-ext train tinyalign`."""

import gzip
import json

import numpy as np
import pytest
import torch

from hf_ext.tinyalign.fashion import load_fashion_captions, load_fashion_mnist, measure_fashion, read_idx
from hf_ext.tinyalign.processing_tinyalign import TinyAlignImageProcessor
from hf_ext.tinyalign.testing import tiny_batch, tiny_config, tiny_model, tiny_processor


def test_image_processor_resizes_converts_and_normalises():
    from PIL import Image

    proc = TinyAlignImageProcessor(size=4, num_channels=3, image_mean=[0.5, 0.25, 0.0], image_std=[0.5, 0.25, 2.0])
    grey = np.full((10, 6), 153, dtype=np.uint8)  # 0.6 everywhere
    out = proc([grey, Image.fromarray(grey), torch.full((1, 10, 6), 0.6)], return_tensors="pt")["pixel_values"]
    assert out.shape == (3, 3, 4, 4)
    want = torch.tensor([(0.6 - 0.5) / 0.5, (0.6 - 0.25) / 0.25, 0.6 / 2.0])[:, None, None].expand(3, 4, 4)
    for row in out:
        torch.testing.assert_close(row, want, atol=3e-3, rtol=0)
    inv = TinyAlignImageProcessor(size=2, invert=True)([np.zeros((2, 2))])["pixel_values"]
    torch.testing.assert_close(inv, torch.ones(1, 1, 2, 2))
    with pytest.raises(ValueError, match="image_mean and image_std need 3 values"):
        TinyAlignImageProcessor(num_channels=3, image_mean=[0.5])


def test_processor_saves_and_loads_through_auto_processor(tmp_path):
    from transformers import AutoImageProcessor, AutoProcessor

    config = tiny_config()
    proc = tiny_processor(config)
    config.save_pretrained(tmp_path)
    proc.save_pretrained(tmp_path)
    loaded = AutoProcessor.from_pretrained(tmp_path)
    assert type(loaded).__name__ == "TinyAlignProcessor"
    assert type(AutoImageProcessor.from_pretrained(tmp_path)).__name__ == "TinyAlignImageProcessor"
    assert (loaded.num_image_tokens, loaded.num_memory_tokens) == (config.num_image_tokens, config.num_memory_tokens)
    want = tiny_batch(config)
    rows = __import__("hf_ext.tinyalign.testing", fromlist=["tiny_data"]).tiny_data(4, seed=1)
    got = loaded(rows["pixel_values"], list(rows["caption"]))
    for key in want:
        torch.testing.assert_close(got[key], want[key])
    loaded.check_config(config)


def _write_idx(path, array):
    dims = np.asarray(array.shape, dtype=">i4").tobytes()
    with gzip.open(path, "wb") as f:
        f.write(bytes([0, 0, 8, array.ndim]) + dims + array.astype(np.uint8).tobytes())


def _fake_fashion(folder, n_train=60, n_test=20):
    rng = np.random.default_rng(0)
    for split, n in (("train", n_train), ("t10k", n_test)):
        x = np.zeros((n, 28, 28), dtype=np.uint8)
        for i in range(n):  # a dark, grey or light rectangle of a random width
            w = int(rng.integers(4, 24))
            x[i, 4:24, 2 : 2 + w] = (60, 150, 250)[i % 3]
        _write_idx(folder / f"{split}-images-idx3-ubyte.gz", x)
        _write_idx(folder / f"{split}-labels-idx1-ubyte.gz", np.arange(n) % 10)


def test_idx_reader_and_fashion_splits_are_disjoint_with_measured_captions(tmp_path):
    _fake_fashion(tmp_path)
    x = read_idx(tmp_path / "train-images-idx3-ubyte.gz")
    assert x.shape == (60, 28, 28) and x.dtype == np.uint8 and x[2, 10, 3] == 250
    data = load_fashion_captions(n_memory=30, n_train=20, n_test=10, root=tmp_path)
    assert [len(data[s]) for s in ("memory", "train", "test")] == [30, 20, 10]
    assert not set(data["memory"]["index"]) & set(data["train"]["index"])  # same file, disjoint rows
    order = {"dark": 0, "grey": 1, "light": 2}
    pairs = sorted((np.asarray(r["pixel_values"]).max(), order[r["caption"].split()[1]]) for r in data["train"])
    assert [w for _, w in pairs] == sorted(w for _, w in pairs)  # brighter never gets a darker word
    for row in data["train"]:
        level = round(np.asarray(row["pixel_values"]).max() * 255)
        word = row["caption"].split()[1]  # measured on the image (terciles of the memory split), not the label
        assert word == {60: "dark", 250: "light"}[level] if level != 150 else word in ("grey", "light", "dark")
        assert (
            row["caption"].split()[3]
            == ("tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot")[
                row["label"]
            ]
        )
    a = measure_fashion(np.asarray(data["train"]["pixel_values"][:2], dtype=np.float32))
    assert set(a) == {"brightness", "width", "area"}


def test_missing_fashion_mnist_names_the_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        load_fashion_mnist(tmp_path)
    (tmp_path / "bad.gz").write_bytes(gzip.compress(b"\x00\x00\x0d\x01\x00\x00\x00\x02ab"))
    with pytest.raises(ValueError, match="not an unsigned-byte IDX file"):
        read_idx(tmp_path / "bad.gz")


def test_retrieval_cache_hits_are_exact_and_a_changed_weight_drops_them():
    model = tiny_model().freeze_for_stage1().eval()
    batch = tiny_batch(model.config)
    with torch.no_grad():
        first = model(**batch)
        second = model(**batch)
    assert model.retrieval_cache.hits == 1 and model.retrieval_cache.misses == 1
    assert torch.equal(first.retrieved_ids, second.retrieved_ids)
    torch.testing.assert_close(first.logits, second.logits)
    with torch.no_grad():  # an in-place change of a frozen weight the query reads: the cache must not answer
        model.retrieval_connector.linear_2.weight.mul_(-1.0)
        changed = model(**batch)
        model.retrieval_cache.clear()
        searched = model(**batch)
    assert torch.equal(changed.retrieved_ids, searched.retrieved_ids)
    assert not torch.equal(changed.retrieved_ids, first.retrieved_ids)
    trainable = tiny_model()  # the embeddings train: no caching at all
    with torch.no_grad():
        trainable(**batch)
        trainable(**batch)
    assert trainable.retrieval_cache.hits == 0 and not trainable.retrieval_cache.entries


def test_train_entry_point_refuses_a_bad_setting_and_saves_model_with_processor(tmp_path):
    from hf_ext.core.hub import save_artifact
    from hf_ext.tinyalign.train import TinyAlignArtifact, main

    with pytest.raises(ValueError, match="--setting must be 'tiny' or 'pretrained'"):
        main(["--setting", "imagenet", "--output_dir", str(tmp_path / "x")])
    model = tiny_model()
    out = save_artifact(TinyAlignArtifact(model, tiny_processor(model.config)), tmp_path / "artifact")
    names = {p.name for p in out.iterdir()}
    assert {"model.safetensors", "memory_bank.safetensors", "processor_config.json", "tokenizer.json"} <= names
    assert json.loads((out / "processor_config.json").read_text())["num_memory_tokens"] == 8


def _pil_digit(seed=1):
    from PIL import Image

    from hf_ext.tinyalign.testing import tiny_data

    pixels = np.asarray(tiny_data(1, seed=seed)["pixel_values"][0], dtype=np.float32)[0]
    return Image.fromarray((pixels * 255).round().astype("uint8"), mode="L")


def test_image_text_to_text_pipeline_matches_generate(tmp_path):
    """`pipeline("image-text-to-text", model=dir)` loads model + processor and generates what `generate` does, from
    the prompt (`text=""`) or continuing a caption start."""
    from transformers import AutoModelForImageTextToText, pipeline

    config = tiny_config()
    tiny_model(config).save_pretrained(tmp_path)
    tiny_processor(config).save_pretrained(tmp_path)
    model = AutoModelForImageTextToText.from_pretrained(tmp_path).eval()
    proc = tiny_processor(config)
    pipe = pipeline("image-text-to-text", model=str(tmp_path))
    image = _pil_digit()
    for start in ("", "a"):
        inputs = proc(image, text=start)
        assert inputs["input_ids"].shape[1] == len(proc.prefix_ids()) + (1 if start else 0)
        gen = model.generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False)
        want = proc.decode(gen[:, inputs["input_ids"].shape[1] :])[0]
        got = pipe(
            images=image, text=start, generate_kwargs={"max_new_tokens": 4, "min_new_tokens": 4}, return_full_text=False
        )
        assert got[0]["generated_text"].strip() == want


def test_generation_prompt_refuses_ragged_starts():
    config = tiny_config()
    proc = tiny_processor(config)
    image = _pil_digit()
    with pytest.raises(ValueError, match="different token lengths"):
        proc([image, image], text=["a", "a thick narrow"])
    with pytest.raises(ValueError, match="one per image"):
        proc([image, image], text=["a"])
    same = proc([image, image], text="a")
    assert same["input_ids"].shape[0] == 2 and "labels" not in same
