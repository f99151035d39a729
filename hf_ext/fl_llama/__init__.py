"""FL-LLaMA (FedSEA-LLaMA): federated split learning and split KV-cache generation for any HF LLaMA
(arXiv 2505.15683)."""

from hf_ext.core.lazy import lazy_exports
from hf_ext.core.registry import MethodSpec, register_method

# Public names load on first use (PEP 562): `import hf_ext` imports no torch and none of the method's own
# dependencies; the Auto classes are registered once the modeling module is imported (see register_method).
__getattr__, __dir__ = lazy_exports(__name__, {
    "FlLlamaClientConfig": ".configuration_fl_llama", "FlLlamaConfig": ".configuration_fl_llama",
    "FlLlamaServerConfig": ".configuration_fl_llama", "FlLlamaClientModel": ".modeling_fl_llama",
    "FlLlamaServerModel": ".modeling_fl_llama", "merge_parts": ".modeling_fl_llama",
    "split_llama": ".modeling_fl_llama",
})  # fmt: skip


SPEC = register_method(
    MethodSpec(
        name="fl_llama",
        title="FL-LLaMA: A Federated Splitting Framework for LLMs: Security, Efficiency, and Adaptability",
        arxiv_id="2505.15683",
        kind="model",
        summary=(
            "Split federated learning of any `LlamaForCausalLM`: the client keeps the embeddings, the first `a` and "
            "the last `c` blocks, the head and the labels (`FlLlamaClientModel`); the server holds the middle blocks "
            "(`FlLlamaServerModel`). Noisy hidden states and gradients cross a counted transport (in-process or "
            "gRPC on loopback), with attention-mask compression, three multi-client modes, LoRA per part, and "
            "transformers' `generate` through the split model with a KV cache on each side."
        ),
        tags=("federated-learning", "split-learning", "llama", "kv-cache", "lora", "privacy", "grpc"),
        config_class="hf_ext.fl_llama.configuration_fl_llama:FlLlamaClientConfig",
        auto_classes={"AutoModel": "hf_ext.fl_llama.modeling_fl_llama:FlLlamaClientModel"},
        # The server's part is a second artifact, published by a different party, with its own config class.
        extra_auto_classes=(
            (
                "hf_ext.fl_llama.configuration_fl_llama:FlLlamaServerConfig",
                {"AutoModel": "hf_ext.fl_llama.modeling_fl_llama:FlLlamaServerModel"},
            ),
        ),
        reproduce="hf_ext.fl_llama.reproduce:main",
        train="hf_ext.fl_llama.train:main",
        evaluate="hf_ext.fl_llama.evaluate:main",
        demo="hf_ext.fl_llama.demo:build_demo",
        contract="hf_ext.fl_llama.testing:contract_fixture",
        commands={
            "serve": "hf_ext.fl_llama.serve:main",
            "tokens": "hf_ext.fl_llama.auth:main",
            "client": "hf_ext.fl_llama.client_command:main",
            "split": "hf_ext.fl_llama.artifacts:main",
        },
        datasets=("super_glue",),
        metrics=("accuracy", "rouge"),
        pipeline_tag="text-generation",
        status=(
            "implemented (SmolLM2-135M and tiny random Llamas + MultiRC; transformers generate/Trainer; "
            "in-process and gRPC loopback transports with a handshake and server checkpoints)"
        ),
        usage=(
            "from transformers import AutoModel\n"
            "# `hf-ext push fl_llama` publishes both parts, client/ and server/ (a repo pushed from one part folder\n"
            "# holds that part at its root: drop `subfolder`)\n"
            'client = AutoModel.from_pretrained("{repo_id}", subfolder="client", trust_remote_code=True)\n'
            'server = AutoModel.from_pretrained("{repo_id}", subfolder="server", trust_remote_code=True)\n'
            "# the two parties run them apart over hf_ext.fl_llama.transport.GrpcTransport; see the model card"
        ),
    )
)

__all__ = [
    "FlLlamaClientConfig",
    "FlLlamaClientModel",
    "FlLlamaConfig",
    "FlLlamaServerConfig",
    "FlLlamaServerModel",
    "SPEC",
    "merge_parts",
    "split_llama",
]
