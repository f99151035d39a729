"""Saving the two parties' parts as separate Hub artifacts, each with a card stating exactly what it holds."""

from __future__ import annotations

import os
from pathlib import Path

from hf_ext.core.hub import save_artifact

from .modeling_fl_llama import FlLlamaClientModel, FlLlamaServerModel


def holdings(part: FlLlamaClientModel | FlLlamaServerModel) -> str:
    """A card section naming the blocks and modules stored in `part` and the partition it was saved with."""
    cfg = part.config
    n, a, c = cfg.num_layers, cfg.num_input_blocks, cfg.num_output_blocks
    if isinstance(part, FlLlamaClientModel):
        k = int(cfg.client_stored_blocks)
        held = (f"the **client** part: `embed_tokens`, blocks `[0, {k})` and `[{n - k}, {n})` of the {n}-block "
                f"Llama, the final RMSNorm and `lm_head` (plus the tokenizer when saved with one). Token ids and "
                f"labels stay with this party.")  # fmt: skip
        usable = f"any `a, c <= {k}` with `a + c < {n}`"
    else:
        held = (f"the **server** part: blocks `[1, {n - 1})` of the {n}-block Llama; no embeddings, no `lm_head`, "
                f"no tokenizer.")  # fmt: skip
        usable = f"any `a, c >= 1` with `a + c < {n}`"
    return (f"## This artifact\n\nThis repository holds {held} Saved with the partition `a = {a}`, `c = {c}` "
            f"(noise scale `s = {cfg.noise_scale:g}`); it can be re-partitioned to {usable} without new weights. "
            f"It is not a usable language model on its own.\n\n")  # fmt: skip


def save_parts(client: FlLlamaClientModel, server: FlLlamaServerModel, out_dir: str | os.PathLike,
               tokenizer=None) -> tuple[Path, Path]:  # fmt: skip
    """Writes `out_dir/client` and `out_dir/server` atomically (safetensors, config with `auto_map`, modeling code,
    and a card per part); the tokenizer goes with the client."""
    from . import SPEC

    body = SPEC.card_file.read_text()
    out = Path(out_dir)
    paths = []
    for name, part in (("client", client), ("server", server)):
        path = save_artifact(part, out / name, SPEC, repo_id=f"your-name/fl_llama-{name}", body=holdings(part) + body)
        if name == "client" and tokenizer is not None:
            tokenizer.save_pretrained(path)
        paths.append(path)
    return paths[0], paths[1]


__all__ = ["holdings", "save_parts"]
