"""Proto-EVFL: vertical federated learning with dual prototypes on extremely unaligned, imbalanced data
(arXiv 2507.22488)."""

from hf_ext.core.lazy import lazy_exports
from hf_ext.core.registry import MethodSpec, register_method

# Public names load on first use (PEP 562): `import hf_ext` imports no torch and none of the method's own
# dependencies; the Auto classes are registered once the modeling module is imported (see register_method).
__getattr__, __dir__ = lazy_exports(__name__, {
    "ProtoEvflConfig": ".configuration_proto_evfl", "ProtoEvflPartyConfig": ".configuration_proto_evfl",
    "ProtoEvflForClassification": ".modeling_proto_evfl", "ProtoEvflOutput": ".modeling_proto_evfl",
    "ProtoEvflPartyModel": ".modeling_proto_evfl", "ProtoEvflPartyOutput": ".modeling_proto_evfl",
})  # fmt: skip


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
        tags=(
            "federated-learning",
            "vertical-federated-learning",
            "flower",
            "prototypes",
            "optimal-transport",
            "zero-shot",
            "class-imbalance",
        ),  # fmt: skip
        config_class="hf_ext.proto_evfl.configuration_proto_evfl:ProtoEvflConfig",
        auto_classes={"AutoModel": "hf_ext.proto_evfl.modeling_proto_evfl:ProtoEvflForClassification"},
        # The party encoder is a second artifact with its own config class.
        extra_auto_classes=(
            (
                "hf_ext.proto_evfl.configuration_proto_evfl:ProtoEvflPartyConfig",
                {"AutoModel": "hf_ext.proto_evfl.modeling_proto_evfl:ProtoEvflPartyModel"},
            ),
        ),
        reproduce="hf_ext.proto_evfl.reproduce:main",
        train="hf_ext.proto_evfl.train:main",
        evaluate="hf_ext.proto_evfl.evaluate:main",
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
