"""The RAG loop FedE4RAG is for: on the client, the retriever's top-k passages feed a small instruction-tuned LM
(SmolLM2-135M-Instruct, through `hf_ext.core.pretrained.load_smollm2`, prompted with its chat template) that answers
the question; answers are scored with chrF (`nltk.translate.chrf_score`, one of the generation metrics of the
authors' `RAGTest`).

Two question sets, both the clients' own:

* FinanceBench questions about the five client companies (17 of the 100; each has a gold answer): scored against it.
* The clients' held-out questions (LLM-written, no gold answer): scored against the *oracle* answer, what the same
  LM says when given the question's golden reference passage. This measures how much of the oracle's answer the
  retrieved context recovers, not correctness.

Generation is greedy (deterministic); passages are cut to `passage_tokens` LM tokens so the prompt stays short on CPU.

**The generator check comes first** ([`generator_check`]): on the FinanceBench questions, the LM given the golden
passages must beat the LM given no passage (chrF against the gold answers). A generator that does not use a correct
passage cannot tell a better retriever from a worse one, so when it fails, `run_rag` compares no retrievers and
returns the check with `"dropped"` saying why (SmolLM2-135M-Instruct, the only generator available offline, failed it:
golden chrF 0.199 < no retrieval 0.246).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import zip_longest

import numpy as np
import torch

SYSTEM = (
    "You answer questions about companies' annual reports. Use only the given passages. Answer in one short "
    "sentence; give the number if one is asked for."
)
# FinanceBench's company names of the five clients (P&G has no FinanceBench test question)
FINANCEBENCH_COMPANY = {
    "PepsiCo": "PEPSICO",
    "Procter & Gamble": "PG",
    "Boeing": "BOEING",
    "Activision Blizzard": "ACTIVISIONBLIZZARD",
    "AES Corporation": "AES",
}


def answer_scores(predictions: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Corpus chrF and the mean sentence chrF (nltk; character n-grams up to 6, β = 3, as sacrebleu's chrF), in
    [0, 1]; an empty prediction scores 0."""
    from nltk.translate.chrf_score import corpus_chrf, sentence_chrf

    if len(predictions) != len(references) or not predictions:
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references (need >= 1 each)")
    sentence = [sentence_chrf(r, p) if p.strip() else 0.0 for p, r in zip(predictions, references)]
    return {
        "chrf": float(corpus_chrf(list(references), list(predictions))),
        "chrf_mean": float(np.mean(sentence)),
        "n": len(predictions),
    }


class RAGAnswerer:
    """Answers a question from passages with a chat LM.

    Args:
        lm: a causal LM (`generate`), e.g. SmolLM2-135M-Instruct.
        tokenizer: its tokenizer, with a chat template.
        max_new_tokens (`int`, defaults to 32): answer length cap.
        passage_tokens (`int`, defaults to 96): each passage is cut to this many LM tokens.
    """

    def __init__(self, lm, tokenizer, max_new_tokens: int = 32, passage_tokens: int = 96):
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError("the RAG answerer needs a tokenizer with a chat template (SmolLM2-Instruct has one)")
        if max_new_tokens < 1 or passage_tokens < 1:
            raise ValueError(f"max_new_tokens and passage_tokens must be >= 1, got {max_new_tokens}, {passage_tokens}")
        self.lm, self.tokenizer = lm.eval(), tokenizer
        self.max_new_tokens, self.passage_tokens = max_new_tokens, passage_tokens

    def _cut(self, text: str) -> str:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][: self.passage_tokens]
        return self.tokenizer.decode(ids)

    def prompt(self, question: str, passages: Sequence[str]) -> str:
        """The chat-templated prompt: system instruction, then the numbered passages and the question."""
        context = "\n\n".join(f"[{i}] {self._cut(p)}" for i, p in enumerate(passages, start=1))
        user = f"Passages:\n{context}\n\nQuestion: {question}" if passages else f"Question: {question}"
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def answer(self, question: str, passages: Sequence[str]) -> str:
        enc = self.tokenizer(self.prompt(question, passages), return_tensors="pt", add_special_tokens=False)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        with torch.inference_mode():
            out = self.lm.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False, pad_token_id=pad)
        return self.tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True).strip()


def financebench_client_questions(questions) -> list:
    """The FinanceBench test questions about one of the five client companies."""
    return [q for q in questions if q.company in FINANCEBENCH_COMPANY]


def generator_check(golden: dict[str, float], none: dict[str, float]) -> dict:
    """ "Golden passage beats no retrieval": the positive control of the RAG comparison, on chrF against the gold
    answers. Returns `{"passed", "golden_chrf", "none_chrf", "reason"}`."""
    passed = golden["chrf"] > none["chrf"]
    reason = (
        f"golden-passage chrF {golden['chrf']:.3f} {'>' if passed else '<='} no-retrieval chrF {none['chrf']:.3f}"
        + ("" if passed else ": the generator does not use a correct passage, so it cannot rank retrievers")
    )
    return {"passed": bool(passed), "golden_chrf": golden["chrf"], "none_chrf": none["chrf"], "reason": reason}


def run_rag(answerer: RAGAnswerer, retrievers: dict, suite, k: int = 3, heldout_questions: int = 20, log=None) -> dict:
    """The RAG loop for each named retriever (and the oracle / no-retrieval reference points).

    Args:
        answerer ([`RAGAnswerer`]): the LM.
        retrievers (`dict[str, model]`): name → retriever model (e.g. zero-shot and the federated one).
        suite ([`~hf_ext.fede4rag.evaluation.EvaluationSuite`]): the run's evaluation data and caches.
        k (`int`, defaults to 3): passages per question.
        heldout_questions (`int`, defaults to 20): held-out questions answered (spread over the clients, in order).
        log (`Callable[[dict], None]`, *optional*): called with every answer as it is made (`context`, `set`,
            `question`, `answer`): on a loaded CPU one answer can take ~25 s, so a run cut short keeps its answers.

    Returns:
        `{"generator_check": ..., "financebench": {name: scores}, "heldout": {name: scores}, "examples": [...]}`;
        scores from [`answer_scores`] plus the retrieval hit rate of the passages the LM saw. When the
        [`generator_check`] fails, only the two reference points are scored and `"dropped"` says why.
    """
    from .encoder import encode_texts
    from .metrics import RetrievalIndex

    def ask(context: str, which: str, question: str, passages) -> str:
        answer = answerer.answer(question, passages)
        if log is not None:
            log({"context": context, "set": which, "question": question, "answer": answer})
        return answer

    fb, ind = suite.financebench, suite.in_domain
    fb_rows = [i for i, q in enumerate(fb.questions) if q.company in FINANCEBENCH_COMPANY]
    gold_fb = [fb.questions[i].answer for i in fb_rows]
    fb_text = dict(zip(fb.corpus.ids, fb.corpus.texts))
    ind_text = dict(zip(ind.corpus.ids, ind.corpus.texts))
    per_company: dict[str, list[int]] = {}
    for j, owner in enumerate(ind.owner):
        per_company.setdefault(owner, []).append(j)
    # round-robin over the companies, so a small budget still covers every client
    ho_rows = [j for group in zip_longest(*per_company.values()) for j in group if j is not None]
    ho_rows = ho_rows[:heldout_questions]
    ho_q = [ind.questions[j] for j in ho_rows]
    out: dict = {
        "financebench": {},
        "heldout": {},
        "k": k,
        "n_financebench": len(fb_rows),
        "n_heldout": len(ho_q),
        "examples": [],
    }
    fb_oracle = [
        ask("oracle", "financebench", fb.questions[i].question, [fb_text[g] for g in fb.golden[i]]) for i in fb_rows
    ]
    out["financebench"]["oracle (golden passages)"] = answer_scores(fb_oracle, gold_fb)
    fb_none = [ask("no retrieval", "financebench", fb.questions[i].question, []) for i in fb_rows]
    out["financebench"]["no retrieval"] = answer_scores(fb_none, gold_fb)
    out["generator_check"] = generator_check(
        out["financebench"]["oracle (golden passages)"], out["financebench"]["no retrieval"]
    )
    if not out["generator_check"]["passed"]:  # the positive control failed: no retriever comparison
        out["dropped"] = "RAG comparison dropped: " + out["generator_check"]["reason"]
        out["n_heldout"] = 0
        return out
    oracle = [ask("oracle", "heldout", q, [ind_text[ind.golden[j][0]]]) for q, j in zip(ho_q, ho_rows)]
    for name, model in retrievers.items():
        fb_index = RetrievalIndex(fb.corpus.ids, encode_texts(model, cache=fb.p_cache))
        fb_ids, _ = fb_index.search(encode_texts(model, cache=fb.q_cache)[fb_rows], k=k)
        answers = [
            ask(name, "financebench", fb.questions[i].question, [fb_text[p] for p in ids])
            for i, ids in zip(fb_rows, fb_ids)
        ]
        scores = answer_scores(answers, gold_fb)
        scores["retrieval_hit"] = float(
            np.mean([bool(set(fb.golden[i]) & set(ids)) for i, ids in zip(fb_rows, fb_ids)])
        )
        out["financebench"][name] = scores
        ind_index = RetrievalIndex(ind.corpus.ids, encode_texts(model, cache=ind.p_cache))
        ho_ids, _ = ind_index.search(encode_texts(model, cache=ind.q_cache)[ho_rows], k=k)
        ho_answers = [ask(name, "heldout", q, [ind_text[p] for p in ids]) for q, ids in zip(ho_q, ho_ids)]
        scores = answer_scores(ho_answers, oracle)
        scores["retrieval_hit"] = float(
            np.mean([bool(set(ind.golden[j]) & set(ids)) for j, ids in zip(ho_rows, ho_ids)])
        )
        out["heldout"][name] = scores
        out["examples"].extend(
            {"retriever": name, "question": fb.questions[i].question, "answer": a, "gold": g}
            for i, a, g in list(zip(fb_rows, answers, gold_fb))[:3]
        )
    return out


__all__ = [
    "FINANCEBENCH_COMPANY",
    "RAGAnswerer",
    "answer_scores",
    "financebench_client_questions",
    "generator_check",
    "run_rag",
]
