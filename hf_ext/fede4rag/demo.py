"""The FedE4RAG Space: ask a question about the five companies' 10-K reports and see the passages the federated
retriever and the zero-shot MiniLM retrieve, side by side. Loads the retriever `hf-ext reproduce fede4rag` saves
(from the linked model repo); without it both columns use zero-shot MiniLM, and the page says so."""

from __future__ import annotations

import functools

import numpy as np

from hf_ext.core.demo import readable_errors, space_model_repo
PER_COMPANY = 60  # passages per company in the demo corpus (kept small: the Space encodes it on a CPU)
MAX_LENGTH = 96
MAX_QUESTION_CHARS = 500


@functools.lru_cache(maxsize=1)
def demo_corpus() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`(companies, passages)`: the first distinct reference passages of each company's training pairs."""
    from .data import COMPANIES, load_pairs

    seen, companies, texts = set(), [], []
    counts = dict.fromkeys(COMPANIES, 0)
    for pair in load_pairs():
        if pair.reference in seen or counts[pair.company] >= PER_COMPANY:
            continue
        seen.add(pair.reference)
        counts[pair.company] += 1
        companies.append(pair.company)
        texts.append(pair.reference)
    return tuple(companies), tuple(texts)


@functools.lru_cache(maxsize=2)
def load_retriever(kind: str, root: str | None = None):
    """`(model, tokenizer, index, source)` for `kind` in {"federated", "zero-shot"}."""
    from transformers import AutoModel, AutoTokenizer

    from .encoder import encode_texts, load_pretrained_retriever
    from .metrics import RetrievalIndex

    if kind not in ("federated", "zero-shot"):
        raise ValueError(f"unknown retriever {kind!r}")
    root = root or space_model_repo("fede4rag")  # the linked model repo (or $HF_EXT_MODEL_REPO)
    model = None
    why = "no model repo is linked"
    if kind == "federated" and root:
        try:
            model, tokenizer = AutoModel.from_pretrained(root).eval(), AutoTokenizer.from_pretrained(root)
            source = f"FedE4RAG retriever from `{root}`"
        except Exception as err:  # noqa: BLE001 - offline or missing: zero-shot MiniLM, and the page says so
            why = f"could not load the linked model repo {root} ({type(err).__name__})"
    if model is None:
        model, tokenizer = load_pretrained_retriever()
        source = "zero-shot all-MiniLM-L6-v2" + (
            "" if kind == "zero-shot" else f" (**Note:** {why}; the federated column shows zero-shot MiniLM too)")
    _, texts = demo_corpus()
    vectors = encode_texts(model, tokenizer, list(texts), max_length=MAX_LENGTH)
    return model, tokenizer, RetrievalIndex([str(i) for i in range(len(texts))], vectors), source


def retrieve(question: str, k: int = 3) -> tuple[list[list], list[list], str]:
    """Top-`k` passages of both retrievers for `question`. Raises `ValueError` on bad input."""
    from .encoder import encode_texts

    question = (question or "").strip()
    if not question:
        raise ValueError("the question is empty: ask something about PepsiCo, P&G, Boeing, Activision Blizzard or AES")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"the question has {len(question)} characters; keep it under {MAX_QUESTION_CHARS}")
    if not any(ch.isalpha() for ch in question):
        raise ValueError("the question has no words: ask it in plain English")
    if not 1 <= int(k) <= 10:
        raise ValueError(f"k must be between 1 and 10, got {k}")
    companies, texts = demo_corpus()
    tables, sources = [], []
    for kind in ("federated", "zero-shot"):
        model, tokenizer, index, source = load_retriever(kind)
        ids, scores = index.search(encode_texts(model, tokenizer, [question], max_length=64), k=int(k))
        rows = [[rank, companies[int(pid)], round(float(s), 3), texts[int(pid)][:300]]
                for rank, (pid, s) in enumerate(zip(ids[0], np.asarray(scores)[0]), start=1)]
        tables.append(rows)
        sources.append(f"**{kind}**: {source}")
    info = " · ".join(sources) + f" · corpus: {len(texts)} passages from five companies' 10-K reports"
    return tables[0], tables[1], info


def build_demo():
    """The Gradio Blocks of the FedE4RAG Space."""
    import gradio as gr

    run = readable_errors(retrieve)  # bad input: a readable message in the page, not a stack trace

    headers = ["rank", "company", "cosine similarity ↑", "passage"]
    with gr.Blocks(title="FedE4RAG: federated retriever for RAG") as demo:
        gr.Markdown(
            "# FedE4RAG — a retriever trained across five companies without sharing their data\n"
            "[arXiv 2504.19101](https://arxiv.org/abs/2504.19101) · hf_ext. Five companies (PepsiCo, P&G, Boeing, "
            "Activision Blizzard, AES) trained one MiniLM retriever on Flower (contrastive loss + similarity-matrix "
            "distillation; uploads optionally CKKS-encrypted). Ask about their 10-K reports and compare what the "
            "federated and the zero-shot retriever find."
        )
        with gr.Row():
            question = gr.Textbox(value="What drove the increase in operating margin?", label="question", scale=4)
            k = gr.Slider(1, 10, value=3, step=1, label="passages")
        gr.Examples(examples=[["How many commercial airplanes did Boeing deliver?", 3],
                              ["What drove the increase in operating margin?", 3],
                              ["What were PepsiCo's net revenues?", 5]], inputs=[question, k],
                    label="examples: questions where the two retrievers can differ")
        button = gr.Button("Retrieve", variant="primary")
        with gr.Row():
            fed = gr.Dataframe(headers=headers, label="federated (FedE4RAG)", elem_id="fede4rag-federated",
                               wrap=True)
            zero = gr.Dataframe(headers=headers, label="zero-shot MiniLM", elem_id="fede4rag-zeroshot", wrap=True)
        info = gr.Markdown(elem_id="fede4rag-info")
        button.click(run, [question, k], [fed, zero, info], api_name="retrieve")
    return demo


def browser_check(page) -> None:
    """A visitor asks about Boeing's deliveries and gets a ranked passage list from both retrievers."""
    from playwright.sync_api import expect

    from hf_ext.core import browser as b

    page.get_by_label("question", exact=True).fill("How many commercial airplanes did Boeing deliver?")
    b.press(page, "Retrieve")
    for elem in ("fede4rag-federated", "fede4rag-zeroshot"):
        b.expect_cell(page, elem, "BOEING")
        row = b.row_cells(page, elem, "1")
        assert len(row) == 4, row
    expect(page.locator("#fede4rag-info")).to_contain_text("300 passages")


def browser_check_bad_input(page) -> None:
    """A question without words: the page says so."""
    import re

    from hf_ext.core import browser as b

    page.get_by_label("question", exact=True).fill("?? 123 !!")
    b.press(page, "Retrieve")
    b.expect_readable_error(page, re.compile(r"the question has no words"))
