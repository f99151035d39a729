"""`hf-ext fl_llama serve`: the server party as its own process, serving part B over gRPC on loopback.

It loads a saved server artifact ([`FlLlamaServerModel`]), optionally moves the partition `(a, c)`, prints
`FL_LLAMA_SERVER_READY <port>` on stdout once it accepts calls, and serves until it is terminated.
"""

from __future__ import annotations

import argparse
import signal
import threading

import torch

from .arguments import FlLlamaTrainingArguments
from .modeling_fl_llama import FlLlamaServerModel
from .server import SplitServer
from .transport import serve_grpc

READY = "FL_LLAMA_SERVER_READY"


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hf-ext fl_llama serve", description=__doc__)
    p.add_argument("server_dir", help="folder of a saved FlLlamaServerModel")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on the READY line)")
    p.add_argument("--a", type=int, help="client input blocks (default: the artifact's)")
    p.add_argument("--c", type=int, help="client output blocks (default: the artifact's)")
    p.add_argument("--lr", type=float, default=FlLlamaTrainingArguments.learning_rate)
    p.add_argument("--max-steps", type=int, default=FlLlamaTrainingArguments.max_steps)
    p.add_argument("--max-grad-norm", type=float, default=1.0, help="per-part clip; <= 0 disables it")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    return p


def main(argv: list[str] | None = None) -> None:
    ns = make_parser().parse_args(argv)
    torch.set_num_threads(ns.threads)
    model = FlLlamaServerModel.from_pretrained(ns.server_dir)
    if ns.a is not None or ns.c is not None:
        model.set_partition(ns.a or model.config.num_input_blocks, ns.c or model.config.num_output_blocks)
    args = FlLlamaTrainingArguments(learning_rate=ns.lr, max_steps=ns.max_steps,
                                    max_grad_norm=ns.max_grad_norm if ns.max_grad_norm > 0 else None)  # fmt: skip
    server, port = serve_grpc(SplitServer(model, args).handle_bytes, port=ns.port, host=ns.host)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"{READY} {port}", flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    server.stop(grace=1.0)


if __name__ == "__main__":
    main()
