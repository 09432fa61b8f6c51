"""Arithmetic-coding steganography: the baseline the spec compares Calgacus with (peers).

Ziegler, Deng & Rush 2019 ("Neural Linguistic Steganography", EMNLP) hide a *bit string* by arithmetic
*decoding* it under the LM: the bits are read as a binary fraction v ∈ [0, 1); at each step the current
interval [low, high) is cut in proportion to the next-token probabilities, the cover token is the one whose
sub-interval holds v, and the leading bits that the interval's ends now share are fixed (emitted). The
receiver re-runs the same cuts on the cover tokens and reads the fixed bits back. Covers are samples of
the model (near-distribution-preserving: cover log-prob ≈ −entropy), but of *variable* length
(≈ message bits / entropy per token); Calgacus instead maps n tokens of text to n tokens of text and is not
distribution-preserving.

Integer arithmetic with ``precision`` bits (Python ints): with R = high − low, token j gets
``floor(p_j · R)`` slots (tokens by decreasing probability, ties by id; the two most likely get at least
one, so every step narrows the interval; tokens with 0 slots are dropped — the paper's truncation — and the
remainder goes to the most likely token), so every interval is non-empty and both sides cut identically
from identical logits. The message is framed as a 16-bit byte
count then the bytes. The same incremental `RankLM` session as Calgacus gives the logits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .ranks import CalgacusError, RankLM, context_or_start

HEADER_BITS = 16


@dataclass
class ArithmeticStegotext:
    """An arithmetic-coding cover: ``ids``/``text``, payload ``n_bits`` in ``n_tokens`` cover tokens."""

    text: str
    ids: list[int]
    n_bits: int
    n_tokens: int
    bits_per_token: float
    cover_logprob: float  # mean log P(s_i | k, s_<i), nats/token (full vocabulary)
    seconds: float


def _bits(data: bytes) -> list[int]:
    if len(data) >= 1 << HEADER_BITS:
        raise CalgacusError(f"arithmetic coding frames at most {(1 << HEADER_BITS) - 1} bytes")
    framed = len(data).to_bytes(HEADER_BITS // 8, "big") + data
    return [(byte >> (7 - k)) & 1 for byte in framed for k in range(8)]


def _cuts(logits: Any, mask: Any, span: int) -> tuple[list[int], list[int]]:
    """(tokens, cumulative slot starts) for an interval of ``span`` slots: tokens by decreasing
    probability (ties by id), ``floor(p · span)`` slots each (the first two at least one, so the interval
    always narrows), zero-slot tokens dropped, remainder to the first token. ``cum`` has one more entry than ``tokens`` (its last is ``span``)."""
    import torch

    ids = torch.nonzero(mask, as_tuple=False).flatten()
    p = torch.softmax(logits[ids].double(), -1)
    order = torch.argsort(-p, stable=True)
    slots = torch.floor(p[order] * span).long()
    if span >= 2 and slots.numel() >= 2:  # at least two tokens, so every step narrows the interval
        slots[:2] = slots[:2].clamp(min=1)
    keep = slots > 0
    tokens = ids[order][keep].tolist()
    widths = slots[keep].tolist()
    if not tokens:  # span too small for any token: the most likely one takes it all
        tokens, widths = [int(ids[order[0]])], [span]
    widths[0] += span - sum(widths)
    cum = [0]
    for w in widths:
        cum.append(cum[-1] + w)
    return tokens, cum


def _shift(low: int, high: int, precision: int) -> tuple[int, int, int]:
    """Drop the leading bits that ``low`` and ``high − 1`` share: returns (k, low', high')."""
    top = high - 1
    k = 0
    while k < precision and ((low >> (precision - 1 - k)) & 1) == ((top >> (precision - 1 - k)) & 1):
        k += 1
    mask = (1 << precision) - 1
    return k, (low << k) & mask, (((top << k) & mask) | ((1 << k) - 1)) + 1


def ac_encode(
    message: bytes,
    key: str,
    model: Any,
    tokenizer: Any = None,
    *,
    precision: int = 32,
    max_tokens: int = 20000,
) -> ArithmeticStegotext:
    """Hide ``message`` in a cover that continues ``key`` (see the module docstring)."""
    from .resolve import resolve_model

    lm: RankLM = resolve_model(model, tokenizer)
    t0 = time.perf_counter()
    bits = _bits(bytes(message))
    mask = lm.admissible_mask()
    sess = lm.session(context_or_start(lm, lm.encode_text(key) if key else []))
    low, high, fixed = 0, 1 << precision, 0
    ids: list[int] = []
    lps: list[float] = []
    while fixed < len(bits):
        if len(ids) >= max_tokens:
            raise CalgacusError(f"arithmetic coding needs more than {max_tokens} cover tokens")
        window = bits[fixed : fixed + precision]
        v = int("".join(map(str, window + [0] * (precision - len(window)))), 2)
        logits = sess.logits()
        tokens, cum = _cuts(logits, mask, high - low)
        j = next(j for j in range(len(tokens)) if v < low + cum[j + 1])
        low, high = low + cum[j], low + cum[j + 1]
        k, low, high = _shift(low, high, precision)
        fixed += k
        ids.append(tokens[j])
        lps.append(float(logits.double().log_softmax(-1)[tokens[j]]))
        sess.append(tokens[j])
    n_bits = 8 * len(message)
    return ArithmeticStegotext(
        text=lm.decode_ids(ids),
        ids=ids,
        n_bits=n_bits,
        n_tokens=len(ids),
        bits_per_token=n_bits / max(len(ids), 1),
        cover_logprob=sum(lps) / max(len(lps), 1),
        seconds=time.perf_counter() - t0,
    )


def ac_decode(ids: list[int], key: str, model: Any, tokenizer: Any = None, *, precision: int = 32) -> bytes:
    """Read the message back from the cover ``ids`` (same model, key and precision)."""
    from .resolve import resolve_model

    lm: RankLM = resolve_model(model, tokenizer)
    mask = lm.admissible_mask()
    sess = lm.session(context_or_start(lm, lm.encode_text(key) if key else []))
    low, high = 0, 1 << precision
    out: list[int] = []
    need = HEADER_BITS
    for i, t in enumerate(ids):
        tokens, cum = _cuts(sess.logits(), mask, high - low)
        try:
            j = tokens.index(int(t))
        except ValueError:
            raise CalgacusError(f"cover token {i} (id {t}) is outside the coded interval") from None
        low, high = low + cum[j], low + cum[j + 1]
        top = low
        k, low, high = _shift(low, high, precision)
        out += [(top >> (precision - 1 - b)) & 1 for b in range(k)]
        if len(out) >= HEADER_BITS:
            need = HEADER_BITS + 8 * int("".join(map(str, out[:HEADER_BITS])), 2)
        if len(out) >= need:
            break
        sess.append(int(t))
    if len(out) < need:
        raise CalgacusError("the cover ends before the message does (truncated or altered)")
    payload = out[HEADER_BITS:need]
    return bytes(int("".join(map(str, payload[i : i + 8])), 2) for i in range(0, len(payload), 8))
