"""The client's view of a split LLaMA: [`FlLlamaSplitForCausalLM`] runs part A, adds the noise, sends `h̃_A` through
a transport, runs part C and the loss on the server's `h_B`, and exposes `forward`, a training step, `generate`
(with a KV cache held by each party, or the no-cache baseline) and a resumable checkpoint.

The boundary is a `torch.autograd.Function`: its forward sends `h̃_A` and receives `h_B`; its backward sends
`g_B = ∂loss/∂h_B` (optionally clipped per sample and noised) and returns the server's `g_A = ∂loss/∂h̃_A`,
which autograd carries into part A (the noise is additive, so the Jacobian of `h̃_A` w.r.t. `h_A` is the identity). One
`loss.backward()` therefore runs steps 3-5 of the protocol, and a plain `transformers.Trainer` can drive it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn
from transformers import DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast

from .arguments import FlLlamaTrainingArguments, PartOptimizer, apply_lora
from .modeling_fl_llama import FlLlamaClientModel, causal_mask_4d, position_ids_from_mask, to_additive
from .transport import FLOAT_DTYPES, ProtocolError, Tensors, Transport, expect_tensor


def _reply_tensor(tensors: Tensors, name: str, method: str, shape: tuple[int, ...]) -> torch.Tensor:
    """The server's reply tensor `name`, checked like the server checks what it receives (rank, float dtype, every
    size): a server that answers with the wrong shape fails here, naming the message, not deep inside part C."""
    try:
        return expect_tensor(tensors, name, ndim=len(shape), dtype=FLOAT_DTYPES, shape=dict(enumerate(shape)))
    except ProtocolError as exc:
        raise ProtocolError(f"server's reply to {method!r} is malformed: {exc}") from exc


class _Boundary(torch.autograd.Function):
    """`h_B = B(h̃_A)` computed by the server; backward exchanges `g_B` for `g_A` over the transport."""

    @staticmethod
    def forward(ctx, h_send, split, extra: dict, train: bool):
        out, _ = split.transport.call("forward", {"hidden": h_send, **extra}, {"client_id": split.client_id,
                                                                              "train": train})  # fmt: skip
        ctx.split, ctx.shape = split, tuple(h_send.shape)
        return _reply_tensor(out, "hidden", "forward", ctx.shape).to(h_send.dtype)

    @staticmethod
    def backward(ctx, grad_b):
        split = ctx.split
        out, _ = split.transport.call("backward", {"grad": split.privatize_gradient(grad_b)},
                                      {"client_id": split.client_id})  # fmt: skip
        return _reply_tensor(out, "grad", "backward", ctx.shape).to(grad_b.dtype), None, None, None


class FlLlamaSplitForCausalLM(nn.Module):
    """A client's split model: parts A and C locally, part B behind `transport`.

    Args:
        client ([`FlLlamaClientModel`]): the client's parts (its config holds `(a, c)`, the noise scale, LoRA).
        transport ([`~hf_ext.fl_llama.transport.Transport`]): the wire to the server.
        args ([`FlLlamaTrainingArguments`], *optional*): optimisation of parts A and C (one AdamW each).
        client_id (`str`): this client's id (the server keeps per-client state between forward and backward).
        compress_mask (`bool`): send `n_real` (B integers) instead of the B x 1 x L x L additive mask.
    """

    def __init__(self, client: FlLlamaClientModel, transport: Transport, args: FlLlamaTrainingArguments | None = None,
                 client_id: str = "0", compress_mask: bool = True):  # fmt: skip
        super().__init__()
        self.client, self.transport, self.client_id = client, transport, str(client_id)
        self.compress_mask = compress_mask
        self.args = args or FlLlamaTrainingArguments()
        self.noise_generator = torch.Generator().manual_seed(self.args.seed)
        self.head_params, self.tail_params = self._prepare_parameters()
        self.head_optimizer = PartOptimizer(self.head_params, self.args)
        self.tail_optimizer = PartOptimizer(self.tail_params, self.args)
        self.steps = 0

    @property
    def config(self):
        return self.client.config

    def _prepare_parameters(self) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
        cfg, m = self.client.config, self.client
        k, a, c = int(cfg.client_stored_blocks), cfg.num_input_blocks, cfg.num_output_blocks
        head_blocks, tail_blocks = [f"head_layers.{i}" for i in range(a)], [f"tail_layers.{i}" for i in range(k - c, k)]
        m.requires_grad_(False)
        if cfg.lora_rank > 0:
            # Only the adapters of the parts listed in lora_parts train; a part left out stays frozen (the server
            # does the same for the body), so an empty list here is expected and PartOptimizer skips it.
            head_blocks = head_blocks if "head" in cfg.lora_parts else []
            tail_blocks = tail_blocks if "tail" in cfg.lora_parts else []
            params = [(n, p) for n, p in m.named_parameters() if "lora_" in n]
            if not params and head_blocks + tail_blocks:  # one injection for both parts (a second one makes PEFT warn)
                apply_lora(m, head_blocks + tail_blocks, cfg.lora_rank, cfg.lora_alpha, cfg.lora_dropout,
                           cfg.lora_target_modules)  # fmt: skip
                params = [(n, p) for n, p in m.named_parameters() if "lora_" in n]
            head = [p for n, p in params if n.split(".self_attn")[0].split(".mlp")[0] in head_blocks]
            tail = [p for n, p in params if n.split(".self_attn")[0].split(".mlp")[0] in tail_blocks]
        else:
            head = [m.embed_tokens.weight] + [p for layer in m.active_head_layers for p in layer.parameters()]
            seen = {id(p) for p in head}  # a tied lm_head is the embedding matrix: trained once, by part A
            tail = [p for layer in m.active_tail_layers for p in layer.parameters()] + [m.norm.weight]
            tail += [m.lm_head.weight] if id(m.lm_head.weight) not in seen else []
        for p in head + tail:
            p.requires_grad_(True)
        return head, tail

    # ---- what leaves the client --------------------------------------------------------------------------------
    def add_noise(self, hidden: torch.Tensor) -> torch.Tensor:
        """`h̃ = h + ε`, `ε ~ N(0, σ²)`, `σ = s·sqrt(π/2)` (a detached copy; no noise when `s = 0`)."""
        sigma = self.client.config.noise_std
        out = hidden.detach()
        if sigma > 0:
            out = out + sigma * torch.randn(out.shape, generator=self.noise_generator, dtype=out.dtype)
        return out

    def privatize_gradient(self, grad: torch.Tensor) -> torch.Tensor:
        """Optional DP on `g_B`: per-sample L2 clip to `dp_grad_clip`, then `N(0, σ²)` (`--add_DP_gradient`)."""
        if not self.args.dp_gradient:
            return grad
        norms = grad.flatten(1).norm(dim=1).clamp(min=1e-12)
        grad = grad * (self.args.dp_grad_clip / norms).clamp(max=1.0)[:, None, None]
        noise = torch.randn(grad.shape, generator=self.noise_generator, dtype=grad.dtype)
        return grad + self.client.config.noise_std * noise

    # ---- training ----------------------------------------------------------------------------------------------
    def forward(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
                labels: torch.LongTensor | None = None, **kwargs) -> CausalLMOutputWithPast:  # fmt: skip
        """Split forward of a left-padded batch; `loss` when `labels` (`-100` = ignored) are given."""
        mask2d = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        length = input_ids.shape[1]
        mask4d = causal_mask_4d(mask2d, length)
        pos = position_ids_from_mask(mask2d)
        h_a = self.client.head(input_ids, mask4d, pos)
        h_send = self.add_noise(h_a) + (h_a - h_a.detach())  # value exactly h̃_A, gradient identity into h_A
        extra = {"position_ids": pos}
        extra.update({"n_real": mask2d.sum(-1).long()} if self.compress_mask else {"mask": to_additive(mask4d)})
        # The server trains (keeps B's graph for a backward) whenever gradients are on, whether or not part A has
        # anything to train: B may have trainable parameters of its own. With a frozen part A, a leaf that requires
        # grad still routes loss.backward() through the boundary to B; the g_A it receives is then unused.
        train = torch.is_grad_enabled()
        if train and not h_send.requires_grad:
            h_send = h_send.detach().requires_grad_(True)
        h_b = _Boundary.apply(h_send, self, extra, train)
        return self.client.tail(h_b, mask4d, pos, labels=labels)

    def train_step(self, batch: dict[str, torch.Tensor]) -> float:
        """One protocol step (forward A -> B -> C, loss, backward C -> B -> A, one optimiser step per part).

        The client steps A and C only once the server has returned `g_A`, so a step interrupted by a lost server or
        a rejected message leaves the client exactly as it was (gradients are dropped, the error is re-raised).
        """
        self.client.train()
        try:
            out = self(batch["input_ids"], batch.get("attention_mask"), batch["labels"])
            out.loss.backward()
        except BaseException:
            self.head_optimizer.zero_grad(), self.tail_optimizer.zero_grad()
            raise
        self.tail_optimizer.step()
        self.head_optimizer.step()
        self.steps += 1
        return float(out.loss.detach())

    # ---- generation --------------------------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, input_ids: torch.LongTensor, max_new_tokens: int = 16, use_cache: bool = True,
                 do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0,
                 eos_token_id: int | None = None, generator: torch.Generator | None = None,
                 session: str = "0") -> torch.LongTensor:  # fmt: skip
        """Split generation, batch 1 (padding removed, as in the official code).

        With `use_cache=True` each party keeps its own `DynamicCache`: the client sends the prefix's `h̃_A` once
        (prefill), then one `1 x 1 x d` vector and a position per new token. With `use_cache=False` (the FL-GLM-style
        baseline) the client resends the whole prefix's hidden states and its `1 x 1 x T x T` mask every step.
        """
        if input_ids.ndim != 2 or input_ids.shape[0] != 1:
            raise ValueError(f"split generation runs with batch 1, got input_ids of shape {tuple(input_ids.shape)}")
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        self.client.eval()
        ids = input_ids.clone()
        caches = (DynamicCache(), DynamicCache()) if use_cache else None
        step_ids = ids
        for t in range(max_new_tokens):
            total = ids.shape[1]
            if use_cache:
                q = step_ids.shape[1]
                pos = torch.arange(total - q, total)[None]
                mask4d = causal_mask_4d(torch.ones(1, total, dtype=torch.bool), q)
                h_a = self.client.head(step_ids, mask4d, pos, caches[0])
                method = "prefill" if t == 0 else "decode"
                meta = {"session": session} if t == 0 else {"session": session, "position": total - 1}
                out, _ = self.transport.call(method, {"hidden": self.add_noise(h_a)}, meta)
                h_b = _reply_tensor(out, "hidden", method, tuple(h_a.shape)).to(h_a.dtype)
                logits = self.client.tail(h_b, mask4d, pos, cache=caches[1]).logits[:, -1]
            else:
                mask4d = causal_mask_4d(torch.ones(1, total, dtype=torch.bool), total)
                pos = torch.arange(total)[None]
                h_a = self.client.head(ids, mask4d, pos)
                sent = {"hidden": self.add_noise(h_a), "mask": to_additive(mask4d)}
                out, _ = self.transport.call("forward_full", sent, {"session": session})
                h_b = _reply_tensor(out, "hidden", "forward_full", tuple(h_a.shape)).to(h_a.dtype)
                logits = self.client.tail(h_b, mask4d, pos).logits[:, -1]
            nxt = _next_token(logits, do_sample, temperature, top_p, generator)
            ids = torch.cat([ids, nxt], dim=1)
            step_ids = nxt
            if eos_token_id is not None and int(nxt) == eos_token_id:
                break
        if use_cache and max_new_tokens > 0:
            self.transport.call("end", meta={"session": session})
        return ids

    # ---- checkpoints -------------------------------------------------------------------------------------------
    def save_checkpoint(self, path: str | Path) -> Path:
        """The client's weights, both optimisers, the noise generator and the step count (safetensors + JSON),
        written atomically; [`load_checkpoint`] resumes from it."""
        from hf_ext.core.hub import atomic_write_dir

        def write(tmp: Path) -> None:
            save_model(self.client, str(tmp / "client.safetensors"))
            opt = {**self.head_optimizer.state_tensors("head"), **self.tail_optimizer.state_tensors("tail"),
                   "noise_generator": self.noise_generator.get_state()}  # fmt: skip
            save_file(opt, str(tmp / "optimizer.safetensors"))
            (tmp / "trainer_state.json").write_text(json.dumps({"steps": self.steps, "client_id": self.client_id}))

        return atomic_write_dir(path, write)

    def load_checkpoint(self, path: str | Path) -> None:
        path = Path(path)
        names = ("client.safetensors", "optimizer.safetensors", "trainer_state.json")
        missing = [n for n in names if not (path / n).is_file()]
        if missing:
            raise FileNotFoundError(f"{path} is not an FL-LLaMA client checkpoint (missing {missing})")
        load_model(self.client, str(path / "client.safetensors"))
        opt = load_file(str(path / "optimizer.safetensors"))
        self.head_optimizer.load_state_tensors(opt, "head")
        self.tail_optimizer.load_state_tensors(opt, "tail")
        self.noise_generator.set_state(opt["noise_generator"])
        self.steps = int(json.loads((path / "trainer_state.json").read_text())["steps"])


def _next_token(logits, do_sample, temperature, top_p, generator) -> torch.LongTensor:
    if not do_sample:
        return logits.argmax(-1, keepdim=True)
    probs = torch.softmax(logits / max(temperature, 1e-6), dim=-1)
    sorted_p, idx = probs.sort(descending=True)
    keep = sorted_p.cumsum(-1) - sorted_p < top_p  # nucleus: smallest prefix with mass >= top_p
    sorted_p = sorted_p * keep
    choice = torch.multinomial(sorted_p / sorted_p.sum(-1, keepdim=True), 1, generator=generator)
    return idx.gather(-1, choice)


__all__ = ["FlLlamaSplitForCausalLM"]
