"""The FL-LLaMA Space: choose the partition `(a, c)` and the noise scale `s`, prompt the split model, and see the
generated text and the bytes each party sent, with the KV cache held by each side and without it (the whole prefix
resent every token).

The Space loads the client and server parts from the linked model repo's `client/` and `server/` subfolders (as
`hf-ext fl_llama train` writes them); without them it splits a tiny random Llama with a BPE tokenizer trained on a
few sentences written into this module (MultiRC is not redistributed with the Space), and says so.
"""

from __future__ import annotations

import functools
import time

from hf_ext.core.demo import readable_errors, space_model_repo

# The offline fallback's tokenizer corpus: MultiRC-style passages and questions written for the Space (the
# reproduction's MultiRC files are research-use data that the Space does not ship).
FALLBACK_TEXT = (
    "A force is a push or a pull. What causes a change in motion? Question: Is it a force? Answer: yes",
    "When you kick a ball it starts to move. The kick is a force that changes the ball's motion. Answer: yes",
    "Friction slows a sliding book until it stops. Question: Does friction speed the book up? Answer: no",
    "Plants use sunlight, water and carbon dioxide to make sugar. Question: Do plants need light? Answer: yes",
    "The moon orbits the Earth about once a month. Question: Does the Earth orbit the moon? Answer: no",
    "Rivers carry sand and mud to the sea, where it settles into layers of rock over many years.",
    "The passage says the town built a bridge after the flood. Question: Was the bridge built first? Answer: no",
    "Heat flows from a warm cup of tea to the colder air around it until both have the same temperature.",
)


@functools.lru_cache(maxsize=1)
def _parts():
    """`(client, server, tokenizer, source)`: the saved artifact when present, else a tiny random split."""
    import torch
    from transformers import AutoTokenizer

    from .modeling_fl_llama import FlLlamaClientModel, FlLlamaServerModel, split_llama

    repo = space_model_repo("fl_llama")  # the linked model repo (client/ and server/ parts), or $HF_EXT_MODEL_REPO
    why = "no model repo is linked"
    if repo:
        try:
            client = FlLlamaClientModel.from_pretrained(repo, subfolder="client")
            server = FlLlamaServerModel.from_pretrained(repo, subfolder="server")
            tok = AutoTokenizer.from_pretrained(repo, subfolder="client")
            return client, server, tok, f"model repo `{repo}` (client/ and server/ parts)"
        except Exception as err:  # noqa: BLE001 - offline or missing: the tiny split below, and the page says so
            why = f"could not load the linked model repo {repo} ({type(err).__name__})"
    from .data import train_tokenizer
    from .presets import tiny_llama

    tok = train_tokenizer(list(FALLBACK_TEXT) * 4, vocab_size=400)
    torch.manual_seed(0)
    client, server = split_llama(tiny_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id), 1, 1,
                                 client_stored_blocks=3)  # fmt: skip
    return client, server, tok, f"**Note:** {why}; showing a tiny random Llama built in code instead"


def _validate(a, c, noise_scale, prompt, max_new_tokens, num_layers: int) -> tuple[int, int, float, str, int]:
    try:
        a, c, s, n = int(a), int(c), float(noise_scale), int(max_new_tokens)
    except (TypeError, ValueError):
        raise ValueError("a, c, the noise scale and the number of tokens must be numbers") from None
    if a + c >= num_layers:
        raise ValueError(f"a + c must be less than the {num_layers} layers so the server keeps a block; "
                         f"got a={a}, c={c}")  # fmt: skip
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"noise scale s must be between 0 and 1, got {s:g}")
    if not 1 <= n <= 64:
        raise ValueError(f"tokens to generate must be between 1 and 64, got {n}")
    if not str(prompt or "").strip():
        raise ValueError("the prompt is empty: type a question or a passage")
    return a, c, s, str(prompt), n


def generate_split(a: int = 1, c: int = 1, noise_scale: float = 0.0, prompt: str = "What causes a change in motion?",
                   max_new_tokens: int = 24) -> tuple[str, list[list]]:  # fmt: skip
    """Generates through the split model with and without KV caches (greedy, in-process transport).

    Returns `(generated text with caches, table rows [mode, client bytes, server bytes, messages, tokens/s,
    same tokens])`; raises `ValueError` with a readable message on bad input.
    """
    import torch

    from .server import SplitServer
    from .split_model import FlLlamaSplitForCausalLM
    from .transport import InProcessTransport

    client, server_model, tok, _ = _parts()
    a, c, s, prompt, n = _validate(a, c, noise_scale, prompt, max_new_tokens, client.config.num_layers)
    client.set_partition(a, c)  # raises ValueError naming the stored-block limit
    server_model.set_partition(a, c)
    client.config.noise_scale = s
    server = SplitServer(server_model)
    split = FlLlamaSplitForCausalLM(client, InProcessTransport(server.handle_bytes))
    ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"][-256:]])
    rows, outputs = [], {}
    for cache in (True, False):
        split.noise_generator.manual_seed(0)
        split.transport.stats.reset()
        start = time.perf_counter()
        out = split.generate(ids, max_new_tokens=n, use_cache=cache)
        seconds = time.perf_counter() - start
        stats = split.transport.stats
        outputs[cache] = out
        rows.append(["with KV caches" if cache else "no cache (prefix resent)", stats.client_bytes, stats.server_bytes,
                     sum(stats.messages.values()), round(n / seconds, 1)])  # fmt: skip
    same = bool(torch.equal(outputs[True], outputs[False]))
    for row in rows:
        row.append("yes" if same else "no (noise draws differ)")
    text = tok.decode(outputs[True][0, ids.shape[1] :].tolist())
    return text, rows


def reading(rows: list[list]) -> str:
    """One honest line on `generate_split`'s traffic rows: how much the KV caches save, and whether the tokens match."""
    cached, resent = rows
    same = cached[-1] == "yes"
    return (
        f"**Reading:** with KV caches the client sent {resent[1] / max(cached[1], 1):.1f}× fewer bytes "
        f"({cached[1]:,} vs {resent[1]:,}) and the server {resent[2] / max(cached[2], 1):.1f}× fewer"
        + (
            "; the generated tokens are identical, so the caches change only the traffic."
            if same
            else "; the tokens differ because the no-cache run draws fresh noise for the resent prefix."
        )
        + " Tokens/s are measured on the Space's shared CPU and only indicative."
    )


def traffic_plot(rows: list[list]):
    """Bytes each party sent, with and without the KV caches (log scale: the gap is often 10× or more)."""
    from hf_ext.core.demo import bar_figure

    return bar_figure(
        ["client → server", "server → client"],
        {row[0]: [row[1], row[2]] for row in rows},
        "bytes sent (log scale, ↓ better)",
        "traffic of one generation",
        log=True,
    )


def build_demo():
    """The Gradio Blocks of the FL-LLaMA Space."""
    import gradio as gr

    def handler(a, c, noise_scale, prompt, max_new_tokens, progress=gr.Progress()):
        progress(0.05, desc="loading the split model")
        source = _parts()[3]
        progress(0.2, desc="generating with and without the KV caches")
        text, rows = generate_split(a, c, noise_scale, prompt, max_new_tokens)
        return text, rows, traffic_plot(rows), reading(rows) + f"\n\n_{source}_"

    run = readable_errors(handler)  # bad input: a readable message in the page, not a stack trace

    with gr.Blocks(title="FL-LLaMA: split generation with KV caches") as demo:
        gr.Markdown(
            "# FL-LLaMA — federated split LLaMA with a KV cache on each side\n"
            "[arXiv 2505.15683](https://arxiv.org/abs/2505.15683) · hf_ext. The client keeps the embeddings and the "
            "first `a` blocks, the last `c` blocks and the LM head; the server runs the blocks in between. The "
            "client adds Gaussian noise (σ = s·sqrt(π/2)) to every hidden state it sends. With KV caches the client "
            "sends the prompt once, then one hidden vector per new token; without them it resends the whole prefix "
            "and its attention mask at every step. The model is tiny (trained offline or random), so the text "
            "itself is not meaningful: the point is what crosses the wire."
        )
        with gr.Row():
            a = gr.Slider(1, 3, value=1, step=1, label="a (client input blocks)")
            c = gr.Slider(1, 3, value=1, step=1, label="c (client output blocks)")
            s = gr.Slider(0.0, 1.0, value=0.0, step=0.01, label="noise scale s")
            n = gr.Slider(1, 64, value=24, step=1, label="tokens to generate")
        prompt = gr.Textbox(value="What causes a change in motion? Question: Is it a force?", label="prompt", lines=2)
        gr.Examples(
            examples=[
                [1, 1, 0.0, "What causes a change in motion? Question: Is it a force?", 24],
                [3, 3, 0.0, "What causes a change in motion? Question: Is it a force?", 24],
                [1, 1, 0.5, "What causes a change in motion? Question: Is it a force?", 24],
            ],
            inputs=[a, c, s, prompt, n],
            label="examples: the default split, more blocks on the client, noise on the hidden states",
        )
        button = gr.Button("Generate through the split model", variant="primary")
        text = gr.Textbox(label="generated continuation (with caches)", elem_id="fl-llama-text")
        headers = ["mode", "client sent (bytes) ↓", "server sent (bytes) ↓", "messages ↓", "tokens/s ↑", "same tokens"]
        table = gr.Dataframe(headers=headers, label="traffic", elem_id="fl-llama-bytes")
        info = gr.Markdown(elem_id="fl-llama-reading")
        plot = gr.Plot(label="bytes sent by each party", elem_id="fl-llama-plot")
        button.click(run, [a, c, s, prompt, n], [text, table, plot, info], api_name="generate")
    return demo


__all__ = ["build_demo", "generate_split"]
