"""Split generation over loopback gRPC, client and server in two processes: KV caches on both sides against the
no-cache baseline that resends the whole prefix (hidden states and its T x T mask) every token, for context lengths
64 / 256 / 1024. Prints tokens per second, bytes each party sent and the speed ratio (target >= 5x at 1024; the paper
reports up to 8x).

Paper: [FL-LLaMA / FedSEA-LLaMA](https://arxiv.org/abs/2505.15683).

Model: a random Llama (d = 256, 8 blocks, 8 heads, a = c = 1), or with `--smollm2` the real SmolLM2-135M-Instruct
(30 blocks, d = 576, a = c = 2, through `hf_ext.core.pretrained`); fp32, one torch thread per process. Timing: best
of `--repeats` runs of `--new-tokens` greedy tokens after the prompt (prefill included in both modes), through
transformers' `generate` (EOS disabled so every run makes the same number of tokens).

Usage: `python benchmarks/fl_llama_generate.py [--quick] [--smollm2] [--lengths 64 256 1024]`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from hf_ext.fl_llama import split_llama
from hf_ext.fl_llama.auth import generate_tokens
from hf_ext.fl_llama.presets import tiny_llama
from hf_ext.fl_llama.serve import READY
from hf_ext.fl_llama.split_model import FlLlamaSplitForCausalLM
from hf_ext.fl_llama.transport import GrpcTransport


def _start_server(server_dir: Path, tokens: Path):
    proc = subprocess.Popen([sys.executable, "-m", "hf_ext.fl_llama.serve", str(server_dir), "--tokens",
                             str(tokens / "server_tokens.json")], stdout=subprocess.PIPE, text=True)  # fmt: skip
    for line in proc.stdout:
        if line.startswith(READY):
            return proc, int(line.split()[1])
    raise RuntimeError("the FL-LLaMA server process exited before it was ready")


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 1024])
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--quick", action="store_true", help="lengths 64 256, 8 tokens, 1 repeat")
    p.add_argument("--smollm2", action="store_true", help="the real SmolLM2-135M-Instruct, a = c = 2")
    p.add_argument("--out", default="runs/fl_llama/benchmark_generate.json")
    ns = p.parse_args(argv)
    if ns.quick:
        ns.lengths, ns.new_tokens, ns.repeats = [64, 256], 8, 1
    torch.set_num_threads(1)
    if ns.smollm2:
        from hf_ext.core.pretrained import load_smollm2

        model, a, vocab = load_smollm2()[0], 2, 49152
        ns.hidden, ns.layers = model.config.hidden_size, model.config.num_hidden_layers
    else:
        model, a, vocab = tiny_llama(vocab_size=1000, hidden_size=ns.hidden, num_layers=ns.layers, num_heads=8,
                                     max_positions=max(ns.lengths) + ns.new_tokens + 8), 1, 1000  # fmt: skip
    client, server = split_llama(model, a, a)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        server.save_pretrained(Path(tmp) / "server")
        token = generate_tokens(Path(tmp) / "tokens", ["bench"])["bench"]
        proc, port = _start_server(Path(tmp) / "server", Path(tmp) / "tokens")
        try:
            # compress_mask=False: the no-cache baseline resends the T x T mask too, as FL-GLM did
            split = FlLlamaSplitForCausalLM(client, GrpcTransport(f"127.0.0.1:{port}", token=token),
                                            compress_mask=False)  # fmt: skip
            split.generation_config.eos_token_id = None
            split.generate(torch.tensor([[5, 6, 7]]), max_new_tokens=2)  # warm-up (first-call allocations)
            for length in ns.lengths:
                ids = torch.randint(3, vocab, (1, length), generator=torch.Generator().manual_seed(length))
                row = {"context": length}
                outs = {}
                for cache in (True, False):
                    best = float("inf")
                    for _ in range(ns.repeats):
                        split.transport.stats.reset()
                        start = time.perf_counter()
                        outs[cache] = split.generate(ids, max_new_tokens=ns.new_tokens, use_cache=cache,
                                                     do_sample=False)  # fmt: skip
                        best = min(best, time.perf_counter() - start)
                    key = "cache" if cache else "no_cache"
                    row[f"{key}_tokens_per_s"] = ns.new_tokens / best
                    row[f"{key}_client_bytes"] = split.transport.stats.client_bytes
                    row[f"{key}_server_bytes"] = split.transport.stats.server_bytes
                row["speedup"] = row["cache_tokens_per_s"] / row["no_cache_tokens_per_s"]
                row["client_bytes_ratio"] = row["no_cache_client_bytes"] / row["cache_client_bytes"]
                row["same_tokens"] = bool(torch.equal(outs[True], outs[False]))
                rows.append(row)
                print(f"T={length:5d}  cached {row['cache_tokens_per_s']:7.1f} tok/s  no cache "
                      f"{row['no_cache_tokens_per_s']:7.1f} tok/s  speed-up {row['speedup']:5.1f}x  client bytes "
                      f"{row['cache_client_bytes']:>12,} vs {row['no_cache_client_bytes']:>13,} "
                      f"({row['client_bytes_ratio']:.0f}x)  same tokens {row['same_tokens']}", flush=True)  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    result = {"model": {"name": "SmolLM2-135M-Instruct" if ns.smollm2 else "random Llama", "hidden": ns.hidden,
                        "layers": ns.layers, "a": a, "c": a}, "new_tokens": ns.new_tokens,
              "transport": "grpc loopback, two processes", "rows": rows}  # fmt: skip
    Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.out).write_text(json.dumps(result, indent=1))
    last = rows[-1]
    print(f"speed-up at T={last['context']}: {last['speedup']:.1f}x (target >= 5x; paper: up to 8x)")
    return result


if __name__ == "__main__":
    main()
