"""The H2Tune Space: pick one of the three heterogeneous clients and prompt it, with and without its federated
H2Tune adapter. Loads the artifacts `hf-ext reproduce h2tune` writes (the linked model repo (`<client>/base`,
`<client>/adapter`)); without them it builds the client's untrained tiny decoder and says so."""

from __future__ import annotations

import functools

from hf_ext.core.demo import readable_errors, space_model_repo


@functools.lru_cache(maxsize=4)
def load_client(name: str, root: str | None = None):
    """`(peft_model, source)` for client `name`: base + adapter from the linked model repo (or `root`: a repo id or
    a folder laid out as `hf-ext reproduce h2tune`'s `clients/`, i.e. `<client>/base`, `<client>/adapter`), or a
    fresh untrained client with a note when that cannot be loaded."""
    from .task import CLIENTS, H2TuneClient, RunConfig

    specs = {c.name: c for c in CLIENTS}
    if name not in specs:
        raise ValueError(f"unknown client {name!r}; choose one of {sorted(specs)}")
    root = root or space_model_repo("h2tune")
    why = "no model repo is linked"
    if root:
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        try:
            base = AutoModelForCausalLM.from_pretrained(root, subfolder=f"{name}/base")
            return PeftModel.from_pretrained(base, root, subfolder=f"{name}/adapter"), f"model repo `{root}` ({name})"
        except Exception as err:  # noqa: BLE001 - offline or missing: an untrained client, and the page says so
            why = f"could not load the linked model repo {root} ({type(err).__name__})"
    index = [c.name for c in CLIENTS].index(name)
    client = H2TuneClient(specs[name], RunConfig(), max(c.layers for c in CLIENTS), index=index)
    return client.model, f"**Note:** {why}; showing an untrained client built in code instead"


def generate(client: str, prompt: str, max_new_tokens: int = 4) -> tuple[list[list[str]], str]:
    """Greedy answers of `client` to `prompt` with and without the adapter. Raises `ValueError` on bad input."""
    from .data import encode, greedy
    from .task import CLIENTS

    if not prompt or not prompt.strip():
        raise ValueError("the prompt is empty; try one like " + ", ".join(_examples()))
    encode(prompt)  # raises ValueError naming unsupported characters
    if len(prompt) > 40:
        raise ValueError(f"the prompt has {len(prompt)} characters; the tiny decoders take at most 40")
    model, source = load_client(client)
    with model.disable_adapter():
        plain = greedy(model, prompt, max_new_tokens)
    adapted = greedy(model, prompt, max_new_tokens)
    spec = {c.name: c for c in CLIENTS}[client]
    expected = expected_answer(prompt)
    rows = [
        [name, answer, "-" if expected is None else ("yes" if answer.strip().startswith(expected) else "no")]
        for name, answer in (("without adapter", plain), ("with federated H2Tune adapter", adapted))
    ]
    info = (
        f"{spec.name}: {spec.family}-style decoder, {spec.layers} layers, width {spec.hidden}, LoRA rank "
        f"{spec.rank}, task {spec.task}; {source}"
    )
    return rows, info


def expected_answer(prompt: str) -> str | None:
    """The right answer to a prompt in one of the task formats ((a + b) mod 10 as a digit, or a multiple-choice
    option's letter), or `None` for a free-form prompt."""
    import re

    prompt = prompt.strip()
    m = (
        re.fullmatch(r"(\d+)\+(\d+)=", prompt)
        or re.fullmatch(r"print\(\((\d+)\+(\d+)\)%10\)>", prompt)
        or re.fullmatch(r"(\d+)\+(\d+) mod 10=", prompt)
    )
    if m:
        return str((int(m[1]) + int(m[2])) % 10)
    m = re.fullmatch(r"(\d+)\+(\d+)\? A(\d) B(\d) C(\d) D(\d):", prompt)
    if m:
        ans, options = (int(m[1]) + int(m[2])) % 10, [int(m[i]) for i in range(3, 7)]
        return "ABCD"[options.index(ans)] if ans in options else None
    return None


def reading(rows: list[list], source: str) -> str:
    """One honest line on the two answers."""
    if rows[0][2] == "-":
        return "**Reading:** a free-form prompt has no known answer; use one of the three task formats to score it."
    right = [r[0] for r in rows if r[2] == "yes"]
    line = (
        f"**Reading:** right answer from {' and '.join(right)}" if right else "**Reading:** neither answer is right"
    ) + "; one prompt is an anecdote, the README's exact match over each client's test split is the "
    line += "measurement."
    if "Note:" in source:
        line += " The client here is untrained (no model repo loaded), so both answers are noise."
    return line


def _examples() -> list[str]:
    return ["3+4=", "3+4 mod 10=", "print((3+4)%10)>"]


def build_demo():
    """The Gradio Blocks of the H2Tune Space."""
    import gradio as gr

    from .task import CLIENTS

    def handler(client, prompt):
        rows, info = generate(client, prompt)
        return rows, reading(rows, info) + "\n\n" + info

    handler.__name__ = "generate"
    run = readable_errors(handler)  # bad input: a readable message in the page, not a stack trace

    with gr.Blocks(title="H2Tune: federated fine-tuning across heterogeneous models") as demo:
        gr.Markdown(
            "# H2Tune — one adapter family, three different decoders\n"
            "[arXiv 2507.22633](https://arxiv.org/abs/2507.22633) · hf_ext. Three clients on two tiny decoders "
            "(two on one Llama-style base, one on a GPT-2-style base) shared only their LoRA middle matrices. "
            "Pick a client, prompt it, and compare its answer with and without its federated adapter. Examples: "
            + " · ".join(_examples())
        )
        with gr.Row():
            client = gr.Radio([c.name for c in CLIENTS], value=CLIENTS[0].name, label="client")
            prompt = gr.Textbox(value="3+4=", label="prompt", elem_id="h2tune-prompt")
        gr.Examples(
            examples=[["client-0", "3+4="], ["client-1", "8+7 mod 10="], ["client-2", "print((3+4)%10)>"]],
            inputs=[client, prompt],
            label="examples: each client's own task format (a fill-in sum, the sum "
            "mod 10, a program output); the adapter should turn a wrong answer into the right one",
        )
        button = gr.Button("Generate", variant="primary")
        table = gr.Dataframe(
            headers=["model", "answer", "right answer? ((a + b) mod 10)"],
            label="greedy answers",
            elem_id="h2tune-answers",
        )
        info = gr.Markdown(elem_id="h2tune-info")
        button.click(run, [client, prompt], [table, info], api_name="generate")
    return demo
