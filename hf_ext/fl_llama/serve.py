"""`hf-ext fl_llama serve`: the server party as its own process, serving part B over gRPC on loopback.

It loads a saved server artifact ([`FlLlamaServerModel`]), optionally moves the partition `(a, c)`, prints
`FL_LLAMA_SERVER_READY <port>` on stdout once it accepts calls, and serves until it is terminated.

Clients authenticate with per-client tokens (`--tokens server_tokens.json`, made by `hf-ext fl_llama tokens`; see
[`~hf_ext.fl_llama.auth`]); `--tls-cert/--tls-key` serve TLS. `--insecure` serves without authentication, only on a
loopback host, for one trusted client process. Limits ([`~hf_ext.fl_llama.server.ServerLimits`]) bound sequence
length (default: the model's), batch, message size, sessions and pending forwards.

Training state: training needs `--output-dir DIR` (created and checked writable at start; without it a client's training
handshake is refused, so no step is trained that could not be saved; generation is still served). It lets clients send
`save` (part B, its optimiser and schedule position written
atomically to `DIR/checkpoint-<step>`, safetensors + JSON), and the server saves once more when it is terminated
(SIGTERM) after training steps; `--resume-from DIR/checkpoint-<step>` continues from such a checkpoint. The schedule
length is `--max-steps` when given (clients asking another are refused at the handshake), else the first training
client's.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

import torch

from hf_ext.core.arguments import ArgumentParser

from .arguments import FlLlamaTrainingArguments
from .modeling_fl_llama import FlLlamaServerModel
from .server import ServerLimits, SplitServer
from .transport import serve_grpc

READY = "FL_LLAMA_SERVER_READY"


def make_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="hf-ext fl_llama serve", description=__doc__)
    p.add_argument("server_dir", help="folder of a saved FlLlamaServerModel")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on the READY line)")
    p.add_argument("--a", type=int, help="client input blocks (default: the artifact's)")
    p.add_argument("--c", type=int, help="client output blocks (default: the artifact's)")
    p.add_argument("--lr", type=float, default=FlLlamaTrainingArguments.learning_rate)
    p.add_argument(
        "--max-steps",
        type=int,
        help="length of the linear LR schedule (default: the first training client's, agreed at the handshake)",
    )
    p.add_argument("--output-dir", help="folder for checkpoints (the `save` message, and on SIGTERM)")
    p.add_argument("--resume-from", help="a checkpoint folder written by this server (`DIR/checkpoint-<step>`)")
    p.add_argument("--save-total-limit", type=int, default=2, help="checkpoints kept in --output-dir")
    p.add_argument(
        "--mode",
        choices=("sequential", "client_batch", "server_hierarchical"),
        default="sequential",
        help="parallel mode for --clients client processes (see hf_ext.fl_llama.parallel)",
    )
    p.add_argument("--clients", type=int, default=1, help="clients per step (client_batch) or per round")
    p.add_argument("--sync-every", type=int, default=5, help="server_hierarchical: local steps between FedAvg")
    p.add_argument("--max-grad-norm", type=float, default=1.0, help="per-part clip; <= 0 disables it")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--tokens", help="server_tokens.json from `hf-ext fl_llama tokens` (client authentication)")
    p.add_argument(
        "--insecure", action="store_true", help="no authentication (loopback host only; clients name themselves)"
    )
    p.add_argument("--tls-cert", help="PEM certificate chain of this server (TLS)")
    p.add_argument("--tls-key", help="PEM private key of this server (TLS)")
    p.add_argument("--max-seq-len", type=int, help="longest sequence (default: the model's max_position_embeddings)")
    p.add_argument("--max-batch", type=int, default=ServerLimits.max_batch)
    p.add_argument("--max-message-mb", type=float, default=ServerLimits.max_message_bytes / 2**20)
    p.add_argument("--max-sessions", type=int, default=ServerLimits.max_sessions)
    p.add_argument("--max-pending", type=int, default=ServerLimits.max_pending)
    p.add_argument(
        "--step-timeout",
        type=float,
        default=ServerLimits.step_timeout,
        help="seconds a client may hold the shared part B between its training forward and backward",
    )
    p.add_argument(
        "--queue-timeout",
        type=float,
        default=ServerLimits.queue_timeout,
        help="seconds a training forward waits for its turn on the shared part B",
    )
    p.add_argument(
        "--max-workers", type=int, default=32, help="gRPC worker threads (>= the clients: a waiting client holds one)"
    )
    return p


def _check_ranges(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> None:
    """Every number within its range, naming the flag (argparse checks only the type)."""
    import math

    at_least_one = {"--clients": ns.clients, "--sync-every": ns.sync_every, "--threads": ns.threads,
                    "--max-batch": ns.max_batch, "--max-sessions": ns.max_sessions, "--max-pending": ns.max_pending,
                    "--save-total-limit": ns.save_total_limit, "--max-workers": ns.max_workers}  # fmt: skip
    for flag, value in at_least_one.items():
        if value < 1:
            parser.error(f"{flag} must be >= 1, got {value}")
    for flag, value in (("--a", ns.a), ("--c", ns.c), ("--max-seq-len", ns.max_seq_len), ("--max-steps", ns.max_steps)):
        if value is not None and value < 1:
            parser.error(f"{flag} must be >= 1, got {value}")
    if not 0 <= ns.port <= 65535:
        parser.error(f"--port must lie in [0, 65535], got {ns.port}")
    positive = {"--lr": ns.lr, "--max-message-mb": ns.max_message_mb, "--step-timeout": ns.step_timeout,
                "--queue-timeout": ns.queue_timeout}  # fmt: skip
    for flag, value in positive.items():
        if not math.isfinite(value) or value <= 0:
            parser.error(f"{flag} must be a finite number > 0, got {value}")
    if not math.isfinite(ns.max_grad_norm):
        parser.error(f"--max-grad-norm must be finite, got {ns.max_grad_norm}")


def _prepare_output_dir(parser: argparse.ArgumentParser, path: str) -> None:
    """Creates `--output-dir` and checks that a file can be written there now, not at the first save."""
    import os
    from pathlib import Path

    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write_probe_{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        parser.error(f"--output-dir {path}: cannot write there ({err})")


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    ns = parser.parse_args(argv)
    if not ns.tokens and not ns.insecure:
        parser.error("pass --tokens (see `hf-ext fl_llama tokens`) or, on a loopback host only, --insecure")
    if bool(ns.tls_cert) != bool(ns.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    _check_ranges(parser, ns)
    if ns.output_dir:
        _prepare_output_dir(parser, ns.output_dir)
    limits = ServerLimits(
        max_seq_len=ns.max_seq_len,
        max_batch=ns.max_batch,
        max_message_bytes=int(ns.max_message_mb * 2**20),
        max_sessions=ns.max_sessions,
        max_pending=ns.max_pending,
        step_timeout=ns.step_timeout,
        queue_timeout=ns.queue_timeout,
    )
    tokens = None
    if ns.tokens:
        from .auth import TokenStore

        try:
            tokens = TokenStore.load(ns.tokens)
        except ValueError as err:
            parser.error(f"--tokens: {err}")
    tls = None
    if ns.tls_cert:
        from pathlib import Path

        tls = (Path(ns.tls_cert).read_bytes(), Path(ns.tls_key).read_bytes())
    torch.set_num_threads(ns.threads)
    model = FlLlamaServerModel.from_pretrained(ns.server_dir)
    if ns.a is not None or ns.c is not None:
        try:  # the partition is checked at start, not at the first client's handshake
            model.set_partition(ns.a or model.config.num_input_blocks, ns.c or model.config.num_output_blocks)
        except (KeyError, ValueError) as err:
            parser.error(f"--a/--c: {err}")
    args = FlLlamaTrainingArguments(learning_rate=ns.lr, max_steps=ns.max_steps,
                                    max_grad_norm=ns.max_grad_norm if ns.max_grad_norm > 0 else None)  # fmt: skip
    split_server = SplitServer(model, args, hierarchical=ns.mode == "server_hierarchical", limits=limits,
                               output_dir=ns.output_dir, save_total_limit=ns.save_total_limit,
                               require_output_dir=True)  # fmt: skip
    if ns.resume_from:
        try:
            state = split_server.load_checkpoint(ns.resume_from)
        except (OSError, ValueError) as err:
            parser.error(f"--resume-from: {err}")
        print(f"resumed from {ns.resume_from} at step {state['steps']}", file=sys.stderr, flush=True)
    resumed_steps = split_server.steps
    handler = split_server.handle_bytes  # thread-safe: it orders the training steps on part B itself
    if ns.mode != "sequential":
        from .parallel import ClientBatchHub, HierarchicalSync

        hub = ClientBatchHub(split_server, ns.clients) if ns.mode == "client_batch" else \
            HierarchicalSync(split_server, ns.clients, ns.sync_every)  # fmt: skip
        handler = hub.handle_bytes
    server, port = serve_grpc(
        handler,
        port=ns.port,
        host=ns.host,
        max_workers=max(ns.max_workers, ns.clients + 2),
        tokens=tokens,
        tls=tls,
        insecure=ns.insecure and tokens is None,
        max_message_bytes=limits.max_message_bytes,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"{READY} {port}", flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    server.stop(grace=1.0).wait()
    if split_server.output_dir is not None and split_server.steps > resumed_steps:
        path = split_server.save_checkpoint(split_server.output_dir / f"checkpoint-{split_server.steps}")
        print(f"saved {path}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
