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


def test_phase_one_builds_every_base_the_run_makes_and_no_other(monkeypatch, tmp_path):
    """Before the parallel federations, the run builds each base it makes once — a tiny decoder is pretrained, a
    derived SmolLM2 healed — so two workers never build the same base at once; a shipped base is only loaded."""
    import hf_ext.h2tune.derive as derive
    import hf_ext.h2tune.reproduce as R
    from hf_ext.h2tune.clients import ClientSpec
    from hf_ext.h2tune.presets import PRETRAINED
    from hf_ext.h2tune.task import RunConfig

    healed = []
    monkeypatch.setattr(derive, "derive_smollm2", lambda name, steps, cache: healed.append((name, steps, cache)))
    run = RunConfig(cache_dir=str(tmp_path), **{**PRETRAINED, "heal_steps": 7})  # smollm2, smollm2-L24, -L28
    assert [R._built_base(s) for s in run.clients] == [False, True, True]
    assert R._built_base(ClientSpec("c2", "gpt2", 2, 32, 4, "program"))  # a tiny decoder: pretrained by the run
    R._pretrain_job(1, run)
    assert healed == [("smollm2-L24", 7, str(tmp_path))]
