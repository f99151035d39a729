"""Saving the two parties' parts as separate Hub artifacts, each with a card stating exactly what it holds (and,
after training, the training record `hf-ext push` renders the published card from), and `hf-ext fl_llama split`,
which splits a saved `LlamaForCausalLM` into those two artifacts."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hf_ext.core.arguments import ArgumentParser

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


def held_line(part: FlLlamaClientModel | FlLlamaServerModel) -> str:
    """One line naming what `part` holds, for a training record's `notes` (the pushed card is rendered from the
    record, not from the [`holdings`] section of the saved card)."""
    cfg = part.config
    n, a, c = cfg.num_layers, cfg.num_input_blocks, cfg.num_output_blocks
    if isinstance(part, FlLlamaClientModel):
        k = int(cfg.client_stored_blocks)
        what = (
            f"The client's part (`FlLlamaClientModel`: `embed_tokens`, blocks `[0, {k})` and `[{n - k}, {n})`, "
            "final norm, `lm_head`, tokenizer)"
        )
    else:
        what = f"The server's part (`FlLlamaServerModel`: blocks `[1, {n - 1})`)"
    return f"{what} of a {n}-block Llama split at a = {a}, c = {c}; not a language model on its own"


def save_part(part: FlLlamaClientModel | FlLlamaServerModel, out_dir: str | os.PathLike, *, tokenizer=None,
              record: Mapping[str, Any] | None = None) -> Path:  # fmt: skip
    """Writes one party's artifact into `out_dir` in one atomic swap: safetensors, config with `auto_map`, modeling
    code, its card, the tokenizer (client) and, after training, `training_record.json`.

    Args:
        part ([`FlLlamaClientModel`] or [`FlLlamaServerModel`]): what to save.
        out_dir (`str` or `os.PathLike`): the artifact folder (replaced only once the new one is complete).
        tokenizer (*optional*): saved beside the client's part.
        record (`Mapping`, *optional*): keyword arguments of [`~hf_ext.core.records.save_training_record`] (not
            `method`); its `notes` are prefixed with [`held_line`], so the pushed card says which part it is.
    """
    from hf_ext.core.cards import render_card
    from hf_ext.core.hub import atomic_write_dir
    from hf_ext.core.records import save_training_record

    from . import SPEC

    name = "client" if isinstance(part, FlLlamaClientModel) else "server"
    body = holdings(part) + SPEC.card_file.read_text()

    def write(tmp: Path) -> None:
        part.save_pretrained(tmp)
        render_card(SPEC, repo_id=f"your-name/fl_llama-{name}", body=body).save(tmp / "README.md")
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        if record is not None:
            notes = "; ".join(n for n in (held_line(part), record.get("notes")) if n)
            save_training_record(tmp, method=SPEC.name, **{**record, "notes": notes})

    return atomic_write_dir(out_dir, write)


def save_parts(client: FlLlamaClientModel, server: FlLlamaServerModel, out_dir: str | os.PathLike,
               tokenizer=None, record: Mapping[str, Any] | None = None) -> tuple[Path, Path]:  # fmt: skip
    """Writes `out_dir/client` and `out_dir/server` with [`save_part`] (each atomically); the tokenizer goes with the
    client, and `record` (the training run, see [`save_part`]) into both: each part is published on its own."""
    out = Path(out_dir)
    return (save_part(client, out / "client", tokenizer=tokenizer, record=record),
            save_part(server, out / "server", record=record))  # fmt: skip


def make_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="hf-ext fl_llama split",
        description=(
            "Splits a saved LlamaForCausalLM (a folder, or a Hub id with a network) into OUT/client (give it to the "
            "client, with the model's tokenizer) and OUT/server (for `hf-ext fl_llama serve OUT/server`). Both parts "
            "carry the SHA-256 of the model they were split from, which the handshake compares."
        ),
    )
    p.add_argument("model", help="a LlamaForCausalLM folder (config.json + safetensors)")
    p.add_argument("out_dir", help="writes OUT/client and OUT/server")
    p.add_argument("--a", type=int, default=1, help="client input blocks")
    p.add_argument("--c", type=int, default=1, help="client output blocks")
    p.add_argument(
        "--client-stored-blocks",
        type=int,
        help="first/last blocks the client stores, so (a, c) can move "
        "up to it without new weights (default: max(a, c))",
    )
    p.add_argument("--noise-scale", type=float, default=0.0, help="s of the client's noise (σ = s·sqrt(π/2))")
    return p


def main(argv: list[str] | None = None) -> tuple[Path, Path]:
    """`hf-ext fl_llama split MODEL OUT`: the client's and the server's artifacts of a saved Llama."""
    parser = make_parser()
    ns = parser.parse_args(argv)
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from .modeling_fl_llama import split_llama

    try:
        model = LlamaForCausalLM.from_pretrained(ns.model, dtype=torch.float32)
    except (OSError, ValueError) as err:
        parser.error(f"cannot load a LlamaForCausalLM from {ns.model}: {err}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(ns.model)
    except (OSError, ValueError, TypeError):
        tokenizer = None  # a bare model folder: the client then names its tokenizer (`client --tokenizer`)
    try:
        client, server = split_llama(model, ns.a, ns.c, client_stored_blocks=ns.client_stored_blocks,
                                     noise_scale=ns.noise_scale)  # fmt: skip
    except ValueError as err:
        parser.error(str(err))
    paths = save_parts(client, server, ns.out_dir, tokenizer=tokenizer)
    print(f"client part: {paths[0]}{'' if tokenizer else ' (no tokenizer found in ' + ns.model + ')'}")
    print(f"server part: {paths[1]} (hf-ext fl_llama serve {paths[1]} --tokens ...)")
    return paths


__all__ = ["held_line", "holdings", "main", "make_parser", "save_part", "save_parts"]
