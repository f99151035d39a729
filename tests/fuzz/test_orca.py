"""Bad-input fuzz suite for ORCA (issue 17): every case must fail with a clear error naming the problem."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hf_ext.core.testing import BadInput, assert_clear_error
from hf_ext.orca import OrcaModel
from hf_ext.orca.data import bin_dwell_time, train_val_test_split, validate_orca_frame
from hf_ext.orca.metrics import dt_metrics
from hf_ext.orca.spurious_generator import SpuriousOrcaConfig
from hf_ext.orca.testing import tiny_batch, tiny_config
from hf_ext.orca.train import OrcaTrainingArguments


def _forward(train: bool = False, **changes):
    def call():
        batch = tiny_batch(8)
        for key, change in changes.items():
            batch[key] = change(batch[key])
        model = OrcaModel(tiny_config())
        model.train(train)
        return model(**batch)

    return call


def _set(index, value):
    def change(t):
        t = t.clone()
        t[index] = value
        return t

    return change


def _config(**kwargs):
    return lambda: tiny_config(**kwargs)


def _loaded(**changes):
    """A saved tiny config whose config.json was edited by hand, loaded back (the strict checks run on load too)."""

    def call():
        import json
        import tempfile
        from pathlib import Path

        from hf_ext.orca import OrcaConfig

        folder = Path(tempfile.mkdtemp(prefix="orca_cfg_"))
        tiny_config().save_pretrained(folder)
        raw = json.loads((folder / "config.json").read_text())
        raw.update(changes)
        (folder / "config.json").write_text(json.dumps(raw))
        return OrcaConfig.from_pretrained(folder)

    return call


def _train_cli(*flags):
    def call():
        from hf_ext.orca.train import build_parser

        return build_parser().parse_args_into_dataclasses(args=["--output_dir", "unused", *flags])

    return call


def _reproduce(*flags):
    import tempfile

    from hf_ext.orca.reproduce import main

    return main(["--out", tempfile.mkdtemp(prefix="orca_repro_"), *flags])


def _frame(**columns):
    base = {
        "user_id": [0, 1, 2],
        "item_id": [1, 0, 2],
        "click": [1, 0, 1],
        "dwell_bin": [3, -100, 0],
        "dwell_seconds": [40.0, 0.0, 1.0],
    }
    base.update(columns)
    return pd.DataFrame(base)


CASES = [
    # Model entry point: the batch.
    BadInput(
        "empty batch",
        _forward(input_ids=lambda t: t[:0], click_labels=lambda t: t[:0], dwell_labels=lambda t: t[:0]),
        "empty batch",
    ),
    BadInput("negative id", _forward(input_ids=_set((0, 1), -3)), r"negative id.*>= 0"),
    BadInput("float input_ids", _forward(input_ids=lambda t: t.float()), "integer tensor"),
    BadInput("input_ids as a list", _forward(input_ids=lambda t: t.tolist()), "integer tensor"),
    BadInput("too few fields", _forward(input_ids=lambda t: t[:, :2]), r"shape \(batch, 3\)"),
    BadInput("1-D input_ids", _forward(input_ids=lambda t: t[:, 0]), r"shape \(batch, 3\)"),
    BadInput("NaN click label", _forward(click_labels=_set(0, float("nan"))), r"click_labels.*0 and 1"),
    BadInput("click label 2", _forward(click_labels=_set(0, 2.0)), r"click_labels.*0 and 1"),
    BadInput("click labels of the wrong length", _forward(click_labels=lambda t: t[:3]), r"click_labels.*shape \(8,\)"),
    BadInput("dwell bin out of range", _forward(dwell_labels=_set(0, 8)), r"dwell_labels.*\[0, 8\)"),
    BadInput("negative dwell bin", _forward(dwell_labels=_set(0, -5)), r"dwell_labels.*\[0, 8\)"),
    BadInput("float dwell labels", _forward(dwell_labels=lambda t: t.float()), r"dwell_labels.*integer"),
    BadInput(
        "training batch of one row",
        _forward(train=True, input_ids=lambda t: t[:1], click_labels=lambda t: t[:1], dwell_labels=lambda t: t[:1]),
        "at least 2 rows",
    ),
    BadInput(
        "counterfactual loss without ORCA",
        lambda: OrcaModel(tiny_config(use_orca=False)).counterfactual_nde_loss(**tiny_batch(8)),
        "use_orca",
    ),
    # Model entry point: the config.
    BadInput("embed_dim = 0", _config(embed_dim=0), r"embed_dim.*>= 1"),
    BadInput("num_experts = 0", _config(num_experts=0), r"num_experts.*>= 1"),
    BadInput("num_task_experts = -1", _config(num_task_experts=-1), r"num_task_experts.*>= 1"),
    BadInput("attention_heads = 0", _config(attention_heads=0), r"attention_heads.*>= 1"),
    BadInput("attention_heads not dividing the features", _config(attention_heads=3), "attention_heads=3 must divide"),
    BadInput("alpha = nan", _config(alpha=float("nan")), r"alpha.*finite"),
    BadInput("beta < 0", _config(beta=-1.0), r"beta.*>= 0"),
    BadInput("ctr_loss_weight = inf", _config(ctr_loss_weight=float("inf")), r"ctr_loss_weight.*finite"),
    BadInput("dropout = 1", _config(dropout=1.0), r"dropout.*\[0, 1\)"),
    BadInput("zero-width expert layer", _config(expert_dims=[8, 0]), r"expert_dims.*>= 1"),
    BadInput("vocabulary size 0", _config(field_vocab_sizes=[11, 0, 5]), r"field_vocab_sizes.*'item_id'"),
    BadInput("unknown backbone", _config(backbone="transformer"), r"backbone must be one of"),
    BadInput("unknown post-click field", _config(post_click_fields=["dwell"]), "post_click_fields"),
    BadInput("decreasing bin edges", _config(bin_edges=[0.1, 5.0, 3.0, 9.0]), "strictly increasing"),
    # Training arguments.
    BadInput(
        "mask_fea_ratio > 1",
        lambda: OrcaTrainingArguments(output_dir="unused", mask_fea_ratio=1.5),
        r"mask_fea_ratio.*\[0, 1\]",
    ),
    BadInput(
        "early_stopping_patience = 0",
        lambda: OrcaTrainingArguments(output_dir="unused", early_stopping_patience=0),
        "early_stopping_patience",
    ),
    # Strict config (issue 38): types and ranges at construction, naming the field.
    BadInput("config: vocab size as a string", _config(field_vocab_sizes=[11, "13", 5]), r"field_vocab_sizes.*'13'"),
    BadInput("config: fractional vocab size", _config(field_vocab_sizes=[11, 13.5, 5]), r"field_vocab_sizes.*13\.5"),
    BadInput("config: embed_dim as a string", _config(embed_dim="4"), r"embed_dim.*integer"),
    BadInput("config: use_inst as a string", _config(use_inst="yes"), r"use_inst.*true or false"),
    BadInput("config: field name None", _config(field_names=["user_id", None, "category"]), r"field_names.*strings"),
    BadInput("config: NaN bin edge", _config(bin_edges=[0.1, float("nan"), 26.1]), r"bin_edges.*finite"),
    BadInput("config: dropout None", _config(dropout=None), r"dropout.*finite number"),
    BadInput("config: negative bin seconds", _config(bin_seconds=[-1.0] + [1.0] * 7), r"bin_seconds.*positive"),
    BadInput("config: initializer_range 0", _config(initializer_range=0.0), r"initializer_range.*> 0"),
    # ... and on load (config.json edited by hand).
    BadInput("loaded config: embed_dim '4'", _loaded(embed_dim="4"), r"embed_dim.*integer"),
    BadInput("loaded config: vocab size 13.5", _loaded(field_vocab_sizes=[11, 13.5, 5]), r"field_vocab_sizes"),
    BadInput("loaded config: dropout 1.5", _loaded(dropout=1.5), r"dropout.*\[0, 1\)"),
    BadInput("loaded config: use_orca 'no'", _loaded(use_orca="no"), r"use_orca.*true or false"),
    # CLI numbers by range, naming the flag (`hf-ext train orca`).
    BadInput("train: --num_impressions -5", _train_cli("--num_impressions", "-5"), r"--num_impressions.*>= 100"),
    BadInput(
        "train: --shortcut_strength nan", _train_cli("--shortcut_strength", "nan"), r"--shortcut_strength.*finite"
    ),
    BadInput("train: --shortcut-strength -1", _train_cli("--shortcut-strength", "-1"), r"--shortcut_strength.*>= 0"),
    BadInput("train: --generator_seed -1", _train_cli("--generator_seed", "-1"), r"--generator_seed.*>= 0"),
    BadInput("train: --mask_fea_ratio 2", _train_cli("--mask_fea_ratio", "2"), r"--mask_fea_ratio.*\[0, 1\]"),
    BadInput("train: --learning_rate 0", _train_cli("--learning_rate", "0"), r"--learning_rate.*> 0"),
    BadInput("train: --learning_rate inf", _train_cli("--learning_rate", "inf"), r"--learning_rate.*finite"),
    BadInput("train: --seed -1", _train_cli("--seed", "-1"), r"--seed.*>= 0"),
    BadInput("train: --per_device_train_batch_size 0", _train_cli("--per_device_train_batch_size", "0"), r"batch_size"),
    BadInput("train: --nde_lr_ratio 0", _train_cli("--nde_lr_ratio", "0"), r"--nde_lr_ratio.*> 0"),
    BadInput("train: --weight_decay -1", _train_cli("--weight_decay", "-1"), r"--weight_decay.*>= 0"),
    # CLI numbers by range, naming the flag (`hf-ext reproduce orca`), checked before any work.
    BadInput("reproduce: --seeds -1", lambda: _reproduce("--seeds", "-1"), r"--seeds.*\[0, 2\*\*32\)"),
    BadInput("reproduce: --seeds 0 0", lambda: _reproduce("--seeds", "0", "0"), r"--seeds.*distinct"),
    BadInput("reproduce: --strengths nan", lambda: _reproduce("--strengths", "nan"), r"--strengths.*finite"),
    BadInput("reproduce: --test-strength -1", lambda: _reproduce("--test-strength", "-1"), r"--test-strength"),
    BadInput("reproduce: --num-impressions 10", lambda: _reproduce("--num-impressions", "10"), r"--num-impressions"),
    BadInput("reproduce: --epochs 0", lambda: _reproduce("--epochs", "0"), r"--epochs.*> 0"),
    BadInput("reproduce: --workers 0", lambda: _reproduce("--workers", "0"), r"--workers.*>= 1"),
    # Data entry points.
    BadInput(
        "float field ids",
        lambda: validate_orca_frame(_frame(user_id=[0.5, 1.0, 2.0]), ["user_id", "item_id"]),
        r"'user_id'.*integers",
    ),
    BadInput(
        "id above the given vocabulary",
        lambda: validate_orca_frame(_frame(), ["user_id", "item_id"], vocab_sizes=[2, 3]),
        r"'user_id'.*\[0, 2\)",
    ),
    BadInput("empty frame", lambda: validate_orca_frame(_frame().iloc[:0], ["user_id", "item_id"]), "no rows"),
    BadInput(
        "missing label column",
        lambda: validate_orca_frame(_frame().drop(columns=["click"]), ["user_id", "item_id"]),
        "click",
    ),
    BadInput(
        "NaN click in a frame",
        lambda: validate_orca_frame(_frame(click=[1.0, np.nan, 1.0]), ["user_id"]),
        r"'click'.*0 and 1",
    ),
    BadInput(
        "split fractions not summing to 1",
        lambda: train_val_test_split(
            __import__("datasets").Dataset.from_dict({"r": list(range(50))}), 0, (0.5, 0.2, 0.2)
        ),
        "fractions",
    ),
    BadInput("bin edges not covering [1, 400] s", lambda: bin_dwell_time([3.0], [2.0, 10.0, 500.0]), "cover"),
    BadInput(
        "dt_metrics given logits",
        lambda: dt_metrics(
            [0, 1], np.array([[3.0] + [0.0] * 7, [0.0, 2.0] + [0.0] * 6]), dwell_seconds_true=[1.0, 14.0]
        ),
        "sum to 1",
    ),
    BadInput("spurious generator: bait_rate = 0", lambda: SpuriousOrcaConfig(bait_rate=0.0), r"bait_rate.*\(0, 1\)"),
    BadInput("spurious generator: no users", lambda: SpuriousOrcaConfig(num_users=0), r"num_users.*>= 1"),
    BadInput(
        "spurious generator: NaN coefficient", lambda: SpuriousOrcaConfig(dwell_mu=float("nan")), r"dwell_mu.*finite"
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_orca_bad_input(case):
    assert_clear_error(case)
