"""FedE4RAG's Flower strategy: the uniform mean of the clients' adapters (the code's `aggregate()`), in clear or on
CKKS ciphertexts, with all clients per round (canonical) or one client per round drawn ∝ data size (the released
FLGo defaults `proportion = 0.2`, `sample = "md"` with five clients).

Every reply is checked on its own; a malformed one (wrong keys or shapes, NaN, a ciphertext that does not
deserialise, another key's context, ciphertexts that parse but cannot be added under the declared context) is
rejected with a logged reason and the round continues with the rest.
"""

from __future__ import annotations

import logging
import random

import numpy as np

from hf_ext.core.federated import weighted_average

from .he import ServerAggregator

logger = logging.getLogger(__name__)
CHUNK_PREFIX = "ckks-"


def chunk_names(n: int) -> list[str]:
    return [f"{CHUNK_PREFIX}{i:05d}" for i in range(n)]


def chunks_to_record(chunks):
    from flwr.app import Array, ArrayRecord

    return ArrayRecord({name: Array(np.frombuffer(blob, dtype=np.uint8).copy())
                        for name, blob in zip(chunk_names(len(chunks)), chunks)})


def record_to_chunks(record) -> list[bytes]:
    names = sorted(k for k in record.keys() if k.startswith(CHUNK_PREFIX))
    if not names or len(names) != len(record.keys()):
        raise ValueError(f"expected only '{CHUNK_PREFIX}*' ciphertext arrays, got keys {sorted(record.keys())[:4]}")
    return [record[n].numpy().tobytes() for n in names]


def plain_problem(record, reference) -> str | None:
    """Why a plaintext adapter record cannot be averaged (vs the first valid one), or `None`."""
    if set(record.keys()) != set(reference.keys()):
        return f"keys differ from the other clients' ({len(record.keys())} vs {len(reference.keys())})"
    for key in reference.keys():
        try:
            value, ref = record[key].numpy(), reference[key].numpy()
        except Exception as err:  # noqa: BLE001
            return f"{key!r} cannot be decoded: {err}"
        if value.shape != ref.shape or value.dtype != ref.dtype:
            return f"{key!r}: {value.dtype}{value.shape} vs {ref.dtype}{ref.shape}"
        if not np.isfinite(value).all():
            return f"{key!r} holds NaN or Inf"
    return None


def make_strategy(*, encrypt: bool, public_context: bytes | None, n_chunks: int = 0, n_values: int | None = None,
                  one_client: bool = False, node_sizes: dict[int, int] | None = None, seed: int = 0, **kwargs):
    """A `FedE4RAGStrategy` (built lazily so importing this module does not import Flower's server).

    With `encrypt`, `n_values` (the adapter's parameter count) fixes how many values each ciphertext chunk must
    encode, and `n_chunks` defaults to what the public context's slot count gives for it.
    """
    from flwr.app import ArrayRecord, MessageType, MetricRecord, RecordDict
    from flwr.serverapp.strategy import FedAvg

    class FedE4RAGStrategy(FedAvg):
        """Uniform FedAvg of the clients' LoRA adapters, in clear or under CKKS (see the module docstring)."""

        def __init__(self, **kw):
            super().__init__(**kw)
            self.encrypt = encrypt
            self.he = ServerAggregator(public_context) if encrypt else None
            self.n_values = n_values
            self.n_chunks = n_chunks
            if self.he is not None and n_values is not None:
                expected = -(-n_values // self.he.slots)
                if n_chunks and n_chunks != expected:
                    raise ValueError(f"{n_chunks} ciphertext chunks configured, but {n_values} values in "
                                     f"{self.he.slots}-slot ciphertexts (the public context's) take {expected}")
                self.n_chunks = expected
            self.one_client = one_client
            self.node_sizes = dict(node_sizes or {})
            self.rng = random.Random(seed)
            self.rejected: dict[int, dict[str, str]] = {}
            self.sampled: dict[int, list[int]] = {}

        def configure_train(self, server_round, arrays, config, grid):
            config["server-round"] = server_round
            nodes = sorted(grid.get_node_ids())
            if self.one_client:  # the released sampling: 1 client, P ∝ data size, with replacement
                weights = [self.node_sizes.get(n, 1) for n in nodes]
                nodes = self.rng.choices(nodes, weights=weights, k=1)
            self.sampled[server_round] = list(nodes)
            record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
            return self._construct_messages(record, nodes, MessageType.TRAIN)

        def aggregate_train(self, server_round, replies):
            valid, _ = self._check_and_log_replies(list(replies), is_train=True, validate=False)
            rejected, accepted = {}, []
            for msg in valid:
                sender = f"node {msg.metadata.src_node_id}"
                content = msg.content
                if "arrays" not in content or not isinstance(content["arrays"], ArrayRecord):
                    rejected[sender] = "reply carries no 'arrays' record"
                elif "metrics" not in content or not isinstance(content["metrics"], MetricRecord):
                    rejected[sender] = "reply carries no 'metrics' record"
                else:
                    accepted.append((sender, msg))
            if self.encrypt:
                uploads = {}
                for sender, msg in accepted:
                    try:
                        cid = str(msg.content["he"]["context-id"]) if "he" in msg.content else ""
                        uploads[sender] = (record_to_chunks(msg.content["arrays"]), cid)
                    except (ValueError, KeyError, TypeError) as err:
                        rejected[sender] = f"malformed encrypted upload: {err}"
                chunks, he_rejected = self.he.average(uploads, self.n_chunks, size=self.n_values)
                rejected.update(he_rejected)
                result = chunks_to_record(chunks) if chunks is not None else None
            else:
                records, reference = [], None
                for sender, msg in accepted:
                    record = msg.content["arrays"]
                    reference = reference if reference is not None else record
                    problem = plain_problem(record, reference)
                    if problem:
                        rejected[sender] = problem
                    else:
                        records.append(record)
                # uniform weights: the code's aggregate() is a plain mean of the received state dicts
                result = weighted_average(records, [1.0] * len(records)) if records else None
            for sender, why in rejected.items():
                logger.warning("fede4rag round %d: rejected %s: %s", server_round, sender, why)
            self.rejected[server_round] = rejected
            ok = [m.content for s, m in accepted if s not in rejected]
            metrics = MetricRecord({"num-accepted": len(ok), "num-rejected": len(rejected)})
            if ok:
                agg = self.train_metrics_aggr_fn(ok, self.weighted_by_key)
                metrics = MetricRecord({**dict(agg or {}), "num-accepted": len(ok), "num-rejected": len(rejected)})
            return result, metrics

    return FedE4RAGStrategy(fraction_evaluate=0.0, **kwargs)


__all__ = ["CHUNK_PREFIX", "chunk_names", "chunks_to_record", "make_strategy", "plain_problem", "record_to_chunks"]
