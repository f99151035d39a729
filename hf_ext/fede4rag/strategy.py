"""FedE4RAG's Flower strategy: the uniform mean of the clients' adapters (the code's `aggregate()`), in clear or on
CKKS ciphertexts, with all clients per round (canonical) or one client per round drawn ∝ data size (the released
FLGo defaults `proportion = 0.2`, `sample = "md"` with five clients).

**What the server checks, and what one dishonest client cannot do.** The server trusts the transport, not the
payload: senders are the node ids the SuperLink stamps on replies. A rejected reply is left out of the round and
named (`"node <id>"`, with the reason) in the round's record (`strategy.rejected`, saved by the ServerApp as
`rejected` under `"<round>:node <id>"`); the round goes on with the others.

* *Replay.* Every train message carries a fresh random nonce for its node and round (`round-nonce`); a reply must
  echo its own node's nonce of this round, and an update whose bytes equal one already received (any round, any
  node) is refused as a replay. Under CKKS the nonce is also inside the ciphertexts (the canaries below), so an
  old upload cannot be re-sent with a new nonce.
* *Plaintext bounds.* Each reply is checked against the server's *own* reference (names, shapes, float32, finite,
  |x| < `max_abs`), never another client's reply; then against the round: the norm of each update's change from the
  current global adapter may be at most `max_norm_ratio` (10) times the round's (lower) median change. A client
  sending 1e12, or values just under `max_abs`, is far outside the honest clients' spread and is dropped.
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
change, or a well-crafted direction) is averaged in clear as well as under CKKS; with fewer than three clients a
canary dispute between two verifiers cannot be decided (the accused sender is rejected when its only other verifier
says so); a client that lies about `num-examples` changes only the one-client sampling weights (the mean is uniform).
Nodes whose query reply disagreed with the server's adapter size are never sampled (`allowed_nodes`).
"""

from __future__ import annotations

import hashlib
import logging
import random
import secrets
import time

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp.strategy import FedAvg

from hf_ext.core.federated import DEFAULT_MAX_ABS, weighted_average

from .he import CANARY_TOLERANCE, ServerAggregator, canary_values, chunk_count

logger = logging.getLogger(__name__)
CHUNK_PREFIX = "ckks-"
CANARY_MESSAGE = f"{MessageType.QUERY}.canary"
# An update may move the adapter at most this many times as far as the round's (lower) median update: honest clients
# differ by their data sizes (FedE4RAG's five companies: 93 to 439 pairs, so up to ~5x the steps of one epoch).
MAX_NORM_RATIO = 10.0
NORM_FLOOR = 1e-12  # a round whose median update is zero still bounds the others (ratio x this floor)


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


def norm_outliers(norms: dict[str, float], ratio: float = MAX_NORM_RATIO) -> dict[str, str]:
    """Senders whose update norm exceeds `ratio` times the round's lower median (robust to one outlier among
    three or more; with two senders, the larger is judged against the smaller), with the reason."""
    if not norms:
        return {}
    values = sorted(norms.values())
    median = values[(len(values) - 1) // 2]
    scale = max(median, NORM_FLOOR)
    return {
        who: (
            f"its update moves the adapter by {n:.3g} (L2), {n / scale:.3g}x the round's median {median:.3g}; "
            f"the limit is {ratio:g}x"
        )
        for who, n in norms.items()
        if not n <= ratio * scale
    }


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


class FedE4RAGStrategy(FedAvg):
    """Uniform FedAvg of the clients' LoRA adapters, in clear or under CKKS (see the module docstring).

    Args:
        encrypt (`bool`): CKKS uploads (the server holds only `public_context`).
        public_context (`bytes`, *optional*): the serialised public CKKS context (no secret key).
        n_chunks (`int`): ciphertexts per upload (default: derived from `n_values` and the context's slots).
        n_values (`int`, *optional*): the adapter's parameter count *as the server computed it*.
        one_client (`bool`): the released sampling (one client per round ∝ data size).
        node_sizes (`dict[int, int]`, *optional*): node id → data size, for that sampling.
        seed (`int`): sampling seed (nonces come from the OS, not from it).
        reference (`Mapping[str, np.ndarray]`, *optional*): the server's own adapter (name → array): plaintext replies
            are checked against it, and it is the round-1 global adapter. Required without `encrypt`.
        allowed_nodes (`Iterable[int]`, *optional*): only these nodes are sampled (default: all).
        max_abs (`float`): plaintext values must satisfy |x| < `max_abs`.
        max_norm_ratio (`float`): a plaintext update may move the adapter at most this many times the round's median.
        canary (`bool`, defaults to `True`): CKKS uploads carry canaries, checked by the clients before aggregation.
        **kwargs: passed to Flower's `FedAvg` (`min_available_nodes`, ...).
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
        max_abs: float = DEFAULT_MAX_ABS,
        max_norm_ratio: float = MAX_NORM_RATIO,
        canary: bool = True,
        **kwargs,
    ):
        if not encrypt and reference is None:
            raise ValueError(
                "a plaintext FedE4RAG strategy needs the server's own adapter as `reference` (replies are "
                "checked against it, never against another client's)"
            )
        if not max_norm_ratio > 1:
            raise ValueError(f"max_norm_ratio must be > 1, got {max_norm_ratio!r}")
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
        self.max_abs, self.max_norm_ratio = max_abs, float(max_norm_ratio)
        self.rejected: dict[int, dict[str, str]] = {}
        self.sampled: dict[int, list[int]] = {}
        self.nonces: dict[int, dict[int, int]] = {}
        self.digests: dict[str, str] = {}  # update digest -> "round r, node n" (replay detection)
        self.canary_votes: dict[int, dict[str, dict[str, bool]]] = {}  # round -> sender -> verifier -> canary ok
        self.global_canary: np.ndarray | None = None  # what the clients must find in the current global's canaries
        self.reference = dict(reference) if reference is not None else None
        self.global_state = self.reference  # plaintext: the global adapter this round's updates start from
        self.aggregated: list[int] = []
        self.aggregate_s: dict[int, float] = {}
        self.round_stats: dict[int, dict[str, float]] = {}
        self.allowed = None if allowed_nodes is None else {int(n) for n in allowed_nodes}
        self._grid = None
        self._timeout = 3600.0

    def start(self, grid, initial_arrays, num_rounds=3, timeout=3600, **kwargs):
        self._timeout = float(timeout)
        return super().start(grid=grid, initial_arrays=initial_arrays, num_rounds=num_rounds, timeout=timeout, **kwargs)

    # ---- configure ---------------------------------------------------------------------------------------------

    def configure_train(self, server_round, arrays, config, grid):
        self._grid = grid
        if not self.encrypt and len(arrays.keys()):
            self.global_state = {k: arrays[k].numpy() for k in arrays.keys()}
        nodes = sorted(n for n in grid.get_node_ids() if self.allowed is None or n in self.allowed)
        if self.one_client:  # the released sampling: 1 client, P ∝ data size, with replacement
            weights = [self.node_sizes.get(n, 1) for n in nodes]
            nodes = self.rng.choices(nodes, weights=weights, k=1)
        self.sampled[server_round] = list(nodes)
        # from the OS, not from `self.rng`: nonces must not be predictable, and the sampling stays seeded
        self.nonces[server_round] = {n: secrets.randbits(48) for n in nodes}
        messages = []
        for node in nodes:
            content = {
                self.arrayrecord_key: arrays,
                self.configrecord_key: ConfigRecord(
                    {**dict(config), "server-round": server_round, "round-nonce": self.nonces[server_round][node]}
                ),
            }
            if self.canary and len(arrays.keys()) and self.global_canary is not None:
                content["he-canary"] = ArrayRecord({"expected": Array(self.global_canary)})
            messages.append(Message(RecordDict(content), dst_node_id=node, message_type=MessageType.TRAIN))
        return messages

    # ---- aggregate ---------------------------------------------------------------------------------------------

    def _screen(self, server_round, replies, rejected) -> list[tuple[str, int, Message]]:
        """Transport-level checks: one reply per sampled node, arrays present, a finite `num-examples`, this round's
        nonce for this node, and not a replay of an update already received."""
        from hf_ext.core.federated.guard import reply_metric

        valid, errors = self._check_and_log_replies(list(replies), is_train=True, validate=False)
        for msg in errors:
            rejected[f"node {msg.metadata.src_node_id}"] = f"replied with an error: {msg.error.reason}"
        accepted, seen = [], set()
        sampled = set(self.sampled.get(server_round, []))
        nonces = self.nonces.get(server_round, {})
        for msg in valid:
            node = msg.metadata.src_node_id
            sender = f"node {node}"
            content = msg.content
            if node in seen:
                rejected[sender] = "more than one reply this round"
                accepted = [a for a in accepted if a[0] != sender]
                continue
            seen.add(node)
            if sampled and node not in sampled:
                rejected[sender] = "replied without being sampled this round"
                continue
            if "arrays" not in content or not isinstance(content["arrays"], ArrayRecord):
                rejected[sender] = "reply carries no 'arrays' ArrayRecord"
                continue
            try:
                reply_metric(msg, "num-examples", integer=True)
                nonce = int(reply_metric(msg, "round-nonce", integer=True))
            except ValueError as err:
                rejected[sender] = f"{err} (a stale or replayed reply?)" if "round-nonce" in str(err) else str(err)
                continue
            if nonce != nonces.get(node):
                rejected[sender] = (
                    f"its round nonce {nonce} is not the one sent to {sender} for round {server_round}: "
                    "a stale or replayed reply"
                )
                continue
            try:
                digest = record_digest(content["arrays"])
            except Exception as err:  # noqa: BLE001 (corrupt Array bytes)
                rejected[sender] = f"the 'arrays' record cannot be read: {type(err).__name__}: {err}"
                continue
            if digest in self.digests:
                rejected[sender] = f"its update repeats one already received ({self.digests[digest]}): a replay"
                continue
            self.digests[digest] = f"round {server_round}, {sender}"
            accepted.append((sender, node, msg))
        return accepted

    def _plain(self, accepted, rejected):
        states = {}
        for sender, _, msg in accepted:
            record = msg.content["arrays"]
            problem = plain_problem(record, self.reference, self.max_abs)
            if problem:
                rejected[sender] = problem
            else:
                states[sender] = {k: record[k].numpy() for k in record.keys()}
        norms = {
            who: float(np.sqrt(sum(float(np.sum((s[k].astype(np.float64) - self.global_state[k]) ** 2)) for k in s)))
            for who, s in states.items()
        }
        for who, why in norm_outliers(norms, self.max_norm_ratio).items():
            rejected[who] = why
            del states[who]
        if not states:
            return None, []
        records = [ArrayRecord({k: Array(v) for k, v in s.items()}) for s in states.values()]
        # uniform weights: the code's aggregate() is a plain mean of the received state dicts
        return weighted_average(records, [1.0] * len(records)), list(states)

    def aggregate_train(self, server_round, replies):
        rejected: dict[str, str] = {}
        accepted = self._screen(server_round, replies, rejected)
        t_aggregate = time.perf_counter()
        if self.encrypt:
            result, kept = self._aggregate_encrypted(server_round, accepted, rejected)
        else:
            result, kept = self._plain(accepted, rejected)
        self.aggregate_s[server_round] = time.perf_counter() - t_aggregate
        for sender, why in rejected.items():
            logger.warning("fede4rag round %d: rejected %s: %s", server_round, sender, why)
        self.rejected[server_round] = rejected
        ok = [m.content["metrics"] for s, _, m in accepted if s in kept]
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

    # ---- CKKS --------------------------------------------------------------------------------------------------

    def _aggregate_encrypted(self, server_round, accepted, rejected):
        raw = {}
        for sender, _, msg in accepted:
            try:
                he = msg.content["he"] if "he" in msg.content else None
                cid = str(he["context-id"]) if he is not None and "context-id" in he else ""
                raw[sender] = (record_to_chunks(msg.content["arrays"]), cid)
            except Exception as err:  # noqa: BLE001 (corrupt Array bytes raise whatever numpy raises)
                rejected[sender] = f"malformed encrypted upload: {type(err).__name__}: {err}"
        lengths = self.he.lengths(self.n_chunks, self.n_values, canary=self.canary) if self.n_values else None
        parsed = {}
        for sender, (chunks, cid) in raw.items():
            try:
                if lengths is None:
                    parsed[sender] = self.he._parse(sender, chunks, cid, self.n_chunks)
                else:
                    parsed[sender] = self.he.check_upload(sender, chunks, cid, self.n_chunks, lengths)
            except ValueError as err:
                rejected[sender] = str(err)
        if lengths is None and parsed:  # no size from the server: the uploads' most common lengths
            lengths = self.he.lengths(self.n_chunks, None, parsed)
            for sender in list(parsed):
                try:
                    self.he._check_lengths(sender, parsed[sender], lengths)
                    self.he._check_level(sender, parsed[sender])
                except ValueError as err:
                    rejected[sender] = str(err)
                    del parsed[sender]
        node_of = {sender: node for sender, node, _ in accepted}
        if self.canary and parsed:
            for sender, why in self._verify_canaries(server_round, parsed, node_of).items():
                rejected[sender] = why
                del parsed[sender]
        if not parsed:
            return None, []
        chunks, more = self.he.mean(parsed, lengths)
        rejected.update(more)
        kept = [s for s in parsed if s not in more]
        if chunks is None:
            return None, []
        if self.canary:
            nonces = self.nonces[server_round]
            self.global_canary = np.mean([canary_values(nonces[node_of[s]], self.n_chunks) for s in kept], axis=0)
        return chunks_to_record(chunks), kept

    def _verify_canaries(self, server_round, parsed, node_of) -> dict[str, str]:
        """Asks every connected, allowed client to decrypt each sender's masked canaries; returns the senders a
        majority of the other verifiers found wrong (or, with no other verifier, the sender itself), with reasons."""
        masked = {sender: self.he.masked_canaries(vectors) for sender, vectors in parsed.items()}
        record = ArrayRecord(
            {
                f"{node_of[s]}-{i:05d}": Array(np.frombuffer(blob, dtype=np.uint8).copy())
                for s, blobs in masked.items()
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
        nonces = self.nonces[server_round]
        votes: dict[str, dict[str, bool]] = {}
        for sender in parsed:
            node = node_of[sender]
            expected = canary_values(nonces[node], self.n_chunks)
            votes[sender] = {}
            for verifier, report in reports.items():
                try:
                    got = report[str(node)].numpy().astype(np.float64)
                    good = got.shape == expected.shape and bool(
                        np.isfinite(got).all() and np.abs(got - expected).max() <= CANARY_TOLERANCE
                    )
                except Exception:  # noqa: BLE001 (a verifier's malformed report is a "wrong" vote of that verifier)
                    good = False
                votes[sender][f"node {verifier}"] = good
        self.canary_votes[server_round] = votes
        out = {}
        for sender, by in votes.items():
            others = {v: ok for v, ok in by.items() if v != sender}
            ballot = others or by
            bad = [v for v, ok in ballot.items() if not ok]
            if not ballot:
                out[sender] = "no client verified its canaries (no verifier replied)"
            elif len(bad) * 2 > len(ballot):
                out[sender] = (
                    f"its canaries do not decrypt to this round's values for its nonce ({len(bad)} of "
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


def node_sizes(grid, n_params: int) -> tuple[dict[int, int], dict[str, str]]:
    """Data size of each node whose query reply is well formed and reports the server's adapter size; the others
    are returned as node → reason (they are never sampled)."""
    from hf_ext.core.federated import reply_metric

    nodes = sorted(grid.get_node_ids())
    messages = [Message(RecordDict({}), dst_node_id=n, message_type=MessageType.QUERY) for n in nodes]
    sizes, refused = {}, {}
    for reply in grid.send_and_receive(messages):
        node = reply.metadata.src_node_id
        try:
            if node in sizes or f"node {node}" in refused:
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
            refused[f"node {node}"] = str(err)
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
    public = Path(str(context.run_config["he-public-path"])).read_bytes() if run.encrypt else None
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
        timeout=float(context.run_config.get("timeout", 3600)),
    )
    rejected = {f"{r}:{who}": why for r, v in strategy.rejected.items() for who, why in v.items()}
    rejected.update({f"0:{who}": why for who, why in refused.items()})  # round 0: the query
    sampled = {f"round-{r}": ",".join(map(str, nodes)) for r, nodes in strategy.sampled.items()}
    summary = {"num-rejected": len(rejected), "rounds": len(strategy.aggregated), "num-params": n_params}
    stats = {f"{r}:{k}": v for r, row in strategy.round_stats.items() for k, v in row.items()}
    records = {
        "arrays": result.arrays,
        "summary": MetricRecord(summary),
        "rejected": ConfigRecord(rejected),
        "sampled": ConfigRecord(sampled),
        "round-stats": MetricRecord(stats),
    }
    if strategy.global_canary is not None:
        records["global-canary"] = ArrayRecord({"expected": Array(strategy.global_canary)})
    save_result(context, records)
    require_rounds(len(strategy.aggregated), int(context.run_config.get("min-rounds", run.rounds)), run.rounds)


__all__ = [
    "CANARY_MESSAGE",
    "CHUNK_PREFIX",
    "FedE4RAGStrategy",
    "MAX_NORM_RATIO",
    "chunk_names",
    "chunks_to_record",
    "make_strategy",
    "norm_outliers",
    "plain_problem",
    "record_digest",
    "record_to_chunks",
    "round_stats",
    "refuse_secrets",
    "run_server",
    "server_adapter",
    "node_sizes",
]
