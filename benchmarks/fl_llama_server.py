"""The FL-LLaMA split server under load (issue 38): many clients on one `SplitServer` over gRPC on 127.0.0.1.

1. Training at 4, 8 and 16 concurrent clients (shared part B: the server orders the steps, see
   `hf_ext.fl_llama.server`): steps per second and the p50 / p95 latency of one client's `train_step` (forward, the
   wait for its turn, backward), and the number of failed steps (must be 0).
2. Inference at 4, 8 and 16 concurrent clients: split `generate` (prefill + decode steps with the KV caches) —
   requests and tokens per second, p50 / p95 latency of one request.
3. Server-hierarchical vs sequential training with 2 and 4 clients (paper's appendix: ~2x for training on GPUs): the
   same steps per client, clients one after another on the shared part B vs all at once on their own sub-servers
   (FedAvg every `--sync-every` steps); speed-up = sequential wall / hierarchical wall.

Clients are threads of this process, each with its own gRPC channel and token; torch releases the GIL while it
computes, so sub-servers and clients overlap on as many cores as the machine gives. Prints the load average before and
after (on a shared 2-core machine the numbers move with the other load; the speed-up cannot exceed the free cores).

Model: a random Llama (d = 128, 6 blocks, a = c = 1, vocab 1000), fp32, batches of 4 x 32 tokens, 8 new tokens per
generate.

Usage: `python benchmarks/fl_llama_server.py [--steps 4] [--out results.json]`.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import torch


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def _parties(model, names, hierarchical=False, sync_every=3, lr=1e-3, max_steps=None):
    from hf_ext.fl_llama import split_llama
    from hf_ext.fl_llama.arguments import FlLlamaTrainingArguments
    from hf_ext.fl_llama.auth import TokenStore, generate_tokens
    from hf_ext.fl_llama.parallel import HierarchicalSync
    from hf_ext.fl_llama.server import SplitServer
    from hf_ext.fl_llama.split_model import FlLlamaSplitForCausalLM
    from hf_ext.fl_llama.transport import GrpcTransport, serve_grpc

    args = FlLlamaTrainingArguments(learning_rate=lr, max_steps=max_steps)
    tmp = Path(tempfile.mkdtemp(prefix="fl_llama_bench_"))
    tokens = generate_tokens(tmp, names)
    client_model, server_model = split_llama(copy.deepcopy(model), 1, 1, noise_scale=0.02)
    server = SplitServer(server_model, args, hierarchical=hierarchical)
    handler = HierarchicalSync(server, len(names), sync_every).handle_bytes if hierarchical else server.handle_bytes
    grpc_server, port = serve_grpc(handler, max_workers=len(names) + 4,
                                   tokens=TokenStore.load(tmp / "server_tokens.json"))  # fmt: skip
    clients = [FlLlamaSplitForCausalLM(copy.deepcopy(client_model),
                                       GrpcTransport(f"127.0.0.1:{port}", token=tokens[n], wait_ready=10),
                                       dataclasses.replace(args, seed=m), client_id=n)
               for m, n in enumerate(names)]  # fmt: skip
    return server, clients, grpc_server


def _run_threads(fns):
    errors, threads = [], []

    def wrap(fn):
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001
            errors.append(repr(exc))

    start = time.perf_counter()
    for fn in fns:
        threads.append(threading.Thread(target=wrap, args=(fn,)))
        threads[-1].start()
    for t in threads:
        t.join()
    return time.perf_counter() - start, errors


def _batches(m, steps, vocab):
    from hf_ext.fl_llama.testing import tiny_batch

    return [tiny_batch(4, 32, seed=1000 * m + s, vocab=vocab) for s in range(steps)]


def load_test(model, n, steps, vocab):
    names = [f"c{m:02d}" for m in range(n)]
    server, clients, grpc_server = _parties(model, names)
    try:
        for c in clients:
            c.handshake()
        lat, failed = [], []

        def trainer(m):
            def fn():
                for b in _batches(m, steps, vocab):
                    t0 = time.perf_counter()
                    try:
                        clients[m].train_step(b)
                    except Exception as exc:  # noqa: BLE001  (counted, not fatal: this is what the test measures)
                        failed.append(repr(exc))
                    lat.append(time.perf_counter() - t0)

            return fn

        wall, errors = _run_threads([trainer(m) for m in range(n)])
        train = {"clients": n, "steps": len(lat), "failed_steps": len(failed) + len(errors), "wall_s": wall,
                 "steps_per_s": len(lat) / wall, "p50_s": _pct(lat, 0.5), "p95_s": _pct(lat, 0.95),
                 "server_steps": server.steps}  # fmt: skip
        lat_inf, tokens, failed_inf = [], [0], []
        prompt = torch.randint(3, vocab, (1, 16), generator=torch.Generator().manual_seed(0))

        def generator(m):
            def fn():
                for _ in range(steps):
                    t0 = time.perf_counter()
                    try:
                        out = clients[m].generate(prompt, max_new_tokens=8, do_sample=False, eos_token_id=None,
                                                  pad_token_id=0)  # fmt: skip
                        tokens[0] += out.shape[1] - prompt.shape[1]
                    except Exception as exc:  # noqa: BLE001
                        failed_inf.append(repr(exc))
                    lat_inf.append(time.perf_counter() - t0)

            return fn

        wall_inf, errors_inf = _run_threads([generator(m) for m in range(n)])
        infer = {"clients": n, "requests": len(lat_inf), "failed": len(failed_inf) + len(errors_inf),
                 "wall_s": wall_inf, "requests_per_s": len(lat_inf) / wall_inf, "tokens_per_s": tokens[0] / wall_inf,
                 "p50_s": _pct(lat_inf, 0.5), "p95_s": _pct(lat_inf, 0.95)}  # fmt: skip
        return train, infer, (failed + failed_inf)[:3]
    finally:
        grpc_server.stop(grace=0.5)


def hierarchical_speedup(model, n, steps, vocab, sync_every):
    names = [f"h{m:02d}" for m in range(n)]
    batches = [_batches(m, steps, vocab) for m in range(n)]
    server, clients, grpc_server = _parties(model, names)
    try:
        for c in clients:
            c.handshake()
        start = time.perf_counter()
        for m in range(n):  # sequential: one client's local training after the other's, shared part B
            for b in batches[m]:
                clients[m].train_step(b)
        seq = time.perf_counter() - start
    finally:
        grpc_server.stop(grace=0.5)
    server, clients, grpc_server = _parties(model, names, hierarchical=True, sync_every=sync_every)
    try:
        for c in clients:
            c.handshake()
        hier, errors = _run_threads([lambda m=m: [clients[m].train_step(b) for b in batches[m]] for m in range(n)])
    finally:
        grpc_server.stop(grace=0.5)
    return {"clients": n, "steps_per_client": steps, "sequential_s": seq, "hierarchical_s": hier,
            "speedup": seq / hier, "errors": errors, "server_steps": server.steps}  # fmt: skip


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=4, help="train steps (and generate requests) per client")
    p.add_argument("--speedup-steps", type=int, default=6, help="train steps per client in the speed-up runs")
    p.add_argument("--sync-every", type=int, default=3)
    p.add_argument("--clients", type=int, nargs="+", default=[4, 8, 16])
    p.add_argument("--speedup-clients", type=int, nargs="+", default=[2, 4])
    p.add_argument("--out", help="write the results as JSON")
    ns = p.parse_args(argv)
    for flag, value in (("--steps", ns.steps), ("--speedup-steps", ns.speedup_steps), ("--sync-every", ns.sync_every)):
        if value < 1:
            p.error(f"{flag} must be >= 1, got {value}")
    if min(ns.clients + ns.speedup_clients) < 1:
        p.error("client counts must be >= 1")
    from hf_ext.fl_llama.presets import tiny_llama

    torch.set_num_threads(1)
    vocab = 1000
    model = tiny_llama(vocab_size=vocab, hidden_size=128, num_layers=6, max_positions=256, seed=0)
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}  "
          f"(cpus: {os.cpu_count()})", flush=True)  # fmt: skip
    results = {"load_before": load_before, "train": [], "inference": [], "speedup": []}
    print("clients  train: steps  failed  steps/s   p50 s   p95 s | infer: req  failed  req/s  tok/s   p50 s   p95 s")
    for n in ns.clients:
        train, infer, examples = load_test(model, n, ns.steps, vocab)
        results["train"].append(train), results["inference"].append(infer)
        print(f"{n:7d}  {train['steps']:12d}  {train['failed_steps']:6d}  {train['steps_per_s']:7.2f}  "
              f"{train['p50_s']:6.3f}  {train['p95_s']:6.3f} | {infer['requests']:10d}  {infer['failed']:6d}  "
              f"{infer['requests_per_s']:5.2f}  {infer['tokens_per_s']:5.1f}  {infer['p50_s']:6.3f}  "
              f"{infer['p95_s']:6.3f}", flush=True)  # fmt: skip
        if examples:
            print(f"         failures: {examples}")
    for n in ns.speedup_clients:
        r = hierarchical_speedup(model, n, ns.speedup_steps, vocab, ns.sync_every)
        results["speedup"].append(r)
        print(f"server-hierarchical vs sequential, {n} clients x {ns.speedup_steps} steps: sequential "
              f"{r['sequential_s']:.2f} s, hierarchical {r['hierarchical_s']:.2f} s, speed-up {r['speedup']:.2f}x"
              f"{'  ERRORS ' + str(r['errors']) if r['errors'] else ''}", flush=True)  # fmt: skip
    load_after = os.getloadavg()
    results["load_after"] = load_after
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print(f"median train p50 over client counts: {statistics.median(r['p50_s'] for r in results['train']):.3f} s")
    if ns.out:
        Path(ns.out).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
