"""The Spaces' one-line readings and input parsing: each says what the numbers shown mean, computed from them
(closed forms on hand-made rows), and refuses what the Space cannot serve with a message naming the limit."""

from __future__ import annotations

import numpy as np
import pytest


def test_fede4rag_corpus_is_built_in_or_the_visitors():
    from hf_ext.fede4rag import demo

    sources, texts = demo.parse_corpus("")
    assert len(texts) == len(demo.DEMO_PASSAGES) == 20
    assert sorted(set(sources)) == sorted({c for c, _ in demo.DEMO_PASSAGES}) and len(set(sources)) == 5
    sources, texts = demo.parse_corpus("first passage\n\n  second passage  \n")
    assert texts == ("first passage", "second passage") and sources == ("your passage 1", "your passage 2")
    with pytest.raises(ValueError, match=f"at most {demo.MAX_PASSAGES}"):
        demo.parse_corpus("\n".join(f"p{i}" for i in range(demo.MAX_PASSAGES + 1)))
    with pytest.raises(ValueError, match="passage 2 has"):
        demo.parse_corpus("short\n" + "x" * (demo.MAX_PASSAGE_CHARS + 1))


def test_fede4rag_reading_counts_shared_passages():
    from hf_ext.fede4rag import demo

    fed = [[1, "A", 0.9, "p1"], [2, "B", 0.8, "p2"], [3, "C", 0.7, "p3"]]
    zero = [[1, "B", 0.9, "p2"], [2, "A", 0.8, "p1"], [3, "D", 0.7, "p4"]]
    line = demo.reading(fed, zero, same_model=False)
    assert "share 2 of their 3 passages" in line and "a different passage first" in line
    assert "the same passage first" in demo.reading(fed, fed, same_model=False)
    assert "same zero-shot model" in demo.reading(fed, fed, same_model=True)


def test_fl_llama_reading_and_plot_follow_the_traffic_rows():
    from hf_ext.fl_llama import demo

    rows = [["with KV caches", 1000, 500, 17, 7.0, "yes"], ["no cache (prefix resent)", 12000, 2000, 16, 4.0, "yes"]]
    line = demo.reading(rows)
    assert "12.0× fewer bytes (1,000 vs 12,000)" in line and "server 4.0× fewer" in line and "identical" in line
    rows_noise = [r[:-1] + ["no (noise draws differ)"] for r in rows]
    assert "tokens differ" in demo.reading(rows_noise)
    ax = demo.traffic_plot(rows).axes[0]
    assert [[b.get_height() for b in c] for c in ax.containers] == [[1000, 500], [12000, 2000]]


@pytest.mark.parametrize(
    "prompt, answer",
    [
        ("3+4=", "7"),
        ("8+9=", "7"),
        ("print((3+4)%10)>", "7"),
        ("8+7 mod 10=", "5"),
        ("3+4? A1 B7 C2 D9:", "B"),
        ("3+4? A1 B2 C3 D9:", None),
        ("hello", None),
    ],
)
def test_h2tune_expected_answer(prompt, answer):
    from hf_ext.h2tune import demo

    assert demo.expected_answer(prompt) == answer


def test_h2tune_reading():
    from hf_ext.h2tune import demo

    rows = [["without adapter", "3", "no"], ["with federated H2Tune adapter", "7", "yes"]]
    assert "right answer from with federated H2Tune adapter" in demo.reading(rows, "model repo `x`")
    wrong = [[r[0], "3", "no"] for r in rows]
    assert "neither answer is right" in demo.reading(wrong, "model repo `x`")
    assert "untrained" in demo.reading(wrong, "**Note:** no model repo is linked")
    assert "no known answer" in demo.reading([[r[0], "3", "-"] for r in rows], "")


def test_proto_evfl_reading_verdicts():
    from hf_ext.proto_evfl.demo import reading

    better = [["accuracy", 60.0, 70.5], ["macro-F1", 50.0, 52.0]]
    assert "is better than vanilla VFL (accuracy +10.5 points, macro-F1 +2.0 points)" in reading(better)
    assert "is mixed against" in reading([["accuracy", 60.0, 70.0], ["macro-F1", 50.0, 49.0]])
    assert "is not better than" in reading([["accuracy", 60.0, 60.0], ["macro-F1", 50.0, 40.0]])


def test_tba_reading_names_shift_and_budget():
    from hf_ext.tba import demo

    rows = [[demo.SHIFT, 12.3], [demo.LINF, 7.98], ["victim gradient evaluations (↓ cheaper attack)", 10]]
    line = demo.reading(rows, "PGD", 8)
    assert "PGD moved the predicted joints by 12.3 mm" in line and "7.98/255 ≤ 8/255" in line


def test_tinyalign_reading_counts_words_in_place():
    from hf_ext.tinyalign.demo import reading

    rows = [
        ["reference (test split)", "a thick narrow seven , slanted right"],
        ["baseline connector (no retrieval)", "a narrow seven , slanted right"],  # shifted: 1 word in place
        ["TinyAlign, top-4 retrieval", "a thick narrow seven , upright"],
    ]
    assert "baseline connector (no retrieval) 1/7; TinyAlign 5/7" in reading(rows)
    uploaded = [["reference", "(uploaded image: no reference caption)"]] + rows[1:]
    assert "no reference caption" in reading(uploaded)


def test_amplitudes_reading_gap():
    from hf_ext.amplitudes.demo import reading

    data = {
        "x": np.array([0.01, 1.0]),
        "string": np.array([2.2, 3.0]),
        "field_theory": np.array([2.0, 2.0]),
        "xlabel": "α′",
        "log": True,
    }
    line = reading(data, 4)
    assert "string 2.2, field theory 2 (relative gap 10.00%)" in line and "α′ → 0" in line
    assert "poles" in reading({**data, "xlabel": "X13", "log": False}, 4)
