"""Tokenizers for tiny models: a byte-level BPE trained on the pydoc corpus, and a character tokenizer.

Both are `transformers.PreTrainedTokenizerFast`, so they save/load like any hub tokenizer. Special
tokens (ids fixed, matching ``iclr26_core.models``): 0 ``<|endoftext|>`` (bos/eos), 1 ``<pad>``,
2 ``<unk>``.

The BPE tokenizer is deterministic for ``(vocab_size, seed)`` and cached under the user cache dir,
keyed by those settings, the corpus and the `tokenizers` version.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<pad>", "<unk>"]


def _wrap(tok):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<pad>",
        unk_token="<unk>",
    )


def _train_bpe_object(texts: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def train_bpe(vocab_size: int = 512, seed: int = 0, texts: Iterable[str] | None = None, cache: bool = True):
    """A byte-level BPE tokenizer with ``vocab_size`` entries trained on ``texts`` (default: pydoc topics).

    ``seed`` orders the training texts; the result is deterministic for ``(texts, vocab_size, seed)``.
    With ``cache=True`` it is stored under ``<cache>/tokenizers/`` and loaded from there next time.
    """
    import tokenizers as hf_tokenizers

    from .cache import cache_dir
    from .corpus import pydoc_topics

    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(
            f"a byte-level BPE needs vocab_size >= {256 + len(SPECIAL_TOKENS)}, got {vocab_size}"
        )
    texts = list(pydoc_topics().values()) if texts is None else list(texts)
    random.Random(seed).shuffle(texts)
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    key = f"bpe-v{vocab_size}-s{seed}-{digest}-tok{hf_tokenizers.__version__}"
    if cache:
        path = cache_dir("tokenizers") / key
        if (path / "tokenizer.json").is_file():
            return load_tokenizer(path)
    tok = _wrap(_train_bpe_object(texts, vocab_size))
    if cache:
        _save_atomic(tok, path)
    return tok


def _save_atomic(tok, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        tok.save_pretrained(tmp)
        os.replace(tmp, path) if not path.exists() else shutil.rmtree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def char_tokenizer(alphabet: str):
    """A character-level tokenizer: ids 0-2 are the special tokens, then one id per character of ``alphabet``.

    Characters outside the alphabet map to ``<unk>``.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    chars = list(dict.fromkeys(alphabet))
    if not chars:
        raise ValueError("the alphabet is empty")
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
    for c in chars:
        vocab.setdefault(c, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(
        Regex(r"[\s\S]"), behavior="isolated"
    )  # every char, newlines too
    tok.decoder = decoders.Fuse()
    return _wrap(tok)


def load_tokenizer(path: str | Path):
    """Load a tokenizer saved with ``save_pretrained`` (our own or any fast tokenizer directory)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(path))
