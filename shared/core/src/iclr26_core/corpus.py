"""Text that ships with Python itself, as `datasets.Dataset`s; never a download.

The corpus is the stdlib's ``pydoc_data.topics``: ~80 help topics (the language reference), about
1 MB of English technical prose with code. Splits are by topic, so validation text is never seen in
training. Plus small synthetic generators for tasks with a known answer, and WikiText-2 blocks on request
(`lm_blocks(..., "wikitext2")`, the one path that reads the hub).
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from .errors import UserError


def pydoc_topics() -> dict[str, str]:
    """{topic name: text} of the stdlib's pydoc help topics, sorted by name."""
    from pydoc_data.topics import topics

    return {name: topics[name] for name in sorted(topics)}


def _split_of(name: str, val_fraction: float, seed: int) -> str:
    # a stable hash of (seed, topic): the split of a topic does not depend on the other topics
    h = int(hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "validation" if h < val_fraction else "train"


def pydoc_dataset(val_fraction: float = 0.1, seed: int = 0):
    """The pydoc topics as a ``datasets.DatasetDict`` with ``train``/``validation`` splits by topic.

    Columns: ``topic`` (str), ``text`` (str). Deterministic for ``(val_fraction, seed)``; both splits
    are non-empty.
    """
    import datasets

    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    topics = pydoc_topics()
    rows: dict[str, dict[str, list[str]]] = {
        "train": {"topic": [], "text": []},
        "validation": {"topic": [], "text": []},
    }
    for name, text in topics.items():
        split = _split_of(name, val_fraction, seed)
        rows[split]["topic"].append(name)
        rows[split]["text"].append(text)
    if not rows["validation"]["topic"]:  # tiny fractions: move the largest-hash topic over
        name = max(topics, key=lambda n: hashlib.sha256(f"{seed}:{n}".encode()).hexdigest())
        i = rows["train"]["topic"].index(name)
        for col in ("topic", "text"):
            rows["validation"][col].append(rows["train"][col].pop(i))
    return datasets.DatasetDict({k: datasets.Dataset.from_dict(v) for k, v in rows.items()})


def pydoc_text(split: str | None = None, val_fraction: float = 0.1, seed: int = 0) -> str:
    """All pydoc text (``split=None``) or one split's, joined by blank lines."""
    if split is None:
        return "\n\n".join(pydoc_topics().values())
    return "\n\n".join(pydoc_dataset(val_fraction, seed)[split]["text"])


def _char_vocab(tokenizer: Any) -> dict[str, int] | None:
    """The vocabulary of a character tokenizer (`iclr26_core.tokenizers.char_tokenizer`, also after a
    save/load), or None for any other tokenizer."""
    import json

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or type(backend.model).__name__ != "WordLevel" or backend.normalizer is not None:
        return None
    pre = json.loads(backend.to_str()).get("pre_tokenizer") or {}
    if pre.get("type") != "Split" or pre.get("pattern") != {"Regex": r"[\s\S]"} or pre.get("invert"):
        return None
    return backend.get_vocab(with_added_tokens=False)


def encode_texts(texts: list[str], tokenizer: Any) -> list[list[int]]:
    """``tokenizer(texts, add_special_tokens=False)["input_ids"]``, faster.

    A character tokenizer maps each character through its vocabulary (about 100x faster than the
    transformers call on pydoc); another fast tokenizer encodes with its Rust backend directly (no
    offsets or masks); anything else goes through the tokenizer's own call. Same ids in every case.
    """
    texts = list(texts)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.truncation is not None or backend.padding is not None:
        return tokenizer(texts, add_special_tokens=False)["input_ids"]
    vocab = _char_vocab(tokenizer)
    added = backend.get_added_tokens_decoder().values()
    if vocab is not None and not any(a.content in t for a in added for t in texts):
        unk = backend.token_to_id(tokenizer.unk_token) if tokenizer.unk_token is not None else None
        if unk is not None:
            return [[vocab.get(c, unk) for c in t] for t in texts]
    return [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]


def token_blocks(texts: list[str], tokenizer: Any, seq_len: int, eos_id: int | None = None):
    """Tokenise ``texts``, join them with ``eos_id`` and cut into ``[n, seq_len]`` int64 blocks (tail dropped)."""
    import numpy as np
    import torch

    eos = tokenizer.eos_token_id if eos_id is None else eos_id
    ids: list[int] = []
    for enc in encode_texts(texts, tokenizer):
        ids.extend(enc)
        if eos is not None:
            ids.append(eos)
    n = len(ids) // seq_len
    if n == 0:
        raise ValueError(f"{len(ids)} tokens is less than one block of {seq_len}")
    return torch.from_numpy(np.asarray(ids[: n * seq_len], dtype=np.int64)).view(n, seq_len)


def lm_dataset(tokenizer: Any, seq_len: int = 128, val_fraction: float = 0.1, seed: int = 0):
    """pydoc text as ``datasets.DatasetDict`` of ``input_ids`` blocks (train/validation), torch format."""
    import datasets

    split = pydoc_dataset(val_fraction, seed)
    out = {}
    for name in ("train", "validation"):
        blocks = token_blocks(split[name]["text"], tokenizer, seq_len)
        out[name] = datasets.Dataset.from_dict({"input_ids": blocks.tolist()}).with_format("torch")
    return datasets.DatasetDict(out)


def wikitext2_blocks(tokenizer: Any, seq_len: int, split: str = "test"):
    """WikiText-2 (raw) ``split`` joined with blank lines, tokenised and cut into ``[n, seq_len]`` blocks (the
    perplexity protocol of the quantisation papers); offline without a cached copy: one `UserError`."""
    try:
        import datasets

        text = datasets.load_dataset("wikitext", "wikitext-2-raw-v1", split=split)["text"]
    except Exception as exc:  # offline, no cache
        raise UserError(
            f"lm.data=wikitext2 needs the WikiText-2 dataset from the hub ({type(exc).__name__}); "
            "use lm.data=pydoc offline"
        ) from None
    ids = tokenizer("\n\n".join(text), return_tensors="pt")["input_ids"][0]
    n = len(ids) // seq_len
    return ids[: n * seq_len].view(n, seq_len)


def lm_blocks(tokenizer: Any, data: str, seq_len: int, train: bool = True):
    """``(train, held-out)`` blocks of ``seq_len`` tokens for ``data``: ``"pydoc"`` (train/validation topics,
    `lm_dataset`) or ``"wikitext2"`` (train/test split; ``train=False`` skips tokenising its train split and
    gives ``None``). Any other name is one `UserError`."""
    if data == "wikitext2":
        return (wikitext2_blocks(tokenizer, seq_len, "train") if train else None), wikitext2_blocks(
            tokenizer, seq_len, "test"
        )
    if data != "pydoc":
        raise UserError(f"lm.data must be pydoc or wikitext2, got {data!r}")
    ds = lm_dataset(tokenizer, seq_len=seq_len)
    return ds["train"]["input_ids"], ds["validation"]["input_ids"]


def random_sequences(n: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    """``n`` uniform random token sequences: a null-information baseline for synthetic tasks."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(length)] for _ in range(n)]
