"""ORCA: multi-task CTR + dwell-time prediction with causal decoupling (arXiv 2508.16573)."""

from hf_ext.core.lazy import lazy_exports
from hf_ext.core.registry import MethodSpec, register_method

# Public names load on first use (PEP 562): `import hf_ext` imports no torch and none of the method's own
# dependencies; the Auto classes are registered once the modeling module is imported (see register_method).
__getattr__, __dir__ = lazy_exports(__name__, {
    "OrcaConfig": ".configuration_orca", "OrcaModel": ".modeling_orca", "OrcaOutput": ".modeling_orca",
})  # fmt: skip


SPEC = register_method(
    MethodSpec(
        name="orca",
        title="ORCA: Mitigating Over-Reliance for Multi-Task Dwell Time Prediction with Causal Decoupling",
        arxiv_id="2508.16573",
        kind="model",
        summary=(
            "A multi-task CTR + dwell-time `PreTrainedModel` (MMoE or PLE backbone) whose dwell-time prediction "
            "subtracts a natural-direct-effect branch that models the clickbait shortcut."
        ),
        tags=("recommendation", "multi-task-learning", "dwell-time", "ctr-prediction", "causal-inference"),
        config_class="hf_ext.orca.configuration_orca:OrcaConfig",
        auto_classes={"AutoModel": "hf_ext.orca.modeling_orca:OrcaModel"},
        reproduce="hf_ext.orca.reproduce:main",
        train="hf_ext.orca.train:main",
        evaluate="hf_ext.orca.evaluate:main",
        demo="hf_ext.orca.demo:build_demo",
        contract="hf_ext.orca.testing:contract_fixture",
        datasets=("synthetic-spurious-shortcut-dwell", "synthetic-causal-dwell", "tenrec-qk-article", "ml-100k"),
        metrics=("roc_auc", "f1", "mae", "ndcg"),
        pipeline_tag="tabular-classification",
        status="implemented (spurious-shortcut generator with exact oracle; ml-100k proxy run; Tenrec loader)",
    )
)

__all__ = ["OrcaConfig", "OrcaModel", "OrcaOutput", "SPEC"]
