"""The Calgacus protocol: `encode` a secret text e into a cover text s of the same token length, `decode` it.

Shared secret: the model P, the key prompt k and the secret prefix k' (paper default ``"A text:"``).

    Encode(e):  x = tok(e);  r_i = rank_{k' + x_<i}(x_i);  s_i = tok_{k + s_<i}(r_i);  cover = detok(s)
    Decode(s):  r_i = rank_{k + s_<i}(s_i);  e_i = tok_{k' + e_<i}(r_i);  secret = detok(e)

|s| = |x| = n tokens; each side costs about 2n incremental forward steps (plus the prompts). k, k' and the
texts are tokenised separately and their ids concatenated (no joint tokenisation across the boundary); an
empty prompt starts from BOS (or a newline token). ``admissible="canonical"`` keeps only cover candidates v
for which tok(detok(s_<i + [v])) == s_<i + [v] (the decoder applies the same filter, which depends on s_<i
only), so the cover text re-tokenises to exactly s; the secret side always ranks over the full admissible
alphabet. A rank beyond the cover's filtered alphabet raises `CalgacusError`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .hf import resolve_model
from .ranks import CalgacusError, RankLM, token_ranks, tokens_from_ranks

ADMISSIBLE = ("all", "canonical")
TRANSPORTS = ("text", "ids")


@dataclass
class Stegotext:
    """The cover text and what produced it. ``ranks[i]`` is the secret's rank at step i (where the cover
    degrades: large ranks); ``cover_logprob`` is the mean log P(s_i | k, s_<i) in nats/token."""

    text: str
    ids: list[int]
    ranks: list[int]
    n_tokens: int
    cover_logprob: float
    seconds: float
    secret_ids: list[int] = field(default_factory=list, repr=False)
    steps: int = 0  # incremental forward steps used

    def __str__(self) -> str:
        return self.text


def _prompt_ids(lm: RankLM, text: str, what: str) -> list[int]:
    ids = lm.encode_text(text) if text else []
    if text and not ids:
        raise CalgacusError(f"the {what} {text!r} tokenises to nothing")
    bad = [i for i in ids if i in lm.special_ids]
    if bad:
        raise CalgacusError(
            f"the {what} contains special tokens ({lm.decode_ids(bad[:3])!r}); use plain text"
        )
    return ids


def _text_ids(lm: RankLM, text: str, what: str) -> list[int]:
    ids = lm.encode_text(text)
    special = [i for i in ids if i in lm.special_ids]
    if special:
        raise CalgacusError(
            f"the {what} contains token(s) outside the admissible alphabet "
            f"({lm.decode_ids(special[:3])!r}: special or unknown characters)"
        )
    return ids


def _check_length(lm: RankLM, n: int, *contexts: list[int]) -> None:
    if lm.max_positions is None:
        return
    need = max(len(c) or len(lm.start_ids) for c in contexts) + n
    if need > lm.max_positions:
        raise CalgacusError(
            f"text of {n} tokens + prompt need {need} positions but the model has "
            f"{lm.max_positions}; shorten the text or the key (no silent truncation)"
        )


def canonical_filter(lm: RankLM):
    """``accept(prefix, v)``: tok(detok(prefix + [v])) == prefix + [v]; ``None`` for bijective vocabularies."""
    if getattr(lm, "bijective", False):
        return None

    def accept(prefix: list[int], v: int) -> bool:
        ids = [*prefix, v]
        return lm.encode_text(lm.decode_ids(ids)) == ids

    return accept


def _filter(lm: RankLM, admissible: str):
    if admissible not in ADMISSIBLE:
        raise CalgacusError(f"admissible must be one of {', '.join(ADMISSIBLE)}, got {admissible!r}")
    return canonical_filter(lm) if admissible == "canonical" else None


def encode(
    secret: str,
    key: str,
    model: Any,
    tokenizer: Any = None,
    *,
    secret_prefix: str = "A text:",
    admissible: str = "all",
    trailer: str | None = None,
    transport: str = "text",
) -> Stegotext:
    """Hide ``secret`` in a cover text of the same token length that continues ``key`` under ``model``.

    ``model``: a `transformers` causal LM (with ``tokenizer``), a path/hub id, ``"tiny"`` or any `RankLM`.
    ``trailer`` (e.g. ``".\\n\\n"``) is appended to the secret before encoding (so the cover ends naturally)
    and stripped by `decode` with the same ``trailer``. With ``transport="text"`` (default) the cover text
    must re-tokenise to the cover ids, else `CalgacusError` (use ``admissible="canonical"``, or
    ``transport="ids"`` and ship ``Stegotext.ids``).
    """
    if transport not in TRANSPORTS:
        raise CalgacusError(f"transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
    lm = resolve_model(model, tokenizer)
    accept = _filter(lm, admissible)
    t0 = time.perf_counter()
    key_ids = _prompt_ids(lm, key, "key")
    prefix_ids = _prompt_ids(lm, secret_prefix, "secret prefix")
    x = _text_ids(lm, secret + (trailer or ""), "secret")
    _check_length(lm, len(x), key_ids, prefix_ids)
    ranks = token_ranks(lm, prefix_ids, x)
    lps: list[float] = []
    s = tokens_from_ranks(lm, key_ids, ranks, accept=accept, logprobs=lps)
    text = lm.decode_ids(s)
    if transport == "text" and lm.encode_text(text) != s:
        raise CalgacusError(
            "the cover text does not re-tokenise to the cover tokens (BPE re-merge); "
            "use admissible='canonical', or transport='ids' and send Stegotext.ids"
        )
    n = len(s)
    steps = 2 * max(n - 1, 0) + len(key_ids or lm.start_ids) + len(prefix_ids or lm.start_ids) if n else 0
    return Stegotext(
        text=text,
        ids=s,
        ranks=ranks,
        n_tokens=n,
        cover_logprob=sum(lps) / n if n else float("nan"),
        seconds=time.perf_counter() - t0,
        secret_ids=x,
        steps=steps,
    )


def decode(
    stegotext: str | Stegotext | Sequence[int],
    key: str,
    model: Any,
    tokenizer: Any = None,
    *,
    secret_prefix: str = "A text:",
    admissible: str = "all",
    trailer: str | None = None,
) -> str:
    """Recover the secret from a cover text (or its ids) with the same model, key, prefix and filter."""
    lm = resolve_model(model, tokenizer)
    accept = _filter(lm, admissible)
    if isinstance(stegotext, Stegotext):
        s = list(stegotext.ids)
    elif isinstance(stegotext, str):
        s = lm.encode_text(stegotext)
    else:
        s = [int(i) for i in stegotext]
    key_ids = _prompt_ids(lm, key, "key")
    prefix_ids = _prompt_ids(lm, secret_prefix, "secret prefix")
    _check_length(lm, len(s), key_ids, prefix_ids)
    ranks = token_ranks(lm, key_ids, s, accept=accept)
    try:
        e = tokens_from_ranks(lm, prefix_ids, ranks)
    except CalgacusError as exc:
        raise CalgacusError(f"cannot decode: {exc} (wrong key, model or filter?)") from None
    secret = lm.decode_ids(e)
    if trailer:
        if not secret.endswith(trailer):
            raise CalgacusError(
                f"the decoded text does not end with the trailer {trailer!r} "
                "(wrong key/model, or no trailer was used)"
            )
        secret = secret[: -len(trailer)]
    return secret


def plausibility(text: str, context: str, model: Any, tokenizer: Any = None) -> float:
    """Mean log-probability per token of ``text`` after ``context`` under ``model``, in nats (≤ 0)."""
    lm = resolve_model(model, tokenizer)
    ctx = _prompt_ids(lm, context, "context")
    x = lm.encode_text(text)
    if not x:
        raise CalgacusError("plausibility of an empty text is undefined")
    lps = lm.logprobs(ctx, x)
    return sum(lps) / len(lps)


def random_rank_text(lm: RankLM, key: str, n: int, seed: int = 0) -> tuple[str, list[int]]:
    """The null cover: ranks drawn uniformly from 1..|A|, generated after ``key``; returns (text, ids)."""
    import random

    size = int(lm.admissible_mask().sum())
    rng = random.Random(seed)
    ranks = [rng.randint(1, size) for _ in range(n)]
    ids = tokens_from_ranks(lm, _prompt_ids(lm, key, "key"), ranks)
    return lm.decode_ids(ids), ids
