"""ORCA: multi-task CTR + dwell-time prediction with causal decoupling (arXiv 2508.16573)."""

from hf_ext.core.registry import MethodSpec, register_method

from .configuration_orca import OrcaConfig
from .modeling_orca import OrcaModel, OrcaOutput

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
        config_class=OrcaConfig,
        auto_classes={"AutoModel": OrcaModel},
        reproduce="hf_ext.orca.reproduce:main",
        train="hf_ext.orca.training:main",
        demo="hf_ext.orca.demo:build_demo",
        contract="hf_ext.orca.testing:contract_fixture",
        datasets=("synthetic-spurious-shortcut-dwell", "synthetic-causal-dwell", "tenrec-qk-article", "ml-100k"),
        metrics=("roc_auc", "f1", "mae", "ndcg"),
        pipeline_tag="tabular-classification",
        status="implemented (spurious-shortcut generator with exact oracle; ml-100k proxy run; Tenrec loader)",
    )
)

__all__ = ["OrcaConfig", "OrcaModel", "OrcaOutput", "SPEC"]
