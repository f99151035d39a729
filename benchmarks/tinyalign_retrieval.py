"""TinyAlign retrieval cost: training-step time with faiss retrieval vs the same step replaying fixed memory ids (same
sequence, no query and no search), and vs the baseline connector (no memory tokens); plus memory-bank build
throughput (images/s) on the digits' memory split. Target: retrieval / replay ≤ 1.15× at a bank of 100k keys.
Also the same
exact bank through the retrieval cache (stage 1 freezes every input of the query, so a row's top-k never changes:
from the second epoch on it comes from the cache, with the same ids as the exact search).
Prints the numbers and writes them to `runs/tinyalign/benchmark_retrieval.json` (`--out`).

    .venv/bin/python benchmarks/tinyalign_retrieval.py [--bank-size 100000] [--steps 20] [--k 4] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch


def step_time(model, batch, steps: int, **extra) -> float:
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    model.train()
    times = []
    for i in range(steps + 2):
        start = time.perf_counter()
        loss = model(**batch, **extra).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        if i >= 2:  # warm-up steps excluded
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def setup_digits(args):
    """The digits setting: in-house ConvNeXt + the small Llama; the bank build is timed on the memory split."""
    from hf_ext.tinyalign import TinyAlignConfig, TinyAlignForConditionalGeneration
    from hf_ext.tinyalign.components import LM_CONFIGS, VISION_CONFIG
    from hf_ext.tinyalign.data import load_digit_captions
    from hf_ext.tinyalign.processing_tinyalign import TinyAlignProcessor, build_memory_bank, build_tokenizer

    data = load_digit_captions()
    tok = build_tokenizer(data["memory"]["caption"])
    text = {**LM_CONFIGS["small"], "vocab_size": len(tok)}
    cfg = TinyAlignConfig(vision_config=dict(VISION_CONFIG), text_config=text, memory_top_k=args.k)
    model = TinyAlignForConditionalGeneration(cfg).freeze_for_stage1()
    proc = TinyAlignProcessor(tok, cfg)
    start = time.perf_counter()
    build_memory_bank(
        model, proc, data["memory"].select(range(16)) if args.no_bank_build else data["memory"], progress=False
    )
    build_s = None if args.no_bank_build else time.perf_counter() - start
    if build_s is not None:
        print(
            f"bank build: {len(data['memory'])} images in {build_s:.2f} s = {len(data['memory']) / build_s:.0f} "
            f"images/s (vision encoder + pooling + Perceiver values + faiss add)"
        )
    rows = data["train"][: args.batch_size]
    base_cfg = TinyAlignConfig(vision_config=dict(VISION_CONFIG), text_config=text, use_retrieval=False)
    base = TinyAlignForConditionalGeneration(base_cfg).freeze_for_stage1()
    base_batch = TinyAlignProcessor(tok, base_cfg)(rows["pixel_values"], rows["caption"])
    return model, proc(rows["pixel_values"], rows["caption"]), base, base_batch, data, build_s, "small digits LM"


def setup_pretrained(args):
    """The paper's setting: frozen EfficientNet-Lite0 (64 px) + SmolLM2-135M-Instruct on Fashion-MNIST captions, with
    the tower's features precomputed (as `hf-ext reproduce tinyalign --pretrained` trains)."""
    from hf_ext.tinyalign.fashion import load_fashion_captions
    from hf_ext.tinyalign.pretrained_parts import add_vision_features, load_frozen_parts, pretrained_tinyalign
    from hf_ext.tinyalign.processing_tinyalign import build_memory_bank

    parts = load_frozen_parts()
    data = load_fashion_captions(n_memory=16, n_train=args.batch_size, n_test=4, seed=0)
    model, proc = pretrained_tinyalign(
        parts, use_retrieval=True, memory_top_k=args.k, value_num_latents=args.value_num_latents
    )
    build_memory_bank(model, proc, data["memory"], batch_size=16, progress=False)  # snapshot of the connector
    base, base_proc = pretrained_tinyalign(parts, use_retrieval=False)

    rows = add_vision_features(model, proc, data["train"])[: args.batch_size]  # the frozen tower, once

    def batch_of(processor):
        out = processor(rows["pixel_values"], rows["caption"])
        out["vision_features"] = torch.as_tensor(rows["vision_features"], dtype=torch.float32)
        del out["pixel_values"]
        return out

    return model, batch_of(proc), base, batch_of(base_proc), data, None, "SmolLM2-135M-Instruct"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bank-size", type=int, default=100_000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=4, help="epochs for the epoch-averaged cached ratio")
    p.add_argument(
        "--indexes",
        nargs="+",
        default=["Flat", "HNSW32,ef128", "HNSW32,ef64"],
        choices=["Flat", "HNSW32,ef128", "HNSW32,ef64"],
        help="faiss indexes to time (Flat is required)",
    )
    p.add_argument("--no-bank-build", action="store_true", help="skip timing the digits bank build")
    p.add_argument(
        "--setting",
        choices=["digits", "pretrained"],
        default="digits",
        help="digits: the small in-house LM (45 k parameters); pretrained: frozen EfficientNet-Lite0 + "
        "SmolLM2-135M-Instruct, the paper's setting (visual features precomputed, as in its run)",
    )
    p.add_argument("--threads", type=int, help="torch threads (default: torch's; 1 on a shared machine)")
    p.add_argument("--value-num-latents", type=int, default=8, help="pretrained setting: latents per memory value")
    p.add_argument(
        "--out", help="where the JSON results go (default runs/tinyalign/benchmark_retrieval[_pretrained].json)"
    )
    args = p.parse_args(argv)

    from hf_ext.tinyalign import MemoryBank

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, batch, base, base_batch, data, build_s, lm_name = (
        setup_pretrained(args) if args.setting == "pretrained" else setup_digits(args)
    )
    cfg = model.config
    ids = torch.randint(0, args.bank_size, (args.batch_size, args.k))
    keys = torch.randn(args.bank_size, cfg.hidden_size)
    values = torch.randn(args.bank_size, cfg.value_num_latents, cfg.value_latent_dim)
    # recall of an approximate index against the exact one, on queries near real keys (a perturbed key each)
    probe = keys[torch.randint(0, args.bank_size, (256,))] + 0.5 * torch.randn(256, cfg.hidden_size)
    per_index, exact_ids = {}, None
    for name, factory, ef in (("Flat", "Flat", 0), ("HNSW32,ef128", "HNSW32", 128), ("HNSW32,ef64", "HNSW32", 64)):
        if name not in args.indexes and name != "Flat":
            continue
        start = time.perf_counter()
        bank = MemoryBank(keys, values, index_factory=factory, ef_search=ef)
        built = time.perf_counter() - start
        model.set_memory_bank(bank)
        found = bank.search(probe, args.k)[1]
        exact_ids = found if name == "Flat" else exact_ids
        recall = float(
            sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(found, exact_ids)) / exact_ids.numel()
        )
        model.use_retrieval_cache = False  # the search itself, every step
        t_retrieve = step_time(model, batch, args.steps)
        q = torch.randn(args.batch_size, cfg.hidden_size)
        start = time.perf_counter()
        for _ in range(args.steps):
            bank.search(q, args.k)
        per_index[name] = {
            "build_s": built,
            "step_ms": t_retrieve * 1e3,
            f"recall_at_{args.k}": recall,
            "search_ms_per_batch": (time.perf_counter() - start) / args.steps * 1e3,
        }
        print(
            f"faiss {name} over {args.bank_size:,} keys (width {cfg.hidden_size}): built in {built:.2f} s, "
            f"recall@{args.k} vs exact {recall:.3f}"
        )
    t_replay = step_time(model, batch, args.steps, memory_ids=ids)
    # the exact (Flat) bank with the retrieval cache: stage 1 freezes every input of the query, so from the second
    # epoch on each (image, prompt) row is answered from the cache; the ids must equal the exact search's
    model.set_memory_bank(MemoryBank(keys, values))
    model.use_retrieval_cache = False
    with torch.no_grad():
        exact = model(**batch).retrieved_ids
    model.use_retrieval_cache = True
    t_cached = step_time(model, batch, args.steps)
    with torch.no_grad():
        cached_ids = model(**batch).retrieved_ids
    cache_recall = float(sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(cached_ids, exact)) / exact.numel())
    hits, misses = model.retrieval_cache.hits, model.retrieval_cache.misses
    t_base = step_time(base, base_batch, args.steps)
    t_retrieve, t_search = per_index["Flat"]["step_ms"] / 1e3, per_index["Flat"]["search_ms_per_batch"] / 1e3
    t_hnsw = {name: per_index[name]["step_ms"] / 1e3 for name in per_index if name != "Flat"}

    print(f"training step, batch {args.batch_size}, k = {args.k}, {lm_name} (median of {args.steps}):")
    print(f"  retrieval (query + faiss top-k + gather): {t_retrieve * 1e3:7.1f} ms")
    print(f"  replayed memory ids (same tokens, no search): {t_replay * 1e3:7.1f} ms")
    print(f"  baseline connector (no memory tokens):       {t_base * 1e3:7.1f} ms")
    print(f"  faiss search alone: {t_search * 1e3:.2f} ms per batch")
    for name, t in t_hnsw.items():
        print(
            f"  retrieval with {name} (approximate): {t * 1e3:7.1f} ms, search "
            f"{per_index[name]['search_ms_per_batch']:.2f} ms per batch"
        )
    print(
        f"ratio retrieval / replay = {t_retrieve / t_replay:.3f}x exact (Flat), "
        + ", ".join(f"{t / t_replay:.3f}x {name}" for name, t in t_hnsw.items())
        + " (target <= 1.15x at 100k keys)"
    )
    print(
        f"  retrieval through the cache (exact bank, frozen query; {hits} hits, {misses} miss): "
        f"{t_cached * 1e3:7.1f} ms, recall@{args.k} vs exact search {cache_recall:.3f}"
    )
    print(
        f"ratio cached retrieval / replay = {t_cached / t_replay:.3f}x (every epoch after the first; the first "
        f"pays the exact search, {t_retrieve / t_replay:.3f}x; over {args.epochs} epochs "
        f"{(t_retrieve + (args.epochs - 1) * t_cached) / (args.epochs * t_replay):.3f}x) (target <= 1.15x)"
    )
    print(
        f"ratio retrieval / baseline = {t_retrieve / t_base:.3f}x (includes the {cfg.num_memory_tokens} extra tokens)"
    )

    results = {
        "benchmark": "tinyalign_retrieval",
        "settings": vars(args),
        "lm": lm_name,
        "memory_tokens": cfg.num_memory_tokens,
        "bank_build": None
        if build_s is None
        else {"images": len(data["memory"]), "seconds": build_s, "images_per_second": len(data["memory"]) / build_s},
        "step_ms_median": {
            "retrieval": t_retrieve * 1e3,
            "replay_memory_ids": t_replay * 1e3,
            "baseline_connector": t_base * 1e3,
        },
        "faiss_search_ms_per_batch": t_search * 1e3,
        "indexes": per_index,
        "ratio_retrieval_over_replay": t_retrieve / t_replay,
        "target_ratio_retrieval_over_replay": 1.15,
        "cached": {
            "step_ms": t_cached * 1e3,
            "ratio_over_replay": t_cached / t_replay,
            "hits": hits,
            "misses": misses,
            f"recall_at_{args.k}_vs_exact": cache_recall,
            "ratio_over_replay_epoch_average": (t_retrieve + (args.epochs - 1) * t_cached) / (args.epochs * t_replay),
            "epochs": args.epochs,
        },
        "ratio_retrieval_over_replay_approximate": {name: t / t_replay for name, t in t_hnsw.items()},
        "ratio_retrieval_over_baseline": t_retrieve / t_base,
        # timings depend on load: record what the machine looked like
        "machine": {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "platform": platform.platform(),
            "load_average_1_5_15": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        },
    }
    out = Path(
        args.out or f"runs/tinyalign/benchmark_retrieval{'_pretrained' if args.setting == 'pretrained' else ''}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()
