"""FL-LLaMA's noise verdict with power (issue 40): does the client's hidden-state noise cost task quality, and does a
deeper split protect against it?

Design, fixed before the run (the rules are printed first by [`print_noise_rules`]):

* **Arms**, for every seed in `seeds` (3 by default): centralised LoRA fine-tuning (the unsplit model), and at each
  depth `a` in `depths` (1 and 3, the paper's noise study) the split model `(a, c)` at `s = 0` and at
  `s = noise_multiple x mean|h_A|` (1x). `mean|h_A|` is measured on the pretrained part A at that depth over the
  validation prompts' real tokens; the noise is `ε ~ N(0, σ²)`, `σ = s·sqrt(π/2)` (so `E|ε| = s`), on every message
  `h̃_A` of training and evaluation. Every table row states it both ways: absolute `σ` and relative
  `σ / mean|h_A|` (and the paper's `s / mean|h_A|`); `mean|h_A|` of the trained part A is reported too.
* **Pairing**: one seed fixes, for all its arms, the batches and their order, the LoRA initialisation and dropout
  draws (global RNG re-seeded before each arm) and the noise generator; every arm of every seed is scored on the
  same validation prompts. Each run records fingerprints of its training order and its evaluation prompts.
* **Clipping**: the split runs use the global-norm clip (`global_clip=True`), so `s = 0` is centralised training
  with the same clip (per-part clipping would make `s = 0` differ from centralised by itself).
* **Metric**: ROC AUC of `logit(yes) − logit(no)` on the validation prompts (threshold-free: a model whose
  predictions all fall on one side still ranks).
* **Interval**: a paired, stratified bootstrap over the validation prompts ([`auc_difference`]): each replicate
  draws positives and negatives with replacement (the same draw for every arm and seed — the pairing) and
  recomputes the seed-mean AUC difference. Not `hf_ext.core.reporting.paired_bootstrap` as is: the AUC is a
  statistic of (positive, negative) pairs, not a mean over items, so it must be recomputed on each resample; not
  DeLong: DeLong's normal approximation needs the covariance of the six correlated AUCs of a seed-mean contrast,
  while the AUC is bilinear in the resample counts, so the exact bootstrap of that contrast costs one matrix product.
  The per-seed differences, their sample SD and the Student-t interval over seeds are reported next to it, so a
  reader sees when training randomness, not the prompts, dominates.
* **Premise** (positive control, decided first): centralised fine-tuning learns — its seed-mean AUC is above
  chance (0.5) with the whole 95 % interval above it. Otherwise every noise rule is *premise absent*.

[`run_noise_verdict`] trains and scores; [`decide_noise_verdict`] turns the runs into verdicts (testable on
hand-made runs); [`print_noise_table`] prints the table. Backbones: SmolLM2-135M-Instruct where it ships offline
(`hf_ext.core.pretrained`), else (or with `backbone="tiny"`) a tiny random Llama (a smoke run: it cannot learn
MultiRC, so its premise is absent).
"""

from __future__ import annotations

import copy
import hashlib
import math
import time
from dataclasses import asdict, dataclass, field

import torch

from hf_ext.core.reporting import (
    CONFIRMED,
    PairedDifference,
    Premise,
    VerdictRule,
    paired_difference,
    print_rules,
    sample_sd,
    summarize,
)

from .arguments import FlLlamaTrainingArguments, PartOptimizer, apply_lora
from .data import (
    answer_token_ids,
    corpus,
    encode_cloze,
    encode_cloze_window,
    iter_batches,
    load_multirc,
    train_tokenizer,  # fmt: skip
)
from .evaluation import evaluate
from .modeling_fl_llama import causal_mask_4d, position_ids_from_mask, split_llama
from .noise_log import NOISE_LOG, arm_id, noise_run_log
from .parallel import build_setup, train

BACKBONES = ("auto", "smollm2", "tiny")
CHANCE_AUC = 0.5


@dataclass
class NoiseVerdictArguments:
    """Sizes of the noise-verdict experiment (`scale="full"`: `--full` and `--noise_verdict`, sized for the whole
    `--full` to stay within 60 min on 2 idle cores; `"smoke"`: a seconds-long check on the tiny random Llama).

    Args:
        backbone (`str`): `"smollm2"`, `"tiny"` or `"auto"` (SmolLM2 where it ships offline, else tiny).
        seeds (`list[int]`): paired seeds (≥ 2 for an interval; 3 by default).
        depths (`list[int]`): client input blocks `a` compared (1 and 3, as in the paper's noise study).
        output_blocks (`int`): client output blocks `c`.
        noise_multiple (`float`): `s / mean|h_A|` of the noisy arm.
    """

    backbone: str = "auto"
    scale: str = "full"
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    depths: list[int] = field(default_factory=lambda: [1, 3])
    output_blocks: int = 2
    noise_multiple: float = 1.0
    train_passages: int = 456
    eval_examples: int = 200
    eval_seed: int = 0  # the validation sample: one for every seed and arm
    train_steps: int = 40
    batch_size: int = 4
    max_length: int = 128
    learning_rate: float = 5e-4
    lora_rank: int = 8
    lora_alpha: float = 16.0
    max_grad_norm: float = 1.0
    n_resamples: int = 2000
    confidence: float = 0.95

    def __post_init__(self):
        name = "NoiseVerdictArguments"
        if self.backbone not in BACKBONES:
            raise ValueError(f"{name}.backbone must be one of {BACKBONES}, got {self.backbone!r}")
        if self.scale not in ("full", "smoke"):
            raise ValueError(f"{name}.scale must be 'full' or 'smoke', got {self.scale!r}")
        if self.scale == "smoke":
            self.train_passages, self.eval_examples, self.train_steps = 40, 48, 4
            self.max_length, self.n_resamples = 48, 200
        for key in ("seeds", "depths"):
            values = getattr(self, key)
            if not values or any(isinstance(v, bool) or not isinstance(v, int) for v in values):
                raise ValueError(f"{name}.{key} must be a non-empty list of integers, got {values!r}")
            if len(set(values)) != len(values):
                raise ValueError(f"{name}.{key} must not repeat a value, got {values!r}")
        if min(self.seeds) < 0 or min(self.depths) < 1:
            raise ValueError(f"{name}: seeds must be >= 0 and depths >= 1, got {self.seeds!r}, {self.depths!r}")
        for key in ("output_blocks", "train_passages", "eval_examples", "train_steps", "batch_size", "max_length",
                    "lora_rank"):  # fmt: skip
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}.{key} must be an integer >= 1, got {value!r}")
        for key in ("noise_multiple", "learning_rate", "lora_alpha", "max_grad_norm"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name}.{key} must be a finite number > 0, got {value!r}")
        if isinstance(self.n_resamples, bool) or not isinstance(self.n_resamples, int) or self.n_resamples < 100:
            raise ValueError(f"{name}.n_resamples must be an integer >= 100, got {self.n_resamples!r}")


# ---- rules -----------------------------------------------------------------------------------------------------------

PREMISE_RULE = VerdictRule(
    claim="positive control: centralised LoRA fine-tuning learns the yes/no task",
    metric="validation AUC − 0.5 (chance), mean over seeds",
    margin=0.0,
)
PREMISE_TEXT = "centralised AUC above chance (0.5), the 95 % interval over prompts entirely above it"


def noise_rule(a: int, noise_multiple: float = 1.0) -> VerdictRule:
    """The claim tested at depth `a`: split `s = 0` beats split `s = noise_multiple x mean|h_A|` on AUC."""
    return VerdictRule(
        claim=(
            f"noise s = {noise_multiple:g} x mean|h_A| costs task quality at a = {a}: split s = 0 beats split "
            f"s = {noise_multiple:g}x (paper: at noise 0.1 the a = 1 split drops, a = 3 is robust)"
        ),
        metric="validation AUC, seed mean on the same prompts",
        margin=0.0,
        premise=PREMISE_TEXT,
    )


def noise_rules(args: NoiseVerdictArguments) -> list[VerdictRule]:
    """The premise rule, then one noise rule per depth (the order in which they are printed and decided)."""
    return [PREMISE_RULE, *[noise_rule(a, args.noise_multiple) for a in args.depths]]


def print_noise_rules(args: NoiseVerdictArguments) -> list[str]:
    """Prints the rules (before any run starts) and the paired-bootstrap design they are decided with."""
    lines = print_rules(noise_rules(args))
    line = (f"[rule] intervals: stratified paired bootstrap over the same {args.eval_examples} validation prompts "
            f"({args.n_resamples} resamples, the same draw for every arm and seed) of the seed-mean AUC difference; "
            f"seeds {args.seeds}, depths a = {args.depths}, c = {args.output_blocks}")  # fmt: skip
    print(line, flush=True)
    return [*lines, line]


# ---- the paired AUC bootstrap --------------------------------------------------------------------------------------


def _pair_matrix(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """`W[i, j] = 1[pos_i > neg_j] + ½·1[pos_i = neg_j]`: the AUC is its mean (Mann-Whitney)."""
    pos, neg = scores[labels.bool()], scores[~labels.bool()]
    diff = pos[:, None] - neg[None, :]
    return (diff > 0).double() + 0.5 * (diff == 0).double()


def auc_difference(a_runs, b_runs, labels, *, n_resamples: int = 2000, seed: int = 0,
                   confidence: float = 0.95) -> PairedDifference:  # fmt: skip
    """Seed-mean `AUC(a) − AUC(b)` over paired runs scored on the same prompts, with a stratified paired bootstrap
    interval over the prompts.

    Args:
        a_runs, b_runs: per seed, the scores of every prompt (the same prompts in the same order); `b_runs=None`
            compares against chance (AUC 0.5).
        labels: the prompts' 0/1 labels.

    Each replicate draws `n_pos` positives and `n_neg` negatives with replacement — one draw shared by every arm and
    seed — and recomputes the contrast. The AUC of a replicate with counts `p` (positives) and `q` (negatives) is
    `pᵀ W q / (n_pos·n_neg)`, so the seed-mean contrast is one matrix `W̄ = mean_k (W_a,k − W_b,k)` and all replicates
    cost one product. `per_pair` holds the per-seed differences, `sd` their sample SD, `n` the number of seeds
    (below two: no interval, as [`~hf_ext.core.reporting.VerdictRule.decide`] requires)."""
    labels = torch.as_tensor(labels).long()
    if b_runs is not None and len(a_runs) != len(b_runs):
        raise ValueError(f"paired arms need the same seeds, got {len(a_runs)} and {len(b_runs)} runs")
    n_pos, n_neg = int(labels.sum()), int((1 - labels).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("labels must contain both classes for an AUC")
    mats, per_seed = [], []
    for k, a in enumerate(a_runs):
        a = torch.as_tensor(a, dtype=torch.float64)
        if len(a) != len(labels):
            raise ValueError(f"run {k} scored {len(a)} prompts, the labels have {len(labels)}")
        w = _pair_matrix(a, labels)
        if b_runs is not None:
            b = torch.as_tensor(b_runs[k], dtype=torch.float64)
            if len(b) != len(labels):
                raise ValueError(f"run {k} of the reference scored {len(b)} prompts, the labels have {len(labels)}")
            w = w - _pair_matrix(b, labels)
        else:
            w = w - CHANCE_AUC
        mats.append(w)
        per_seed.append(float(w.mean()))
    n = len(per_seed)
    mean = sum(per_seed) / n
    if n < 2:
        return PairedDifference(mean, math.nan, n, math.nan, math.nan, confidence, tuple(per_seed), "bootstrap")
    w_bar = torch.stack(mats).mean(0)
    g = torch.Generator().manual_seed(seed)
    p = torch.zeros(n_resamples, n_pos, dtype=torch.float64)
    q = torch.zeros(n_resamples, n_neg, dtype=torch.float64)
    p.scatter_add_(
        1, torch.randint(n_pos, (n_resamples, n_pos), generator=g), torch.ones(n_resamples, n_pos, dtype=torch.float64)
    )
    q.scatter_add_(
        1, torch.randint(n_neg, (n_resamples, n_neg), generator=g), torch.ones(n_resamples, n_neg, dtype=torch.float64)
    )
    reps = sorted((((p @ w_bar) * q).sum(1) / (n_pos * n_neg)).tolist())
    alpha = (1.0 - confidence) / 2.0
    lo = reps[max(0, int(math.floor(alpha * n_resamples)))]
    hi = reps[min(n_resamples - 1, int(math.ceil((1.0 - alpha) * n_resamples)) - 1)]
    return PairedDifference(mean, sample_sd(per_seed), n, lo, hi, confidence, tuple(per_seed), "bootstrap")


# ---- deciding ---------------------------------------------------------------------------------------------------


def _select(runs: list[dict], seeds: list[int], **match) -> list[dict]:
    out = []
    for s in seeds:
        found = [r for r in runs if r["seed"] == s and all(r.get(k) == v for k, v in match.items())]
        if len(found) != 1:
            raise ValueError(f"expected one run with seed {s} and {match}, found {len(found)}")
        out.append(found[0])
    return out


def decide_noise_verdict(runs: list[dict], labels, args: NoiseVerdictArguments) -> dict:
    """The premise, then one verdict per depth, from the runs (each a dict with `setting` (`"centralized"` /
    `"split"`), `seed`, `a`, `noise_multiple`, `margins` — the score of every validation prompt — and `auc`).

    Returns `{"premise": Verdict, "verdicts": [Verdict per depth], "differences": {...}}`; the differences are
    [`auc_difference`]s (seed-mean, bootstrap over prompts) plus the per-seed Student-t view."""
    boot = dict(n_resamples=args.n_resamples, seed=0, confidence=args.confidence)
    central = _select(runs, args.seeds, setting="centralized")
    above = auc_difference([r["margins"] for r in central], None, labels, **boot)
    premise_verdict = PREMISE_RULE.decide(above)
    premise = Premise(PREMISE_TEXT, premise_verdict.verdict == CONFIRMED, premise_verdict.reason)
    differences = {"centralized_minus_chance": above}
    verdicts = []
    for a, rule in zip(args.depths, noise_rules(args)[1:], strict=True):
        zero = _select(runs, args.seeds, setting="split", a=a, noise_multiple=0.0)
        noisy = _select(runs, args.seeds, setting="split", a=a, noise_multiple=args.noise_multiple)
        d = auc_difference([r["margins"] for r in zero], [r["margins"] for r in noisy], labels, **boot)
        differences[f"a{a}_s0_minus_noisy"] = d
        differences[f"a{a}_s0_minus_noisy_seed_t"] = paired_difference([r["auc"] for r in zero],
                                                                       [r["auc"] for r in noisy])  # fmt: skip
        differences[f"a{a}_s0_minus_centralized"] = auc_difference(
            [r["margins"] for r in zero], [r["margins"] for r in central], labels, **boot
        )
        verdicts.append(rule.decide(d, premise))
    return {"premise": premise_verdict, "verdicts": verdicts, "differences": differences}


# ---- running -------------------------------------------------------------------------------------------------------


def _fingerprint(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def load_backbone(args: NoiseVerdictArguments) -> dict:
    """The model, tokenizer, training data and the fixed validation sample for `args.backbone`."""
    from hf_ext.core.pretrained import load_smollm2, smollm2_available

    backbone = args.backbone
    if backbone == "auto":
        backbone = "smollm2" if smollm2_available() else "tiny"
    train_ex = load_multirc("train", limit=args.train_passages)
    val_ex = load_multirc("val")
    g = torch.Generator().manual_seed(args.eval_seed)
    val_ex = [val_ex[i] for i in torch.randperm(len(val_ex), generator=g)[: args.eval_examples].tolist()]
    if backbone == "smollm2":
        model, tok = load_smollm2()
        tok.padding_side = "left"
        name = "SmolLM2-135M-Instruct"
        data = encode_cloze_window(tok, train_ex, args.max_length)
        val = encode_cloze_window(tok, val_ex, args.max_length)
        fits = {"train_fit_share": float(data.pop("fits").float().mean()),
                "val_fit_share": float(val.pop("fits").float().mean())}  # fmt: skip
    else:
        from .presets import tiny_llama

        tok = train_tokenizer(corpus(train_ex, 60))
        model = tiny_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id, seed=0)
        name = "tiny random Llama (smoke: cannot learn MultiRC)"
        data, val, fits = encode_cloze(tok, train_ex, args.max_length), encode_cloze(tok, val_ex, args.max_length), {}
    model.eval()
    return {"model": model, "tokenizer": tok, "backbone": backbone, "name": name, "train": data, "val": val, **fits}


@torch.no_grad()
def _mean_abs_head(client, val: dict, rows: int = 16) -> float:
    """mean |h_A| over the real tokens of the first validation prompts (the scale the noise is relative to)."""
    mask = val["attention_mask"][:rows].bool()
    h = client.head(val["input_ids"][:rows], causal_mask_4d(mask, mask.shape[1]), position_ids_from_mask(mask))
    return float(h[mask].abs().mean())


def _targs(args: NoiseVerdictArguments, seed: int, split: bool) -> FlLlamaTrainingArguments:
    return FlLlamaTrainingArguments(learning_rate=args.learning_rate, max_steps=args.train_steps, seed=seed,
                                    max_grad_norm=args.max_grad_norm, global_clip=split)  # fmt: skip


def _train_centralized(model, batches, args: NoiseVerdictArguments, seed: int) -> tuple[object, list[float]]:
    from .reproduce_smollm2 import _Centralized

    torch.manual_seed(seed)  # LoRA initialisation and dropout draws
    central = copy.deepcopy(model)
    params = apply_lora(central, [f"model.layers.{i}" for i in range(model.config.num_hidden_layers)],
                        args.lora_rank, args.lora_alpha, 0.05, ["q_proj", "k_proj", "v_proj", "o_proj"])  # fmt: skip
    central.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    opt, wrapped, losses = PartOptimizer(params, _targs(args, seed, split=False)), _Centralized(central), []
    central.train()
    for b in batches:
        loss = wrapped(b["input_ids"], b["attention_mask"], b["labels"], logits_to_keep=2).loss
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return wrapped, losses


def run_noise_verdict(args: NoiseVerdictArguments, log=print, backbone: dict | None = None,
                      log_path=None, resume: bool = False) -> dict:  # fmt: skip
    """Trains and scores every arm (see the module docstring), then decides. Returns the runs, the per-depth
    `mean|h_A|`, the differences and the verdicts (as dicts) and `"_verdicts"` (the `Verdict` objects). With
    `log_path`, every finished arm goes to a run log there ([`~hf_ext.fl_llama.noise_log.noise_run_log`]); with
    `resume` too, arms already in it are reused, not trained."""
    from hf_ext.core.devices import torch_device

    from .reproduce_smollm2 import _Centralized

    start = time.perf_counter()
    # `--device` (`$HF_EXT_DEVICE`): every arm trains and scores there; the fingerprints, the labels and the
    # bootstrap stay on the CPU, and the noise comes from CPU generators, so a seed draws the same noise anywhere
    device = torch.device(torch_device())
    bb = backbone or load_backbone(args)
    model, tok, data, val = bb["model"].to(device), bb["tokenizer"], bb["train"], bb["val"]
    yes, no = answer_token_ids(tok)
    labels = val["label"].clone()
    score_data = {k: v for k, v in val.items() if k != "fits"}
    eval_print = _fingerprint(score_data["input_ids"], score_data["attention_mask"], labels)
    score_data = {k: v.to(device) for k, v in score_data.items()}
    majority = max(float(labels.float().mean()), 1 - float(labels.float().mean()))
    scale = {}
    for a in args.depths:
        probe, _ = split_llama(model, a, args.output_blocks)
        scale[a] = _mean_abs_head(probe, score_data)
        del probe

    def score(m):
        return evaluate(m, score_data, yes, no, batch_size=8, logits_to_keep=2, per_item=True)

    run_log = noise_run_log(log_path, args, bb["name"], str(device), reuse=resume) if log_path is not None else None

    def logged(setting: str, seed, a, mult: float) -> dict | None:
        record = run_log.get(**arm_id(setting, seed, a, mult)) if run_log is not None else None
        run = record["run"] if record is not None else None
        if run is not None:
            runs.append(run)
            log(f"seed {seed} {setting}{'' if a is None else f' a = {a} s = {mult:g}x'}: AUC {run['auc']:.3f} "
                f"(from {run_log.path.name})")  # fmt: skip
        return run

    def finished(run: dict) -> None:
        runs.append(run)
        if run_log is not None:
            run_log.add(arm_id(run["setting"], run["seed"], run["a"], run["noise_multiple"]), run=run)

    runs: list[dict] = []
    if logged("pretrained", None, None, 0.0) is None:
        t0 = time.perf_counter()
        finished({"setting": "pretrained", "seed": None, "a": None, "noise_multiple": 0.0, "eval_prompts": eval_print,
                  **score(_Centralized(model)), "seconds": time.perf_counter() - t0})  # fmt: skip
        log(f"pretrained: AUC {runs[-1]['auc']:.3f}")
    for seed in args.seeds:
        batches = list(iter_batches(data, args.batch_size, seed=seed, steps=args.train_steps))
        order = _fingerprint(*[b["input_ids"] for b in batches])
        batches = [{k: v.to(device) for k, v in b.items()} for b in batches]
        if logged("centralized", seed, None, 0.0) is None:
            t0 = time.perf_counter()
            wrapped, losses = _train_centralized(model, batches, args, seed)
            finished({"setting": "centralized", "seed": seed, "a": None, "noise_multiple": 0.0, "s": 0.0,
                      "sigma": 0.0, "train_order": order, "eval_prompts": eval_print,
                      "final_train_loss": _tail(losses), **score(wrapped),
                      "seconds": time.perf_counter() - t0})  # fmt: skip
            del wrapped
            log(f"seed {seed} centralized: AUC {runs[-1]['auc']:.3f} ({runs[-1]['seconds']:.0f} s)")
        for a in args.depths:
            for mult in (0.0, args.noise_multiple):
                if logged("split", seed, a, mult) is not None:
                    continue
                t0 = time.perf_counter()
                torch.manual_seed(seed)  # the same LoRA initialisation and dropout draws for s = 0 and s > 0
                setup = build_setup(model, a, args.output_blocks, mult * scale[a], args=_targs(args, seed, True),
                                    lora_rank=args.lora_rank, lora_alpha=args.lora_alpha)  # fmt: skip
                client = setup.clients[0]
                losses = train(setup, [batches], logits_to_keep=2)["losses"][0]
                sigma = float(client.client.config.noise_std)
                finished({"setting": "split", "seed": seed, "a": a, "c": args.output_blocks,
                          "noise_multiple": mult, "mean_abs_h_a": scale[a], "s": mult * scale[a], "sigma": sigma,
                          "sigma_relative": sigma / scale[a],
                          "mean_abs_h_a_trained": _mean_abs_head(client.client, score_data),
                          "noise_seed": client.args.seed, "train_order": order, "eval_prompts": eval_print,
                          "final_train_loss": _tail(losses), **score(client),
                          "seconds": time.perf_counter() - t0})  # fmt: skip
                del setup, client
                log(f"seed {seed} split a = {a} s = {mult:g}x (σ = {sigma:.4g}): AUC {runs[-1]['auc']:.3f} "
                    f"({runs[-1]['seconds']:.0f} s)")  # fmt: skip
    decided = decide_noise_verdict(runs, labels, args)
    out = {
        "args": asdict(args),
        "backbone": bb["name"],
        "device": str(device),
        **({"runs_from_log": run_log.reused} if run_log is not None and run_log.reused else {}),
        "val_examples": len(labels),
        "val_positives": int(labels.sum()),
        "majority_rate": majority,
        "train_fit_share": bb.get("train_fit_share"),
        "val_fit_share": bb.get("val_fit_share"),
        "mean_abs_h_a": {str(a): v for a, v in scale.items()},
        "labels": labels.tolist(),
        "runs": runs,
        "summary": summary_rows(runs, args),
        "differences": {k: v.to_dict() for k, v in decided["differences"].items()},
        "premise": decided["premise"].to_dict(),
        "verdicts": [v.to_dict() for v in decided["verdicts"]],
        "wall_s": time.perf_counter() - start,
    }
    out["_verdicts"] = [decided["premise"], *decided["verdicts"]]
    return out


def _tail(xs: list[float], n: int = 10) -> float:
    return sum(xs[-n:]) / len(xs[-n:])


def summary_rows(runs: list[dict], args: NoiseVerdictArguments) -> list[dict]:
    """One row per arm: AUC and accuracy as mean ± sample SD over seeds, and the noise in both terms."""
    arms = [("centralized", None, 0.0)]
    arms += [("split", a, m) for a in args.depths for m in (0.0, args.noise_multiple)]
    rows = []
    for setting, a, mult in arms:
        sel = [r for r in runs if r["setting"] == setting and r.get("a") == a and r["noise_multiple"] == mult]
        if not sel:
            continue
        sigma = sel[0].get("sigma", 0.0)
        rows.append({"setting": setting, "a": a, "noise_multiple": mult, "s": sel[0].get("s", 0.0), "sigma": sigma,
                     "mean_abs_h_a": sel[0].get("mean_abs_h_a"), "sigma_relative": sel[0].get("sigma_relative", 0.0),
                     "auc": summarize([r["auc"] for r in sel]).to_dict(),
                     "accuracy": summarize([r["accuracy"] for r in sel]).to_dict(),
                     "final_train_loss": summarize([r["final_train_loss"] for r in sel]).to_dict(),
                     "seeds": [r["seed"] for r in sel]})  # fmt: skip
    return rows


def _cell(d: dict, digits: int = 3) -> str:
    if d["n"] < 2 or d["sd"] is None:
        return f"{d['mean']:.{digits}f} (n = {d['n']})"
    return f"{d['mean']:.{digits}f} ± {d['sd']:.{digits}f}"


def _diff_cell(d: dict) -> str:
    if d["ci_low"] is None:
        return f"{d['mean']:+.3f} (n = {d['n']}, no interval)"
    sd = f" ± {d['sd']:.3f}" if d["sd"] is not None else ""
    return f"{d['mean']:+.3f}{sd} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"


def noise_report_tables(out: dict) -> list[dict]:
    """What the docs renderer reads of a noise verdict (`hf_ext.core.results_render.table`): the arms (AUC, accuracy
    and final training loss as mean ± SD over seeds; the noise in absolute and relative terms) and the paired
    differences, as [`print_noise_table`] prints them."""
    from hf_ext.core.results_render import table

    a = out["args"]
    pre = next(r for r in out["runs"] if r["setting"] == "pretrained")
    arms = [
        [
            "centralized" if r["setting"] == "centralized" else f"split a={r['a']} c={a['output_blocks']}",
            f"{r['noise_multiple']:g}",
            "—" if r["mean_abs_h_a"] is None else f"{r['mean_abs_h_a']:.4g}",
            f"{r['sigma']:.4g}",
            f"{r['sigma_relative']:.4g}",
            _cell(r["auc"]),
            _cell(r["accuracy"]),
            _cell(r["final_train_loss"]),
        ]
        for r in out["summary"]
    ]
    title = (
        f"Noise verdict on {out['backbone']}: {len(a['seeds'])} seeds, {a['train_steps']} LoRA steps of "
        f"B = {a['batch_size']} at L = {a['max_length']}, lr {a['learning_rate']:g}; {out['val_examples']} "
        f"validation prompts ({out['val_positives']} yes), majority rate {out['majority_rate']:.3f}, "
        f"pretrained AUC {pre['auc']:.3f}"
    )
    columns = ["arm", "s / mean|h_A|", "mean|h_A|", "σ (abs)", "σ / mean|h_A|", "val AUC", "val acc", "train loss"]
    diffs = [[k, _diff_cell(d)] for k, d in out["differences"].items()]
    return [
        table(title, columns, arms),
        table("Noise verdict: paired differences (seed mean ± SD [95 % interval])", ["difference", "value"], diffs),
    ]


def print_noise_table(out: dict, file=None) -> None:
    """The verdict table: per arm AUC / accuracy (mean ± SD over seeds), σ absolute and relative; the paired
    differences with their intervals; the verdict lines."""
    a = out["args"]
    pre = next(r for r in out["runs"] if r["setting"] == "pretrained")
    smoke = " — SMOKE RUN (too small to decide anything)" if a["scale"] == "smoke" else ""
    print(f"(N) noise verdict on {out['backbone']}{smoke}: {len(a['seeds'])} seeds {a['seeds']}, "
          f"{a['train_steps']} LoRA steps of B = {a['batch_size']} at L = {a['max_length']}, "
          f"lr {a['learning_rate']:g}, "
          f"global clip {a['max_grad_norm']:g}; {out['val_examples']} validation prompts ({out['val_positives']} yes), "
          f"majority rate {out['majority_rate']:.3f}, pretrained AUC {pre['auc']:.3f}; {out['wall_s']:.0f} s",
          file=file)  # fmt: skip
    print("    arm                 s/mean|h_A|  mean|h_A|  σ (abs)   σ/mean|h_A|  val AUC          val acc          "
          "train loss", file=file)  # fmt: skip
    for r in out["summary"]:
        arm = "centralized" if r["setting"] == "centralized" else f"split a={r['a']} c={a['output_blocks']}"
        scale = "—" if r["mean_abs_h_a"] is None else f"{r['mean_abs_h_a']:.4g}"
        print(f"    {arm:<19} {r['noise_multiple']:<12g} {scale:<10} {r['sigma']:<9.4g} {r['sigma_relative']:<12.4g} "
              f"{_cell(r['auc']):<16} {_cell(r['accuracy']):<16} {_cell(r['final_train_loss'])}",
              file=file)  # fmt: skip
    print("    paired differences, seed mean ± SD over seeds [95 % bootstrap interval over prompts]:", file=file)
    for k, d in out["differences"].items():
        kind = "(Student-t over seeds)" if k.endswith("_seed_t") else ""
        print(f"      {k:<34} {_diff_cell(d)} {kind}", file=file)
    for v in [out["premise"], *out["verdicts"]]:
        print(f"[verdict] {v['claim']}: {v['verdict'].upper()} ({v['reason']})", file=file)


__all__ = [
    "BACKBONES",
    "NOISE_LOG",
    "PREMISE_RULE",
    "NoiseVerdictArguments",
    "auc_difference",
    "decide_noise_verdict",
    "load_backbone",
    "noise_report_tables",
    "noise_rule",
    "noise_rules",
    "print_noise_rules",
    "print_noise_table",
    "run_noise_verdict",
    "summary_rows",
]
