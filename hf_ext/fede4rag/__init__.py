"""FedE4RAG: federated training of a RAG retriever with similarity-matrix knowledge distillation and CKKS-encrypted
aggregation (arXiv 2504.19101), on all-MiniLM-L6-v2 with a PEFT LoRA adapter, Flower apps and a faiss index."""

from hf_ext.core.lazy import lazy_exports
from hf_ext.core.registry import MethodSpec, register_method

# Public names load on first use (PEP 562): `import hf_ext` imports no torch and none of the method's own
# dependencies; the Auto classes are registered once the modeling module is imported (see register_method).
__getattr__, __dir__ = lazy_exports(__name__, {
    "FedE4RAGConfig": ".configuration_fede4rag", "FedE4RAGRetriever": ".modeling_fede4rag",
    "pool_tokens": ".modeling_fede4rag",
})  # fmt: skip


SPEC = register_method(
    MethodSpec(
        name="fede4rag",
        title="FedE4RAG: Privacy-Preserving Federated Embedding Learning for Localized Retrieval-Augmented Generation",
        arxiv_id="2504.19101",
        kind="model",
        summary=(
            "A dense retriever (all-MiniLM-L6-v2, mask-aware mean pooling, optional LoRA) trained across clients on "
            "Flower with an in-batch contrastive loss plus λ·MSE between the local and the received global model's "
            "question–passage similarity matrices; the uploads can be CKKS-encrypted (TenSEAL) so the server only "
            "adds ciphertexts."
        ),
        tags=(
            "federated-learning",
            "flower",
            "retrieval",
            "rag",
            "sentence-transformers",
            "homomorphic-encryption",
            "knowledge-distillation",
            "lora",
        ),
        config_class="hf_ext.fede4rag.configuration_fede4rag:FedE4RAGConfig",
        auto_classes={"AutoModel": "hf_ext.fede4rag.modeling_fede4rag:FedE4RAGRetriever"},
        reproduce="hf_ext.fede4rag.reproduce:main",
        train="hf_ext.fede4rag.train:main",
        evaluate="hf_ext.fede4rag.evaluate:main",
        demo="hf_ext.fede4rag.demo:build_demo",
        contract="hf_ext.fede4rag.testing:contract_fixture",
        datasets=("financebench",),
        metrics=("hit@k", "recall", "mrr", "ndcg"),
        pipeline_tag="sentence-similarity",
        status="implemented (MiniLM + LoRA on the top layer; CKKS via TenSEAL; CPU quick scale, see model card)",
        usage=(
            "from sentence_transformers import SentenceTransformer\n"
            "import hf_ext  # registers the FedE4RAG retriever with transformers' AutoModel\n\n"
            "model = SentenceTransformer('{repo_id}')\n"
            "embeddings = model.encode(['What was PepsiCo net revenue in 2022?'])"
        ),
    )
)

__all__ = ["FedE4RAGConfig", "FedE4RAGRetriever", "SPEC", "pool_tokens"]
