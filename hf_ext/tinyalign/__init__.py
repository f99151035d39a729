"""TinyAlign: a retrieval-augmented vision-language connector for small LMs (arXiv 2505.12884)."""

from hf_ext.core.registry import MethodSpec, register_method

from .configuration_tinyalign import TinyAlignConfig
from .memory import MemoryBank, MemoryBankError
from .modeling_tinyalign import TinyAlignForConditionalGeneration, TinyAlignOutput
from .processing_tinyalign import TinyAlignProcessor, build_memory_bank, build_tokenizer

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
        config_class=TinyAlignConfig,
        auto_classes={"AutoModelForImageTextToText": TinyAlignForConditionalGeneration},
        reproduce="hf_ext.tinyalign.reproduce:main",
        demo="hf_ext.tinyalign.demo:build_demo",
        contract="hf_ext.tinyalign.testing:contract_fixture",
        datasets=("sklearn-digits-captions",),
        metrics=("accuracy", "bleu"),
        pipeline_tag="image-to-text",
        status="implemented (sklearn digits with measured-attribute captions; tiny frozen encoders/LMs)",
    )
)

__all__ = ["TinyAlignConfig", "TinyAlignForConditionalGeneration", "TinyAlignOutput", "MemoryBank", "MemoryBankError",
           "TinyAlignProcessor", "build_memory_bank", "build_tokenizer", "SPEC"]
