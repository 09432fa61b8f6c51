"""The Calgacus protocol: `encode` a secret text e into a cover text s of the same token length, `decode` it.

Shared secret: the model P, the key prompt k and the secret prefix k' (paper default ``"A text:"``).

    Encode(e):  x = tok(e);  r_i = rank_{k' + x_<i}(x_i);  s_i = tok_{k + s_<i}(r_i);  cover = detok(s)
    Decode(s):  r_i = rank_{k + s_<i}(s_i);  e_i = tok_{k' + e_<i}(r_i);  secret = detok(e)

|s| = |x| = n tokens; each side costs about 2n incremental forward steps (plus the prompts). k, k' and the
texts are tokenised separately and their ids concatenated (no joint tokenisation across the boundary); an
empty prompt starts from BOS (or a newline token). The secret side ranks over the full admissible alphabet;
the cover side ranks a *permutation* of the same alphabet (``canonical.py``: candidates whose cover text
re-tokenises exactly first, the others after), so every secret maps to a cover and ``encode`` never refuses
one; ``Stegotext.text_exact`` says whether the cover *text* re-tokenises to the cover ids (else ship the
ids). ``decode`` of a `Stegotext` checks the model fingerprint and the prompts recorded at encode.
"""

from __future__ import annotations

import hashlib
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .canonical import WHITESPACE, CoverFilter, normalize
from .ranks import CalgacusError, RankLM, token_ranks, tokens_from_ranks
from .resolve import resolve_model

ADMISSIBLE = ("all", "canonical")
TRANSPORTS = ("text", "ids")
LOSSY = ("refuse", "warn")


class CalgacusWarning(UserWarning):
    """Something the user should know that does not stop the protocol (short-context model, inexact text)."""


@dataclass
class Stegotext:
    """The cover text and what produced it. ``ranks[i]`` is the secret's rank at step i (where the cover
    degrades: large ranks); ``cover_logprob`` is the mean log P(s_i | k, s_<i) in nats/token.

    ``text_exact``: the cover text (after the declared ``whitespace`` normalisation) re-tokenises to
    ``ids``, so sending the text is enough; otherwise send ``ids``. ``rejected_steps``: the steps whose cover
    token is one the filter ranks last (a secret rank beyond the accepted candidates). ``fingerprint`` and
    ``checks`` (16-bit checks of the key and the secret prefix) let `decode` refuse a mismatch.
    """

    text: str
    ids: list[int]
    ranks: list[int]
    n_tokens: int
    cover_logprob: float
    seconds: float
    secret_ids: list[int] = field(default_factory=list, repr=False)
    steps: int = 0  # incremental forward steps used
    text_exact: bool = True
    rejected_steps: list[int] = field(default_factory=list)
    admissible: str = "all"
    whitespace: str = "exact"
    fingerprint: dict[str, Any] = field(default_factory=dict, repr=False)
    checks: dict[str, str] = field(default_factory=dict, repr=False)

    def __str__(self) -> str:
        return self.text


def prompt_check(text: str) -> str:
    """A 16-bit check (4 hex digits of SHA-256) of a prompt: catches a mistyped key or prefix on decode
    (1 in 65,536 slips through) while saying little about the prompt itself."""
    return hashlib.sha256(b"calgacus-prompt\0" + text.encode("utf-8")).hexdigest()[:4]


def _checks(key: str, prefix: str) -> dict[str, str]:
    return {"key": prompt_check(key), "secret_prefix": prompt_check(prefix)}


def _fingerprint(lm: RankLM) -> dict[str, Any]:
    fn = getattr(lm, "fingerprint", None)
    return dict(fn()) if fn else {}


def _warn_short_context(lm: RankLM, key: str, prefix: str) -> None:
    n = getattr(lm, "context_size", None)
    if n is not None and (key or prefix):
        warnings.warn(
            f"{getattr(lm, 'name', 'this model')} sees only the last {n} symbol(s) of the key and of the "
            f"secret prefix: a wrong key ending in the same {n} symbols decodes the secret, and the cover "
            "copies the secret once their last symbols agree; use a long-context model for secrecy",
            CalgacusWarning,
            stacklevel=3,
        )


def _prompt_ids(lm: RankLM, text: str, what: str) -> list[int]:
    enc = getattr(lm, "encode_prompt", lm.encode_text)
    ids = enc(text) if text else []
    if text and not ids:
        raise CalgacusError(f"the {what} {text!r} tokenises to nothing")
    bad = [i for i in ids if i in lm.special_ids]
    if bad:
        raise CalgacusError(
            f"the {what} contains special tokens or characters the model does not know "
            f"({lm.decode_ids(bad[:3])!r}); use plain text"
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


def _check_round_trip(lm: RankLM, text: str, ids: list[int], lossy: str) -> None:
    """Refuse (or warn about) a secret the tokenizer does not give back: detok(tok(e)) != e (a normaliser,
    e.g. NFC turning "e\u0301" into "é", or a pre-tokeniser that drops a space), which decode could never
    return."""
    back = lm.decode_ids(ids)
    if back == text:
        return
    i = next((i for i, (a, b) in enumerate(zip(back, text)) if a != b), min(len(back), len(text)))
    msg = (
        f"the tokenizer does not round-trip the secret: from character {i}, {text[i : i + 8]!r} comes back "
        f"as {back[i : i + 8]!r}, so decode would return the altered text"
    )
    if lossy == "refuse":
        raise CalgacusError(msg + "; normalise the secret first (e.g. unicodedata.normalize('NFC', s))")
    warnings.warn(msg, CalgacusWarning, stacklevel=3)


def _check_length(lm: RankLM, n: int, *contexts: list[int]) -> None:
    if lm.max_positions is None:
        return
    need = max(len(c) or len(lm.start_ids) for c in contexts) + n
    if need > lm.max_positions:
        raise CalgacusError(
            f"text of {n} tokens + prompt need {need} positions but the model has "
            f"{lm.max_positions}; shorten the text or the key (no silent truncation)"
        )


def canonical_filter(lm: RankLM, whitespace: str = "exact") -> CoverFilter | None:
    """The cover-side filter of ``admissible="canonical"`` (``None`` when it would accept everything)."""
    f = CoverFilter(lm, canonical=True, whitespace=whitespace)
    return f if f.active else None


def _filter(lm: RankLM, admissible: str, whitespace: str = "exact") -> CoverFilter | None:
    if admissible not in ADMISSIBLE:
        raise CalgacusError(f"admissible must be one of {', '.join(ADMISSIBLE)}, got {admissible!r}")
    if whitespace not in WHITESPACE:
        raise CalgacusError(f"whitespace must be one of {', '.join(WHITESPACE)}, got {whitespace!r}")
    f = CoverFilter(lm, canonical=admissible == "canonical", whitespace=whitespace)
    return f if f.active else None


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
    whitespace: str = "exact",
    lossy: str = "refuse",
) -> Stegotext:
    """Hide ``secret`` in a cover text of the same token length that continues ``key`` under ``model``.

    ``model``: a `transformers` causal LM (with ``tokenizer``), a path/hub id, ``"tiny"`` or any `RankLM`.
    ``admissible="canonical"`` ranks cover candidates whose text re-tokenises exactly first (BPE);
    ``whitespace="lf"`` declares that the receiver reads CR LF / CR as LF (the cover avoids CR).
    ``trailer`` (e.g. ``".\\n\\n"``) is appended to the secret before encoding (so the cover ends naturally)
    and stripped by `decode` with the same ``trailer``. A secret the tokenizer does not give back
    (detok(tok(e)) != e, e.g. under an NFC normaliser) is refused (``lossy="refuse"``, a `CalgacusError`)
    or encoded with a `CalgacusWarning` (``lossy="warn"``). Every secret the tokenizer can represent is
    encoded; when the cover text does not re-tokenise exactly (``text_exact`` False) and
    ``transport="text"``, a `CalgacusWarning` says to send ``Stegotext.ids`` instead.
    """
    if transport not in TRANSPORTS:
        raise CalgacusError(f"transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
    if lossy not in LOSSY:
        raise CalgacusError(f"lossy must be one of {', '.join(LOSSY)}, got {lossy!r}")
    lm = resolve_model(model, tokenizer)
    accept = _filter(lm, admissible, whitespace)
    _warn_short_context(lm, key, secret_prefix)
    t0 = time.perf_counter()
    key_ids = _prompt_ids(lm, key, "key")
    prefix_ids = _prompt_ids(lm, secret_prefix, "secret prefix")
    x = _text_ids(lm, secret + (trailer or ""), "secret")
    _check_round_trip(lm, secret + (trailer or ""), x, lossy)
    _check_length(lm, len(x), key_ids, prefix_ids)
    ranks = token_ranks(lm, prefix_ids, x)
    lps: list[float] = []
    rejected: list[int] = []
    s = tokens_from_ranks(lm, key_ids, ranks, accept=accept, logprobs=lps, rejected=rejected)
    text = lm.decode_ids(s)
    exact = lm.encode_text(normalize(text, whitespace)) == s
    if transport == "text" and not exact:
        warnings.warn(
            f"the cover text does not re-tokenise to its {len(s)} cover ids "
            f"({len(rejected)} step(s) used a filtered-out token); send Stegotext.ids (transport='ids')"
            + ("" if admissible == "canonical" else " or use admissible='canonical'"),
            CalgacusWarning,
            stacklevel=2,
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
        text_exact=exact,
        rejected_steps=rejected,
        admissible=admissible,
        whitespace=whitespace,
        fingerprint=_fingerprint(lm),
        checks=_checks(key, secret_prefix),
    )


def _check_record(st: Stegotext, lm: RankLM, key: str, prefix: str, admissible: str, whitespace: str) -> None:
    """Refuse to decode a `Stegotext` with another model, other prompts or another filter."""
    fp = _fingerprint(lm)
    for k, v in st.fingerprint.items():
        if k in fp and k != "model" and fp[k] != v:
            raise CalgacusError(
                f"the stegotext was made with {k}={v!r} but this model has {fp[k]!r}: "
                "decoding needs the identical model and tokenizer"
            )
    mine = _checks(key, prefix)
    for k, v in st.checks.items():
        if mine.get(k, v) != v:
            raise CalgacusError(f"the {k.replace('_', ' ')} differs from the one used at encode (check {v})")
    if (admissible, whitespace) != (st.admissible, st.whitespace):
        raise CalgacusError(
            f"the stegotext was made with admissible={st.admissible!r}, whitespace={st.whitespace!r}; "
            f"decode was asked for {admissible!r}, {whitespace!r}"
        )


def decode(
    stegotext: str | Stegotext | Sequence[int],
    key: str,
    model: Any,
    tokenizer: Any = None,
    *,
    secret_prefix: str = "A text:",
    admissible: str | None = None,
    trailer: str | None = None,
    whitespace: str | None = None,
) -> str:
    """Recover the secret from a cover text (or its ids) with the same model, key, prefix and filter.

    A `Stegotext` is decoded from its ids, after checking the model fingerprint, the key and the secret
    prefix against those recorded at encode; ``admissible``/``whitespace`` default to its own (else to
    ``"all"``/``"exact"``). A text is first normalised as ``whitespace`` declares.
    """
    lm = resolve_model(model, tokenizer)
    if isinstance(stegotext, Stegotext):
        admissible = admissible or stegotext.admissible
        whitespace = whitespace or stegotext.whitespace
        _check_record(stegotext, lm, key, secret_prefix, admissible, whitespace)
    admissible, whitespace = admissible or "all", whitespace or "exact"
    accept = _filter(lm, admissible, whitespace)
    _warn_short_context(lm, key, secret_prefix)
    if isinstance(stegotext, Stegotext):
        s = list(stegotext.ids)
    elif isinstance(stegotext, str):
        s = lm.encode_text(normalize(stegotext, whitespace))
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
