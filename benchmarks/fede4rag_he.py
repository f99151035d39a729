"""Cost of FedE4RAG's CKKS-encrypted aggregation against plaintext aggregation, per round, as measured in one run.

For K clients: client encrypt time, server aggregate time (sum of ciphertexts × 1/K under the public context),
client decrypt time, bytes each client uploads, and the maximum parameter error of encrypted vs plaintext averaging
(target ≤ 1e-6), for

1. the trainable adapter the reproduction sends (LoRA r = 8 on every linear of MiniLM's top layer, 55,296 values),
2. the spec's example adapter (LoRA r = 8 on query/value of all 6 layers, 73,728 values),
3. the full all-MiniLM-L6-v2 encoder (22.7 M values): *extrapolated* from `--sample-chunks` ciphertexts per client
   (a full upload is ~5,500 ciphertexts ≈ 1.7 GiB per client per round; it is never run in the tests).

Plaintext aggregation is `hf_ext.core.federated.weighted_average` on the same vectors (uniform weights).

    python benchmarks/fede4rag_he.py [--clients 5] [--sample-chunks 32]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from flwr.app import Array, ArrayRecord

from hf_ext.core.federated import weighted_average
from hf_ext.fede4rag.he import ClientCipher, ServerAggregator, make_keys

SIZES = {
    "adapter (top layer, all linears, r=8)": 55_296,
    "adapter (q,v of 6 layers, r=8)": 73_728,
    "full MiniLM-L6 encoder": 22_713_216,
}


def measure(
    n_values: int, clients: int, cipher: ClientCipher, server: ServerAggregator, rng, sample_chunks: int | None = None
) -> dict:
    slots = cipher.slots
    total_chunks = -(-n_values // slots)
    chunks = total_chunks if sample_chunks is None else min(sample_chunks, total_chunks)
    n = min(n_values, chunks * slots)
    vectors = [rng.normal(0.0, 0.02, n) for _ in range(clients)]
    t0 = time.perf_counter()
    uploads = {str(i): (cipher.encrypt(v), cipher.context_id) for i, v in enumerate(vectors)}
    t1 = time.perf_counter()
    agg, rejected = server.average(uploads, chunks, size=n)
    t2 = time.perf_counter()
    out = cipher.decrypt(agg, n)
    t3 = time.perf_counter()
    assert not rejected
    records = [ArrayRecord({"w": Array(v.astype(np.float32))}) for v in vectors]
    t4 = time.perf_counter()
    plain = weighted_average(records, [1.0] * clients)["w"].numpy()
    t5 = time.perf_counter()
    scale = total_chunks / chunks
    return {
        "values": n_values,
        "ciphertexts_per_client": total_chunks,
        "extrapolated": scale > 1,
        "encrypt_s_per_client": (t1 - t0) / clients * scale,
        "aggregate_s": (t2 - t1) * scale,
        "decrypt_s": (t3 - t2) * scale,
        "plain_aggregate_s": (t5 - t4) * scale,
        "bytes_up_per_client": np.mean([sum(len(b) for b in u[0]) for u in uploads.values()]) * scale,
        "plain_bytes_up_per_client": n_values * 4,
        "max_abs_error": float(np.abs(out - np.mean(vectors, axis=0)).max()),
        "max_abs_error_vs_float32_plain": float(np.abs(out - plain).max()),
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=5)
    p.add_argument("--sample-chunks", type=int, default=32, help="ciphertexts per client measured for the full model")
    ns = p.parse_args(argv)
    keys = make_keys()
    cipher, server = ClientCipher(keys.secret, keys.public), ServerAggregator(keys.public)
    assert not server.can_decrypt()
    rng = np.random.default_rng(0)
    results = {}
    print(
        f"CKKS N=8192, moduli [60,40,40,60], scale 2^40, {cipher.slots} slots; {ns.clients} clients; "
        f"public context {len(keys.public) / 2**10:.0f} KiB"
    )
    print(
        f"{'payload':<40}{'values':>11}{'ct/client':>10}{'enc s/cl':>10}{'agg s':>9}{'dec s':>8}"
        f"{'plain agg s':>12}{'MiB up/cl':>11}{'x plain':>9}{'max err':>10}"
    )
    for name, n in SIZES.items():
        full = n > 1_000_000
        r = measure(n, ns.clients, cipher, server, rng, ns.sample_chunks if full else None)
        results[name] = r
        ratio = r["bytes_up_per_client"] / r["plain_bytes_up_per_client"]
        print(
            f"{name + (' [extrapolated]' if r['extrapolated'] else ''):<40}{n:>11,}{r['ciphertexts_per_client']:>10}"
            f"{r['encrypt_s_per_client']:>10.2f}{r['aggregate_s']:>9.2f}{r['decrypt_s']:>8.2f}"
            f"{r['plain_aggregate_s']:>12.4f}{r['bytes_up_per_client'] / 2**20:>11.1f}{ratio:>9.0f}"
            f"{r['max_abs_error']:>10.1e}"
        )
    worst = max(r["max_abs_error"] for r in results.values())
    print(
        f"max parameter error after encrypted averaging: {worst:.2e} (target <= 1e-6: "
        f"{'met' if worst <= 1e-6 else 'NOT met'})"
    )
    return results


if __name__ == "__main__":
    main()
