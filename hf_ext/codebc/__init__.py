"""CodeBC (arXiv 2504.21043): security-tag fine-tuning for Solidity — one LoRA adapter trained code infilling →
vulnerability detection → tag-guided instruction tuning, generation with a forced security tag, and scoring by a
real compiler (solc-js) and analyser (Slither)."""

from hf_ext.core.lazy import lazy_exports
from hf_ext.core.registry import MethodSpec, register_method

# Public names load on first use (PEP 562): `import hf_ext` imports no torch and none of the method's own
# dependencies; the Auto classes are registered once the modeling module is imported (see register_method).
__getattr__, __dir__ = lazy_exports(__name__, {
    "CodeBCConfig": ".configuration_codebc", "CodeBCForCausalLM": ".modeling_codebc", "SECURITY_TAGS": ".tags",
    "ForcedTagLogitsProcessor": ".tags", "generate_with_tag": ".tags",
})  # fmt: skip


SPEC = register_method(
    MethodSpec(
        name="codebc",
        title="CodeBC: A More Secure Large Language Model for Smart Contract Code Generation in Blockchain",
        arxiv_id="2504.21043",
        kind="adapter",
        summary=(
            "One PEFT LoRA adapter on a LLaMA decoder trained in three stages (FIM code infilling, vulnerability "
            "detection as `correct`/`bug` tag generation, instruction tuning with the security tag on both sides of "
            "the code); at inference the `correct` tag is forced at the start of the response. Scored with BLEU, "
            "CodeBLEU, solc-js compile rate and Slither's vulnerability rate."
        ),
        tags=("peft", "lora", "solidity", "smart-contracts", "code-generation", "security"),
        config_class="hf_ext.codebc.configuration_codebc:CodeBCConfig",
        auto_classes={"AutoModelForCausalLM": "hf_ext.codebc.modeling_codebc:CodeBCForCausalLM"},
        reproduce="hf_ext.codebc.reproduce:main",
        demo="hf_ext.codebc.demo:build_demo",
        contract="hf_ext.codebc.testing:contract_fixture",
        datasets=("mwritescode/slither-audited-smart-contracts", "Blockchain-HumanEval"),
        metrics=("bleu", "codebleu", "compile_rate", "vulnerability_rate"),
        pipeline_tag="text-generation",
        library_name="peft",
        status="3-stage LoRA + forced tags + solc-js/Slither scoring (tiny LLaMA or SmolLM2-135M; see model card)",
        train="hf_ext.codebc.train:main",
        evaluate="hf_ext.codebc.evaluate:main",
        commands={
            "score": "hf_ext.codebc.scoring:main",
            "setup": "hf_ext.codebc.solidity:setup_main",
            "generate": "hf_ext.codebc.generate:generate_main",
        },
        usage=(
            "from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast\n"
            "from peft import PeftModel\n"
            "import hf_ext\n"
            "from hf_ext.codebc import generate_with_tag\n\n"
            "base = AutoModelForCausalLM.from_pretrained('{repo_id}')\n"
            "model = PeftModel.from_pretrained(base, '{repo_id}', subfolder='adapter')\n"
            "tok = PreTrainedTokenizerFast.from_pretrained('{repo_id}')\n"
            "print(generate_with_tag(model, tok, 'Implement a library named SafeMath ...', security_tag='correct'))"
        ),
    )
)

__all__ = [
    "CodeBCConfig",
    "CodeBCForCausalLM",
    "ForcedTagLogitsProcessor",
    "generate_with_tag",
    "SECURITY_TAGS",
    "SPEC",
]
