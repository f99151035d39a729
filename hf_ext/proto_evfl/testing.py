"""The Proto-EVFL contract fixture: the active party's top model ([`ProtoEvflForClassification`]) on tiny
embeddings, for the shared contract test (no downloads). The party model has its own tests in
`tests/proto_evfl/test_modeling.py`.

The top model is the piece a plain `transformers.Trainer` can train as is: given the parties' embeddings of
aligned samples (fixed inputs here; received over the wire in the federation), one step updates the gate and the
per-party projections, and the forward pass moves the global prototypes by EMA.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from hf_ext.core.testing import ContractFixture

from .configuration_proto_evfl import ProtoEvflConfig, ProtoEvflPartyConfig
from .modeling_proto_evfl import ProtoEvflForClassification, ProtoEvflPartyModel


def tiny_config(**overrides) -> ProtoEvflConfig:
    kwargs = dict(num_parties=2, embed_dim=4, fused_dim=4, num_classes=3, party_input_dims=[5, 3])
    kwargs.update(overrides)
    return ProtoEvflConfig(**kwargs)


def tiny_party_config(**overrides) -> ProtoEvflPartyConfig:
    kwargs = dict(input_dim=5, hidden_dims=[6], embed_dim=4, num_classes=3, party_index=1)
    kwargs.update(overrides)
    return ProtoEvflPartyConfig(**kwargs)


def tiny_batch(n: int = 12, seed: int = 0, config: ProtoEvflConfig | None = None) -> dict[str, torch.Tensor]:
    """Normalised party embeddings, party prototype logits and labels covering every class."""
    config = config or tiny_config()
    g = torch.Generator().manual_seed(seed)
    z = F.normalize(torch.randn(n, config.num_parties, config.embed_dim, generator=g), dim=-1)
    logits = torch.randn(n, config.num_parties, config.num_classes, generator=g)
    labels = torch.arange(n) % config.num_classes
    return {"party_embeddings": z, "party_logits": logits, "labels": labels}


def _outputs(model: ProtoEvflForClassification, inputs: dict) -> dict[str, torch.Tensor]:
    model.eval()
    with torch.no_grad():
        out = model(**inputs)
    return {"loss": out.loss, "logits": out.logits, "fused": out.fused, "gate": out.gate,
            "global_prototypes": model.head.prototypes.clone()}  # fmt: skip


def _trainer(model: ProtoEvflForClassification, output_dir: Path):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    batch = tiny_batch(32, seed=1, config=model.config)
    ds = Dataset.from_dict({k: v.tolist() for k, v in batch.items()})
    args = TrainingArguments(
        output_dir=str(output_dir), max_steps=1, per_device_train_batch_size=32, learning_rate=1e-2, use_cpu=True,
        report_to="none", save_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=0,
    )  # fmt: skip
    return Trainer(model=model, args=args, train_dataset=ds)


def contract_fixture() -> ContractFixture:
    from transformers import AutoModel

    return ContractFixture(
        make_config=tiny_config,
        make_artifact=ProtoEvflForClassification,
        example_inputs=tiny_batch,
        outputs=_outputs,
        load=lambda path: AutoModel.from_pretrained(path),
        make_trainer=_trainer,
    )


__all__ = ["ProtoEvflPartyModel", "contract_fixture", "tiny_batch", "tiny_config", "tiny_party_config"]


def tampering_client_app(tamper, party: int = 1):
    """A Proto-EVFL ClientApp whose party `party` rewrites its replies with `tamper(message_type, content)`, for
    the malformed- and spoofed-reply tests."""
    from flwr.clientapp import ClientApp

    from .client_app import app as client_app

    class Tampering(ClientApp):
        def __call__(self, message, context):
            reply = client_app(message, context)
            if int(context.node_config["partition-id"]) == party:
                tamper(message.metadata.message_type, reply.content)
            return reply

    return Tampering()
