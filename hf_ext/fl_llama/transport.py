"""What crosses the client/server boundary, and how: a message format, an in-process transport for tests and a gRPC
transport for client and server as separate processes.

A message is one safetensors buffer: named tensors plus a JSON header field holding the method name and a few
scalars (client id, step, session). safetensors is used on the wire for the same reason it is used on disk: no
pickle, so a peer cannot execute code on the other side, and the byte count of a message is exactly what is sent.

Why plain gRPC (unary `Call(bytes) -> bytes`, generic handler, no generated stubs) rather than Flower or
`torch.distributed.rpc`: the split protocol is a request/reply RPC per forward, backward and decode step, driven by
the *client* (it holds data and labels), which is gRPC's native shape; `grpcio` is already installed with Flower;
byte counting and error mapping (bad message -> `INVALID_ARGUMENT`, lost peer -> `UNAVAILABLE`) are explicit. Flower's
Message API is server-driven and its deployment engine starts a fresh ClientApp process per message (tens of seconds
per step here, see the ecosystem notes), which would swamp the per-token cost that the KV-cache study measures;
`torch.distributed.rpc` hides the bytes inside TensorPipe and its distributed autograd would also carry the gradient
unnoised, leaving no place for the optional DP on `g_B`.
"""

from __future__ import annotations

import contextlib
import json
import struct
import threading
from collections import defaultdict
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

Tensors = dict[str, torch.Tensor]
Meta = dict[str, object]
GRPC_SERVICE, GRPC_METHOD = "hf_ext.fl_llama.Split", "Call"
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # hidden states and gradients, either direction
MAX_MESSAGE_BYTES = 512 * 1024 * 1024  # Flower's default; a 1024-token no-cache step of a 7B model is ~36 MB
GRPC_OPTIONS = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]  # fmt: skip


class ProtocolError(ValueError):
    """A message whose method, tensor names, shapes or dtypes do not match what the receiving party expects."""


class PeerDisconnected(ConnectionError):
    """The other party went away (or never answered) in the middle of a step."""


class RemoteError(RuntimeError):
    """The other party failed while handling a well-formed message."""


class AccessDenied(PermissionError):
    """The server refused the caller: no valid client token, or a message this client may not send (e.g.
    `partition` without an admin token)."""


def encode(method: str, tensors: Tensors | None = None, meta: Meta | None = None) -> bytes:
    """One message as bytes: contiguous CPU tensors plus `{"method", "meta"}` in the safetensors header."""
    tensors = {k: v.detach().contiguous().cpu() for k, v in (tensors or {}).items()}
    return st_save(tensors, metadata={"method": method, "meta": json.dumps(meta or {})})


def decode(data: bytes) -> tuple[str, Tensors, Meta]:
    """Inverse of [`encode`]; a buffer that is not a message raises [`ProtocolError`]."""
    try:
        (header_len,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + header_len])
        info = header.get("__metadata__") or {}
        tensors = st_load(data) if len(header) > (1 if "__metadata__" in header else 0) else {}
        return str(info["method"]), tensors, json.loads(info.get("meta", "{}"))
    except ProtocolError:
        raise
    except Exception as exc:  # noqa: BLE001  (any parse failure is the peer's fault, report it as such)
        raise ProtocolError(f"not an FL-LLaMA message ({type(exc).__name__}: {exc})") from exc


def expect_tensor(tensors: Tensors, name: str, *, ndim: int, dtype: torch.dtype | tuple[torch.dtype, ...],
                  shape: dict[int, int] | None = None) -> torch.Tensor:  # fmt: skip
    """The tensor `name` of a message, after checking it exists and has the expected rank, dtype and sizes."""
    if name not in tensors:
        raise ProtocolError(f"message lacks tensor {name!r} (has {sorted(tensors)})")
    t = tensors[name]
    dtypes = dtype if isinstance(dtype, tuple) else (dtype,)
    if t.dtype not in dtypes:
        raise ProtocolError(f"tensor {name!r} has dtype {t.dtype}, expected {' or '.join(map(str, dtypes))}")
    if t.ndim != ndim:
        raise ProtocolError(f"tensor {name!r} has shape {tuple(t.shape)}, expected {ndim} dimensions")
    for dim, size in (shape or {}).items():
        if t.shape[dim] != size:
            raise ProtocolError(f"tensor {name!r} has shape {tuple(t.shape)}, expected size {size} in dim {dim}")
    return t


@dataclass
class TrafficStats:
    """Bytes and message counts per method, in each direction (client->server "sent", server->client "received")."""

    sent: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    received: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    messages: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def record(self, method: str, sent: int, received: int) -> None:
        self.sent[method] += sent
        self.received[method] += received
        self.messages[method] += 1

    @property
    def client_bytes(self) -> int:
        return sum(self.sent.values())

    @property
    def server_bytes(self) -> int:
        return sum(self.received.values())

    def reset(self) -> None:
        self.sent.clear(), self.received.clear(), self.messages.clear()

    def as_dict(self) -> dict:
        return {"client_sent": self.client_bytes, "server_sent": self.server_bytes,
                "per_method": {m: {"messages": self.messages[m], "client_sent": self.sent[m],
                                   "server_sent": self.received[m]} for m in sorted(self.messages)}}  # fmt: skip


class Transport:
    """Client side of the wire: `call(method, tensors, meta) -> (tensors, meta)`, with bytes counted."""

    def __init__(self):
        self.stats = TrafficStats()

    def _send(self, data: bytes) -> bytes:
        raise NotImplementedError

    def call(self, method: str, tensors: Tensors | None = None, meta: Meta | None = None) -> tuple[Tensors, Meta]:
        request = encode(method, tensors, meta)
        reply = self._send(request)
        self.stats.record(method, len(request), len(reply))
        reply_method, out, out_meta = decode(reply)
        if reply_method == "error":
            kind, message = out_meta.get("kind"), str(out_meta.get("message"))
            error = {"protocol": ProtocolError, "access": AccessDenied}.get(kind, RemoteError)
            raise error(f"server rejected {method!r}: {message}")
        return out, out_meta

    def close(self) -> None:
        pass


class InProcessTransport(Transport):
    """Calls the server's `handle_bytes` directly, still through the byte encoding (so counts and checks are real)."""

    def __init__(self, handler: Callable[[bytes], bytes]):
        super().__init__()
        self.handler = handler

    def _send(self, data: bytes) -> bytes:
        return self.handler(data)


class GrpcTransport(Transport):
    """Talks to a [`serve_grpc`] server, e.g. on `127.0.0.1:port`; a lost server raises [`PeerDisconnected`].

    Args:
        address (`str`): `host:port`.
        timeout (`float`): seconds per call.
        wait_ready (`float`): seconds to wait for the server at start (0: do not wait).
        token (`str`, *optional*): this client's token (see [`~hf_ext.fl_llama.auth`]), sent with every call.
        root_certificates (`bytes`, *optional*): PEM of the CA that signed the server's TLS certificate; with it
            the channel is TLS (needed to keep the token secret on anything but loopback).
        max_message_bytes (`int`): the largest message this client sends or accepts.
    """

    def __init__(
        self,
        address: str,
        timeout: float = 120.0,
        wait_ready: float = 30.0,
        *,
        token: str | None = None,
        root_certificates: bytes | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ):
        import grpc

        super().__init__()
        self.address, self.timeout, self._grpc = address, timeout, grpc
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
        ]
        if root_certificates is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self.channel = grpc.secure_channel(address, credentials, options=options)
        else:
            self.channel = grpc.insecure_channel(address, options=options)
        self._call = self.channel.unary_unary(f"/{GRPC_SERVICE}/{GRPC_METHOD}")
        if wait_ready:
            try:
                grpc.channel_ready_future(self.channel).result(timeout=wait_ready)
            except grpc.FutureTimeoutError as exc:
                raise PeerDisconnected(f"no FL-LLaMA server answered at {address} within {wait_ready:.0f} s") from exc

    def _send(self, data: bytes) -> bytes:
        grpc = self._grpc
        try:
            return self._call(data, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            code = exc.code()
            if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED):
                return encode("error", meta={"kind": "protocol", "message": f"{code.name}: {exc.details()}"})
            if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                return encode("error", meta={"kind": "access", "message": f"{code.name}: {exc.details()}"})
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
                raise PeerDisconnected(f"server at {self.address} disconnected mid-step ({code.name}: "
                                       f"{exc.details()})") from exc  # fmt: skip
            raise RemoteError(f"server at {self.address} failed: {code.name}: {exc.details()}") from exc

    def close(self) -> None:
        self.channel.close()


_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def serve_grpc(
    handler: Callable[..., bytes],
    port: int = 0,
    host: str = "127.0.0.1",
    max_workers: int = 4,
    *,
    tokens=None,
    tls: tuple[bytes, bytes] | None = None,
    max_message_bytes: int = 64 * 1024 * 1024,
    insecure: bool = False,
    serialize: bool = False,
):
    """Starts a gRPC server routing `Call(bytes)` to `handler`; returns `(server, port)`.

    With `tokens` (a [`~hf_ext.fl_llama.auth.TokenStore`]) every call must carry a valid client token (else
    `UNAUTHENTICATED`, before the message is even decoded) and `handler(request, principal)` gets the authenticated
    [`~hf_ext.fl_llama.auth.Principal`]; the server keys every piece of per-client state by it. Without `tokens`
    the server is unauthenticated and clients name themselves: allowed only with `insecure=True` and on a loopback
    host (one trusted client process, e.g. tests), and `handler(request)` is called alone.

    Calls run concurrently on `max_workers` threads: a [`~hf_ext.fl_llama.server.SplitServer`] (and the parallel
    hubs in front of it) is thread-safe and orders the training steps on its shared part B itself; a waiting client
    holds a worker, so `max_workers` should be at least the number of clients. `serialize=True` puts one lock around
    every call (for a handler that is not thread-safe). gRPC refuses messages above `max_message_bytes`
    (`RESOURCE_EXHAUSTED`) and queues at most `4 * max_workers` calls.
    `tls=(cert_pem, key_pem)` serves TLS (keeps tokens secret on a network).
    """
    import grpc

    if tokens is None and not (insecure and host in _LOOPBACK):
        raise ValueError(
            "an FL-LLaMA server needs client tokens (`tokens=`, see `hf-ext fl_llama tokens`); an "
            f"unauthenticated one needs insecure=True and a loopback host, got host {host!r}"
        )
    lock = threading.Lock() if serialize else contextlib.nullcontext()

    def call(request: bytes, context) -> bytes:
        if tokens is None:
            with lock:
                return handler(request)
        header = dict(context.invocation_metadata()).get("authorization", "")
        principal = tokens.authenticate(header[7:] if header.startswith("Bearer ") else None)
        if principal is None:
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "no valid FL-LLaMA client token (send the token made by "
                "`hf-ext fl_llama tokens` as 'authorization: Bearer ...')",
            )
        with lock:
            return handler(request, principal)

    options = [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers), options=options, maximum_concurrent_rpcs=4 * max_workers
    )
    rpc = grpc.unary_unary_rpc_method_handler(call)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(GRPC_SERVICE, {GRPC_METHOD: rpc}),))
    if tls is not None:
        cert, key = tls
        bound = server.add_secure_port(f"{host}:{port}", grpc.ssl_server_credentials([(key, cert)]))
    else:
        bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"could not bind the FL-LLaMA gRPC server to {host}:{port}")
    server.start()
    return server, bound


__all__ = [
    "AccessDenied",
    "FLOAT_DTYPES",
    "GrpcTransport",
    "InProcessTransport",
    "PeerDisconnected",
    "ProtocolError",
    "RemoteError",
    "TrafficStats",
    "Transport",
    "decode",
    "encode",
    "expect_tensor",
    "serve_grpc",
]
