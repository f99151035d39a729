"""Proto-EVFL: vertical federated learning with dual prototypes on extremely unaligned, imbalanced data
(arXiv 2507.22488)."""

from hf_ext.core.registry import MethodSpec, register_method

from .configuration_proto_evfl import ProtoEvflConfig, ProtoEvflPartyConfig
from .modeling_proto_evfl import ProtoEvflForClassification, ProtoEvflOutput, ProtoEvflPartyModel, ProtoEvflPartyOutput

SPEC = register_method(
    MethodSpec(
        name="proto_evfl",
        title="Proto-EVFL: Enhanced Vertical Federated Learning via Dual Prototype with Extremely Unaligned Data",
        arxiv_id="2507.22488",
        kind="model",
        summary=(
            "Vertical federated learning as HF artifacts: each party's encoder with local class prototypes "
            "(`ProtoEvflPartyModel`) and the active party's gated top model with global prototypes "
            "(`ProtoEvflForClassification`), trained bi-level over Flower with conditional-OT selection of "
            "unaligned samples under a mixed class prior."
        ),
        tags=("federated-learning", "vertical-federated-learning", "flower", "prototypes", "optimal-transport",
              "zero-shot", "class-imbalance"),  # fmt: skip
        config_class=ProtoEvflConfig,
        auto_classes={"AutoModel": ProtoEvflForClassification},
        # The party encoder is a second artifact with its own config class.
        extra_auto_classes=((ProtoEvflPartyConfig, {"AutoModel": ProtoEvflPartyModel}),),
        reproduce="hf_ext.proto_evfl.reproduce:main",
        train="hf_ext.proto_evfl.training:main",
        demo="hf_ext.proto_evfl.demo:build_demo",
        contract="hf_ext.proto_evfl.testing:contract_fixture",
        datasets=("sklearn-digits", "fashion-mnist"),
        metrics=("accuracy", "f1"),
        pipeline_tag="tabular-classification",
        status="implemented (Fashion-MNIST and sklearn digits, vertical halves; Flower in-process and loopback "
               "deployment; per-party datasets)",
    )
)

__all__ = [
    "ProtoEvflConfig",
    "ProtoEvflForClassification",
    "ProtoEvflOutput",
    "ProtoEvflPartyConfig",
    "ProtoEvflPartyModel",
    "ProtoEvflPartyOutput",
    "SPEC",
]
