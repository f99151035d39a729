"""The three FL-LLaMA training modes with separate processes: one `hf-ext fl_llama serve --mode MODE --clients M`
server and M client processes, each authenticated with its own token, over gRPC on loopback. Prints, per mode, the
wall time from the clients' start to the last one's end, the server steps, bytes per client and the mean final loss
(ratios against sequential in the same run).

Paper: [FL-LLaMA / FedSEA-LLaMA](https://arxiv.org/abs/2505.15683) (appendix: sequential vs client-batch vs
server-hierarchical). On 2 shared CPU cores the processes share the cores, so the paper's GPU speed-ups cannot show;
the point is that the modes run across processes and what each sends.

Model: a random Llama (d = 64, 6 blocks, a = c = 1), fp32, one torch thread per process, batches of 4 x 32 tokens.

Usage: `python benchmarks/fl_llama_parallel.py [--clients 2] [--steps 6]`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READY = "FL_LLAMA_SERVER_READY"


def client_main(ns) -> None:
    """One client process: train `--steps` steps on its own batches, print one JSON line."""
    import torch

    from hf_ext.fl_llama import FlLlamaClientModel
    from hf_ext.fl_llama.arguments import FlLlamaTrainingArguments
    from hf_ext.fl_llama.auth import read_token
    from hf_ext.fl_llama.split_model import FlLlamaSplitForCausalLM
    from hf_ext.fl_llama.testing import tiny_batch
    from hf_ext.fl_llama.transport import GrpcTransport

    torch.set_num_threads(1)
    split = FlLlamaSplitForCausalLM(FlLlamaClientModel.from_pretrained(ns.client_dir),
                                    GrpcTransport(f"127.0.0.1:{ns.port}", token=read_token(ns.token)),
                                    FlLlamaTrainingArguments(learning_rate=1e-3, max_steps=ns.steps * ns.clients,
                                                             seed=ns.index), client_id=str(ns.index))  # fmt: skip
    split.handshake()
    print("CLIENT_READY", flush=True)
    sys.stdin.readline()  # start together
    losses = [split.train_step(tiny_batch(4, 32, seed=100 * ns.index + s, vocab=1000)) for s in range(ns.steps)]
    print(json.dumps({"losses": losses, "client_sent": split.transport.stats.client_bytes}), flush=True)


def _run_mode(mode: str, root: Path, clients: int, steps: int) -> dict:
    server = subprocess.Popen([sys.executable, "-m", "hf_ext.fl_llama.serve", str(root / "server"), "--tokens",
                               str(root / "tokens" / "server_tokens.json"), "--mode", mode, "--clients",
                               str(clients), "--sync-every", str(max(1, steps // 2)),
                               "--max-steps", str(steps * clients), "--output-dir", str(root / f"trained-{mode}")],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        port = next(int(line.split()[1]) for line in server.stdout if line.startswith(READY))
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--client",
                    "--index",
                    str(m),
                    "--port",
                    str(port),
                    "--client-dir",
                    str(root / "client"),
                    "--steps",
                    str(steps),
                    "--clients",
                    str(clients),
                    "--token",
                    str(root / "tokens" / "clients" / f"c{m}.token"),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for m in range(clients)
        ]
        for p in procs:
            assert p.stdout.readline().startswith("CLIENT_READY")
        start = time.perf_counter()
        if mode == "sequential":  # clients take turns
            outs = []
            for p in procs:
                p.stdin.write("go\n"), p.stdin.flush()
                outs.append(json.loads(p.stdout.readline()))
        else:
            for p in procs:
                p.stdin.write("go\n"), p.stdin.flush()
            outs = [json.loads(p.stdout.readline()) for p in procs]
        wall = time.perf_counter() - start
        for p in procs:
            p.wait(timeout=60)
    finally:
        server.terminate()
        server.wait(timeout=60)
    return {
        "mode": mode,
        "clients": clients,
        "wall_s": wall,
        "client_sent": [o["client_sent"] for o in outs],
        "final_loss": sum(o["losses"][-1] for o in outs) / clients,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--steps", type=int, default=6, help="steps per client")
    p.add_argument("--out", default="runs/fl_llama/benchmark_parallel.json")
    p.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--client-dir", help=argparse.SUPPRESS)
    p.add_argument("--token", help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    if ns.client:
        return client_main(ns)
    import torch

    from hf_ext.fl_llama import split_llama
    from hf_ext.fl_llama.auth import generate_tokens
    from hf_ext.fl_llama.presets import tiny_llama

    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        client, server = split_llama(tiny_llama(vocab_size=1000, max_positions=64), 1, 1)
        client.save_pretrained(root / "client")
        server.save_pretrained(root / "server")
        generate_tokens(root / "tokens", [f"c{m}" for m in range(ns.clients)])
        for mode in ("sequential", "client_batch", "server_hierarchical"):
            rows.append(_run_mode(mode, root, ns.clients, ns.steps))
            r = rows[-1]
            print(f"{mode:<20} {ns.clients} client processes  wall {r['wall_s']:6.2f} s "
                  f"({r['wall_s'] / rows[0]['wall_s']:.2f}x sequential)  client sent {r['client_sent']} B  "
                  f"final loss {r['final_loss']:.4f}", flush=True)  # fmt: skip
    Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.out).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
