"""Tiny retrievers and the FedE4RAG contract fixture for the shared contract test (no downloads)."""

from __future__ import annotations

from pathlib import Path

import torch

from hf_ext.core.testing import ContractFixture

from .configuration_fede4rag import FedE4RAGConfig
from .modeling_fede4rag import FedE4RAGRetriever

VOCAB = 100


def tiny_config(**overrides) -> FedE4RAGConfig:
    kwargs = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        max_query_length=16,
        max_passage_length=32,
    )
    kwargs.update(overrides)
    return FedE4RAGConfig(**kwargs)


def tiny_retriever(config: FedE4RAGConfig | None = None, seed: int = 0) -> FedE4RAGRetriever:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return FedE4RAGRetriever(config if config is not None else tiny_config()).eval()


def tiny_inputs(batch: int = 3, length: int = 9, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[0, length // 2 :] = 0  # one padded row, so masked pooling matters
    ids[mask == 0] = 0
    return {"input_ids": ids, "attention_mask": mask}


def tiny_encoder_folder(path: str | Path, num_layers: int = 2, seed: int = 0) -> Path:
    """A tiny random BERT with MiniLM's tokenizer, saved as a pretrained folder (for fast federated tests)."""
    from transformers import BertConfig, BertModel

    from .encoder import minilm_path

    path = Path(path)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertModel(
            BertConfig(
                vocab_size=tokenizer.vocab_size,
                hidden_size=32,
                num_hidden_layers=num_layers,
                num_attention_heads=4,
                intermediate_size=64,
                max_position_embeddings=128,
            )
        )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def tiny_federation(root: str | Path, rounds: int = 1, secret_dir: str = ""):
    """What the federation tests share: a tiny encoder folder, a CKKS key pair (the secret context under
    `root/secret_dir/secret.ctx`, the public one at `root/public.ctx`) and a tiny run config; returns `(run, keys)`."""
    from .he import make_keys
    from .task import RunConfig

    root = Path(root)
    encoder = tiny_encoder_folder(root / "encoder")
    keys = make_keys()
    (root / secret_dir).mkdir(parents=True, exist_ok=True)
    (root / secret_dir / "secret.ctx").write_bytes(keys.secret)
    (root / "public.ctx").write_bytes(keys.public)
    run = RunConfig(
        rounds=rounds,
        train_fraction=0.02,
        lora_layers=(1,),
        lora_rank=2,
        max_passage_length=32,
        max_query_length=16,
        learning_rate=1e-2,
        encoder_path=str(encoder),
        cache_dir=str(root / "cache"),
    )
    return run, keys


def _outputs(model, inputs):
    model.eval()
    with torch.no_grad():
        out = model(**inputs)
    return {"sentence_embedding": out.pooler_output, "token_states": out.last_hidden_state}


def _load(path: Path):
    from transformers import AutoModel

    return AutoModel.from_pretrained(path)


def _trainer(model, output_dir: Path):
    from datasets import Dataset

    from .trainer import FedE4RAGTrainer, FedE4RAGTrainingArguments, TokenPairCollator, frozen_teacher

    g = torch.Generator().manual_seed(3)
    q = torch.randint(1, VOCAB, (8, 6), generator=g).tolist()
    p = torch.randint(1, VOCAB, (8, 12), generator=g).tolist()
    ds = Dataset.from_dict({"q_input_ids": q, "p_input_ids": p})
    args = FedE4RAGTrainingArguments(
        output_dir=str(output_dir),
        use_cpu=True,
        report_to="none",
        max_steps=1,
        per_device_train_batch_size=8,
        learning_rate=1e-2,
        weight_decay=0.01,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        kd_lambda=100.0,
    )
    teacher = frozen_teacher(model)
    model.train()
    return FedE4RAGTrainer(model=model, args=args, train_dataset=ds, teacher=teacher, data_collator=TokenPairCollator())


def contract_fixture() -> ContractFixture:
    return ContractFixture(
        make_config=tiny_config,
        make_artifact=tiny_retriever,
        example_inputs=tiny_inputs,
        outputs=_outputs,
        load=_load,
        config_from_dict=FedE4RAGConfig.from_dict,
        make_trainer=_trainer,
    )
