"""The pretrained-base cache of `hf-ext reproduce h2tune`: keyed by config, init seed and steps; reused on rerun."""

import torch

from hf_ext.h2tune.data import VOCAB_SIZE
from hf_ext.h2tune.task import ClientSpec, RunConfig, pretrain_key, pretrained_base
from hf_ext.h2tune.testing import tiny_base, tiny_base_config


def _base(spec, seed):
    return tiny_base(tiny_base_config(spec.family, spec.layers, spec.hidden, VOCAB_SIZE), seed=seed)


def test_pretrained_base_is_cached_and_keyed(tmp_path):
    spec = ClientSpec("c", "gpt2", 1, 16, 4, "fill_in")
    run = RunConfig(pretrain_steps=2, cache_dir=str(tmp_path))
    first = pretrained_base(_base(spec, 1), spec, run, init_seed=1)
    folders = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert [p.name for p in folders] == [pretrain_key(_base(spec, 1), spec, 2, 1)]
    assert "init1-steps2" in folders[0].name and not any(p.name.startswith(".") for p in tmp_path.iterdir())
    again = pretrained_base(_base(spec, 1), spec, run, init_seed=1)  # loaded, not retrained
    for (n, a), (_, b) in zip(first.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), n
    wider = ClientSpec("c", "gpt2", 1, 32, 4, "fill_in")
    keys = {
        pretrain_key(_base(spec, 1), spec, 2, 1),
        pretrain_key(_base(spec, 1), spec, 3, 1),
        pretrain_key(_base(spec, 1), spec, 2, 2),
        pretrain_key(_base(wider, 1), wider, 2, 1),
    }
    assert len(keys) == 4
