"""The FL-LLaMA contract fixture: the client's artifact ([`FlLlamaClientModel`]) of a tiny random Llama, for the
shared contract test (no downloads). The server's part has its own round-trip test in `tests/fl_llama/`.

The Trainer step trains the client's parts through [`FlLlamaSplitForCausalLM`] with an in-process server: a plain
`transformers.Trainer` calls `loss.backward()`, the boundary sends `g_B` and receives `g_A`, and Trainer's
optimiser steps parts A and C (the server steps part B when it receives `g_B`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import LlamaConfig

from hf_ext.core.testing import ContractFixture

from .arguments import FlLlamaTrainingArguments
from .configuration_fl_llama import FlLlamaClientConfig, FlLlamaServerConfig
from .modeling_fl_llama import FlLlamaClientModel, FlLlamaServerModel


def tiny_llama_config(**overrides) -> dict:
    kwargs = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0)  # fmt: skip
    kwargs.update(overrides)
    return LlamaConfig(**kwargs).to_dict()


def tiny_config(**overrides) -> FlLlamaClientConfig:
    kwargs = dict(llama_config=tiny_llama_config(), num_input_blocks=1, num_output_blocks=1, client_stored_blocks=2)
    kwargs.update(overrides)
    return FlLlamaClientConfig(**kwargs)


def tiny_batch(n: int = 4, length: int = 8, seed: int = 0, vocab: int = 64) -> dict[str, torch.Tensor]:
    """Left-padded ids (rows with 0-3 pads), their mask and labels (pads ignored)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (n, length), generator=g)
    mask = torch.ones(n, length, dtype=torch.long)
    for i in range(n):
        mask[i, : i % 4] = 0
    ids = ids * mask
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def hello_meta(part, max_steps: int | None = None, purpose: str = "train") -> dict:
    """The `hello` meta a client of `part`'s split (either part: they share the partition and the model hash) sends,
    for tests that speak the wire protocol by hand."""
    cfg = part.config
    return {"purpose": purpose, "a": int(cfg.num_input_blocks), "c": int(cfg.num_output_blocks),
            "model_hash": cfg.model_hash(), "hidden_size": cfg.hidden_size, "num_layers": cfg.num_layers,
            "max_steps": max_steps}  # fmt: skip


def _outputs(model: FlLlamaClientModel, inputs: dict) -> dict[str, torch.Tensor]:
    model.eval()
    g = torch.Generator().manual_seed(1)
    server_hidden = torch.randn(*inputs["input_ids"].shape, model.config.hidden_size, generator=g)
    with torch.no_grad():
        out = model(inputs["input_ids"], inputs["attention_mask"], server_hidden=server_hidden, labels=inputs["labels"])
    return {"h_a": out.hidden_states[0], "logits": out.logits, "loss": out.loss}


def split_for(client: FlLlamaClientModel, args: FlLlamaTrainingArguments | None = None):
    """`client` paired with a fresh in-process server holding a tiny body of the same shape."""
    from .server import SplitServer
    from .split_model import FlLlamaSplitForCausalLM
    from .transport import InProcessTransport

    torch.manual_seed(0)
    server = SplitServer(FlLlamaServerModel(FlLlamaServerConfig(**client.config.to_dict())), args)
    return FlLlamaSplitForCausalLM(client, InProcessTransport(server.handle_bytes), args), server


def _trainer(model: FlLlamaClientModel, output_dir: Path):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    split, _ = split_for(model)
    batch = tiny_batch(8, seed=1)
    ds = Dataset.from_dict({k: v.tolist() for k, v in batch.items()})
    args = TrainingArguments(
        output_dir=str(output_dir), max_steps=1, per_device_train_batch_size=8, learning_rate=1e-2, use_cpu=True,
        report_to="none", save_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=0,
    )  # fmt: skip
    return Trainer(model=split, args=args, train_dataset=ds)


def _trainable(model: FlLlamaClientModel) -> dict[str, torch.Tensor]:
    """Parts A and C under the partition: embeddings and active head blocks, active tail blocks, norm, lm_head."""
    a, c, k = model.config.num_input_blocks, model.config.num_output_blocks, model.config.client_stored_blocks
    keep = ("embed_tokens.", "norm.", "lm_head.", *[f"head_layers.{i}." for i in range(a)],
            *[f"tail_layers.{i}." for i in range(k - c, k)])  # fmt: skip
    return {n: p for n, p in model.named_parameters() if n.startswith(keep)}


def start_serve(server_dir, *args, timeout: float = 240):
    """Starts `hf-ext fl_llama serve server_dir *args` as a subprocess and waits for its READY line; returns
    `(process, port)`. Its stderr goes to a temporary file (an unread pipe could fill up and block the server)."""
    import os
    import subprocess
    import sys
    import tempfile
    import time

    from .serve import READY

    cmd = [sys.executable, "-m", "hf_ext.fl_llama.serve", str(server_dir), *map(str, args)]
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(READY):
            return proc, int(line.split()[1])
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {open(log.name).read()[-2000:]}")
    proc.kill()
    raise TimeoutError("server did not start")


def contract_fixture() -> ContractFixture:
    from transformers import AutoModel

    return ContractFixture(
        make_config=tiny_config,
        make_artifact=FlLlamaClientModel,
        example_inputs=tiny_batch,
        outputs=_outputs,
        load=lambda path: AutoModel.from_pretrained(path),
        make_trainer=_trainer,
        trainable_state=_trainable,
    )


__all__ = [
    "contract_fixture",
    "hello_meta",
    "split_for",
    "start_serve",
    "tiny_batch",
    "tiny_config",
    "tiny_llama_config",
]
