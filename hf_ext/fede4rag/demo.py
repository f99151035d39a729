"""The FedE4RAG Space: ask a question about annual-report passages and see the passages the federated retriever and
the zero-shot MiniLM retrieve, side by side. Loads the retriever `hf-ext reproduce fede4rag` saves (from the linked
model repo); without it both columns use zero-shot MiniLM, and the page says so.

The passages searched are the visitor's own (one per line) or [`DEMO_PASSAGES`], short 10-K-style passages written
for this Space about five fictional companies (one per industry of the five companies the retriever was trained
on). The reproduction's FinanceBench passages (CC BY-NC 4.0) are not redistributed with the Space.
"""

from __future__ import annotations

import functools

import numpy as np

from hf_ext.core.demo import readable_errors, space_model_repo

MAX_LENGTH = 96
MAX_QUESTION_CHARS = 500
MAX_PASSAGES = 200  # a visitor's corpus is encoded on the Space's CPU for every new text
MAX_PASSAGE_CHARS = 2000
# (company, passage): written for the Space; figures are invented and belong to no real company
DEMO_PASSAGES: tuple[tuple[str, str], ...] = (
    (
        "Crestfield Beverages",
        "Net revenue grew 6% to $18.2 billion, driven by effective net pricing of 9% that was "
        "partially offset by a 3% decline in organic volume in our snacks and beverages segments.",
    ),
    (
        "Crestfield Beverages",
        "Operating margin increased 80 basis points, reflecting productivity savings in our "
        "bottling plants and lower advertising spending, partially offset by higher packaging and freight costs.",
    ),
    (
        "Crestfield Beverages",
        "We returned $4.1 billion to shareholders through dividends of $2.9 billion and share "
        "repurchases of $1.2 billion; the annualised dividend per share rose 7%.",
    ),
    (
        "Crestfield Beverages",
        "Our largest customer, a discount retail chain, accounted for 12% of net revenue; the "
        "loss of this customer could have a material adverse effect on our results.",
    ),
    (
        "Larkspur Home Care",
        "Organic sales rose 5%, with fabric care and baby care up on higher pricing, while "
        "grooming sales fell 2% as unfavourable foreign exchange reduced reported sales in Latin America.",
    ),
    (
        "Larkspur Home Care",
        "Gross margin decreased 150 basis points to 47.1% because of higher commodity costs for "
        "resins and pulp, partially offset by manufacturing cost savings.",
    ),
    (
        "Larkspur Home Care",
        "Capital expenditures were $2.6 billion, or 4.8% of net sales, mainly for new production "
        "lines for liquid detergents and for supply-chain automation.",
    ),
    (
        "Larkspur Home Care",
        "Research and development spending was $1.9 billion; we hold about 24,000 patents "
        "covering product formulas, packaging and manufacturing processes.",
    ),
    (
        "Altair Aerospace",
        "We delivered 512 commercial airplanes during the year, compared with 380 the year "
        "before, as production of our single-aisle family returned to 31 airplanes per month.",
    ),
    (
        "Altair Aerospace",
        "Total backlog was $410 billion at year end, including more than 4,500 commercial "
        "airplane orders; defense backlog represented 14% of the total.",
    ),
    (
        "Altair Aerospace",
        "Research and development expense increased to $3.4 billion, mainly for the new "
        "wide-body program and for autonomous systems in the defense business.",
    ),
    (
        "Altair Aerospace",
        "The defense segment recorded losses of $1.3 billion on fixed-price development "
        "contracts for a tanker and a trainer aircraft because of higher estimated costs.",
    ),
    (
        "Pixelforge Games",
        "Net bookings rose 18% to $8.9 billion, as in-game purchases in our two largest "
        "franchises more than offset lower sales of boxed games.",
    ),
    (
        "Pixelforge Games",
        "Monthly active users averaged 370 million across console, PC and mobile; mobile "
        "accounted for 58% of net bookings.",
    ),
    (
        "Pixelforge Games",
        "Product development costs were $1.6 billion, or 18% of net revenue, driven by "
        "additional headcount for live-service titles.",
    ),
    (
        "Pixelforge Games",
        "Deferred revenue increased $600 million because revenue from online-enabled games is "
        "recognised over the estimated period the players keep playing.",
    ),
    (
        "Northgate Power",
        "Operating margin rose $210 million, mainly from new wind and solar capacity in South "
        "America and lower maintenance costs at our thermal plants.",
    ),
    (
        "Northgate Power",
        "We added 3.1 gigawatts of renewable capacity and signed long-term power purchase "
        "agreements for another 4.0 gigawatts with data-centre and industrial customers.",
    ),
    (
        "Northgate Power",
        "Interest expense decreased 4% to $1.0 billion, reflecting repayment of parent company "
        "debt and lower rates on refinanced project loans.",
    ),
    (
        "Northgate Power",
        "We recognised impairments of $480 million on two coal-fired plants that we expect to "
        "retire early as the regulator approved accelerated closure.",
    ),
)


def parse_corpus(text: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`(sources, passages)`: the visitor's passages (one per non-empty line) or, for empty text, [`DEMO_PASSAGES`].

    Raises `ValueError` when there are more than [`MAX_PASSAGES`] lines or a line is longer than
    [`MAX_PASSAGE_CHARS`]."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return tuple(c for c, _ in DEMO_PASSAGES), tuple(t for _, t in DEMO_PASSAGES)
    if len(lines) > MAX_PASSAGES:
        raise ValueError(f"the corpus has {len(lines)} passages; the Space searches at most {MAX_PASSAGES}")
    long = [i for i, line in enumerate(lines, start=1) if len(line) > MAX_PASSAGE_CHARS]
    if long:
        raise ValueError(f"passage {long[0]} has {len(lines[long[0] - 1])} characters; at most {MAX_PASSAGE_CHARS}")
    return tuple(f"your passage {i}" for i in range(1, len(lines) + 1)), tuple(lines)


@functools.lru_cache(maxsize=2)
def load_encoder(kind: str, root: str | None = None):
    """`(model, tokenizer, source)` for `kind` in {"federated", "zero-shot"}."""
    from transformers import AutoModel, AutoTokenizer

    from .encoder import load_pretrained_retriever

    if kind not in ("federated", "zero-shot"):
        raise ValueError(f"unknown retriever {kind!r}")
    root = root or space_model_repo("fede4rag")  # the linked model repo (or $HF_EXT_MODEL_REPO)
    why = "no model repo is linked"
    if kind == "federated" and root:
        try:
            model, tokenizer = AutoModel.from_pretrained(root).eval(), AutoTokenizer.from_pretrained(root)
            return model, tokenizer, f"FedE4RAG retriever from `{root}`"
        except Exception as err:  # noqa: BLE001 - offline or missing: zero-shot MiniLM, and the page says so
            why = f"could not load the linked model repo {root} ({type(err).__name__})"
    model, tokenizer = load_pretrained_retriever()
    return (
        model,
        tokenizer,
        "zero-shot all-MiniLM-L6-v2"
        + ("" if kind == "zero-shot" else f" (**Note:** {why}; the federated column shows zero-shot MiniLM too)"),
    )


@functools.lru_cache(maxsize=4)
def load_retriever(kind: str, passages: tuple[str, ...] | None = None):
    """`(model, tokenizer, index, source)`: `kind`'s encoder and an exact index over `passages` (default: the
    demo's)."""
    from .encoder import encode_texts
    from .metrics import RetrievalIndex

    model, tokenizer, source = load_encoder(kind)
    texts = passages if passages is not None else parse_corpus(None)[1]
    vectors = encode_texts(model, tokenizer, list(texts), max_length=MAX_LENGTH)
    return model, tokenizer, RetrievalIndex([str(i) for i in range(len(texts))], vectors), source


def reading(federated: list[list], zero_shot: list[list], same_model: bool) -> str:
    """One honest line on the two rankings: how many passages they share and whether the top passage agrees."""
    if same_model:
        return (
            "**Reading:** both columns come from the same zero-shot model here, so they are identical; link the "
            "trained retriever to see what federated training changes."
        )
    top = {row[3] for row in federated} & {row[3] for row in zero_shot}
    first = "the same" if federated[0][3] == zero_shot[0][3] else "a different"
    return (
        f"**Reading:** the federated and the zero-shot retriever share {len(top)} of their {len(federated)} "
        f"passages and put {first} passage first; one question is an anecdote, the README's Recall@k over "
        "FinanceBench is the measurement."
    )


def retrieve(question: str, k: int = 3, corpus: str | None = None) -> tuple[list[list], list[list], str]:
    """Top-`k` passages of both retrievers for `question` among `corpus` (one passage per line; empty: the demo's
    passages). Returns `(federated rows, zero-shot rows, Markdown info)`; raises `ValueError` on bad input."""
    from .encoder import encode_texts

    question = (question or "").strip()
    if not question:
        raise ValueError("the question is empty: ask something about the passages (see the examples)")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"the question has {len(question)} characters; keep it under {MAX_QUESTION_CHARS}")
    if not any(ch.isalpha() for ch in question):
        raise ValueError("the question has no words: ask it in plain English")
    if not 1 <= int(k) <= 10:
        raise ValueError(f"k must be between 1 and 10, got {k}")
    sources_of, texts = parse_corpus(corpus)
    tables, sources = [], []
    for kind in ("federated", "zero-shot"):
        model, tokenizer, index, source = load_retriever(kind, texts)
        ids, scores = index.search(encode_texts(model, tokenizer, [question], max_length=64), k=int(k))
        rows = [
            [rank, sources_of[int(pid)], round(float(s), 3), texts[int(pid)][:300]]
            for rank, (pid, s) in enumerate(zip(ids[0], np.asarray(scores)[0]), start=1)
        ]
        tables.append(rows)
        sources.append(f"**{kind}**: {source}")
    what = (
        "passages you pasted"
        if corpus and corpus.strip()
        else "10-K-style passages written for this Space about five fictional companies"
    )
    same_model = "Note:" in sources[0]  # the federated column fell back to zero-shot MiniLM
    info = reading(tables[0], tables[1], same_model) + "\n\n" + " · ".join(sources) + f" · corpus: {len(texts)} {what}"
    return tables[0], tables[1], info


EXAMPLE_QUESTIONS = (
    "How many commercial airplanes were delivered during the year?",
    "What drove the increase in operating margin?",
    "How much was returned to shareholders?",
    "Why did gross margin decrease?",
)


def build_demo():
    """The Gradio Blocks of the FedE4RAG Space."""
    import gradio as gr

    def handler(question, k, corpus, progress=gr.Progress()):
        progress(0.1, desc="loading the retrievers and encoding the passages (first request only)")
        return retrieve(question, k, corpus)

    run = readable_errors(handler)  # bad input: a readable message in the page, not a stack trace

    headers = ["rank", "company", "cosine ↑", "passage"]  # cosine similarity of question and passage
    with gr.Blocks(title="FedE4RAG: federated retriever for RAG") as demo:
        gr.Markdown(
            "# FedE4RAG — a retriever trained across five companies without sharing their data\n"
            "[arXiv 2504.19101](https://arxiv.org/abs/2504.19101) · hf_ext. Five companies (PepsiCo, P&G, Boeing, "
            "Activision Blizzard, AES) trained one MiniLM retriever on Flower (contrastive loss + similarity-matrix "
            "distillation; uploads optionally CKKS-encrypted) on question–passage pairs from their 10-K reports. "
            "Ask a question and compare what the federated and the zero-shot retriever find among the passages "
            "below: by default short 10-K-style passages written for this Space about five fictional companies "
            "(the FinanceBench passages are not redistributed), or paste your own, one per line."
        )
        with gr.Row():
            question = gr.Textbox(value=EXAMPLE_QUESTIONS[1], label="question", scale=4)
            k = gr.Slider(1, 10, value=3, step=1, label="passages")
        corpus = gr.Textbox(
            label=f"your passages (optional; one per line, at most {MAX_PASSAGES}; empty = the "
            "Space's 20 example passages)",
            lines=3,
            elem_id="fede4rag-corpus",
        )
        gr.Examples(
            examples=[[q, 3] for q in EXAMPLE_QUESTIONS],
            inputs=[question, k],
            label="examples: questions whose answer is in one passage; the retrievers can rank it differently",
        )
        button = gr.Button("Retrieve", variant="primary")
        info = gr.Markdown(elem_id="fede4rag-info")
        with gr.Row():
            fed = gr.Dataframe(
                headers=headers,
                label="federated (FedE4RAG); cosine: question–passage similarity, ↑ more similar",
                elem_id="fede4rag-federated",
                wrap=True,
            )
            zero = gr.Dataframe(
                headers=headers,
                label="zero-shot MiniLM; cosine: question–passage similarity, ↑ more similar",
                elem_id="fede4rag-zeroshot",
                wrap=True,
            )
        button.click(run, [question, k, corpus], [fed, zero, info], api_name="retrieve")
    return demo
