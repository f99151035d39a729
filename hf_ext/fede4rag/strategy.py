"""FedE4RAG's Flower strategy: the uniform mean of the clients' adapters (the code's `aggregate()`), in clear or on
CKKS ciphertexts, with all clients per round (canonical) or one client per round drawn ∝ data size (the released
FLGo defaults `proportion = 0.2`, `sample = "md"` with five clients).

The server trusts the transport, not the payload: senders are the node ids the SuperLink stamps on replies, and every
reply is checked on its own against the server's *own* reference — in clear, the server's copy of the seeded
round-0 adapter (names, shapes, float32; finite; |x| < 1e6), never another client's reply; under CKKS, the
server's own encryption of zeros and the adapter size it computed itself. A malformed reply (wrong keys or shapes,
NaN, huge values, a NaN `num-examples`, a ciphertext that does not deserialise, another key's context, ciphertexts that
parse but cannot be added under the declared context) is rejected with a logged reason and the round continues with
the rest. Nodes whose query reply disagreed with the server's adapter size are never sampled (`allowed_nodes`).
"""

from __future__ import annotations

import logging
import random
import time

import numpy as np

from hf_ext.core.federated import DEFAULT_MAX_ABS, weighted_average

from .he import ServerAggregator

logger = logging.getLogger(__name__)
CHUNK_PREFIX = "ckks-"


def chunk_names(n: int) -> list[str]:
    return [f"{CHUNK_PREFIX}{i:05d}" for i in range(n)]


def chunks_to_record(chunks):
    from flwr.app import Array, ArrayRecord

    return ArrayRecord(
        {
            name: Array(np.frombuffer(blob, dtype=np.uint8).copy())
            for name, blob in zip(chunk_names(len(chunks)), chunks)
        }
    )


def record_to_chunks(record) -> list[bytes]:
    names = sorted(k for k in record.keys() if k.startswith(CHUNK_PREFIX))
    if not names or len(names) != len(record.keys()):
        raise ValueError(f"expected only '{CHUNK_PREFIX}*' ciphertext arrays, got keys {sorted(record.keys())[:4]}")
    return [record[n].numpy().tobytes() for n in names]


def plain_problem(record, reference, max_abs: float = DEFAULT_MAX_ABS) -> str | None:
    """Why a plaintext adapter record cannot be averaged, or `None`.

    `reference` is the server's own adapter (name → array, e.g. the seeded round-0 adapter), never a client's reply:
    one malformed first client then cannot make every honest client look wrong.
    """
    from flwr.app import ArrayRecord

    from hf_ext.core.federated.guard import _decode, array_problem, array_spec

    if not isinstance(record, ArrayRecord):
        return f"the 'arrays' record is a {type(record).__name__}, not an ArrayRecord"
    spec = array_spec(reference)
    if set(record.keys()) != set(spec):
        extra, missing = set(record.keys()) - set(spec), set(spec) - set(record.keys())
        return f"keys differ from the server's adapter (unexpected {sorted(extra)[:3]}, missing {sorted(missing)[:3]})"
    for key, want in spec.items():
        try:
            value = _decode(key, record[key])
        except ValueError as err:
            return str(err)
        problem = array_problem(key, value, want, max_abs)
        if problem:
            return problem
    return None


def round_stats(metrics, aggregate_s: float) -> dict[str, float]:
    """What one aggregated round cost: gradient steps summed over the accepted clients (the step budget the
    comparison tables state), the longest client's steps (the sequential chain), mean client encrypt / decrypt
    seconds and upload bytes, and the server's aggregation seconds. Missing or non-finite client values count 0."""

    def values(key):
        out = []
        for m in metrics:
            v = m[key] if key in m.keys() else 0.0
            out.append(float(v) if isinstance(v, (int, float)) and np.isfinite(v) else 0.0)
        return out

    steps = values("num-steps")
    return {
        "num-clients": float(len(metrics)),
        "steps-total": float(sum(steps)),
        "steps-max": float(max(steps)),
        "encrypt-s": float(np.mean(values("encrypt-s"))),
        "decrypt-s": float(np.mean(values("decrypt-s"))),
        "bytes-up": float(np.mean(values("bytes-up"))),
        "aggregate-s": float(aggregate_s),
    }


def make_strategy(
    *,
    encrypt: bool,
    public_context: bytes | None,
    n_chunks: int = 0,
    n_values: int | None = None,
    one_client: bool = False,
    node_sizes: dict[int, int] | None = None,
    seed: int = 0,
    reference=None,
    allowed_nodes=None,
    max_abs: float = DEFAULT_MAX_ABS,
    **kwargs,
):
    """A `FedE4RAGStrategy` (built lazily so importing this module does not import Flower's server).

    Args:
        encrypt (`bool`): CKKS uploads (the server holds only `public_context`).
        public_context (`bytes`, *optional*): the serialised public CKKS context (no secret key).
        n_chunks (`int`): ciphertexts per upload (default: derived from `n_values` and the context's slots).
        n_values (`int`, *optional*): the adapter's parameter count *as the server computed it*.
        one_client (`bool`): the released sampling (one client per round ∝ data size).
        node_sizes (`dict[int, int]`, *optional*): node id → data size, for that sampling.
        seed (`int`): sampling seed.
        reference (`Mapping[str, np.ndarray]`, *optional*): the server's own adapter (name → array): plaintext replies
            are checked against it. Required without `encrypt`.
        allowed_nodes (`Iterable[int]`, *optional*): only these nodes are sampled (default: all).
        max_abs (`float`): plaintext values must satisfy |x| < `max_abs`.
    """
    if not encrypt and reference is None:
        raise ValueError(
            "a plaintext FedE4RAG strategy needs the server's own adapter as `reference` (replies are "
            "checked against it, never against another client's)"
        )
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
                    raise ValueError(
                        f"{n_chunks} ciphertext chunks configured, but {n_values} values in "
                        f"{self.he.slots}-slot ciphertexts (the public context's) take {expected}"
                    )
                self.n_chunks = expected
            self.one_client = one_client
            self.node_sizes = dict(node_sizes or {})
            self.rng = random.Random(seed)
            self.rejected: dict[int, dict[str, str]] = {}
            self.sampled: dict[int, list[int]] = {}
            self.reference = dict(reference) if reference is not None else None
            self.aggregated: list[int] = []
            self.aggregate_s: dict[int, float] = {}
            self.round_stats: dict[int, dict[str, float]] = {}
            self.allowed = None if allowed_nodes is None else {int(n) for n in allowed_nodes}

        def configure_train(self, server_round, arrays, config, grid):
            config["server-round"] = server_round
            nodes = sorted(n for n in grid.get_node_ids() if self.allowed is None or n in self.allowed)
            if self.one_client:  # the released sampling: 1 client, P ∝ data size, with replacement
                weights = [self.node_sizes.get(n, 1) for n in nodes]
                nodes = self.rng.choices(nodes, weights=weights, k=1)
            self.sampled[server_round] = list(nodes)
            record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
            return self._construct_messages(record, nodes, MessageType.TRAIN)

        def aggregate_train(self, server_round, replies):
            from hf_ext.core.federated.guard import reply_metric

            valid, _ = self._check_and_log_replies(list(replies), is_train=True, validate=False)
            rejected, accepted, seen = {}, [], set()
            sampled = set(self.sampled.get(server_round, []))
            for msg in valid:
                node = msg.metadata.src_node_id
                sender = f"node {node}"
                content = msg.content
                if node in seen:
                    rejected[sender] = "more than one reply this round"
                    accepted = [(s, m) for s, m in accepted if s != sender]
                    continue
                seen.add(node)
                if sampled and node not in sampled:
                    rejected[sender] = "replied without being sampled this round"
                elif "arrays" not in content or not isinstance(content["arrays"], ArrayRecord):
                    rejected[sender] = "reply carries no 'arrays' ArrayRecord"
                else:
                    try:
                        reply_metric(msg, "num-examples", integer=True)
                    except ValueError as err:
                        rejected[sender] = str(err)
                        continue
                    accepted.append((sender, msg))
            t_aggregate = time.perf_counter()
            if self.encrypt:
                uploads = {}
                for sender, msg in accepted:
                    try:
                        he = msg.content["he"] if "he" in msg.content else None
                        cid = str(he["context-id"]) if he is not None and "context-id" in he else ""
                        uploads[sender] = (record_to_chunks(msg.content["arrays"]), cid)
                    except Exception as err:  # noqa: BLE001 (corrupt Array bytes raise whatever numpy raises)
                        rejected[sender] = f"malformed encrypted upload: {type(err).__name__}: {err}"
                chunks, he_rejected = self.he.average(uploads, self.n_chunks, size=self.n_values)
                rejected.update(he_rejected)
                result = chunks_to_record(chunks) if chunks is not None else None
            else:
                records = []
                for sender, msg in accepted:
                    record = msg.content["arrays"]
                    problem = plain_problem(record, self.reference, max_abs)
                    if problem:
                        rejected[sender] = problem
                    else:
                        records.append(record)
                # uniform weights: the code's aggregate() is a plain mean of the received state dicts
                result = weighted_average(records, [1.0] * len(records)) if records else None
            self.aggregate_s[server_round] = time.perf_counter() - t_aggregate
            for sender, why in rejected.items():
                logger.warning("fede4rag round %d: rejected %s: %s", server_round, sender, why)
            self.rejected[server_round] = rejected
            ok = [m.content["metrics"] for s, m in accepted if s not in rejected]
            metrics = {"num-accepted": len(ok), "num-rejected": len(rejected)}
            # only finite loss metrics reported by every accepted client are averaged (uniformly, as the model)
            keys = set.intersection(*(set(k for k in m.keys() if k.startswith("loss-")) for m in ok)) if ok else set()
            for key in sorted(keys):
                values = [m[key] for m in ok]
                if all(isinstance(v, (int, float)) and np.isfinite(v) for v in values):
                    metrics[key] = float(np.mean(values))
            if result is not None and ok:
                self.aggregated.append(server_round)
                self.round_stats[server_round] = round_stats(ok, self.aggregate_s[server_round])
            return (result if ok else None), MetricRecord(metrics)

    return FedE4RAGStrategy(fraction_evaluate=0.0, **kwargs)


__all__ = [
    "CHUNK_PREFIX",
    "chunk_names",
    "chunks_to_record",
    "make_strategy",
    "plain_problem",
    "record_to_chunks",
    "round_stats",
]
