"""CodeBC's text formats (the three training stages and inference) and security-tag forcing at generation time.

Formats follow the authors' CodeLlama-Instruct templates (spec §3):

- **CI** (code infilling, PSM order): `<s><PRE>{code[:s]}<SUF>{code[e:]}<MID>{code[s:e]}\\n<EOT></s>`, with
  `s ~ U[L/5, 2L/5]`, `e ~ U[3L/5, 4L/5]` (characters), 5 samples per contract with seeds k = 0..4. CodeLlama writes
  `▁<PRE>`: `▁` is its SentencePiece word-boundary marker, which a byte-level BPE does not need.
- **VD** (vulnerability detection as generation): prompt
  `<s>[INST]Please determine whether this smart contract code is a correct solution:\\n```\\n{code}\\n```\\n[/INST]\\n[Tag]`
  and answer `\\n{correct|bug}\\n[/Tag]\\n` (the authors add `</s>`; see [`vd_example`] for why not here); loss on
  the answer only.
- **TI** (tag-guided instruction tuning): `<s>[INST]{header}\\n{comments}\\nPlease give the contract code[/INST]\\n`
  then the response `[Tag]\\n{tag}\\n[/Tag]\\n```\\n{code}\\n```\\n[Tag]\\n{tag}\\n[/Tag]\\n</s>` — the tag on both
  sides of the code; loss on the response.

Deviation (a fix): the authors' VD training JSON spells the block `[TAG]…[/TAG]` while their TI data and generation
script use `[Tag]…[/Tag]`; one spelling, `[Tag]`, is used everywhere here so the three stages share the tag tokens.

On a tokenizer with a chat template (SmolLM2-Instruct) the `[INST]…[/INST]` wrapper is replaced by the model's own
template ([`PromptStyle`]); the tag blocks and the FIM markers are the same text for every tokenizer, atomic tokens
or not.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import torch

FIM_TOKENS = ("<PRE>", "<SUF>", "<MID>", "<EOT>")
INST_TOKENS = ("[INST]", "[/INST]")
TAG_OPEN, TAG_CLOSE = "[Tag]", "[/Tag]"
TAG_TOKENS = (TAG_OPEN, TAG_CLOSE)
SECURITY_TAGS = ("correct", "bug")
VD_INSTRUCTION = "Please determine whether this smart contract code is a correct solution:"
TI_HEADER = "Generate smart contract code that meets the following requirements:"
TI_TAIL = "Please give the contract code"


def tag_block(tag: str) -> str:
    """`[Tag]\\n{tag}\\n[/Tag]\\n` for `tag` in `("correct", "bug")`."""
    if tag not in SECURITY_TAGS:
        raise ValueError(f"security tag must be one of {SECURITY_TAGS}, got {tag!r}")
    return f"{TAG_OPEN}\n{tag}\n{TAG_CLOSE}\n"


def fim_split(code: str, seed: int) -> tuple[str, str, str]:
    """Character-level prefix / suffix / middle with `s ~ U[L/5, 2L/5]`, `e ~ U[3L/5, 4L/5]` (seeded)."""
    r = random.Random(seed)
    n = len(code)
    s = r.randint(n // 5, 2 * n // 5)
    e = r.randint(3 * n // 5, 4 * n // 5)
    return code[:s], code[e:], code[s:e]


@dataclass(frozen=True, eq=False)
class PromptStyle:
    """How a CodeBC user turn is wrapped for one tokenizer.

    A tokenizer with a chat template (SmolLM2-Instruct, CodeLlama-Instruct...) wraps the instruction with its own
    template (`apply_chat_template(..., add_generation_prompt=True)`); one without (the tiny CodeBC BPE) gets the
    authors' CodeLlama-Instruct spelling `{bos}[INST]{text}[/INST]\\n`. Build it with [`prompt_style`].

    Args:
        bos (`str`): text that starts a plain (template-free) sample; `""` under a chat template (it adds its own).
        eos (`str`): the end-of-sequence text that ends CI and TI targets (`</s>`, `<|im_end|>`...).
        tokenizer (*optional*): the tokenizer whose chat template wraps user turns; `None` for `[INST]`.
    """

    bos: str = "<s>"
    eos: str = "</s>"
    tokenizer: object | None = None

    def user_turn(self, text: str) -> str:
        """The prompt up to where the model's answer starts."""
        if self.tokenizer is not None:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
        return f"{self.bos}[INST]{text}[/INST]\n"


def prompt_style(tokenizer) -> PromptStyle:
    """The [`PromptStyle`] of `tokenizer`: its own chat template when it has one, else `[INST]`."""
    if getattr(tokenizer, "chat_template", None):
        return PromptStyle(bos="", eos=tokenizer.eos_token or "", tokenizer=tokenizer)
    return PromptStyle(bos=tokenizer.bos_token or "", eos=tokenizer.eos_token or "")


PLAIN = PromptStyle()  # the authors' CodeLlama spelling: `<s>[INST]...[/INST]`, `</s>`


def ci_text(code: str, seed: int, style: PromptStyle = PLAIN) -> str:
    """One code-infilling sample (PSM order); no chat template (infilling is not a conversation)."""
    pre, suf, mid = fim_split(code, seed)
    return f"{style.bos}<PRE>{pre}<SUF>{suf}<MID>{mid}\n<EOT>{style.eos}"


def vd_example(code: str, tag: str, style: PromptStyle = PLAIN) -> tuple[str, str]:
    """`(prompt, answer)` of the vulnerability-detection stage.

    The answer is `\\n{tag}\\n[/Tag]\\n` with **no** end-of-sequence (a fix): the authors end it with `</s>`, so a
    model fresh from VD has learned "`[/Tag]` then stop", and the tag block forced at the start of a TI/inference
    response ends the generation right there. The verdict is what VD teaches; what follows the block is TI's job.
    """
    tag_block(tag)  # validates
    prompt = style.user_turn(f"{VD_INSTRUCTION}\n```\n{code}\n```\n") + TAG_OPEN
    return prompt, f"\n{tag}\n{TAG_CLOSE}\n"


def ti_instruction(comments: list[str] | str) -> str:
    body = comments if isinstance(comments, str) else "\n".join(comments)
    return f"{TI_HEADER}\n{body}\n{TI_TAIL}" if body else f"{TI_HEADER}\n{TI_TAIL}"


def ti_example(code: str, comments: list[str] | str, tag: str | None, style: PromptStyle = PLAIN) -> tuple[str, str]:
    """`(prompt, response)` of the tag-guided instruction-tuning stage; `tag=None` gives the plain instruction-tuning
    format with no tag (the "instruction tuning without tags" control)."""
    prompt = style.user_turn(ti_instruction(comments))
    if tag is None:
        return prompt, f"```\n{code}\n```\n{style.eos}"
    block = tag_block(tag)
    return prompt, f"{block}```\n{code}\n```\n{block}{style.eos}"


def inference_prompt(instruction: str, style: PromptStyle = PLAIN) -> str:
    """The prompt for a Blockchain-HumanEval instruction (which already ends with "Please give the contract code")."""
    return style.user_turn(instruction.strip())


def extract_code(generated: str) -> str:
    """The contract in a generated response: the first fenced block, else the text after the tag block."""
    text = re.sub(r"^\s*\[Tag\]\s*\w*\s*\[/Tag\]\s*", "", generated)
    m = re.search(r"```(?:solidity)?\n?(.*?)(?:```|\[Tag\]|$)", text, re.S)
    code = m.group(1) if m else text
    return code.split("[Tag]")[0].strip()


class ForcedTagLogitsProcessor:
    """Forces a token sequence (the security-tag block) at the first generated positions.

    At generation step `i < len(forced_ids)` every logit except `forced_ids[i]` is set to `-inf`, so the response
    starts with the tag whatever the sampling settings; afterwards the scores pass through unchanged.

    Args:
        prompt_length (`int`): length of the (left-padded) prompt batch; steps are counted from there.
        forced_ids (`list[int]`): the token ids to force.
    """

    def __init__(self, prompt_length: int, forced_ids: list[int], vocab_size: int | None = None):
        if isinstance(prompt_length, bool) or not isinstance(prompt_length, int) or prompt_length < 0:
            raise ValueError(f"prompt_length must be an integer >= 0, got {prompt_length!r}")
        ids = list(forced_ids)
        if any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
            raise ValueError(f"forced_ids must be integer token ids, got {ids}")
        high = vocab_size if vocab_size is not None else None
        bad = [i for i in ids if i < 0 or (high is not None and i >= high)]
        if bad:
            raise ValueError(
                f"forced_ids must lie in [0, {high if high is not None else 'vocab_size'}), got {bad} "
                f"(a negative id would wrap around to the end of the vocabulary)"
            )
        self.prompt_length = prompt_length
        self.forced_ids = ids

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        step = input_ids.shape[1] - self.prompt_length
        if 0 <= step < len(self.forced_ids) and self.forced_ids[step] >= scores.shape[-1]:
            raise ValueError(f"forced_ids must lie in [0, vocab_size={scores.shape[-1]}), got {self.forced_ids[step]}")
        if 0 <= step < len(self.forced_ids):
            forced = torch.full_like(scores, float("-inf"))
            forced[:, self.forced_ids[step]] = 0.0
            return forced
        return scores


def check_generation_args(
    instructions, *, max_new_tokens, temperature, top_p, max_prompt_tokens, batch_size, do_sample
) -> None:
    """Refuses arguments of [`generate_with_tag`] that would crash inside `generate()` or silently do something else
    (an empty batch, `max_prompt_tokens=0` keeping the whole prompt, a zero batch size)."""
    from hf_ext.core.validation import check_finite_number, check_positive_int

    if not isinstance(instructions, (list, tuple)) or len(instructions) == 0:
        raise ValueError("instructions must be a non-empty list of strings (an empty batch generates nothing)")
    if not all(isinstance(i, str) and i.strip() for i in instructions):
        raise ValueError("instructions must be non-empty strings")
    check_positive_int("max_new_tokens", max_new_tokens)
    check_positive_int("max_prompt_tokens", max_prompt_tokens)
    check_positive_int("batch_size", batch_size)
    if do_sample:
        check_finite_number("temperature", temperature, low=0.0, low_open=True, high=100.0)
        check_finite_number("top_p", top_p, low=0.0, low_open=True, high=1.0)


@torch.no_grad()
def generate_batched(
    model,
    tokenizer,
    prompts: list[str],
    *,
    max_new_tokens: int,
    max_prompt_tokens: int,
    batch_size: int,
    forced_ids: list[int] | None = None,
    stop=None,
    **gen_kwargs,
) -> list[str]:
    """Decoded continuations of `prompts` (text after each prompt, special tokens dropped), in input order.

    Prompts keep their last `max_prompt_tokens` tokens, are sorted by length and left-padded in batches of
    `batch_size` (every prompt ends where generation starts); the inputs go to `model.device`. `forced_ids`, if
    given, are forced at the first steps by a [`ForcedTagLogitsProcessor`]; `stop`, if given, is called with each
    batch's padded prompt width and returns that batch's `StoppingCriteria` (a row stops when it says so; the
    criterion knows where the prompt ends); `gen_kwargs` go to `generate()`.
    """
    from transformers import LogitsProcessorList

    ids = [tokenizer(p, add_special_tokens=False)["input_ids"][-max_prompt_tokens:] for p in prompts]
    # a tokenizer without a pad token (many chat models) pads with end-of-sequence; the mask hides it anyway
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    texts: list[str] = [""] * len(ids)
    model.eval()
    device = model.device  # the inputs go where the weights are (CPU, CUDA, ...)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        width = max(len(ids[i]) for i in chunk)
        input_ids = torch.tensor([[pad_id] * (width - len(ids[i])) + ids[i] for i in chunk], device=device)
        mask = torch.tensor([[0] * (width - len(ids[i])) + [1] * len(ids[i]) for i in chunk], device=device)
        processors = LogitsProcessorList()
        if forced_ids:
            processors.append(ForcedTagLogitsProcessor(width, list(forced_ids), vocab_size=len(tokenizer)))
        if stop is not None:
            from transformers import StoppingCriteriaList

            gen_kwargs["stopping_criteria"] = StoppingCriteriaList([stop(width)])
        out = model.generate(
            input_ids=input_ids,
            attention_mask=mask,
            max_new_tokens=max_new_tokens,
            pad_token_id=pad_id,
            eos_token_id=tokenizer.eos_token_id,
            logits_processor=processors,
            **gen_kwargs,
        )
        for i, text in zip(chunk, tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)):
            texts[i] = text
    return texts


@torch.no_grad()
def generate_with_tag(
    model,
    tokenizer,
    instructions: list[str] | str,
    security_tag: str | None = "correct",
    *,
    force: str = "processor",
    max_new_tokens: int = 256,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
    max_prompt_tokens: int = 1024,
    batch_size: int = 8,
) -> list[dict]:
    """Generates contracts for instructions with the security tag forced at the start of the response.

    Args:
        model: a causal LM (plain or a `PeftModel`).
        tokenizer: the model's tokenizer: the tiny CodeBC BPE (atomic `[Tag]` tokens, `[INST]` prompts) or any
            other (its chat template wraps the prompt; the tag block may be several tokens, all of them forced).
        instructions (`list[str]` or `str`): Blockchain-HumanEval-style requirements.
        security_tag (`str`, *optional*, defaults to `"correct"`): `"correct"` (ask for secure code), `"bug"`, or
            `None` (no tag: the model writes whatever it wants first).
        force (`str`, defaults to `"processor"`): `"processor"` forces the tag block token by token through a
            [`ForcedTagLogitsProcessor`] in `generate()`; `"prefix"` appends it to the prompt instead. Both give a
            response that starts with the tag block.
        max_new_tokens, do_sample, temperature, top_p: passed to `generate()`.
        seed (`int`, *optional*): torch seed for sampling.
        max_prompt_tokens (`int`, defaults to 1024): longer prompts lose their start (the authors' left
            truncation, max prompt 1024).
        batch_size (`int`, defaults to 8): prompts per `generate()` call (sorted by length to limit padding).

    Returns:
        `list[dict]` with `response` (decoded text after the prompt, tag included) and `code` (the extracted contract).
    """
    if isinstance(instructions, str):
        instructions = [instructions]
    check_generation_args(
        instructions,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        max_prompt_tokens=max_prompt_tokens,
        batch_size=batch_size,
        do_sample=do_sample,
    )
    if force not in ("processor", "prefix"):
        raise ValueError(f"force must be 'processor' or 'prefix', got {force!r}")
    block = tag_block(security_tag) if security_tag is not None else ""
    prompts = [inference_prompt(i, prompt_style(tokenizer)) for i in instructions]
    if security_tag is not None and force == "prefix":
        prompts = [p + block for p in prompts]
    forced_ids: list[int] = []
    if security_tag is not None and force == "processor":
        forced_ids = tokenizer(block, add_special_tokens=False)["input_ids"]
    if seed is not None:
        torch.manual_seed(seed)
    extra = dict(temperature=temperature, top_p=top_p) if do_sample else {}
    texts = generate_batched(
        model,
        tokenizer,
        prompts,
        max_new_tokens=max_new_tokens + len(forced_ids),
        max_prompt_tokens=max_prompt_tokens,
        batch_size=batch_size,
        forced_ids=forced_ids,
        do_sample=do_sample,
        **extra,
    )
    prefix = block if (security_tag is not None and force == "prefix") else ""
    return [{"response": prefix + t, "code": extract_code(prefix + t)} for t in texts]
