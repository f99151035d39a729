"""TinyAlign (arXiv 2505.12884): a retrieval-augmented vision-language connector as a `PreTrainedModel`.

Vision encoder → `mlp2x_gelu` connector → visual tokens; a fused image+prompt query retrieves the top-k memory
entries from a faiss bank; their Perceiver values go through connector2 and become `k·32` extra tokens right after
the image tokens; a causal LM reads `[BOS] [image] [memory] [prompt] [caption]`. Self-contained (relative imports only)
so the saved artifact loads with `trust_remote_code=True`.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import AutoModel, AutoModelForCausalLM, GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_tinyalign import TinyAlignConfig
from .input_checks import IGNORE_INDEX, TinyAlignInputChecks
from .memory import BANK_FILE, MemoryBank, MemoryBankError, RetrievalCache, TinyAlignValueEncoder, attention_pool
from .modeling_efficientnet import TinyAlignEfficientNetModel  # noqa: F401  (registers the EfficientNet tower)
from .processing_tinyalign import TinyAlignProcessor  # noqa: F401  (registers AutoProcessor / AutoImageProcessor)


@dataclass
class TinyAlignOutput(CausalLMOutputWithPast):
    """[`CausalLMOutputWithPast`] plus what retrieval returned.

    Args:
        retrieved_ids (`torch.LongTensor` of shape `(B, k)`, *optional*): memory ids, best first.
        retrieval_scores (`torch.FloatTensor` of shape `(B, k)`, *optional*): their cosine similarities.
    """

    retrieved_ids: torch.LongTensor | None = None
    retrieval_scores: torch.FloatTensor | None = None


class TinyAlignConnector(nn.Module):
    """`mlp2x_gelu`: Linear(d_in → H) → GELU → Linear(H → H)."""

    def __init__(self, in_dim: int, hidden_size: int):
        super().__init__()
        self.linear_1 = nn.Linear(in_dim, hidden_size)
        self.act = nn.GELU()
        self.linear_2 = nn.Linear(hidden_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(self.act(self.linear_1(x)))


def vision_feature_width(config: TinyAlignConfig) -> int:
    """Width of the selected vision hidden state, for token encoders (`hidden_size`) and staged CNNs
    (`hidden_sizes`, whose `hidden_states` are the stem output followed by one entry per stage)."""
    vc = config.vision_config
    if getattr(vc, "hidden_sizes", None):
        widths = [vc.hidden_sizes[0], *vc.hidden_sizes]
        return widths[config.vision_feature_layer]
    return vc.hidden_size


class TinyAlignPreTrainedModel(PreTrainedModel):
    config_class = TinyAlignConfig
    base_model_prefix = "model"
    input_modalities = ("image", "text")
    main_input_name = "input_ids"
    _no_split_modules = []
    _supports_sdpa = True


class TinyAlignForConditionalGeneration(TinyAlignInputChecks, TinyAlignPreTrainedModel, GenerationMixin):
    """TinyAlign for image captioning / conditional generation.

    Holds `vision_tower` (any HF vision encoder), `connector`, `language_model` (any HF causal LM) and, when
    `config.use_retrieval`, `connector2` (memory values → LM width), `retrieval_connector` (a frozen snapshot of the
    connector taken when the bank is built, so that queries stay in the key space while the connector trains) and
    `value_encoder` (the frozen random Perceiver). The memory bank itself is attached with [`set_memory_bank`] and
    saved as `memory_bank.safetensors` next to the weights.

    Args:
        config ([`TinyAlignConfig`]): the configuration.
        vision_tower (`PreTrainedModel`, *optional*), language_model (`PreTrainedModel`, *optional*): ready-made
            (pretrained) parts to use instead of building random ones from the config; see [`from_pretrained_parts`].
    """

    def __init__(self, config: TinyAlignConfig, vision_tower=None, language_model=None):
        super().__init__(config)
        self.vision_tower = vision_tower if vision_tower is not None else AutoModel.from_config(config.vision_config)
        self.language_model = (
            language_model if language_model is not None else AutoModelForCausalLM.from_config(config.text_config)
        )
        width = vision_feature_width(config)
        self.connector = TinyAlignConnector(width, config.hidden_size)
        if config.use_retrieval:
            self.connector2 = TinyAlignConnector(config.value_latent_dim, config.hidden_size)
            self.retrieval_connector = TinyAlignConnector(width, config.hidden_size)
            self.retrieval_connector.requires_grad_(False)
            self.value_encoder = TinyAlignValueEncoder(config)
            # the learned norm of the memory tokens (config.memory_token_norm); set from the LM's embeddings below
            self.memory_scale = nn.Parameter(torch.ones(()))
        self.memory_bank: MemoryBank | None = None
        # ids retrieved per (image, prompt) while every input of the query is frozen (see RetrievalCache)
        self.retrieval_cache = RetrievalCache()
        self.use_retrieval_cache = True  # False: search every time (benchmarks of the search itself)
        self.post_init()
        self.calibrate_memory_scale()

    def calibrate_memory_scale(self) -> None:
        """Sets `memory_scale` to the mean L2 norm of the LM's input embeddings (the scale text tokens enter at)."""
        if self.config.use_retrieval:
            with torch.no_grad():
                weight = self.get_input_embeddings().weight
                if weight.device.type != "meta":
                    self.memory_scale.fill_(float(weight.float().norm(dim=-1).mean()))

    def memory_tokens(self, values: torch.Tensor) -> torch.Tensor:
        """connector2 over gathered values `(B, k·L, D)`; with `config.memory_token_norm` each token is rescaled to
        the learned norm `memory_scale` (RMS-free: the direction is connector2's, the length is learned)."""
        tokens = self.connector2(values)
        if self.config.memory_token_norm:
            tokens = nn.functional.normalize(tokens, dim=-1) * self.memory_scale
        return tokens

    def train(self, mode: bool = True):
        """As `nn.Module.train`, but a frozen vision tower or LM stays in eval mode: frozen BatchNorm statistics
        (EfficientNet) must not drift with the training batches, and frozen parts should not drop out."""
        super().train(mode)
        for part in (self.vision_tower, self.language_model):
            if mode and not any(p.requires_grad for p in part.parameters()):
                part.eval()
        return self

    # ---- plumbing -------------------------------------------------------------------------------------------
    def get_input_embeddings(self):
        return self.language_model.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.language_model.set_input_embeddings(value)

    def get_output_embeddings(self):
        return self.language_model.get_output_embeddings()

    def freeze_for_stage1(self) -> TinyAlignForConditionalGeneration:
        """Stage 1 of the recipe: vision tower and LM frozen; connector and connector2 train."""
        self.vision_tower.requires_grad_(False)
        self.language_model.requires_grad_(False)
        if self.config.use_retrieval:
            self.retrieval_connector.requires_grad_(False)
            self.value_encoder.requires_grad_(False)
        return self

    def freeze_for_stage2(self) -> TinyAlignForConditionalGeneration:
        """Stage 2: LM, connector and connector2 train; the vision tower stays frozen (the paper also tunes it)."""
        self.freeze_for_stage1()
        self.language_model.requires_grad_(True)
        # the LM now trains, so it is no longer the referenced checkpoint: save it with the artifact
        self.config.text_model_name_or_path = None
        return self

    def load_components(self, vision_state: dict | None = None, lm_state: dict | None = None) -> None:
        """Copies pretrained vision-encoder / LM weights in (strict: every key must match)."""
        if vision_state is not None:
            self.vision_tower.load_state_dict(vision_state, strict=True)
        if lm_state is not None:
            self.language_model.load_state_dict(lm_state, strict=True)
            self.calibrate_memory_scale()

    def image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Vision features `(B, Nv, d_v)` of the selected hidden state (before the connector)."""
        self.check_pixel_values(pixel_values)
        out = self.vision_tower(pixel_values=pixel_values, output_hidden_states=True)
        h = out.hidden_states[self.config.vision_feature_layer]
        if h.ndim == 4:  # CNN feature map (B, C, H, W) -> tokens
            h = h.flatten(2).transpose(1, 2)
        elif self.config.vision_feature_select_strategy == "default" and h.shape[1] == self.config.num_image_tokens + 1:
            h = h[:, 1:]  # drop CLS (ViT-like encoders)
        if h.shape[1] != self.config.num_image_tokens:
            raise ValueError(
                f"the vision encoder gives {h.shape[1]} tokens but config.num_image_tokens is "
                f"{self.config.num_image_tokens}"
            )
        return h

    # ---- memory -----------------------------------------------------------------------------------------------
    def set_memory_bank(self, bank: MemoryBank | None) -> None:
        """Attaches a bank after checking it fits: key width = LM width, value shape = (latents, latent_dim),
        at least `top_k` entries."""
        if bank is not None:
            if not self.config.use_retrieval:
                raise MemoryBankError("this model was built with use_retrieval=False and has no connector2")
            if len(bank) == 0:
                raise MemoryBankError("the memory bank is empty")
            if bank.key_dim != self.config.hidden_size:
                raise MemoryBankError(
                    f"bank key width {bank.key_dim} does not match the model's hidden size {self.config.hidden_size}"
                )
            want = (self.config.value_num_latents, self.config.value_latent_dim)
            if tuple(bank.value_shape) != want:
                raise MemoryBankError(
                    f"bank values have shape {tuple(bank.value_shape)} per entry, the model expects {want}"
                )
            if self.config.memory_top_k > len(bank):
                raise MemoryBankError(
                    f"top_k={self.config.memory_top_k} is larger than the memory bank ({len(bank)} entries)"
                )
        self.memory_bank = bank
        self.retrieval_cache.clear()

    def text_query_mask(self, input_ids, attention_mask=None, labels=None) -> torch.Tensor:
        """Text tokens that enter the query, chosen by position so that the result does not depend on `labels`.

        Honest query (default, and always in eval mode, hence in evaluation and generation): the tokens before the
        last image/memory placeholder and the `config.query_prompt_length` prompt tokens right after it, never later
        positions (the answer, generated tokens), nor placeholders or padding. `labels`, if given, also drop any
        labelled token. The `query_includes_answer` ablation (the released code's leak) applies to training-mode
        forwards only, as in the released code, where the answer is in `input_ids` at training time but not at
        inference: it then pools every non-placeholder, non-padding token, the answer included.
        """
        cfg = self.config
        placeholder = (input_ids == cfg.image_token_id) | (input_ids == cfg.rag_token_id)
        mask = ~placeholder
        if attention_mask is not None:
            mask &= attention_mask.bool()
        if cfg.query_includes_answer and self.training:
            return mask
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        # last placeholder per row (-1 when a row has none: then only the first prompt_length tokens count)
        last = torch.where(placeholder, positions, torch.full_like(positions, -1)).amax(dim=1, keepdim=True)
        mask &= positions <= last + cfg.query_prompt_length
        if labels is not None:
            mask &= labels == IGNORE_INDEX
        return mask

    def fused_key(
        self,
        visual_features: torch.Tensor,
        text_embeds: torch.Tensor,
        text_mask: torch.Tensor,
        connector: nn.Module | None = None,
    ) -> torch.Tensor:
        """The pooled key/query (α-weighted attention pooling) from vision features and token embeddings."""
        connector = connector if connector is not None else self.retrieval_connector
        return attention_pool(connector(visual_features), text_embeds, text_mask, self.config.alpha)

    @torch.no_grad()
    def retrieve(self, query: torch.Tensor, k: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """faiss top-k: `(scores, ids)` of shape `(B, k)`."""
        if self.memory_bank is None:
            raise MemoryBankError("no memory bank attached: call build_memory_bank(...) or set_memory_bank(...)")
        return self.memory_bank.search(query, k or self.config.memory_top_k)

    # ---- forward ----------------------------------------------------------------------------------------------
    def forward(
        self,
        input_ids=None,
        pixel_values=None,
        attention_mask=None,
        position_ids=None,
        cache=None,
        inputs_embeds=None,
        labels=None,
        use_cache=None,
        logits_to_keep=0,
        memory_ids=None,
        vision_features=None,
        **kwargs,
    ) -> TinyAlignOutput:
        """Args follow `LlamaForCausalLM.forward`, plus `pixel_values` `(B, C, S, S)` and, optionally, `memory_ids`
        `(B, k)`: bank entries to use instead of searching (benchmarks, replaying a retrieval). `input_ids` hold one
        `image_token_id` per visual token and one `rag_token_id` per memory token (see `TinyAlignProcessor`).
        `vision_features` `(B, Nv, d_v)` (what [`image_features`] returns) may replace `pixel_values`: the vision
        tower is frozen, so a training run computes them once per image (`hf_ext.tinyalign.features`)."""
        cfg = self.config
        retrieved = scores = None
        if input_ids is not None:
            self.check_text_inputs(input_ids, attention_mask, labels, memory_ids)
        if inputs_embeds is None:
            if input_ids is None:
                raise ValueError("pass input_ids (or inputs_embeds)")
            placeholders = (input_ids == cfg.image_token_id) | (input_ids == cfg.rag_token_id)
            inputs_embeds = self.get_input_embeddings()(input_ids.masked_fill(placeholders, 0))
        if pixel_values is not None or vision_features is not None:
            if input_ids is None:
                raise ValueError("pixel_values need input_ids that mark where the image tokens go")
            if vision_features is not None:
                feats = self.check_vision_features(vision_features).to(inputs_embeds.device, inputs_embeds.dtype)
            else:
                self.check_pixel_values(pixel_values)
                feats = self.image_features(pixel_values.to(inputs_embeds.dtype))
            if feats.shape[0] != input_ids.shape[0]:
                raise ValueError(f"pixel_values has {feats.shape[0]} images for {input_ids.shape[0]} rows of input_ids")
            inputs_embeds = self._scatter(inputs_embeds, input_ids, cfg.image_token_id, self.connector(feats), "image")
            if cfg.use_retrieval:
                if self.memory_bank is None:
                    raise MemoryBankError(
                        "no memory bank attached: call build_memory_bank(...) or set_memory_bank(...)"
                    )
                if memory_ids is not None:  # replay given entries: no query, no search
                    retrieved, scores = memory_ids.cpu(), torch.full(memory_ids.shape, float("nan"))
                else:
                    scores, retrieved = self._search(feats, input_ids, inputs_embeds, attention_mask, labels)
                values = self.memory_bank.gather(retrieved).to(inputs_embeds.device, inputs_embeds.dtype)
                inputs_embeds = self._scatter(
                    inputs_embeds, input_ids, cfg.rag_token_id, self.memory_tokens(values), "memory"
                )
                retrieved, scores = retrieved.to(inputs_embeds.device), scores.to(inputs_embeds.device)
        out = self.language_model(
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            labels=labels,
            use_cache=use_cache,
            logits_to_keep=logits_to_keep,
            **kwargs,
        )
        return TinyAlignOutput(
            loss=out.loss,
            logits=out.logits,
            cache=getattr(out, "cache", None),
            hidden_states=out.hidden_states,
            attentions=out.attentions,
            retrieved_ids=retrieved,
            retrieval_scores=scores,
        )

    def _query_is_frozen(self) -> bool:
        """Whether nothing the query depends on can change between steps: vision tower, embeddings and retrieval
        connector all frozen, and the leaky ablation (whose training query sees the answer) off."""
        parts = (self.vision_tower, self.get_input_embeddings(), self.retrieval_connector)
        return not (self.config.query_includes_answer and self.training) and not any(
            p.requires_grad for part in parts for p in part.parameters()
        )

    def _search(self, feats, input_ids, inputs_embeds, attention_mask, labels):
        """Query + faiss top-k, through `retrieval_cache` when the query is frozen: a cached row is keyed by its
        visual features and its query tokens, and the cache is dropped whenever a weight it depends on changes
        (tensor version counters), so a hit returns exactly what the search would."""
        text_mask = self.text_query_mask(input_ids, attention_mask, labels)
        use_cache = self.use_retrieval_cache and self._query_is_frozen()
        if use_cache:
            self.retrieval_cache.check(
                self.memory_bank,
                self.config.memory_top_k,
                (self.vision_tower, self.get_input_embeddings(), self.retrieval_connector),
            )
            hit = self.retrieval_cache.lookup(feats, input_ids, text_mask)
            if hit is not None:
                return hit
        with torch.no_grad():
            query = self.fused_key(feats, inputs_embeds, text_mask)
        scores, retrieved = self.retrieve(query)
        if use_cache:
            self.retrieval_cache.store(feats, input_ids, text_mask, scores, retrieved)
        return scores, retrieved

    def prepare_inputs_for_generation(self, input_ids, *args, is_first_iteration: bool | None = False, **kwargs):
        """As `GenerationMixin`'s, but precomputed `vision_features` go to the prefill only, like `pixel_values`
        (later steps see one new token and no image placeholders)."""
        features = kwargs.pop("vision_features", None)
        inputs = super().prepare_inputs_for_generation(
            input_ids, *args, is_first_iteration=is_first_iteration, **kwargs
        )
        if features is not None and (is_first_iteration or not kwargs.get("use_cache", True)):
            inputs["vision_features"] = features
        return inputs

    def check_vision_features(self, vision_features) -> torch.Tensor:
        """Precomputed visual features must be `(B, num_image_tokens, d_v)` and finite."""
        want = (self.config.num_image_tokens, vision_feature_width(self.config))
        if (
            not isinstance(vision_features, torch.Tensor)
            or vision_features.ndim != 3
            or tuple(vision_features.shape[1:]) != want
            or not vision_features.is_floating_point()
        ):
            raise ValueError(
                f"vision_features must be a float tensor of shape (batch, {want[0]}, {want[1]}) "
                f"(what image_features returns), got {tuple(getattr(vision_features, 'shape', ()))}"
            )
        if not bool(torch.isfinite(vision_features).all()):
            raise ValueError("vision_features must be finite; got NaN or Inf values")
        return vision_features

    @staticmethod
    def _scatter(embeds, input_ids, token_id, features, what):
        mask = input_ids == token_id
        per_row = mask.sum(dim=1)
        if not bool((per_row == features.shape[1]).all()):
            raise ValueError(
                f"input_ids hold {per_row.tolist()} {what} placeholder tokens per row but the model "
                f"produces {features.shape[1]} {what} tokens; build inputs with TinyAlignProcessor for "
                f"this config"
            )
        return embeds.masked_scatter(mask[..., None], features.to(embeds.dtype))

    # ---- the bank -----------------------------------------------------------------------------------------------
    @torch.no_grad()
    def encode_memory(
        self, pixel_values: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor, captions: list[str]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys `(B, H)` and values `(B, L, D)` of image–caption pairs; `input_ids` hold prompt + caption (no image
        or memory placeholders)."""
        feats = self.image_features(pixel_values)
        text = self.get_input_embeddings()(input_ids)
        keys = self.fused_key(feats, text, attention_mask)  # same projector as the queries
        return keys, self.value_encoder(pixel_values, captions)

    def snapshot_retrieval_connector(self) -> None:
        """Freezes a copy of the current connector as the query/key projector (done when the bank is built)."""
        self.retrieval_connector.load_state_dict(copy.deepcopy(self.connector.state_dict()))

    # ---- composition from pretrained parts ------------------------------------------------------------------------
    @classmethod
    def from_pretrained_parts(cls, vision_model, language_model, reference: bool = True, **config_kwargs):
        """TinyAlign around a pretrained vision encoder and a pretrained causal LM, both frozen (stage 1).

        Args:
            vision_model (`str` or `PreTrainedModel`): a vision tower or its repo id / folder (`AutoModel`), e.g. a
                saved [`TinyAlignEfficientNetModel`] or any HF vision model.
            language_model (`str` or `PreTrainedModel`): a causal LM or its repo id / folder
                (`AutoModelForCausalLM`).
            reference (`bool`, defaults to `True`): record where each part came from (`name_or_path`) in
                `vision_model_name_or_path` / `text_model_name_or_path`, so `save_pretrained` stores only what
                was trained and `from_pretrained` reloads the parts from there.
            config_kwargs: further [`TinyAlignConfig`] fields (`image_size`, `memory_top_k`, ...).
                `num_channels` and `num_image_tokens` are read off the vision tower when not given.
        """
        if isinstance(vision_model, (str, os.PathLike)):
            vision_model = AutoModel.from_pretrained(vision_model)
        if isinstance(language_model, (str, os.PathLike)):
            language_model = AutoModelForCausalLM.from_pretrained(language_model)
        vc = vision_model.config
        kwargs = dict(config_kwargs)
        kwargs.setdefault("image_size", getattr(vc, "image_size", 224))
        kwargs.setdefault("num_channels", getattr(vc, "num_channels", 3))
        if "num_image_tokens" not in kwargs:  # count them: one dry forward of a blank image
            size, channels = kwargs["image_size"], kwargs["num_channels"]
            with torch.no_grad():
                out = vision_model.eval()(pixel_values=torch.zeros(1, channels, size, size), output_hidden_states=True)
            h = out.hidden_states[kwargs.get("vision_feature_layer", -1)]
            n = h.shape[2] * h.shape[3] if h.ndim == 4 else h.shape[1]
            cls_token = (
                h.ndim == 3
                and kwargs.get("vision_feature_select_strategy", "default") == "default"
                and (getattr(vc, "model_type", "") in ("vit", "clip_vision_model", "deit"))
            )
            kwargs["num_image_tokens"] = n - 1 if cls_token else n
        if reference:
            kwargs.setdefault("vision_model_name_or_path", getattr(vision_model, "name_or_path", None) or None)
            kwargs.setdefault("text_model_name_or_path", getattr(language_model, "name_or_path", None) or None)
        config = TinyAlignConfig(vision_config=vc.to_dict(), text_config=language_model.config.to_dict(), **kwargs)
        return cls(config, vision_tower=vision_model, language_model=language_model).freeze_for_stage1()

    def _referenced_parts(self) -> dict[str, str]:
        refs = {
            "vision_tower": self.config.vision_model_name_or_path,
            "language_model": self.config.text_model_name_or_path,
        }
        return {prefix: ref for prefix, ref in refs.items() if ref}

    # ---- save / load with the bank ------------------------------------------------------------------------------
    def save_pretrained(self, save_directory, *args, save_frozen_parts: bool = False, **kwargs):
        """Saves the weights, config and memory bank. Parts named by `vision_model_name_or_path` /
        `text_model_name_or_path` are left out of `model.safetensors` unless `save_frozen_parts=True`, which writes
        every weight and clears the references in the saved config (the artifact is then self-contained)."""
        refs = self._referenced_parts()
        if refs and save_frozen_parts:
            saved = (self.config.vision_model_name_or_path, self.config.text_model_name_or_path)
            self.config.vision_model_name_or_path = self.config.text_model_name_or_path = None
            try:
                super().save_pretrained(save_directory, *args, **kwargs)
            finally:
                self.config.vision_model_name_or_path, self.config.text_model_name_or_path = saved
        elif refs:
            state = {k: v for k, v in self.state_dict().items() if not k.startswith(tuple(f"{p}." for p in refs))}
            super().save_pretrained(save_directory, *args, state_dict=state, **kwargs)
        else:
            super().save_pretrained(save_directory, *args, **kwargs)
        if self.memory_bank is not None and kwargs.get("is_main_process", True):
            self.memory_bank.save(save_directory)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """Loads weights, the referenced frozen parts (if the config names them) and, if the artifact has
        `memory_bank.safetensors`, the bank (faiss index + values). With `output_loading_info=True` returns
        `(model, info)` as transformers does; the referenced parts' keys are not reported missing."""
        wants_info = kwargs.pop("output_loading_info", False)
        config = kwargs.get("config")
        old = []
        raw, _ = TinyAlignConfig.get_config_dict(pretrained_model_name_or_path)
        if not isinstance(config, TinyAlignConfig):
            config = TinyAlignConfig.from_pretrained(pretrained_model_name_or_path)
        # Saved before the memory-token norm existed (also when an Auto class read that config.json and passes it
        # in): load it as it was, without the norm.
        if "memory_token_norm" not in raw:
            config.memory_token_norm, old = False, [r"^memory_scale$"]
            kwargs["config"] = config
        referenced = [
            prefix
            for prefix, ref in (
                ("vision_tower", config.vision_model_name_or_path),
                ("language_model", config.text_model_name_or_path),
            )
            if ref
        ]
        # the referenced parts are absent on purpose: keep them out of transformers' missing-keys report
        ignored = cls._keys_to_ignore_on_load_missing
        cls._keys_to_ignore_on_load_missing = [*(ignored or []), *old, *(rf"^{p}\." for p in referenced)]
        try:
            model, info = super().from_pretrained(
                pretrained_model_name_or_path, *args, output_loading_info=True, **kwargs
            )
        finally:
            cls._keys_to_ignore_on_load_missing = ignored
        if old:  # an artifact from before the memory-token norm has no memory_scale, and needs none (norm off)
            info["missing_keys"] = type(info["missing_keys"])(k for k in info["missing_keys"] if k != "memory_scale")
        loaders = {"vision_tower": AutoModel, "language_model": AutoModelForCausalLM}
        for prefix, ref in model._referenced_parts().items():
            part = loaders[prefix].from_pretrained(ref)
            try:
                getattr(model, prefix).load_state_dict(part.state_dict(), strict=True)
            except RuntimeError as err:
                raise ValueError(
                    f"the frozen part {prefix} referenced as {ref!r} does not fit this TinyAlign "
                    f"config: {str(err).splitlines()[0]}"
                ) from None
            getattr(model, prefix).requires_grad_(False)
            info["missing_keys"] = type(info["missing_keys"])(
                k for k in info["missing_keys"] if not k.startswith(f"{prefix}.")
            )
        model.eval()
        path = Path(os.fspath(pretrained_model_name_or_path)) / BANK_FILE
        if not path.is_file():
            from transformers.utils import cached_file

            found = cached_file(
                pretrained_model_name_or_path,
                BANK_FILE,
                _raise_exceptions_for_missing_entries=False,
                _raise_exceptions_for_connection_errors=False,
            )
            path = Path(found) if found else None
        if path is not None and model.config.use_retrieval:
            model.set_memory_bank(MemoryBank.load(path))
        return (model, info) if wants_info else model


__all__ = [
    "TinyAlignForConditionalGeneration",
    "TinyAlignEfficientNetModel",
    "TinyAlignPreTrainedModel",
    "TinyAlignOutput",
    "TinyAlignConnector",
]
