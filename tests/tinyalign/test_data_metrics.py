"""Digit captions from measured attributes, the generic image–caption loaders, and the caption metrics."""

import json
import math

import numpy as np
import pytest
import torch

from hf_ext.tinyalign.data import (
    DIGIT_WORDS,
    from_image_caption_dataset,
    load_caption_folder,
    load_digit_captions,
    measure_attributes,
)
from hf_ext.tinyalign.metrics import class_word_accuracy, corpus_bleu, steps_to_threshold, token_accuracy


@pytest.fixture(scope="module")
def digits():
    return load_digit_captions()


def test_splits_are_disjoint_stratified_and_sized(digits):
    ids = {k: set(v["index"]) for k, v in digits.items()}
    names = sorted(ids)
    assert names == ["memory", "test", "train", "validation"]
    assert all(not (ids[a] & ids[b]) for a in names for b in names if a < b)
    assert sum(map(len, ids.values())) == 1797
    assert len(ids["memory"]) == 718 and len(ids["validation"]) == 120 and len(ids["test"]) == 240
    for split in digits.values():
        counts = np.bincount(split["label"], minlength=10)
        assert counts.min() >= 0.8 * counts.mean()


def test_captions_need_more_than_the_class(digits):
    train = digits["train"]
    for cap, label in zip(train["caption"], train["label"]):
        assert DIGIT_WORDS[label] in cap.split()
    # within one class the captions vary with the measured attributes
    sevens = {c for c, y in zip(train["caption"], train["label"]) if y == 7}
    assert len(sevens) >= 8
    assert len(set(train["caption"])) > 60


def test_measured_attributes_follow_the_image():
    img = np.zeros((3, 8, 8))
    img[0, 1:7, 3] = 1.0  # thin vertical bar
    img[1, 1:7, 2:5] = 1.0  # thick bar
    for r in range(1, 7):  # a stroke whose top is to the right: leans right
        img[2, r, 7 - r] = 1.0
    a = measure_attributes(img)
    assert a["ink"][1] > a["ink"][0] and a["width"][1] == 3 and a["width"][0] == 1
    assert abs(a["slant"][0]) < 1e-9 and a["slant"][2] > 0.5


def test_caption_folder_loader_reads_imagefolder_and_coco(tmp_path):
    from PIL import Image

    for i in range(2):
        Image.fromarray((np.eye(16) * 255 * (i + 1) / 2).astype(np.uint8)).save(tmp_path / f"{i}.png")
    (tmp_path / "metadata.jsonl").write_text(
        "\n".join(json.dumps({"file_name": f"{i}.png", "caption": f"cap {i}"}) for i in range(2))
    )
    ds = load_caption_folder(tmp_path)
    assert ds["caption"] == ["cap 0", "cap 1"]
    px = np.asarray(ds["pixel_values"])
    assert px.shape == (2, 1, 8, 8) and 0.0 <= px.min() and px.max() <= 1.0
    (tmp_path / "metadata.jsonl").unlink()
    (tmp_path / "captions.json").write_text(
        json.dumps({"images": [{"id": 7, "file_name": "1.png"}], "annotations": [{"image_id": 7, "caption": "coco"}]})
    )
    assert load_caption_folder(tmp_path)["caption"] == ["coco"]
    with pytest.raises(ValueError, match="no column 'text'"):
        from_image_caption_dataset(ds, image_column="pixel_values", caption_column="text")


def test_token_accuracy_is_shifted_and_masked():
    labels = torch.tensor([[-100, 3, 4, -100]])
    logits = torch.zeros(1, 4, 6)
    logits[0, 0, 3] = 1  # predicts position 1 correctly
    logits[0, 1, 5] = 1  # wrong for position 2
    logits[0, 2, 0] = 1  # position 3 is ignored
    assert token_accuracy(logits, labels) == (1, 2)


def test_bleu_closed_forms():
    assert corpus_bleu(["a b c d e"], ["a b c d e"]) == pytest.approx(100.0)
    assert corpus_bleu(["x y z w"], ["a b c d"]) == 0.0
    # hypothesis = first 4 of 5 reference words: all precisions 1, brevity penalty exp(1 - 5/4)
    assert corpus_bleu(["a b c d"], ["a b c d e"]) == pytest.approx(100 * math.exp(1 - 5 / 4))
    # one wrong unigram out of 5: p1 = 4/5, p2 = 2/4, p3 = 1/3, p4 = 0/2 -> 0 without smoothing
    assert corpus_bleu(["a b X d e"], ["a b c d e"]) == 0.0
    nltk = pytest.importorskip("nltk.translate.bleu_score")
    hyps = ["a thin narrow seven , upright", "a thick wide one , slanted left"]
    refs = ["a thin narrow seven , slanted right", "a thick wide one , slanted left"]
    ref = nltk.corpus_bleu([[r.split()] for r in refs], [h.split() for h in hyps])
    assert corpus_bleu(hyps, refs) == pytest.approx(100 * ref)


def test_class_word_accuracy_and_steps_to_threshold():
    assert class_word_accuracy(["a thin seven , upright", "a one"], ["a thick seven , upright", "a two"]) == 0.5
    assert steps_to_threshold([3, 2, 1, 1, 1, 1, 1], 1.5, window=3) == 4
    assert steps_to_threshold([3, 3, 3], 1.0, window=2) is None


def test_constant_references_are_chosen_on_train_and_scored_on_test():
    """The training-majority class (not the test split's own) and the best constant caption by training BLEU, which
    equals a brute-force search with `corpus_bleu`; both scored on the test captions."""
    from hf_ext.tinyalign.metrics import constant_references, corpus_bleu

    words = ["five", "two", "seven"]
    train = ["a thin five , upright"] * 3 + ["a thick two , slanted", "a thin two , upright", "a thin seven , upright"]
    test = ["a thin two , upright", "a thick two , upright", "a thin five , slanted", "a thin seven , upright"]
    refs = constant_references(train, test, words)
    assert refs["majority_class"] == "five"  # the test split's own majority is "two"
    assert refs["majority_class_word_accuracy"] == 0.25
    brute = max(sorted(set(train)), key=lambda c: corpus_bleu([c] * len(train), train))
    assert refs["best_constant_caption"] == brute
    assert refs["best_constant_caption_train_bleu"] == pytest.approx(corpus_bleu([brute] * len(train), train))
    assert refs["best_constant_caption_test_bleu"] == pytest.approx(corpus_bleu([brute] * len(test), test))
    with pytest.raises(ValueError, match="non-empty"):
        constant_references([], test, words)


def test_quick_reproduce_verdicts_are_paired_over_seeds():
    from hf_ext.core.reporting import CONFIRMED, INCONCLUSIVE, PREMISE_ABSENT, REFUTED
    from hf_ext.tinyalign.metrics import majority_hits
    from hf_ext.tinyalign.reproduce import TinyAlignReproduceArguments, rules, verdicts

    run = TinyAlignReproduceArguments(lm_sizes=["small"], seeds=[0, 1], fractions=[0.4, 1.0])
    assert set(rules(run)) == {"premise", "tinyalign_vs_baseline", "data_efficiency"}
    test_captions = ["a thin four", "a wide four", "a thin seven", "a bold one", "a thin two", "a wide five"] * 5
    reference = majority_hits(test_captions, "four")
    assert reference == [1, 1, 0, 0, 0, 0] * 5
    learned = [1, 1, 1, 1, 1, 0] * 5  # 25 of 30 digits named right, against the majority class's 10

    def cell(acc, hits=learned):
        return {"metrics": {"token_accuracy": acc, "class_word_hits": hits}}

    done = {
        ("small", "baseline", 0, 1.0): cell(0.80),
        ("small", "baseline", 1, 1.0): cell(0.70),
        ("small", "k4", 0, 1.0): cell(0.85),  # +0.05 in both seeds: confirmed
        ("small", "k4", 1, 1.0): cell(0.75),
        ("small", "k4", 0, 0.4): cell(0.60),  # -0.2 in both seeds: refuted
        ("small", "k4", 1, 0.4): cell(0.50),
    }
    got = verdicts(run, done, reference)
    assert got["premise (small LM)"].verdict == CONFIRMED
    assert got["premise (small LM)"].difference.n == 30  # paired over test digits, not seeds
    assert got["premise (small LM)"].difference.mean == pytest.approx((25 - 10) / 30)
    assert got["tinyalign_vs_baseline (small LM)"].verdict == CONFIRMED
    assert got["data_efficiency (small LM)"].verdict == REFUTED
    done[("small", "k4", 1, 1.0)] = cell(0.65)  # +0.05 and -0.05: the interval spans 0
    assert verdicts(run, done, reference)["tinyalign_vs_baseline (small LM)"].verdict == INCONCLUSIVE
    # a baseline that only ever names the majority class has learned nothing: neither claim can be read
    for s in (0, 1):
        done[("small", "baseline", s, 1.0)] = cell(0.70, hits=reference)
    got = verdicts(run, done, reference)
    assert got["premise (small LM)"].verdict != CONFIRMED
    assert {got[f"{n} (small LM)"].verdict for n in ("tinyalign_vs_baseline", "data_efficiency")} == {PREMISE_ABSENT}
    # with one seed the premise still has an interval (its unit is the test digit)
    one = TinyAlignReproduceArguments(lm_sizes=["small"], seeds=[0], fractions=[0.4, 1.0])
    done[("small", "baseline", 0, 1.0)] = cell(0.80)
    assert verdicts(one, done, reference)["premise (small LM)"].verdict == CONFIRMED
    with pytest.raises(ValueError, match="different test sets"):
        verdicts(one, done, reference[:-1])
