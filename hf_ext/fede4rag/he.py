"""CKKS homomorphic encryption of the client→server model messages (TenSEAL), for FedE4RAG's secure aggregation.

The released code only has a vestigial `.decrypt()` loop that is never executed; this module implements the design
the spec infers from it [INF]:

1. Key setup: a key authority (in practice one client) creates a CKKS context. Every client receives the *secret*
   context; the server receives only the public context (`make_context_public()`, no secret key, no relinearisation or
   Galois keys: additions and plaintext multiplications need none), so it can add ciphertexts and multiply them by a
   plaintext 1/K but cannot decrypt.
2. Client upload: flatten the trainable parameters, chunk into slot-sized vectors (4,096 slots at N = 8192), encrypt,
   serialise.
3. Server: deserialise each client's chunks under the public context, sum chunk-wise, multiply by 1/K, serialise.
4. Clients: decrypt, drop the padding, reshape into the next global parameters.

A ciphertext encrypted under another key cannot be told apart arithmetically, so every message names the context it
was made under (`context_id`, a SHA-256 of the public context); the server rejects a client whose id differs from its
own, or whose chunks fail to parse, and averages the rest.
"""

from __future__ import annotations

import hashlib
import logging
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
            raise ValueError(f"CKKSParams.scale_bits must be >= 20 (weights ~1e-2 need precision), got "
                             f"{self.scale_bits}")

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


def context_id(public_context: bytes) -> str:
    """Identifier of a key: SHA-256 of the serialised public context (first 16 hex digits)."""
    return hashlib.sha256(public_context).hexdigest()[:16]


def make_keys(params: CKKSParams = CKKSParams()) -> KeyPair:
    """The key authority's set-up: a fresh CKKS context, serialised with and without its secret key."""
    import tenseal as ts

    ctx = ts.context(ts.SCHEME_TYPE.CKKS, poly_modulus_degree=params.poly_modulus_degree,
                     coeff_mod_bit_sizes=list(params.coeff_mod_bit_sizes))
    ctx.global_scale = 2.0 ** params.scale_bits
    secret = ctx.serialize(save_secret_key=True, save_galois_keys=False, save_relin_keys=False)
    public_ctx = ctx.copy()
    public_ctx.make_context_public()
    # The server only adds and multiplies by plaintexts: it needs no relinearisation or Galois key. The public key is
    # kept so that the context (and its id) is specific to this key pair, not only to the parameters.
    public = public_ctx.serialize(save_public_key=True, save_secret_key=False, save_galois_keys=False,
                                  save_relin_keys=False)
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

    def encrypt(self, flat: np.ndarray) -> list[bytes]:
        """Chunks `flat` into slot-sized pieces and returns each piece's serialised ciphertext."""
        import tenseal as ts

        flat = np.asarray(flat, dtype=np.float64).ravel()
        if not np.isfinite(flat).all():
            raise ValueError("refusing to encrypt NaN or Inf parameters")
        return [ts.ckks_vector(self.ctx, flat[i:i + self.slots].tolist()).serialize()
                for i in range(0, max(len(flat), 1), self.slots)]

    def decrypt(self, chunks: Sequence[bytes], size: int) -> np.ndarray:
        """Decrypts the chunks and returns the first `size` values (the rest is padding)."""
        import tenseal as ts

        expected = -(-size // self.slots)
        if len(chunks) != expected:
            raise ValueError(f"{len(chunks)} ciphertext chunks for {size} values (expected {expected})")
        parts = []
        for i, blob in enumerate(chunks):
            try:
                parts.append(np.asarray(ts.ckks_vector_from(self.ctx, bytes(blob)).decrypt(), dtype=np.float64))
            except Exception as err:  # noqa: BLE001
                raise ValueError(f"aggregate chunk {i} cannot be decrypted: {type(err).__name__}: {err}") from err
        flat = np.concatenate(parts)
        if flat.size < size:
            raise ValueError(f"decrypted {flat.size} values, expected at least {size}")
        return flat[:size]


class ServerAggregator:
    """The server's side: holds only the public context; sums clients' ciphertexts chunk-wise and scales by 1/K.

    Args:
        public_context (`bytes`): the serialised public context (must hold no secret key).
    """

    def __init__(self, public_context: bytes):
        self.ctx = _load_context(public_context, need_secret=False)
        if self.ctx.has_secret_key() or self.ctx.is_private():
            raise ValueError("the server must not hold the secret key: pass the public context")
        self.context_id = context_id(public_context)

    def can_decrypt(self) -> bool:
        return self.ctx.has_secret_key()

    def _parse(self, client: str, chunks: Sequence[bytes], cid: str, n_chunks: int):
        import tenseal as ts

        if cid != self.context_id:
            raise ValueError(f"client {client}: its ciphertexts are under context {cid!r}, the server's is "
                             f"{self.context_id!r} (another key or other parameters)")
        if len(chunks) != n_chunks:
            raise ValueError(f"client {client}: {len(chunks)} ciphertext chunks, expected {n_chunks}")
        vectors = []
        for i, blob in enumerate(chunks):
            try:
                vectors.append(ts.ckks_vector_from(self.ctx, bytes(blob)))
            except Exception as err:  # noqa: BLE001
                raise ValueError(f"client {client}: ciphertext chunk {i} does not deserialise "
                                 f"({type(err).__name__}: {err})") from err
        return vectors

    def average(self, uploads: Mapping[str, tuple[Sequence[bytes], str]], n_chunks: int
                ) -> tuple[list[bytes] | None, dict[str, str]]:
        """Encrypted FedAvg: (1/K)·Σ_k ct_k chunk-wise over the valid uploads (uniform weights, as the code's
        `aggregate()`).

        Args:
            uploads (`Mapping[str, tuple[Sequence[bytes], str]]`): client → (serialised chunks, context id).
            n_chunks (`int`): how many chunks every upload must have.

        Returns:
            `(chunks, rejected)`: the serialised average (`None` if no upload was valid) and client → reason.
        """
        parsed, rejected = {}, {}
        for client, (chunks, cid) in uploads.items():
            try:
                parsed[client] = self._parse(client, chunks, cid, n_chunks)
            except ValueError as err:
                logger.warning("fede4rag: rejected encrypted upload: %s", err)
                rejected[client] = str(err)
        if not parsed:
            return None, rejected
        k = len(parsed)
        out = []
        for i in range(n_chunks):
            total = None
            for client in list(parsed):
                try:
                    total = parsed[client][i] if total is None else total + parsed[client][i]
                except Exception as err:  # noqa: BLE001 (parameter mismatch surfaces on the first addition)
                    raise ValueError(f"client {client}: chunk {i} cannot be added ({type(err).__name__}: {err})"
                                     ) from err
            out.append((total * (1.0 / k)).serialize())
        return out, rejected


def flatten_state(state: Mapping[str, "np.ndarray"]) -> tuple[np.ndarray, list[tuple[str, tuple[int, ...]]]]:
    """Concatenates arrays (in the mapping's order) into one float64 vector; returns it with (name, shape) layout."""
    layout = [(name, tuple(np.shape(value))) for name, value in state.items()]
    flat = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in state.values()]) if state else \
        np.zeros(0)
    return flat, layout


def unflatten_state(flat: np.ndarray, layout: Sequence[tuple[str, tuple[int, ...]]]) -> dict[str, np.ndarray]:
    """Inverse of [`flatten_state`] (float32 arrays)."""
    out, offset = {}, 0
    for name, shape in layout:
        n = int(np.prod(shape)) if shape else 1
        if offset + n > flat.size:
            raise ValueError(f"flat vector too short for {name!r} with shape {shape}")
        out[name] = np.asarray(flat[offset:offset + n], dtype=np.float32).reshape(shape)
        offset += n
    if offset != flat.size:
        raise ValueError(f"flat vector has {flat.size} values, the layout needs {offset}")
    return out


__all__ = ["CKKSParams", "ClientCipher", "KeyPair", "ServerAggregator", "context_id", "flatten_state", "make_keys",
           "unflatten_state"]
