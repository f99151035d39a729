"""Train-step and inference time of ORCA against the same backbone without ORCA, as ratios measured in one run.

Targets from the foundation issue: training ≤ 1.3×, inference ≤ 1.1×. The train step is what `OrcaTrainer` does
per batch: forward + backward + Adam step, plus (ORCA only) the counterfactual masked NDE step on a share
`mask_fea_ratio` of batches. Timings interleave the two models and take medians, so machine load hits both alike.

    python benchmarks/orca_speed.py [--batch 512] [--repeats 30]
"""

from __future__ import annotations

import argparse
import random
import statistics

import torch
from timing import timed

from hf_ext.orca import OrcaConfig, OrcaModel
from hf_ext.orca.causal_generator import FIELD_NAMES, POST_CLICK_FIELDS, SyntheticOrcaConfig, field_vocab_sizes
from hf_ext.orca.trainer import counterfactual_nde_step


def make_batch(config: OrcaConfig, n: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randint(0, v, (n,), generator=g) for v in config.field_vocab_sizes], dim=1)
    clicks = (torch.rand(n, generator=g) < 0.13).float()
    dwell = torch.where(clicks > 0, torch.randint(0, config.num_bins, (n,), generator=g), torch.full((n,), -100))
    return {"input_ids": ids, "click_labels": clicks, "dwell_labels": dwell}


class Stepper:
    """One model with its optimisers, doing exactly what OrcaTrainer does per batch."""

    def __init__(self, config: OrcaConfig, mask_ratio: float = 0.2):
        torch.manual_seed(0)
        self.model = OrcaModel(config).train()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, weight_decay=1e-4)
        nde = self.model.nde_parameters()
        self.nde_opt = torch.optim.Adam(nde, lr=1e-3, weight_decay=1e-4) if nde else None
        self.rng = random.Random(0)
        self.mask_ratio = mask_ratio

    def train_step(self, batch):
        loss = self.model(**batch).loss
        loss.backward()
        if self.nde_opt is not None and self.rng.random() < self.mask_ratio:
            counterfactual_nde_step(self.model, batch, self.nde_opt)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    @torch.no_grad()
    def infer(self, batch):
        self.model.eval()
        self.model(input_ids=batch["input_ids"])
        self.model.train()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--infer-batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = field_vocab_sizes(SyntheticOrcaConfig(num_users=1000, num_items=600))
    results = {}
    for backbone in ("mmoe", "ple"):
        make = lambda orca: OrcaConfig(  # noqa: E731
            field_names=list(FIELD_NAMES),
            field_vocab_sizes=sizes,  # noqa: E731
            post_click_fields=list(POST_CLICK_FIELDS),
            backbone=backbone,
            use_orca=orca,
        )
        base, orca = Stepper(make(False)), Stepper(make(True))
        train_batch, infer_batch = (
            make_batch(base.model.config, args.batch),
            make_batch(base.model.config, args.infer_batch),
        )
        times = {k: [] for k in ("base_train", "orca_train", "base_infer", "orca_infer")}
        for _ in range(5):  # warm-up
            base.train_step(train_batch), orca.train_step(train_batch)
        for _ in range(args.repeats):
            times["base_train"].append(timed(base.train_step, train_batch))
            times["orca_train"].append(timed(orca.train_step, train_batch))
            times["base_infer"].append(timed(base.infer, infer_batch))
            times["orca_infer"].append(timed(orca.infer, infer_batch))
        med = {k: statistics.median(v) for k, v in times.items()}
        results[backbone] = {
            **{f"{k}_ms": round(v * 1000, 2) for k, v in med.items()},
            "train_ratio": round(med["orca_train"] / med["base_train"], 3),
            "infer_ratio": round(med["orca_infer"] / med["base_infer"], 3),
        }
    print(
        f"ORCA vs same backbone without ORCA (median of {args.repeats}, train batch {args.batch}, "
        f"inference batch {args.infer_batch}, {torch.get_num_threads()} threads)"
    )
    print(
        "backbone | train ms base / ORCA | train ratio (target ≤ 1.3) | "
        "infer ms base / ORCA | infer ratio (target ≤ 1.1)"
    )
    for backbone, r in results.items():
        print(
            f"{backbone:8} | {r['base_train_ms']:7.2f} / {r['orca_train_ms']:7.2f} | {r['train_ratio']:.3f} | "
            f"{r['base_infer_ms']:7.2f} / {r['orca_infer_ms']:7.2f} | {r['infer_ratio']:.3f}"
        )
    return results


if __name__ == "__main__":
    main()
