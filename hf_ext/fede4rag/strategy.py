"""FedE4RAG's Flower strategy: the uniform mean of the clients' adapters (the code's `aggregate()`), in clear or on
CKKS ciphertexts, with all clients per round (canonical) or one client per round drawn ∝ data size (the released
FLGo defaults `proportion = 0.2`, `sample = "md"` with five clients).

**What the server checks, and what one dishonest client cannot do.** The strategy is the core's
[`~hf_ext.core.federated.GuardedStrategy`]: senders are the node ids the SuperLink stamps on replies; a rejected
reply is left out of the round and named in the round's record (`strategy.records`, saved by the ServerApp as
`rejected` under `"<round>:<node id>"`, round 0 being the query); the round goes on with the others.

* *Replay.* Every train message carries a fresh random nonce for its node and round; a reply must echo its own
  node's nonce of this round (the core's `guard` record), and an update whose bytes equal one already received (any
  round, any node) is refused as a replay. Under CKKS the nonce is also inside the ciphertexts (the canaries below),
  so an old upload cannot be re-sent, even re-randomised, with a new nonce.
* *Plaintext bounds.* Each reply is checked against the server's *own* reference (the global adapter it sent; in
  round 1 its seeded adapter): names, shapes, float32, finite, |x| < `max_abs`; never against another client's reply.
  Then against the round (the core's robust screen): an update farther from the reference than 10 times the round's
  median distance (with three or more updates), or than 100 times the reference's norm, is dropped. A client sending
  1e12, or values just under `max_abs`, is far outside the honest clients' spread.
* *CKKS key.* A malformed upload (wrong chunk count or size, bytes that do not deserialise, another declared context
  id, chunks that parse but cannot be added) is rejected as before. An upload under a *foreign key* that declares the
  federation's context id passes all of that; it is caught by its **canaries**: every chunk carries known values
  derived from the node's round nonce; the server masks each sender's chunks down to those slots (it needs no key)
  and asks every client to decrypt them (`query.canary`). A sender is rejected when a majority of the *other*
  verifying clients report its canaries wrong (a lying verifier cannot frame an honest client while the others are
  honest). The aggregate's canary slots are the mean of the accepted canaries, which the clients check on receipt.

**What cannot be detected** (by design or by this server): under CKKS the server never sees values, so an upload
under the right key with huge or adversarial values (e.g. 1e12) is aggregated: the clients then refuse the decrypted
global adapter (|x| ≥ 1e6) and the round's sender is not named; a bounded poisoned update (within 10× the median
distance, or a well-crafted direction) is averaged in clear as well as under CKKS; with fewer than three updates in
a round only the 100×-reference-norm bound applies in clear; with fewer than three clients a
canary dispute between two verifiers cannot be decided (the accused sender is rejected when its only other verifier
says so); a client that lies about `num-examples` changes only the one-client sampling weights (the mean is uniform).
Nodes whose query reply disagreed with the server's adapter size are never sampled (`allowed_nodes`).
"""

from __future__ import annotations

import hashlib
import logging
import random
import time

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict

from hf_ext.core.federated import DEFAULT_MAX_ABS
from hf_ext.core.federated.strategy import GuardedStrategy, Update

from .he import CANARY_TOLERANCE, ServerAggregator, canary_values, chunk_count

logger = logging.getLogger(__name__)
CHUNK_PREFIX = "ckks-"
CANARY_MESSAGE = f"{MessageType.QUERY}.canary"


def chunk_names(n: int) -> list[str]:
    return [f"{CHUNK_PREFIX}{i:05d}" for i in range(n)]


def chunks_to_record(chunks):
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


def record_digest(record) -> str:
    """SHA-256 of an `ArrayRecord`'s keys and bytes (replay detection)."""
    h = hashlib.sha256()
    for key in sorted(record.keys()):
        h.update(key.encode())
        h.update(bytes(record[key].data))
    return h.hexdigest()


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


class FedE4RAGStrategy(GuardedStrategy):
    """Uniform FedAvg of the clients' LoRA adapters, in clear or under CKKS, on the core's
    [`~hf_ext.core.federated.GuardedStrategy`] (round nonces, per-reply checks against the server's reference,
    robust screening, per-round records by node id); see the module docstring for what FedE4RAG adds.

    Args:
        encrypt (`bool`): CKKS uploads (the server holds only `public_context`).
        public_context (`bytes`, *optional*): the serialised public CKKS context (no secret key).
        n_chunks (`int`): ciphertexts per upload (default: derived from `n_values` and the context's slots).
        n_values (`int`, *optional*): the adapter's parameter count *as the server computed it*.
        one_client (`bool`): the released sampling (one client per round ∝ data size).
        node_sizes (`dict[int, int]`, *optional*): node id → data size, for that sampling.
        seed (`int`): sampling seed (nonces come from the OS, not from it).
        reference (`Mapping[str, np.ndarray]`, *optional*): the server's own adapter (name → array): the round-1
            global adapter, which plaintext replies are checked against. Required without `encrypt`.
        allowed_nodes (`Iterable[int]`, *optional*): only these nodes are sampled (default: all).
        canary (`bool`, defaults to `True`): CKKS uploads carry canaries, checked by the clients before aggregation.
        **kwargs: [`GuardedStrategy`]'s and Flower's `FedAvg` arguments (`max_abs`, `peer_ratio`,
            `min_available_nodes`, ...).
    """

    def __init__(
        self,
        *,
        encrypt: bool,
        public_context: bytes | None = None,
        n_chunks: int = 0,
        n_values: int | None = None,
        one_client: bool = False,
        node_sizes: dict[int, int] | None = None,
        seed: int = 0,
        reference=None,
        allowed_nodes=None,
        canary: bool = True,
        **kwargs,
    ):
        if not encrypt and reference is None:
            raise ValueError(
                "a plaintext FedE4RAG strategy needs the server's own adapter as `reference` (replies are "
                "checked against it, never against another client's)"
            )
        kwargs.setdefault("fraction_evaluate", 0.0)
        super().__init__(**kwargs)
        self.encrypt = encrypt
        self.canary = bool(encrypt and canary)
        self.he = ServerAggregator(public_context) if encrypt else None
        self.n_values = n_values
        self.n_chunks = n_chunks
        if self.he is not None and n_values is not None:
            expected = chunk_count(n_values, self.he.slots, self.canary)
            if n_chunks and n_chunks != expected:
                raise ValueError(
                    f"{n_chunks} ciphertext chunks configured, but {n_values} values in "
                    f"{self.he.slots}-slot ciphertexts (the public context's) take {expected}"
                )
            self.n_chunks = expected
        if self.canary and not self.n_chunks:
            raise ValueError("CKKS with canaries needs `n_values` (or `n_chunks`)")
        self.one_client = one_client
        self.node_sizes = dict(node_sizes or {})
        self.rng = random.Random(seed)
        self.initial = dict(reference) if reference is not None else None
        self.digests: dict[str, str] = {}  # update digest -> "round r, node n" (replay detection)
        self.canary_votes: dict[int, dict[int, dict[int, bool]]] = {}  # round -> sender -> verifier -> canary ok
        self.global_canary: np.ndarray | None = None  # what the clients must find in the current global's canaries
        self.round_stats: dict[int, dict[str, float]] = {}
        self.aggregate_s: dict[int, float] = {}
        self.allowed = None if allowed_nodes is None else {int(n) for n in allowed_nodes}
        self._grid = None
        self._timeout = 3600.0

    def start(self, grid, initial_arrays, num_rounds=3, timeout=3600, **kwargs):
        self._timeout = float(timeout)
        return super().start(grid=grid, initial_arrays=initial_arrays, num_rounds=num_rounds, timeout=timeout, **kwargs)

    @property
    def sampled(self) -> dict[int, list[int]]:
        """Round → the nodes sent a train instruction."""
        return {r: list(rec.sent) for r, rec in sorted(self.records.items())}

    # ---- configure ---------------------------------------------------------------------------------------------

    def reference_arrays(self, arrays):
        if self.encrypt:
            return None  # ciphertexts: the server checks uploads against its own size and key, not values
        if len(arrays.keys()) == 0:
            return dict(self.initial)  # round 1: the seeded adapter every client starts from
        return {k: arrays[k].numpy() for k in arrays.keys()}

    def configure_train(self, server_round, arrays, config, grid):
        self._grid = grid
        nodes = sorted(n for n in grid.get_node_ids() if self.allowed is None or n in self.allowed)
        if self.one_client:  # the released sampling: 1 client, P ∝ data size, with replacement
            weights = [self.node_sizes.get(n, 1) for n in nodes]
            nodes = self.rng.choices(nodes, weights=weights, k=1)
        config = ConfigRecord({**dict(config), "server-round": server_round})
        messages = [
            m for m in super().configure_train(server_round, arrays, config, grid) if m.metadata.dst_node_id in nodes
        ]
        self.record(server_round).sent = [int(m.metadata.dst_node_id) for m in messages]
        if self.canary and len(arrays.keys()) and self.global_canary is not None:
            for message in messages:
                message.content["he-canary"] = ArrayRecord({"expected": Array(self.global_canary)})
        return messages

    # ---- hooks ---------------------------------------------------------------------------------------------------

    def decode_reply(self, message, server_round):
        """The plaintext adapter (checked against the server's reference by the core guard), or the CKKS chunks
        (checked against the server's own size, context and level); either way, not a replay of an update already
        received (same bytes)."""

        content = message.content
        node = int(message.metadata.src_node_id)
        if self.arrayrecord_key not in content or not isinstance(content[self.arrayrecord_key], ArrayRecord):
            raise ValueError(f"node {node}: the reply carries no '{self.arrayrecord_key}' ArrayRecord")
        try:
            digest = record_digest(content[self.arrayrecord_key])
        except Exception as err:  # noqa: BLE001 (corrupt Array bytes)
            raise ValueError(f"node {node}: the arrays cannot be read: {type(err).__name__}: {err}") from err
        if digest in self.digests:
            raise ValueError(f"node {node}: its update repeats one already received ({self.digests[digest]}): a replay")
        update = self._decode(message, server_round, node)
        self.digests[digest] = f"round {server_round}, node {node}"  # only well-formed updates count as received
        return update

    def _decode(self, message, server_round, node):
        from hf_ext.core.federated import reply_metric

        content = message.content
        metrics = content["metrics"] if "metrics" in content else MetricRecord()
        if not self.encrypt:
            update = super().decode_reply(message, server_round)
            update.weight = 1.0  # the code's aggregate() is a plain mean of the received state dicts
            update.payload = metrics
            return update
        reply_metric(message, "num-examples", integer=True)
        try:
            he = content["he"] if "he" in content else None
            cid = str(he["context-id"]) if he is not None and "context-id" in he else ""
            chunks = record_to_chunks(content[self.arrayrecord_key])
        except Exception as err:  # noqa: BLE001 (corrupt Array bytes raise whatever numpy raises)
            raise ValueError(f"node {node}: malformed encrypted upload: {type(err).__name__}: {err}") from err
        lengths = self.he.lengths(self.n_chunks, self.n_values, canary=self.canary) if self.n_values else None
        if lengths is None:
            vectors = self.he._parse(f"node {node}", chunks, cid, self.n_chunks)
        else:
            vectors = self.he.check_upload(f"node {node}", chunks, cid, self.n_chunks, lengths)
        return Update(node, {}, weight=1.0, metrics={}, payload=(vectors, metrics))

    def screen(self, updates, server_round):
        """Plaintext: the core's robust screen (distance to the round's reference vs the round's median). CKKS: the
        canary check by the other clients."""
        if not self.encrypt:
            return super().screen(updates, server_round)
        if not self.canary or not updates:
            return {}
        return self._verify_canaries(server_round, {n: u.payload[0] for n, u in updates.items()})

    def aggregate_updates(self, updates, server_round):
        t0 = time.perf_counter()
        try:
            if not self.encrypt:
                return super().aggregate_updates(updates, server_round)
            if not updates:
                return None, {}
            parsed = {n: updates[n].payload[0] for n in sorted(updates)}
            lengths = self.he.lengths(self.n_chunks, self.n_values, parsed, canary=self.canary)
            chunks, rejected = self.he.mean(parsed, lengths)
            rejected = {int(n): why for n, why in rejected.items()}
            if chunks is None:
                return None, rejected
            if self.canary:
                kept = [n for n in parsed if n not in rejected]
                self.global_canary = np.mean(
                    [canary_values(self.round_nonce(server_round, n), self.n_chunks) for n in kept], axis=0
                )
            return chunks_to_record(chunks), rejected
        finally:
            self.aggregate_s[server_round] = time.perf_counter() - t0

    def round_metrics(self, updates, server_round):
        record = super().round_metrics(updates, server_round)
        ok = [updates[n].payload for n in sorted(updates)]
        if self.encrypt:
            ok = [p[1] for p in ok]
        # only finite loss metrics reported by every accepted client are averaged (uniformly, as the model)
        keys = set.intersection(*(set(k for k in m.keys() if k.startswith("loss-")) for m in ok)) if ok else set()
        for key in sorted(keys):
            values = [m[key] for m in ok]
            if all(isinstance(v, (int, float)) and np.isfinite(v) for v in values):
                record[key] = float(np.mean(values))
        if ok and self.record(server_round).aggregated:
            self.round_stats[server_round] = round_stats(ok, self.aggregate_s.get(server_round, 0.0))
        return record

    # ---- CKKS canaries -------------------------------------------------------------------------------------------

    def _verify_canaries(self, server_round, parsed) -> dict[int, str]:
        """Asks every connected, allowed client to decrypt each sender's masked canaries; returns the senders a
        majority of the other verifiers found wrong (or, with no other verifier, the sender itself), with reasons."""
        masked = {node: self.he.masked_canaries(vectors) for node, vectors in parsed.items()}
        record = ArrayRecord(
            {
                f"{node}-{i:05d}": Array(np.frombuffer(blob, dtype=np.uint8).copy())
                for node, blobs in masked.items()
                for i, blob in enumerate(blobs)
            }
        )
        grid = self._grid
        verifiers = sorted(n for n in grid.get_node_ids() if self.allowed is None or n in self.allowed)
        messages = [
            Message(
                RecordDict({"canaries": record, "config": ConfigRecord({"server-round": server_round})}),
                dst_node_id=n,
                message_type=CANARY_MESSAGE,
            )
            for n in verifiers
        ]
        reports: dict[int, ArrayRecord] = {}
        for reply in grid.send_and_receive(messages, timeout=self._timeout):
            node = reply.metadata.src_node_id
            if node in reports or node not in verifiers or reply.has_error() or not reply.has_content():
                continue
            content = reply.content
            if "canaries" in content and isinstance(content["canaries"], ArrayRecord):
                reports[node] = content["canaries"]
        votes: dict[int, dict[int, bool]] = {}
        for node in parsed:
            expected = canary_values(self.round_nonce(server_round, node), self.n_chunks)
            votes[node] = {}
            for verifier, report in reports.items():
                try:
                    got = report[str(node)].numpy().astype(np.float64)
                    good = got.shape == expected.shape and bool(
                        np.isfinite(got).all() and np.abs(got - expected).max() <= CANARY_TOLERANCE
                    )
                except Exception:  # noqa: BLE001 (a verifier's malformed report is a "wrong" vote of that verifier)
                    good = False
                votes[node][verifier] = good
        self.canary_votes[server_round] = votes
        out = {}
        for node, by in votes.items():
            others = {v: ok for v, ok in by.items() if v != node}
            ballot = others or by
            bad = [f"node {v}" for v, ok in ballot.items() if not ok]
            if not ballot:
                out[node] = f"node {node}: no client verified its canaries (no verifier replied)"
            elif len(bad) * 2 > len(ballot):
                out[node] = (
                    f"node {node}: its canaries do not decrypt to this round's values for its nonce ({len(bad)} of "
                    f"{len(ballot)} verifying clients: {', '.join(bad)}): encrypted under another key than the "
                    "federation's, or replayed from an earlier round"
                )
        return out


def make_strategy(**kwargs) -> FedE4RAGStrategy:
    """A [`FedE4RAGStrategy`] (kept for callers of the earlier factory; same arguments)."""
    return FedE4RAGStrategy(**kwargs)


# ---- the ServerApp's main (`server_app.py` routes to it) ----------------------------------------------------------


def refuse_secrets(run_config) -> None:
    """`ValueError` when the run config (which the server receives) names a secret: it belongs in the clients' node
    configs only."""
    named = sorted(k for k in run_config if "secret" in str(k).lower())
    if named:
        raise ValueError(
            f"the run config names {named}: the ServerApp receives the run config, so secret keys "
            "must only appear in the SuperNodes' node config (e.g. `--node-config "
            "he-secret-path=...`)"
        )


def server_adapter(run) -> dict:
    """The server's own copy of the seeded round-0 adapter (name → float32 array), built like every client's."""
    from .encoder import adapter_arrays
    from .task import build_model

    return adapter_arrays(build_model(run)[0])


def node_sizes(grid, n_params: int) -> tuple[dict[int, int], dict[int, str]]:
    """Data size of each node whose query reply is well formed and reports the server's adapter size; the others
    are returned as node → reason (they are never sampled)."""
    from hf_ext.core.federated import reply_metric

    nodes = sorted(grid.get_node_ids())
    messages = [Message(RecordDict({}), dst_node_id=n, message_type=MessageType.QUERY) for n in nodes]
    sizes, refused = {}, {}
    for reply in grid.send_and_receive(messages):
        node = reply.metadata.src_node_id
        try:
            if node in sizes or node in refused:
                raise ValueError(f"node {node} sent more than one query reply")
            size = int(reply_metric(reply, "num-examples", integer=True))
            theirs = int(reply_metric(reply, "num-params", integer=True))
            if theirs != n_params:
                raise ValueError(
                    f"node {node} reports an adapter of {theirs} parameters, the server's has "
                    f"{n_params}: not the same model"
                )
        except ValueError as err:
            logger.warning("fede4rag: left out %s", err)
            refused[node] = str(err)
            sizes.pop(node, None)
            continue
        sizes[node] = size
    return sizes, refused


def run_server(grid, context) -> None:
    """The ServerApp's main: asks every node its data size, runs [`FedE4RAGStrategy`] for `rounds` rounds and saves
    the result (`arrays`, `summary`, `rejected` = `"<round>:node <id>"` → reason, round 0 being the query,
    `sampled`, `round-stats`, and under CKKS `global-canary`).

    The server trusts the transport, not the payload. It builds the seeded round-0 adapter itself (the same seed
    every client uses), so its own copy is the reference every plaintext reply is checked against and its own
    parameter count fixes the ciphertext layout; a node whose query reply reports another `num-params` (another
    model) is left out of every round, alone, with a logged reason.

    Key separation by construction: with `encrypt` on, the server reads only the *public* CKKS context
    (`he-public-path`): it adds ciphertexts and scales by 1/K but cannot decrypt; the final global adapter it stores
    is ciphertext. The secret context lives only in the client processes, named by their *node* config
    (`he-secret-path`), which the server never receives; a run config that names a secret (any key with "secret" in
    it) is refused before anything runs, and so is a public context that holds a secret key. A run that aggregated
    fewer rounds than `min-rounds` (default: all) fails after saving its result.
    """
    from pathlib import Path

    from hf_ext.core.federated import require_rounds, save_result

    from .task import RunConfig

    refuse_secrets(context.run_config)
    run = RunConfig.from_run_config(context.run_config)
    reference = server_adapter(run)
    n_params = int(sum(v.size for v in reference.values()))
    sizes, refused = node_sizes(grid, n_params)
    if not sizes:
        raise RuntimeError(f"no node answered the query with this model's adapter: {refused}")
    if run.encrypt and not run.he_public_path:
        raise ValueError("encrypt is on but the run config names no public CKKS context ('he-public-path')")
    public = Path(run.he_public_path).read_bytes() if run.encrypt else None
    # encrypted: the strategy derives the ciphertext count from the server's n_params and the public context's slots
    strategy = FedE4RAGStrategy(
        encrypt=run.encrypt,
        public_context=public,
        n_values=n_params if run.encrypt else None,
        one_client=run.one_client,
        node_sizes=sizes,
        seed=run.seed,
        min_available_nodes=1,
        min_train_nodes=1,
        reference=None if run.encrypt else reference,
        allowed_nodes=sorted(sizes),
    )
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(),
        num_rounds=run.rounds,
        train_config=ConfigRecord(),
        timeout=run.timeout,
    )
    records = strategy.result_records()  # rejected / failed ("<round>:<node id>" -> reason), accepted
    rejected = dict(records["rejected"])
    rejected.update({f"0:{node}": why for node, why in refused.items()})  # round 0: the query
    sampled = {f"round-{r}": ",".join(map(str, nodes)) for r, nodes in strategy.sampled.items()}
    summary = {"num-rejected": len(rejected), "rounds": len(strategy.aggregated), "num-params": n_params}
    stats = {f"{r}:{k}": v for r, row in strategy.round_stats.items() for k, v in row.items()}
    records.update(
        {
            "arrays": result.arrays,
            "summary": MetricRecord(summary),
            "rejected": ConfigRecord(rejected),
            "sampled": ConfigRecord(sampled),
            "round-stats": MetricRecord(stats),
        }
    )
    if strategy.global_canary is not None:
        records["global-canary"] = ArrayRecord({"expected": Array(strategy.global_canary)})
    save_result(context, records)
    require_rounds(len(strategy.aggregated), run.min_rounds or run.rounds, run.rounds)


__all__ = [
    "CANARY_MESSAGE",
    "CHUNK_PREFIX",
    "FedE4RAGStrategy",
    "chunk_names",
    "chunks_to_record",
    "make_strategy",
    "plain_problem",
    "record_digest",
    "record_to_chunks",
    "round_stats",
    "refuse_secrets",
    "run_server",
    "server_adapter",
    "node_sizes",
]
