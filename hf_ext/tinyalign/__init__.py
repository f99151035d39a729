"""TinyAlign: a retrieval-augmented vision-language connector for small LMs (arXiv 2505.12884)."""

from hf_ext.core.lazy import lazy_exports
from hf_ext.core.registry import MethodSpec, register_method

# Public names load on first use (PEP 562): `import hf_ext` imports no torch and none of the method's own
# dependencies; the Auto classes are registered once the modeling module is imported (see register_method).
__getattr__, __dir__ = lazy_exports(__name__, {
    "TinyAlignConfig": ".configuration_tinyalign", "MemoryBank": ".memory", "MemoryBankError": ".memory",
    "TinyAlignForConditionalGeneration": ".modeling_tinyalign", "TinyAlignOutput": ".modeling_tinyalign",
    "TinyAlignProcessor": ".processing_tinyalign", "build_memory_bank": ".processing_tinyalign",
    "build_tokenizer": ".processing_tinyalign",
})  # fmt: skip


SPEC = register_method(
    MethodSpec(
        name="tinyalign",
        title="TinyAlign: Boosting Lightweight Vision-Language Models by Mitigating Modal Alignment Bottlenecks",
        arxiv_id="2505.12884",
        kind="model",
        summary=(
            "A vision-language `PreTrainedModel` (any HF vision encoder + `mlp2x_gelu` connector + any HF causal LM) "
            "whose connector is augmented by top-k retrieval from a faiss memory bank of fused image–caption keys; "
            "retrieved Perceiver values become extra tokens after the image tokens."
        ),
        tags=("vision-language", "image-to-text", "retrieval-augmented", "connector", "faiss", "llava"),
        config_class="hf_ext.tinyalign.configuration_tinyalign:TinyAlignConfig",
        auto_classes={
            "AutoModelForImageTextToText": "hf_ext.tinyalign.modeling_tinyalign:TinyAlignForConditionalGeneration",
        },
        reproduce="hf_ext.tinyalign.reproduce:main",
        train="hf_ext.tinyalign.train:main",
        evaluate="hf_ext.tinyalign.evaluate:main",
        demo="hf_ext.tinyalign.demo:build_demo",
        contract="hf_ext.tinyalign.testing:contract_fixture",
        datasets=("sklearn-digits-captions",),
        metrics=("accuracy", "bleu"),
        pipeline_tag="image-to-text",
        status="implemented (sklearn digits with measured-attribute captions; tiny frozen encoders/LMs)",
    )
)

__all__ = [
    "TinyAlignConfig",
    "TinyAlignForConditionalGeneration",
    "TinyAlignOutput",
    "MemoryBank",
    "MemoryBankError",
    "TinyAlignProcessor",
    "build_memory_bank",
    "build_tokenizer",
    "SPEC",
]
