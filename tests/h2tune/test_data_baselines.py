"""Synthetic tasks, the character codec, and the HetLoRA baseline's pad → average → truncate."""

from __future__ import annotations

import random

import pytest
import torch
from peft import LoraConfig, get_peft_model

from hf_ext.h2tune.baselines import hetlora_round, lora_factors
from hf_ext.h2tune.data import EOS, TASKS, decode, encode, make_example, to_features
from hf_ext.h2tune.testing import tiny_base, tiny_base_config


def test_tasks_pose_the_same_skill():
    rng = random.Random(0)
    for task in TASKS:
        prompt, answer = make_example(task, 7, 8, rng)
        assert decode(encode(prompt + answer)) == prompt + answer
        if task == "choice":
            letter = prompt.split(" ")[1:][("ABCD".index(answer))]
            assert letter == f"{answer}5"  # (7 + 8) mod 10 = 5 behind the right letter
        else:
            assert answer == "5"
    with pytest.raises(ValueError, match="unsupported character"):
        encode("what?")


def test_features_train_only_on_answer():
    feats = to_features([("3+4=", "7")], max_len=10)
    labels = feats["labels"][0]
    assert labels[:5] == [-100] * 5 and labels[6] == EOS and decode([labels[5]]) == "7"
    assert sum(feats["attention_mask"][0]) == 7


def test_hetlora_round_closed_form():
    """Same base (width 32), ranks 2 and 4: the rank-2 client gets the first 2 rows of the rank-padded mean; a
    client on another base (width 48) is averaged with nobody."""
    cfg = dict(target_modules="all-linear", init_lora_weights=False)
    small = get_peft_model(tiny_base(tiny_base_config("llama", 2, 32)), LoraConfig(r=2, **cfg))
    large = get_peft_model(tiny_base(tiny_base_config("llama", 2, 32)), LoraConfig(r=4, **cfg))
    wide = get_peft_model(tiny_base(tiny_base_config("llama", 1, 48)), LoraConfig(r=4, **cfg))
    key = (0, 0)  # layer 0, q
    a_s, a_l, a_w = (lora_factors(m)[key][0].clone() for m in (small, large, wide))
    sent = hetlora_round([small, large, wide])
    mean = a_l / 2
    mean[:2] += a_s / 2
    torch.testing.assert_close(lora_factors(small)[key][0], mean[:2])
    torch.testing.assert_close(lora_factors(large)[key][0], mean)
    torch.testing.assert_close(lora_factors(wide)[key][0], a_w)  # no partner in its feature space: unchanged
    assert sent > 0


def test_client_split_tests_only_inputs_the_client_never_trained_on():
    from hf_ext.h2tune.data import client_split, operand_blocks

    def operands(prompt):
        import re

        return tuple(int(x) for x in re.findall(r"(\d)\+(\d)", prompt)[0])

    blocks = operand_blocks(4, seed=3)
    assert sorted(p for b in blocks for p in b) == [(a, b) for a in range(10) for b in range(10)]
    from hf_ext.h2tune.clients import CLIENTS

    splits = [client_split(spec.task, c, 3, 200, 50, seed=3) for c, spec in enumerate(CLIENTS)]
    trained = [{operands(p) for p, _ in train} for train, _ in splits]
    for c, (train, test) in enumerate(splits):
        tested = [operands(p) for p, _ in test]
        assert len(tested) == len(set(tested)) == 50 and len(train) == 200
        assert trained[c] <= set(blocks[c]) and not trained[c] & set(tested)  # disjoint from its own inputs
        # every test pair is a training pair of another client (there, in that client's format)
        assert set(tested) <= set().union(*(trained[o] for o in range(3) if o != c))
        assert not {p for p, _ in train} & {p for p, _ in test}  # no test prompt appears verbatim in training


def test_pooled_ceiling_poses_every_clients_pairs_in_its_own_format():
    from hf_ext.h2tune.clients import CLIENTS, client_pairs, pooled_pairs
    from hf_ext.h2tune.data import make_example
    from hf_ext.h2tune.task import RunConfig

    run = RunConfig(num_train=200, seed=3)
    own = {c: {p for p, _ in client_pairs(CLIENTS, c, run)[0]} for c in range(3)}
    for c, spec in enumerate(CLIENTS):
        pooled = pooled_pairs(CLIENTS, run, c)
        assert len(pooled) == 3 * 200  # as many examples as the three clients hold together
        # every pair in the client's own format: re-posing its operands reproduces the prompt
        fmt = {make_example(spec.task, a, b, random.Random(0))[0] for a in range(10) for b in range(10)}
        assert {p for p, _ in pooled} <= fmt
        # ... and it covers the other clients' operand pairs (their test pairs), not only its own
        others = {make_example(spec.task, *_ops(p), random.Random(0))[0] for o in range(3) if o != c for p in own[o]}
        assert others <= {p for p, _ in pooled}
        test = {p for p, _ in client_pairs(CLIENTS, c, run)[1]}
        assert test <= {p for p, _ in pooled}  # the ceiling sees the test inputs: what sharing could bring at best


def _ops(prompt):
    import re

    return tuple(int(x) for x in re.findall(r"(\d)\+(\d)", prompt)[0])


def test_derived_smollm2_layer_choice_and_drop_is_exact():
    from hf_ext.h2tune.derive import distill_loss, drop_layers, kept_layers

    assert kept_layers("smollm2-L4") == [0, 1, 28, 29] and kept_layers("smollm2-L5") == [0, 1, 2, 28, 29]
    with pytest.raises(ValueError, match="smollm2-L"):
        kept_layers("smollm2-L31")
    full = tiny_base(tiny_base_config("llama", 4, 32))
    dropped = drop_layers(tiny_base(tiny_base_config("llama", 4, 32)), [0, 3])
    small = tiny_base(tiny_base_config("llama", 2, 32))
    state = {
        k.replace("layers.1.", "layers.X.").replace("layers.3.", "layers.1.").replace("layers.X.", "layers.9."): v
        for k, v in full.state_dict().items()
    }
    small.load_state_dict({k: v for k, v in state.items() if "layers.9." not in k and "layers.2." not in k})
    ids = torch.randint(3, 60, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(dropped(input_ids=ids).logits, small(input_ids=ids).logits)
    assert dropped.config.num_hidden_layers == 2
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    assert distill_loss(small, dropped, batch).abs() < 1e-5  # identical student and teacher: KL 0
    assert distill_loss(full, dropped, batch) > 1e-4


def test_tokenizer_codec_poses_prompts_in_the_chat_template_and_ends_answers_with_eos():
    from hf_ext.core import pretrained as P
    from hf_ext.h2tune.data import TokenizerCodec

    if not P.smollm2_available():
        pytest.skip(P.SMOLLM2_PIP)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(P.smollm2_path())
    chat, raw = TokenizerCodec(tok), TokenizerCodec(tok, chat=False)
    assert chat.chat and not raw.chat  # SmolLM2-Instruct ships a chat template: used by default
    text = tok.decode(chat.prompt_ids("3+4="))
    assert text.endswith("<|im_start|>user\n3+4=<|im_end|>\n<|im_start|>assistant\n")  # one user turn, then ours
    assert tok.decode(raw.prompt_ids("3+4=")) == tok.bos_token + "3+4="
    feats = to_features([("3+4=", "7")], max_len=64, codec=chat)
    answer = [t for t in feats["labels"][0] if t != -100]
    assert answer == chat.answer_ids("7") + [tok.eos_token_id] and tok.decode(answer[:-1]) == "7"
    assert chat.decode(answer) == "7"  # EOS ends the decoded answer
