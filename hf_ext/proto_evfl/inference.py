"""Scoring new entities with a trained Proto-EVFL federation: each party embeds its own feature block of the
entities with its saved encoder ([`embed_party`]; in a deployment this runs at the party and only `z^k` leaves it),
and the active party's top model scores the stacked embeddings ([`score_embeddings`]). [`predict_entities`] does
both, for a harness that holds every party's artifact (tests, a demo, a single organisation's silos).

The published artifact of a federation ([`save_federation`], what `hf-ext push proto_evfl` uploads) is the top
model at the root and each party's encoder in `parties/party-<k>/`; [`load_federation`] reads it back from a folder
or a Hub repo id.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


def _load(model_or_path, kind: str):
    if isinstance(model_or_path, (str, Path)):
        from transformers import AutoModel

        import hf_ext  # noqa: F401  (registers the Proto-EVFL model types with AutoModel)

        model_or_path = AutoModel.from_pretrained(str(model_or_path))
    expected = {"party": "ProtoEvflPartyModel", "top": "ProtoEvflForClassification"}[kind]
    if type(model_or_path).__name__ != expected:
        raise TypeError(f"expected a {expected} (or its saved folder), got {type(model_or_path).__name__}")
    return model_or_path.eval()


@torch.no_grad()
def embed_party(party, features) -> np.ndarray:
    """`z^k` of the entities' rows of this party's block.

    Args:
        party ([`ProtoEvflPartyModel`] or path): the party's trained encoder.
        features (`array-like` of shape `(n, input_dim)`): the party's features of the `n` entities, in the
            entities' order (the same order at every party).
    """
    party = _load(party, "party")
    x = torch.as_tensor(np.asarray(features, dtype=np.float32))
    return party.embed(x).numpy()


@torch.no_grad()
def score_embeddings(top, embeddings) -> dict[str, np.ndarray]:
    """Class scores from the parties' embeddings of the same entities.

    Args:
        top ([`ProtoEvflForClassification`] or path): the active party's trained top model.
        embeddings (`list` of `K` arrays of shape `(n, embed_dim)`): `z^k` from each party, in party order.

    Returns:
        `dict`: `logits` `(n, C)`, `probabilities` (softmax of the logits), `predictions` `(n,)`, `gate` `(n, K)`.
    """
    top = _load(top, "top")
    k = top.config.num_parties
    if len(embeddings) != k:
        raise ValueError(f"need embeddings from {k} parties, got {len(embeddings)}")
    z = [np.asarray(e, dtype=np.float32) for e in embeddings]
    if len({e.shape[0] for e in z}) != 1:
        raise ValueError(f"every party must embed the same entities; got row counts {[e.shape[0] for e in z]}")
    out = top(party_embeddings=torch.from_numpy(np.stack(z, axis=1)))
    return {"logits": out.logits.numpy(), "probabilities": out.logits.softmax(-1).numpy(),
            "predictions": out.logits.argmax(-1).numpy(), "gate": out.gate.numpy()}  # fmt: skip


def predict_entities(top, parties, features) -> dict[str, np.ndarray]:
    """Scores new entities from their parties' features.

    Args:
        top ([`ProtoEvflForClassification`] or path): the active party's top model.
        parties (`list` of [`ProtoEvflPartyModel`] or paths): each party's encoder, in party order.
        features (`list` of arrays): each party's features of the same entities, in party order.

    Example:

    ```python
    >>> from hf_ext.proto_evfl.inference import predict_entities
    >>> out = predict_entities("runs/proto_evfl/artifact", ["runs/proto_evfl/artifact/parties/party-0",
    ...                        "runs/proto_evfl/artifact/parties/party-1"], [x_left, x_right])
    >>> out["predictions"]
    ```
    """
    if len(parties) != len(features):
        raise ValueError(f"{len(parties)} party models but {len(features)} feature blocks")
    return score_embeddings(top, [embed_party(p, x) for p, x in zip(parties, features)])


def party_subfolder(k: int) -> str:
    """Where party `k`'s encoder lives inside a published federation artifact."""
    return f"parties/party-{k}"


def save_federation(top, parties, out_dir: str | Path, spec=None) -> Path:
    """Saves the top model (at the root, with the model card when `spec` is given) and every party's encoder (in
    [`party_subfolder`]) as one artifact, swapped into place atomically.

    In a deployment each party keeps its own encoder; the reproduction's single harness holds them all, and
    publishing them together is what lets a Space (or [`predict_entities`]) score new entities from raw features.
    """
    from hf_ext.core.hub import atomic_write_dir

    def write(tmp: Path) -> None:
        top.save_pretrained(tmp)
        if spec is not None:
            from hf_ext.core.cards import render_card

            render_card(spec).save(tmp / "README.md")
        for k, party in enumerate(parties):
            party.save_pretrained(tmp / party_subfolder(k))

    return atomic_write_dir(out_dir, write)


def load_federation(source: str | Path, **kwargs):
    """`(top, parties)` of a federation saved by [`save_federation`]: a local folder or a Hub repo id (`kwargs`,
    e.g. `revision`, go to every `from_pretrained`). Raises `OSError` (or the Hub client's error) when a part is
    missing, e.g. a repo pushed with the top model only."""
    from .modeling_proto_evfl import ProtoEvflForClassification, ProtoEvflPartyModel

    top = ProtoEvflForClassification.from_pretrained(str(source), **kwargs).eval()
    parties = [
        ProtoEvflPartyModel.from_pretrained(str(source), subfolder=party_subfolder(k), **kwargs).eval()
        for k in range(top.config.num_parties)
    ]
    return top, parties


__all__ = [
    "embed_party",
    "load_federation",
    "party_subfolder",
    "predict_entities",
    "save_federation",
    "score_embeddings",
]
