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
    cfg = dict(target_modules="all-linear", init_lora_weights=False)
    small = get_peft_model(tiny_base(tiny_base_config("llama", 2, 32)), LoraConfig(r=2, **cfg))
    large = get_peft_model(tiny_base(tiny_base_config("llama", 1, 48)), LoraConfig(r=4, **cfg))
    key = (0, 0)  # layer 0, q
    a_s, _ = (t.clone() for t in lora_factors(small)[key])
    a_l, _ = (t.clone() for t in lora_factors(large)[key])
    only_small = lora_factors(small)[(1, 0)][0].clone()
    sent = hetlora_round([small, large])
    mean = torch.zeros(4, 48)
    mean[:2, :32] += a_s / 2
    mean += a_l / 2
    torch.testing.assert_close(lora_factors(small)[key][0], mean[:2, :32])
    torch.testing.assert_close(lora_factors(large)[key][0], mean)
    torch.testing.assert_close(lora_factors(small)[(1, 0)][0], only_small)  # no partner: unchanged
    assert sent > 0
