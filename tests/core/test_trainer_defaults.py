"""Trainer defaults: the device comes from `--device` / `TrainingArguments` (no hard-coded `use_cpu`), progress bars
follow HF's default (on), and each Trainer-based method's `trainer.evaluate()` reports its own metric, equal to the
method's direct evaluation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import EvalPrediction, TrainingArguments

import hf_ext  # noqa: F401
from hf_ext.core import devices
from hf_ext.core.trainer_metrics import answer_exact_match, argmax_logits, token_accuracy

ROOT = Path(__file__).resolve().parents[2]
TRAINING_FILES = [
    "tba/train.py",
    "tba/trainer.py",
    "codebc/trainer.py",
    "fede4rag/task.py",
    "h2tune/task.py",
    "tinyalign/train.py",
    "tinyalign/trainer.py",
]


@pytest.mark.parametrize("path", TRAINING_FILES)
def test_no_hard_coded_cpu_or_silent_bars(path):
    source = (ROOT / "hf_ext" / path).read_text()
    assert not re.search(r"use_cpu\s*=\s*True", source), f"{path} forces the CPU"
    assert not re.search(r"disable_tqdm\s*[:=]\s*(bool\s*=\s*)?True", source), f"{path} turns progress bars off"


def test_device_choice(monkeypatch):
    monkeypatch.delenv(devices.DEVICE_ENV, raising=False)
    assert devices.use_cpu() is False  # auto: TrainingArguments / Accelerate decide (CUDA when present)
    assert devices.set_device("cpu") == "cpu" and devices.use_cpu() is True
    devices.set_device("auto")
    assert devices.use_cpu() is False
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            devices.set_device("cuda")
    with pytest.raises(ValueError, match="device must be one of"):
        devices.set_device("tpu")
    from hf_ext.tinyalign.train import TinyAlignTrainingArguments

    devices.set_device("cpu")
    assert TinyAlignTrainingArguments(output_dir="x").use_cpu is True
    devices.set_device("auto")
    assert TinyAlignTrainingArguments(output_dir="x").use_cpu is False


def test_metric_blocks_on_known_predictions():
    # rows: answer at positions 2-3 (labels shifted by one as in the LM loss)
    labels = np.array([[-100, -100, 5, 6, -100], [-100, -100, 7, 8, 9], [-100] * 5])
    preds = np.array([[0, 5, 6, 0, 0], [0, 7, 0, 9, 0], [0, 0, 0, 0, 0]])
    ev = EvalPrediction(predictions=preds, label_ids=labels)
    assert token_accuracy(ev)["token_acc"] == pytest.approx(4 / 5)
    assert answer_exact_match(ev)["exact_match"] == pytest.approx(1 / 2)  # the empty row does not count
    assert answer_exact_match(ev, max_positions=1)["exact_match"] == pytest.approx(1.0)


def _args(tmp_path, **kw):
    return TrainingArguments(
        output_dir=str(tmp_path), report_to="none", per_device_eval_batch_size=8, remove_unused_columns=False, **kw
    )


def test_h2tune_evaluate_reports_exact_match_equal_to_greedy(tmp_path):
    from datasets import Dataset

    from hf_ext.h2tune.data import EOS, decode, encode, exact_match, greedy, make_split, to_features
    from hf_ext.h2tune.testing import make_adapter, tiny_config
    from hf_ext.h2tune.trainer import H2TuneTrainer, compute_metrics

    model = make_adapter(tiny_config()).eval()
    real = make_split("fill_in", 12, seed=0)
    # half the answers are the model's own greedy continuation, so the expected exact match is not trivially 0
    # (only continuations made of characters or EOS: `decode` drops other ids, so greedy would match a string the
    # teacher-forced labels cannot express; a trained model emits characters)
    own = []
    for p, _ in make_split("choice", 24, seed=1):
        ids, raw = torch.tensor([encode(p)]), []
        with torch.no_grad():
            for _ in range(2):
                nxt = int(model(input_ids=ids).logits[0, -1].argmax())
                raw.append(nxt)
                if nxt == EOS:
                    break
                ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
        if all(t == EOS or decode([t]) for t in raw):
            own.append((p, greedy(model, p, 2)))
    pairs = real + own
    ds = Dataset.from_dict(to_features(pairs))
    trainer = H2TuneTrainer(
        model=model,
        args=_args(tmp_path),
        eval_dataset=ds,
        compute_metrics=compute_metrics,
        preprocess_logits_for_metrics=argmax_logits,
    )
    result = trainer.evaluate()
    want = exact_match(model, pairs)
    assert 0.2 < want < 1.0, want
    assert result["eval_exact_match"] == pytest.approx(want)
    assert "eval_token_acc" in result and "eval_loss" in result


def test_tinyalign_evaluate_reports_token_acc(tmp_path):
    from datasets import Dataset

    from hf_ext.tinyalign.metrics import token_accuracy as ta_token_accuracy
    from hf_ext.tinyalign.testing import tiny_config, tiny_data, tiny_model, tiny_processor
    from hf_ext.tinyalign.train import TinyAlignTrainingArguments
    from hf_ext.tinyalign.trainer import make_trainer

    config = tiny_config()
    model, processor = tiny_model(config), tiny_processor(config)
    rows = tiny_data(8, seed=2)
    ds = Dataset.from_dict(
        {"pixel_values": [np.asarray(p).tolist() for p in rows["pixel_values"]], "caption": list(rows["caption"])}
    ).with_format("torch")
    args = TinyAlignTrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=8, use_cpu=True)
    trainer, _ = make_trainer(model, processor, ds, args)
    result = trainer.evaluate(ds)
    batch = processor(rows["pixel_values"], rows["caption"])
    model.eval()
    with torch.no_grad():
        correct, total = ta_token_accuracy(model(**batch).logits, batch["labels"])
    assert result["eval_token_acc"] == pytest.approx(correct / total)


def test_tba_victim_evaluate_reports_mpjpe(tmp_path):
    from hf_ext.tba.body import build_body
    from hf_ext.tba.data import make_dataset
    from hf_ext.tba.metrics import victim_error
    from hf_ext.tba.modeling_tba import TbaPoseRegressor
    from hf_ext.tba.testing import tiny_victim_config
    from hf_ext.tba.trainer import make_trainer

    body = build_body("procedural")
    ds = make_dataset(body, 8, seed=0, image_size=tiny_victim_config().image_size)
    torch.manual_seed(0)
    model = TbaPoseRegressor(tiny_victim_config(num_params=body.num_params)).eval()
    trainer = make_trainer(model, ds, tmp_path, epochs=1, lr=1e-3, batch_size=8, seed=0, body=body)
    result = trainer.evaluate(ds)
    rows = ds.with_format("torch")[:]
    want = victim_error(model, body, rows["pixel_values"], rows["labels"])
    for key in ("mpjpe", "pa_mpjpe", "pve"):
        assert result[f"eval_{key}"] == pytest.approx(want[key], rel=1e-4), key


def test_codebc_evaluate_reports_token_acc(tmp_path):
    from datasets import Dataset

    from hf_ext.codebc.testing import make_adapter, tiny_config, tiny_inputs
    from hf_ext.codebc.trainer import CodeBCStageArguments, make_trainer

    model = make_adapter(tiny_config()).eval()
    ids = tiny_inputs(batch=6, length=10, seed=4)["input_ids"]
    ds = Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})
    trainer = make_trainer(model, ds, 0, CodeBCStageArguments(batch_size=6, max_steps=1), str(tmp_path))
    result = trainer.evaluate(ds)
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    want = float((logits[:, :-1].argmax(-1) == ids[:, 1:]).float().mean())
    assert result["eval_token_acc"] == pytest.approx(want)


def test_fede4rag_evaluate_reports_inbatch_retrieval(tmp_path):
    from datasets import Dataset

    from hf_ext.fede4rag.testing import VOCAB, tiny_config, tiny_retriever
    from hf_ext.fede4rag.trainer import (
        FedE4RAGTrainer,
        FedE4RAGTrainingArguments,
        TokenPairCollator,
        compute_metrics,
        similarity,
    )

    model = tiny_retriever(tiny_config()).eval()
    g = torch.Generator().manual_seed(5)
    q = torch.randint(1, VOCAB, (8, 6), generator=g)
    p = torch.randint(1, VOCAB, (8, 12), generator=g)
    p[:4, :6] = q[:4]  # half the passages contain their query, so some ranks are 0 and some are not
    ds = Dataset.from_dict({"q_input_ids": q.tolist(), "p_input_ids": p.tolist()})
    args = FedE4RAGTrainingArguments(output_dir=str(tmp_path), report_to="none", per_device_eval_batch_size=8)
    trainer = FedE4RAGTrainer(
        model=model, args=args, eval_dataset=ds, data_collator=TokenPairCollator(), compute_metrics=compute_metrics
    )
    result = trainer.evaluate()
    with torch.no_grad():
        sim = similarity(
            model(input_ids=q, attention_mask=torch.ones_like(q)).pooler_output,
            model(input_ids=p, attention_mask=torch.ones_like(p)).pooler_output,
        )
    ranks = (sim > sim.diagonal()[:, None]).sum(1).float()
    assert result["eval_inbatch_hit@1"] == pytest.approx(float((ranks < 1).float().mean()))
    assert result["eval_inbatch_mrr"] == pytest.approx(float((1 / (ranks + 1)).mean()))
    assert 0 < result["eval_inbatch_hit@1"] <= 1
