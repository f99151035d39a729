"""Parallel modes, the inversion attack and ROUGE, and the MultiRC cloze data."""

from __future__ import annotations

import pytest
import torch

from hf_ext.fl_llama.arguments import FlLlamaTrainingArguments
from hf_ext.fl_llama.attack import InversionDecoder, attack_rouge, rouge, train_inversion
from hf_ext.fl_llama.data import (
    answer_token_ids,
    corpus,
    encode_cloze,
    load_multirc,
    partition_by_passage,
    train_tokenizer,  # fmt: skip
)
from hf_ext.fl_llama.parallel import build_setup, train
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.testing import tiny_batch


@pytest.fixture(scope="module")
def model():
    return tiny_llama(vocab_size=64, hidden_size=32, num_layers=4, max_positions=64, seed=0)


def test_client_batch_concatenates_and_steps_once_per_round(model):
    setup = build_setup(model, 1, 1, num_clients=2, mode="client_batch", args=FlLlamaTrainingArguments(max_steps=6))
    batches = [[tiny_batch(2, 8, seed=10 * m + s, vocab=64) for s in range(3)] for m in range(2)]
    res = train(setup, batches, mode="client_batch")
    assert setup.server.steps == 3  # one forward/backward/step of B per round, for both clients together
    assert all(len(ls) == 3 for ls in res["losses"])
    # each client's parts are its own
    assert not torch.equal(setup.clients[0].client.embed_tokens.weight, setup.clients[1].client.embed_tokens.weight)


def test_server_hierarchical_fedavg_of_sub_servers(model):
    setup = build_setup(model, 1, 1, num_clients=2, mode="server_hierarchical",
                        args=FlLlamaTrainingArguments(max_steps=4, learning_rate=1e-2))  # fmt: skip
    batches = [[tiny_batch(2, 8, seed=10 * m + s, vocab=64) for s in range(2)] for m in range(2)]
    train(setup, batches, mode="server_hierarchical", sync_every=100)  # only the final aggregation
    subs = [setup.server._subs[k].model.state_dict() for k in sorted(setup.server._subs)]
    start = model.state_dict()
    assert len(subs) == 2
    for key, value in subs[0].items():
        torch.testing.assert_close(value, subs[1][key])  # broadcast after FedAvg
        torch.testing.assert_close(setup.server.model.state_dict()[key], value)
    assert any(not torch.equal(v, start[f"model.layers.{int(k.split('.')[1]) + 1}.{k.split('.', 2)[2]}"])
               for k, v in subs[0].items() if k.startswith("layers.0."))  # fmt: skip


def test_rouge_closed_forms():
    assert rouge("the cat sat", "the cat sat") == {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}
    r = rouge("the cat sat on the mat", "the cat lay on the mat")
    assert r["rouge1"] == pytest.approx(5 / 6)  # 5 of 6 unigrams shared each way
    assert r["rouge2"] == pytest.approx(3 / 5)  # "the cat", "on the", "the mat"
    assert r["rougeL"] == pytest.approx(5 / 6)
    assert rouge("", "x")["rouge1"] == 0.0
    # the package's tokeniser, not whitespace splitting: punctuation does not split a sentence from itself (a
    # whitespace tokeniser scored this 0.222 ROUGE-2 against the hand-written version's own reference, issue 40)
    assert rouge("In 1998, revenue rose 12%.", "In 1998, revenue rose 12%.") == {
        "rouge1": 1.0,
        "rouge2": 1.0,
        "rougeL": 1.0,
    }
    # a known value with punctuation, by hand: tokens [revenue, rose, 12, in, 1998] vs [in, 1998, revenue, rose, 12]
    r = rouge("Revenue rose 12% in 1998.", "In 1998, revenue rose 12%.")
    assert r["rouge1"] == pytest.approx(1.0) and r["rouge2"] == pytest.approx(3 / 4)  # revenue rose, rose 12, in 1998
    assert r["rougeL"] == pytest.approx(3 / 5)  # LCS "revenue rose 12"
    with pytest.raises(TypeError, match="two strings"):
        rouge(None, "x")


@pytest.fixture(scope="module")
def multirc():
    return load_multirc("train", limit=12), load_multirc("val", limit=4)


def test_multirc_cloze_encoding(multirc):
    train_ex, val_ex = multirc
    assert len(train_ex) > 100 and {e.label for e in train_ex} == {0, 1}
    e = train_ex[0]
    assert e.prompt(5).endswith(f"Is it {e.answer}?") and "Question:" in e.prompt(5)
    tok = train_tokenizer(corpus(train_ex, 60), vocab_size=1000)
    yes, no = answer_token_ids(tok)
    enc = encode_cloze(tok, val_ex, max_length=48)
    assert enc["input_ids"].shape == (len(val_ex), 48)
    labelled = enc["labels"] != -100
    assert labelled.sum(-1).tolist() == [1] * len(val_ex) and labelled[:, -1].all()
    assert set(enc["labels"][:, -1].tolist()) <= {yes, no}
    assert (enc["labels"][:, -1] == yes).long().tolist() == enc["label"].tolist()
    parts = partition_by_passage(train_ex, 3)
    assert sum(map(len, parts)) == len(train_ex)
    assert not {p.passage_id for p in parts[0]} & {p.passage_id for p in parts[1]}
    with pytest.raises(ValueError, match="split must be"):
        load_multirc("dev")


def test_inversion_attack_degrades_with_noise(multirc):
    train_ex, _ = multirc
    tok = train_tokenizer(corpus(train_ex, 60), vocab_size=300)
    colluder, victim = (encode_cloze(tok, p, max_length=32) for p in partition_by_passage(train_ex, 2))
    model = tiny_llama(vocab_size=len(tok), hidden_size=32, num_layers=4, max_positions=64, seed=0)
    client = build_setup(model, 1, 1).clients[0].client
    from hf_ext.fl_llama.modeling_fl_llama import causal_mask_4d, position_ids_from_mask

    def hidden(enc, sigma, seed):
        m = enc["attention_mask"].bool()
        with torch.no_grad():
            h = client.head(enc["input_ids"], causal_mask_4d(m, m.shape[1]), position_ids_from_mask(m))
        return h + sigma * torch.randn(h.shape, generator=torch.Generator().manual_seed(seed))

    scores = {}
    for sigma in (0.0, 0.5):
        dec = InversionDecoder(client.config.base, attack_layers=1, seed=0)
        losses = train_inversion(dec, hidden(colluder, sigma, 1), colluder["input_ids"], colluder["attention_mask"],
                                 steps=80, lr=5e-3)  # fmt: skip
        assert losses[-1] < losses[0]
        scores[sigma] = attack_rouge(dec, tok, hidden(victim, sigma, 2)[:16], victim["input_ids"][:16],
                                     victim["attention_mask"][:16])  # fmt: skip
    assert scores[0.0]["rouge1"] > 0.3  # noiseless, shallow hidden states are largely invertible
    assert scores[0.5]["rouge1"] < scores[0.0]["rouge1"]


def test_margin_auc_matches_sklearn_with_ties_and_names_the_one_class_case():
    import math

    from sklearn.metrics import roc_auc_score

    from hf_ext.fl_llama.evaluation import margin_auc

    scores = torch.tensor([0.3, -1.0, 0.3, 2.0, 0.1, 0.3, -0.2])
    labels = torch.tensor([1, 0, 0, 1, 0, 1, 1])
    assert margin_auc(scores, labels) == pytest.approx(roc_auc_score(labels.numpy(), scores.numpy()))
    assert margin_auc(torch.full((4,), -3.0), torch.tensor([1, 0, 1, 0])) == 0.5  # a constant predictor: chance
    assert math.isnan(margin_auc(scores[:3], torch.ones(3, dtype=torch.long)))


def test_question_window_keeps_the_evidence_within_the_budget(multirc):
    from hf_ext.fl_llama.data import ClozeExample, encode_cloze_window, question_window

    train_ex, _ = multirc
    tok = train_tokenizer(corpus(train_ex, 60), vocab_size=1000)
    filler = " ".join(f"Filler sentence number {i} talks about weather." for i in range(40))
    e = ClozeExample(7, f"{filler} The red fox ate the grapes in Paris. {filler}", "Where did the fox eat grapes",
                     "in Paris", 1)  # fmt: skip
    count = lambda text: len(tok(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    assert count(e.prompt()) > 120
    text, fits = question_window(e, tok, 120)
    assert not fits and count(text) <= 120
    assert "The red fox ate the grapes in Paris." in text and text.endswith("Is it in Paris?")
    short = ClozeExample(1, "Tiny passage.", "Is it tiny", "yes", 1)
    assert question_window(short, tok, 120) == (short.prompt(), True)
    enc = encode_cloze_window(tok, [e, short], max_length=121)
    assert enc["fits"].tolist() == [False, True] and enc["input_ids"].shape == (2, 121)
    yes, _ = answer_token_ids(tok)
    assert enc["labels"][:, -1].tolist() == [yes, yes]
    assert int(enc["attention_mask"][0].sum()) == count(text) + 1  # the window whole (no cut), then the answer


def test_restricted_vocabulary_decoder_maps_ids_both_ways():
    from transformers import LlamaConfig

    cfg = LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1)  # fmt: skip
    head = torch.randn(50, 16)
    dec = InversionDecoder(cfg, vocab_ids=torch.tensor([3, 7, 42]), head_weight=head)
    assert torch.equal(dec.lm_head.weight, head[[3, 7, 42]])  # the public embedding rows of the kept ids
    assert dec.to_local(torch.tensor([[42, 3, 5, -100]])).tolist() == [[2, 0, -100, -100]]
    assert dec.to_global(torch.tensor([2, 0, 1])).tolist() == [42, 3, 7]
