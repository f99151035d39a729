"""The CodeBC tokenizer: a byte-level BPE trained on the (leakage-filtered) Solidity corpus, plus CodeBC's tokens.

Added on top of the learned merges, each as one atomic token:
- special: `<s>`, `</s>`, `<pad>` and the FIM sentinels `<PRE>`, `<SUF>`, `<MID>`, `<EOT>` (CodeLlama's infilling
  format); special tokens are dropped by `decode(skip_special_tokens=True)`;
- normal added tokens (kept when decoding): `[INST]`, `[/INST]`, the security-tag delimiters `[Tag]`, `[/Tag]` and
  the tags `correct` and `bug` (whole words only).
"""

from __future__ import annotations

from collections.abc import Iterable

from .tags import FIM_TOKENS, INST_TOKENS, SECURITY_TAGS, TAG_TOKENS

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
TOKENIZER_VERSION = 2  # part of the pretrained-base cache key: bump when the tokenizer recipe changes


def load_tokenizer(folder):
    """Loads a saved CodeBC tokenizer (as `PreTrainedTokenizerFast`: the folder's config.json is the model's)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(folder)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 2048, min_frequency: int = 2):
    """Trains the byte-level BPE on `texts` and returns a `PreTrainedTokenizerFast` with CodeBC's tokens.

    Args:
        texts (`Iterable[str]`): training text (comment-free Solidity; never the Blockchain-HumanEval references).
        vocab_size (`int`, defaults to 2048): BPE vocabulary size including the added tokens.
        min_frequency (`int`, defaults to 2): minimum pair frequency for a merge.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = [PAD, BOS, EOS, *FIM_TOKENS]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in (*INST_TOKENS, *TAG_TOKENS)])
    # the tag words themselves are single tokens too (whole words only, so `debug` is not split around `bug`)
    tok.add_tokens([AddedToken(t, normalized=False, special=False, single_word=True) for t in SECURITY_TAGS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=list(FIM_TOKENS),
        padding_side="left",
    )
    fast.padding_side = "left"
    return fast


def codebc_token_ids(tokenizer) -> dict[str, int]:
    """Ids of the FIM, instruction, tag-delimiter and tag tokens (each must be a single token)."""
    ids = {}
    for t in (*FIM_TOKENS, *INST_TOKENS, *TAG_TOKENS, *SECURITY_TAGS):
        enc = tokenizer(t, add_special_tokens=False)["input_ids"]
        if len(enc) != 1:
            raise ValueError(f"token {t!r} is not atomic in this tokenizer: {enc}")
        ids[t] = enc[0]
    return ids


def token_sequences(tokenizer) -> dict[str, list[int]]:
    """The token ids of each CodeBC marker in any tokenizer (FIM, `[INST]`, tag delimiters, tag words), atomic or
    not: on SmolLM2 `[Tag]` is 3 tokens and `correct` one; generation forces the whole sequence either way."""
    return {
        t: tokenizer(t, add_special_tokens=False)["input_ids"]
        for t in (*FIM_TOKENS, *INST_TOKENS, *TAG_TOKENS, *SECURITY_TAGS)
    }


def add_fim_tokens(model, tokenizer) -> list[int]:
    """Makes `<PRE> <SUF> <MID> <EOT>` atomic special tokens of a pretrained `tokenizer` and grows `model`'s
    embeddings to match; returns the ids of the tokens it added (train them with the adapter, PEFT
    `trainable_token_indices`, as [`~hf_ext.codebc.trainer.CodeBCStageArguments.trainable_token_ids`] does).

    A pretrained BPE splits `<PRE>` into `<`, `PRE`, `>` — text a model also sees in ordinary code — so the CI
    stage's markers would be ambiguous. The new rows are drawn around the mean of the existing embeddings
    (`mean_resizing`), a neutral point the adapter moves from. Tokens that are already atomic are left alone, so
    calling this twice adds nothing the second time.
    """
    from tokenizers import AddedToken

    missing = [t for t in FIM_TOKENS if len(tokenizer(t, add_special_tokens=False)["input_ids"]) != 1]
    if not missing:
        return []
    tokenizer.add_tokens([AddedToken(t, normalized=False, special=True) for t in missing], special_tokens=True)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=True)
    ids = [tokenizer.convert_tokens_to_ids(t) for t in missing]
    for t, i in zip(missing, ids):
        if tokenizer(t, add_special_tokens=False)["input_ids"] != [i]:
            raise ValueError(f"could not make {t!r} an atomic token of this tokenizer")
    return ids
