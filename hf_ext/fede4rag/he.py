"""CKKS homomorphic encryption of the client→server model messages (TenSEAL), for FedE4RAG's secure aggregation.

The released code only has a vestigial `.decrypt()` loop that is never executed; this module implements the design
the spec infers from it [INF]:

1. Key setup: a key authority (in practice one client) creates a CKKS context. Every client receives the *secret*
   context; the server receives only the public context (`make_context_public()`, no secret key, no relinearisation or
   Galois keys: additions and plaintext multiplications need none), so it can add ciphertexts and multiply them by a
   plaintext 1/K but cannot decrypt.
2. Client upload: flatten the trainable parameters, chunk into slot-sized vectors (4,096 slots at N = 8192), encrypt,
   serialise.
3. Server: deserialise each client's chunks under the public context, sum chunk-wise (from its own encryption of
   zeros, so a client's chunks are checked against the server's parameters, not another client's), multiply by 1/K,
   serialise.
4. Clients: decrypt, drop the padding, reshape into the next global parameters.

A ciphertext encrypted under another key cannot be told apart arithmetically, so every message names the context it
was made under (`context_id`, a SHA-256 of the public context); the server rejects a client whose id differs from its
own, whose chunks fail to parse, or whose chunks parse but cannot be added (another scale or level under the declared
id), and averages the rest.

**Canaries: proof that an upload is under the federation's key.** The declared context id is a claim; a client can
name the honest id and encrypt under a key of its own, and its chunks then parse, add, and decrypt (for everyone) to
~1e19. So every chunk also carries `CANARY_SLOTS` known values in its first slots, derived from the round's nonce that
the server sent to that node ([`canary_values`]). The server, which cannot decrypt, multiplies each sender's chunk by
a plaintext mask that keeps only those slots ([`ServerAggregator.masked_canaries`]: a plaintext product, no key
needed) and asks the clients, who hold the secret key, to decrypt the masked chunks ([`ClientCipher.read_canaries`]).
A chunk under another key decrypts to noise of ~1e19 in every slot, masked or not; a chunk replayed from an earlier
round carries the old nonce's values. Either fails and names its sender. A masked chunk reveals only the canary slots
(every other slot is multiplied by an exact zero; what remains there is CKKS noise, ~1e-8), so the verifying clients
learn nothing about each other's updates. The aggregate's canary slots are the mean of the accepted senders' canaries,
which every client checks when it decrypts the global adapter.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CKKSParams:
    """CKKS parameters (spec: N = 8192, coefficient moduli [60, 40, 40, 60] bits, scale 2⁴⁰; 4,096 slots).

    Args:
        poly_modulus_degree (`int`, defaults to 8192): ring dimension N (slots = N / 2).
        coeff_mod_bit_sizes (`tuple[int, ...]`, defaults to `(60, 40, 40, 60)`): coefficient modulus chain.
        scale_bits (`int`, defaults to 40): log2 of the encoding scale.
    """

    poly_modulus_degree: int = 8192
    coeff_mod_bit_sizes: tuple[int, ...] = (60, 40, 40, 60)
    scale_bits: int = 40

    def __post_init__(self):
        n = self.poly_modulus_degree
        if n < 1024 or n & (n - 1):
            raise ValueError(f"CKKSParams.poly_modulus_degree must be a power of two >= 1024, got {n}")
        if len(self.coeff_mod_bit_sizes) < 3:
            raise ValueError("CKKSParams.coeff_mod_bit_sizes needs at least 3 primes (one level for the 1/K product)")
        if self.scale_bits < 20:
            raise ValueError(
                f"CKKSParams.scale_bits must be >= 20 (weights ~1e-2 need precision), got {self.scale_bits}"
            )

    @property
    def slots(self) -> int:
        return self.poly_modulus_degree // 2


@dataclass(frozen=True)
class KeyPair:
    """Serialised contexts: `secret` (clients only) and `public` (what the server gets)."""

    secret: bytes
    public: bytes

    @property
    def context_id(self) -> str:
        return context_id(self.public)


CANARY_SLOTS = 4  # known values at the start of every chunk (4 x 10 bits: a replay matches by chance ~1e-12)
CANARY_TOLERANCE = 1e-4  # CKKS error on a masked canary is ~2e-7; neighbouring canary values are 1/1024 apart


def canary_values(nonce: str | int, n_chunks: int) -> np.ndarray:
    """The canary of each chunk for a round nonce: `(n_chunks, CANARY_SLOTS)` values in [1, 2), 1/1024 apart."""
    out = np.empty((n_chunks, CANARY_SLOTS))
    for i in range(n_chunks):
        digest = hashlib.sha256(f"fede4rag-canary:{nonce}:{i}".encode()).digest()
        out[i] = [1.0 + (int.from_bytes(digest[2 * j : 2 * j + 2], "big") % 1024) / 1024 for j in range(CANARY_SLOTS)]
    return out


def chunk_count(size: int, slots: int, canary: bool = False) -> int:
    """How many ciphertexts carry `size` values (each chunk loses `CANARY_SLOTS` slots to its canary)."""
    per_chunk = slots - (CANARY_SLOTS if canary else 0)
    return max(1, -(-int(size) // per_chunk))


def chunk_lengths(size: int, slots: int, canary: bool = False) -> list[int]:
    """The number of slots chunk i encodes (canary included)."""
    extra = CANARY_SLOTS if canary else 0
    per_chunk = slots - extra
    return [extra + min(per_chunk, size - i * per_chunk) for i in range(chunk_count(size, slots, canary))]


def context_id(public_context: bytes) -> str:
    """Identifier of a key: SHA-256 of the serialised public context (first 16 hex digits)."""
    return hashlib.sha256(public_context).hexdigest()[:16]


def make_keys(params: CKKSParams = CKKSParams()) -> KeyPair:
    """The key authority's set-up: a fresh CKKS context, serialised with and without its secret key."""
    import tenseal as ts

    ctx = ts.context(
        ts.SCHEME_TYPE.CKKS,
        poly_modulus_degree=params.poly_modulus_degree,
        coeff_mod_bit_sizes=list(params.coeff_mod_bit_sizes),
    )
    ctx.global_scale = 2.0**params.scale_bits
    secret = ctx.serialize(save_secret_key=True, save_galois_keys=False, save_relin_keys=False)
    public_ctx = ctx.copy()
    public_ctx.make_context_public()
    # The server only adds and multiplies by plaintexts: it needs no relinearisation or Galois key. The public key is
    # kept so that the context (and its id) is specific to this key pair, not only to the parameters.
    public = public_ctx.serialize(
        save_public_key=True, save_secret_key=False, save_galois_keys=False, save_relin_keys=False
    )
    return KeyPair(secret=secret, public=public)


def _load_context(data: bytes, *, need_secret: bool):
    import tenseal as ts

    try:
        ctx = ts.context_from(data)
    except Exception as err:  # noqa: BLE001 (TenSEAL raises ValueError or RuntimeError on bad bytes)
        raise ValueError(f"cannot deserialise the CKKS context: {type(err).__name__}: {err}") from err
    if need_secret and not ctx.has_secret_key():
        raise ValueError("this CKKS context holds no secret key: a client needs the secret context to decrypt")
    return ctx


def _slots(ctx) -> int:
    """CKKS slot count (N / 2) of a TenSEAL context."""
    return ctx.seal_context().data.first_context_data().parms().poly_modulus_degree() // 2


class ClientCipher:
    """A client's side: encrypts its flat parameter vector in chunks and decrypts the aggregate.

    Args:
        secret_context (`bytes`): the serialised secret context from the key authority.
        public_context (`bytes`): the serialised public context (its hash is the `context_id` sent along).
    """

    def __init__(self, secret_context: bytes, public_context: bytes):
        self.ctx = _load_context(secret_context, need_secret=True)
        self.context_id = context_id(public_context)
        self.slots = _slots(self.ctx)

    def encrypt(self, flat: np.ndarray, canary: np.ndarray | None = None) -> list[bytes]:
        """Chunks `flat` into slot-sized pieces and returns each piece's serialised ciphertext.

        Args:
            flat (`np.ndarray`): the values.
            canary (`np.ndarray`, *optional*): `(n_chunks, CANARY_SLOTS)` values ([`canary_values`]) written in the
                first slots of every chunk (each chunk then holds `slots - CANARY_SLOTS` values).
        """
        import tenseal as ts

        flat = np.asarray(flat, dtype=np.float64).ravel()
        if not np.isfinite(flat).all():
            raise ValueError("refusing to encrypt NaN or Inf parameters")
        if canary is None:
            return [
                ts.ckks_vector(self.ctx, flat[i : i + self.slots].tolist()).serialize()
                for i in range(0, max(len(flat), 1), self.slots)
            ]
        per_chunk = self.slots - CANARY_SLOTS
        n = chunk_count(flat.size, self.slots, canary=True)
        canary = np.asarray(canary, dtype=np.float64)
        if canary.shape != (n, CANARY_SLOTS):
            raise ValueError(f"canary has shape {canary.shape}, {flat.size} values need {(n, CANARY_SLOTS)}")
        return [
            ts.ckks_vector(self.ctx, [*canary[i], *flat[i * per_chunk : (i + 1) * per_chunk]]).serialize()
            for i in range(n)
        ]

    def _decrypt_all(self, chunks: Sequence[bytes], what: str) -> list[np.ndarray]:
        import tenseal as ts

        parts = []
        for i, blob in enumerate(chunks):
            try:
                parts.append(np.asarray(ts.ckks_vector_from(self.ctx, bytes(blob)).decrypt(), dtype=np.float64))
            except Exception as err:  # noqa: BLE001
                raise ValueError(f"{what} chunk {i} cannot be decrypted: {type(err).__name__}: {err}") from err
        return parts

    def decrypt(self, chunks: Sequence[bytes], size: int, canary: bool = False):
        """Decrypts the chunks and returns the first `size` values (the rest is padding); with `canary`, returns
        `(values, canaries)`, the canaries an `(n_chunks, CANARY_SLOTS)` array."""
        expected = chunk_count(size, self.slots, canary)
        if len(chunks) != expected:
            raise ValueError(f"{len(chunks)} ciphertext chunks for {size} values (expected {expected})")
        parts = self._decrypt_all(chunks, "aggregate")
        if canary:
            if any(p.size < CANARY_SLOTS for p in parts):
                raise ValueError(f"an aggregate chunk holds fewer than the {CANARY_SLOTS} canary slots")
            canaries = np.stack([p[:CANARY_SLOTS] for p in parts])
            parts = [p[CANARY_SLOTS:] for p in parts]
        flat = np.concatenate(parts)
        if flat.size < size:
            raise ValueError(f"decrypted {flat.size} values, expected at least {size}")
        return (flat[:size], canaries) if canary else flat[:size]

    def read_canaries(self, masked: Sequence[bytes]) -> np.ndarray:
        """The canary slots of masked chunks ([`ServerAggregator.masked_canaries`]), `(n_chunks, CANARY_SLOTS)`;
        a chunk that does not decrypt gives NaN (it cannot be under the federation's key)."""
        out = np.full((len(masked), CANARY_SLOTS), np.nan)
        for i, blob in enumerate(masked):
            try:
                values = self._decrypt_all([blob], "masked canary")[0]
            except ValueError:
                continue
            if values.size >= CANARY_SLOTS:
                out[i] = values[:CANARY_SLOTS]
        return out


class ServerAggregator:
    """The server's side: holds only the public context; sums clients' ciphertexts chunk-wise and scales by 1/K.

    Args:
        public_context (`bytes`): the serialised public context (must hold no secret key).
    """

    def __init__(self, public_context: bytes):
        self.ctx = _load_context(public_context, need_secret=False)
        if self.ctx.has_secret_key() or self.ctx.is_private():
            raise ValueError("the server must not hold the secret key: pass the public context")
        if not self.ctx.has_public_key():  # it encrypts the zeros each encrypted sum starts from
            raise ValueError("the public context holds no public key: serialise it with save_public_key=True")
        self.context_id = context_id(public_context)
        self.slots = _slots(self.ctx)
        # a fresh ciphertext's size bounds what an honest chunk can be: anything much larger is refused before
        # TenSEAL parses it (bytes a peer controls)
        import tenseal as ts

        self.max_chunk_bytes = 2 * len(ts.ckks_vector(self.ctx, [0.0]).serialize()) + 4096

    def can_decrypt(self) -> bool:
        return self.ctx.has_secret_key()

    def _parse(self, client: str, chunks: Sequence[bytes], cid: str, n_chunks: int):
        import tenseal as ts

        if cid != self.context_id:
            raise ValueError(
                f"client {client}: its ciphertexts are under context {cid!r}, the server's is "
                f"{self.context_id!r} (another key or other parameters)"
            )
        if len(chunks) != n_chunks:
            raise ValueError(f"client {client}: {len(chunks)} ciphertext chunks, expected {n_chunks}")
        vectors = []
        for i, blob in enumerate(chunks):
            if len(blob) > self.max_chunk_bytes:
                raise ValueError(
                    f"client {client}: ciphertext chunk {i} has {len(blob)} bytes, more than the "
                    f"{self.max_chunk_bytes} a fresh ciphertext under this context can take"
                )
            try:
                vectors.append(ts.ckks_vector_from(self.ctx, bytes(blob)))
            except Exception as err:  # noqa: BLE001
                raise ValueError(
                    f"client {client}: ciphertext chunk {i} does not deserialise ({type(err).__name__}: {err})"
                ) from err
        return vectors

    def _check_lengths(self, client: str, vectors, lengths: Sequence[int]) -> None:
        """Chunk i must encode `lengths[i]` values: vectors of other lengths cannot be added without Galois keys."""
        for i, (vec, want) in enumerate(zip(vectors, lengths)):
            if vec.size() != want:
                raise ValueError(f"client {client}: ciphertext chunk {i} encodes {vec.size()} values, expected {want}")

    def _check_level(self, client: str, vectors) -> None:
        """The 1/K product rescales once: a chunk already at the last modulus level could not take it."""
        data = self.ctx.seal_context().data
        for i, vec in enumerate(vectors):
            level = data.get_context_data(vec.ciphertext()[0].parms_id())
            if level is None or level.chain_index() < 1:
                raise ValueError(
                    f"client {client}: ciphertext chunk {i} is at the last modulus level (no room for the 1/K product)"
                )

    def lengths(self, n_chunks: int, size: int | None, parsed=None, canary: bool = False) -> list[int]:
        """Slots chunk i must encode: from `size` (the value count the server computed itself) or, without it, the
        most common length among the parsed uploads (ties: the first client's)."""
        if size is not None:
            if chunk_count(size, self.slots, canary) != n_chunks:
                raise ValueError(
                    f"{size} values need {chunk_count(size, self.slots, canary)} chunks of {self.slots} slots"
                    f"{' (with canaries)' if canary else ''}, not {n_chunks}"
                )
            return chunk_lengths(size, self.slots, canary)
        return [Counter(v[i].size() for v in parsed.values()).most_common(1)[0][0] for i in range(n_chunks)]

    def check_upload(self, client: str, chunks: Sequence[bytes], cid: str, n_chunks: int, lengths: Sequence[int]):
        """One upload's ciphertexts, parsed and checked on their own (context id, chunk count, size, lengths, level);
        `ValueError` names the client and the problem."""
        vectors = self._parse(client, chunks, cid, n_chunks)
        self._check_lengths(client, vectors, lengths)
        self._check_level(client, vectors)
        return vectors

    def masked_canaries(self, vectors) -> list[bytes]:
        """Each chunk times a plaintext mask that keeps only its `CANARY_SLOTS` first slots (no key needed): what
        the clients decrypt to check that an upload is under the federation's key, without seeing the update."""
        out = []
        for vec in vectors:
            n = vec.size()
            mask = [1.0] * min(CANARY_SLOTS, n) + [0.0] * max(0, n - CANARY_SLOTS)
            out.append((vec * mask).serialize())
        return out

    def mean(self, parsed, lengths: Sequence[int]) -> tuple[list[bytes] | None, dict[str, str]]:
        """(1/K)·Σ_k ct_k chunk-wise over checked uploads (client → vectors), summed from the server's own
        encryption of zeros; an upload that cannot be added is rejected alone (see [`average`])."""
        import tenseal as ts

        rejected = {}
        zeros = {n: ts.ckks_vector(self.ctx, [0.0] * n) for n in set(lengths)}  # public-key encryptions
        total = [zeros[n] for n in lengths]
        accepted = 0
        for client, vectors in parsed.items():
            new_total = []
            try:
                for i, (acc, vec) in enumerate(zip(total, vectors)):
                    try:
                        new_total.append(acc + vec)
                    except Exception as err:  # noqa: BLE001 (SEAL: "scale mismatch", parameter mismatch, ...)
                        raise ValueError(
                            f"client {client}: ciphertext chunk {i} cannot be added to the server's "
                            f"reference ({type(err).__name__}: {err}; other scale or parameters under "
                            f"the declared context id?)"
                        ) from err
            except ValueError as err:
                logger.warning("fede4rag: rejected encrypted upload: %s", err)
                rejected[client] = str(err)  # its partial sums are dropped: the total holds only accepted clients
                continue
            total, accepted = new_total, accepted + 1
        if not accepted:
            return None, rejected
        return [(acc * (1.0 / accepted)).serialize() for acc in total], rejected

    def average(
        self,
        uploads: Mapping[str, tuple[Sequence[bytes], str]],
        n_chunks: int,
        size: int | None = None,
        canary: bool = False,
    ) -> tuple[list[bytes] | None, dict[str, str]]:
        """Encrypted FedAvg: (1/K)·Σ_k ct_k chunk-wise over the valid uploads (uniform weights, as the code's
        `aggregate()`).

        Every upload is judged on its own, so one bad client never fails the round: its context id, chunk count,
        deserialisation, per-chunk lengths and modulus level are checked, and then its chunks are added to a running
        sum that starts from the server's *own* encryption of zeros (made with the public key, at the context's scale
        and top level). An upload whose ciphertexts parse but cannot be added (e.g. encrypted at another scale while
        declaring the honest context id) therefore fails against the server's reference, not against whichever client
        came first, and is dropped with its reason while the others are kept. Adding the encrypted zeros costs one
        fresh-encryption noise term (~1e-11 at scale 2⁴⁰). An upload under another key that declares the honest id
        passes every check here: only its canary tells (see the module docstring).

        Args:
            uploads (`Mapping[str, tuple[Sequence[bytes], str]]`): client → (serialised chunks, context id).
            n_chunks (`int`): how many chunks every upload must have.
            size (`int`, *optional*): how many values the chunks encode in all (chunk i then holds
                `min(slots, size - i·slots)`, plus the canary slots with `canary`). Without it, each chunk's length
                is the most common one among the uploads (ties: the first client's).
            canary (`bool`): the chunks carry canary slots.

        Returns:
            `(chunks, rejected)`: the serialised average (`None` if no upload was valid) and client → reason.
        """
        if size is not None:
            self.lengths(n_chunks, size, canary=canary)  # the server's own size and chunk count must agree
        raw, rejected = {}, {}
        for client, (chunks, cid) in uploads.items():
            try:
                raw[client] = self._parse(client, chunks, cid, n_chunks)
            except ValueError as err:
                logger.warning("fede4rag: rejected encrypted upload: %s", err)
                rejected[client] = str(err)
        if not raw:
            return None, rejected
        lengths = self.lengths(n_chunks, size, raw, canary)
        parsed = {}
        for client, vectors in raw.items():
            try:
                self._check_lengths(client, vectors, lengths)
                self._check_level(client, vectors)
            except ValueError as err:
                logger.warning("fede4rag: rejected encrypted upload: %s", err)
                rejected[client] = str(err)
                continue
            parsed[client] = vectors
        if not parsed:
            return None, rejected
        chunks, more = self.mean(parsed, lengths)
        rejected.update(more)
        return chunks, rejected


def flatten_state(state: Mapping[str, np.ndarray]) -> tuple[np.ndarray, list[tuple[str, tuple[int, ...]]]]:
    """Concatenates arrays (in the mapping's order) into one float64 vector; returns it with (name, shape) layout."""
    layout = [(name, tuple(np.shape(value))) for name, value in state.items()]
    flat = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in state.values()]) if state else np.zeros(0)
    return flat, layout


def unflatten_state(flat: np.ndarray, layout: Sequence[tuple[str, tuple[int, ...]]]) -> dict[str, np.ndarray]:
    """Inverse of [`flatten_state`] (float32 arrays)."""
    out, offset = {}, 0
    for name, shape in layout:
        n = int(np.prod(shape)) if shape else 1
        if offset + n > flat.size:
            raise ValueError(f"flat vector too short for {name!r} with shape {shape}")
        out[name] = np.asarray(flat[offset : offset + n], dtype=np.float32).reshape(shape)
        offset += n
    if offset != flat.size:
        raise ValueError(f"flat vector has {flat.size} values, the layout needs {offset}")
    return out


__all__ = [
    "CANARY_SLOTS",
    "CANARY_TOLERANCE",
    "CKKSParams",
    "ClientCipher",
    "KeyPair",
    "ServerAggregator",
    "canary_values",
    "chunk_count",
    "chunk_lengths",
    "context_id",
    "flatten_state",
    "make_keys",
    "unflatten_state",
]
