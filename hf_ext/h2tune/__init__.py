"""H2Tune: federated fine-tuning across heterogeneous foundation models (arXiv 2507.22633), as a PEFT adapter
(triple-matrix LoRA ΔW = (α/r)·B(T+I)A) plus relation-guided layer alignment and a Flower aggregation strategy."""

from hf_ext.core.lazy import lazy_exports, when_imported
from hf_ext.core.registry import MethodSpec, register_method

# Everything here builds on PEFT: imported on first use, so `import hf_ext` does not pull peft in.
__getattr__, __dir__ = lazy_exports(__name__, {
    "TESTED_PEFT_RANGE": ".config", "H2TuneConfig": ".config", "H2TuneLinear": ".layer", "H2TuneVariant": ".layer",
    "H2TuneCallback": ".trainer", "H2TuneTrainer": ".trainer", "H2TuneAlternatingTrainer": ".trainer",
    "get_middle": ".model", "set_middle": ".model", "sync_middle": ".model",
})  # fmt: skip


def _register_peft_type() -> None:
    from .config import register_peft_type

    register_peft_type()


# Plain `PeftModel.from_pretrained(base, h2tune_dir)` restores the H2Tune variant once hf_ext is imported, whichever
# is imported first: the peft_type is registered the moment peft is (config.register_peft_type).
when_imported("peft", _register_peft_type)

SPEC = register_method(
    MethodSpec(
        name="h2tune",
        title="H2Tune: Federated Foundation Model Fine-Tuning with Hybrid Heterogeneity",
        arxiv_id="2507.22633",
        kind="adapter",
        summary=(
            "A PEFT LoRA variant ΔW = (α/r)·B(T+I)A whose middle block T is picked from a shared R×R matrix by a "
            "top-k of a learnable score matrix; clients with different decoders share only the middle matrices, "
            "mapped across depths by a learned relation matrix and averaged on a Flower server."
        ),
        tags=("peft", "lora", "federated-learning", "flower", "heterogeneous-models"),
        config_class="hf_ext.h2tune.config:H2TuneConfig",
        reproduce="hf_ext.h2tune.reproduce:main",
        train="hf_ext.h2tune.train:main",
        evaluate="hf_ext.h2tune.evaluate:main",
        demo="hf_ext.h2tune.demo:build_demo",
        contract="hf_ext.h2tune.testing:contract_fixture",
        datasets=("synthetic-modular-arithmetic",),
        metrics=("exact_match",),
        pipeline_tag="text-generation",
        library_name="peft",
        status="adapter + alignment + aggregation; tiny, SmolLM2 or user decoders (see model card)",
        usage=(
            "from transformers import AutoModelForCausalLM\n"
            "from peft import PeftModel\n"
            "import hf_ext  # maps peft_type HF_EXT_H2TUNE to the H2Tune variant (plain PEFT refuses it)\n\n"
            "# the repo holds the client's base decoder at its root and the H2Tune adapter in adapter/\n"
            "base = AutoModelForCausalLM.from_pretrained('{repo_id}')\n"
            "model = PeftModel.from_pretrained(base, '{repo_id}', subfolder='adapter')"
        ),
    )
)

__all__ = [
    "H2TuneConfig",
    "H2TuneLinear",
    "H2TuneVariant",
    "H2TuneCallback",
    "H2TuneTrainer",
    "H2TuneAlternatingTrainer",
    "get_middle",
    "set_middle",
    "sync_middle",
    "TESTED_PEFT_RANGE",
    "SPEC",
]
