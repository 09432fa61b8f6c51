"""The cover-side filter: ``admissible="canonical"`` (local re-tokenisation) and declared whitespace.

A filter ``accept(prefix, v)`` only *reorders* the cover alphabet at a step (accepted candidates first, then
rejected ones, see ``ranks.py``), so the protocol stays a bijection whatever it says; it decides how often
the cover *text* re-tokenises to the cover ids (``Stegotext.text_exact``). Both sides compute it from
``s_<i`` and ``v`` only.

**Canonical, locally** (spec, "No rank can overflow"). With a BPE tokenizer tok(detok(s)) may differ from
s (re-merges: " the" + "me" → " theme"). Tokens never cross a pre-tokenised word, so only the last word can
change when ``v`` is appended: the filter re-tokenises the *window* ``w = s_j..s_<i + [v]`` that starts at
the last word start of ``s_<i`` (at most ``window`` tokens back), or ``w = [v]`` when ``v`` starts a word
right after a token that ends in a non-space, and accepts ``v`` iff tok(detok(w)) == w; on a canonical
prefix this is the whole-prefix check (tested on byte-level "Ġ" and SentencePiece "▁" tokenizers).

Word starts are read from each token's text *in context*, ``decode(anchor + [t])`` minus the anchor's
text (the anchor is the word "x"): " the" for "Ġthe" and for "▁the" alike, where ``decode([t])`` alone
drops a "▁" token's space. A window inside the cover is decoded and re-tokenised after the anchor, so a
tokenizer that prepends "▁" to a text and strips the first space on decode (Llama-2, Mistral, Gemma)
treats it as it sits in the cover; a window at the cover's start is checked as the start of a text.

So one forced (rejected) step does not reject every later
candidate, as a whole-prefix check would. Byte-level tokens that end in an incomplete UTF-8 character
(they decode to U+FFFD) are *pending*: ``v`` is accepted when the pending tail is the start of one
character and the window without it re-tokenises to itself before a non-space character (so a whitespace
run that the coming character would split is rejected); after a pending token only tokens that keep or
complete the character pass, and the completed word is checked at a later step (and by ``text_exact``).

**Whitespace** (declared, never silent): ``whitespace="lf"`` means the receiver reads CR LF and CR as LF;
the filter then rejects cover tokens that contain a CR, so the cover survives a line-ending conversion.
``"exact"`` (default) changes nothing: one altered space or newline garbles the rest of the secret.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

WHITESPACE = ("exact", "lf")
_PENDING = "\ufffd"


def normalize(text: str, whitespace: str) -> str:
    """The declared normalisation the receiver applies before tokenising (``"lf"``: CR LF, CR → LF)."""
    if whitespace == "lf":
        return text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def encode_many(lm: Any, texts: list[str]) -> list[list[int]]:
    """``[lm.encode_text(t) for t in texts]``, batched when the model offers it."""
    fn = getattr(lm, "encode_many", None)
    return fn(texts) if fn else [lm.encode_text(t) for t in texts]


def decode_many(lm: Any, seqs: list[list[int]]) -> list[str]:
    fn = getattr(lm, "decode_many", None)
    return fn(seqs) if fn else [lm.decode_ids(s) for s in seqs]


def fast_encode_many(tokenizer: Any, texts: list[str]) -> list[list[int]] | None:
    """A `transformers` fast tokenizer's ``tokenizer(texts, add_special_tokens=False,
    split_special_tokens=True)["input_ids"]`` straight from its Rust backend (``None`` for a slow one)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    backend.encode_special_tokens = True  # what split_special_tokens=True sets
    return [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]


def fast_decode_many(tokenizer: Any, seqs: list[list[int]]) -> list[str] | None:
    """``[tokenizer.decode(s, skip_special_tokens=False, clean_up_tokenization_spaces=False) ...]`` from
    the Rust backend (``None`` for a slow tokenizer)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    return backend.decode_batch(seqs, skip_special_tokens=False)


class CoverFilter:
    """``accept(prefix, v)`` for the cover side; ``many(prefix, vs)`` classifies candidates in one batch."""

    def __init__(self, lm: Any, canonical: bool, whitespace: str = "exact", window: int = 64) -> None:
        self.lm = lm
        self.canonical = bool(canonical) and not getattr(lm, "bijective", False)
        self.no_cr = whitespace == "lf"
        self.window = int(window)
        self._texts: dict[int, str] = {}
        self._anchor: list[int] | None = None

    @property
    def active(self) -> bool:
        return self.canonical or self.no_cr

    @property
    def anchor(self) -> list[int]:
        """The ids of a one-letter word ("x") that ends in a non-space: windows that start at a word start
        inside the cover are decoded and re-tokenised after it, so a tokenizer that marks or strips the
        text's first space ("▁" SentencePiece: Prepend on encode, Strip on decode) sees the window as it
        sits in the cover, not as the start of a text. Empty if "x" does not round-trip."""
        if self._anchor is None:
            ids = self.lm.encode_text("x")
            self._anchor = ids if ids and self.lm.decode_ids(ids) == "x" else []
        return self._anchor

    def token_text(self, t: int) -> str:
        """The text token ``t`` adds after a word (``decode(anchor + [t])`` minus the anchor's text): " the"
        for both "Ġthe" and "▁the", where ``decode([t])`` alone gives "the" for a "▁" vocabulary."""
        got = self._texts.get(t)
        if got is None:
            a = self.anchor
            got = self.lm.decode_ids([*a, t])[len(self.lm.decode_ids(a)) if a else 0 :]
            self._texts[t] = got
        return got

    def word_start(self, t: int) -> bool:
        """Whether token ``t`` begins a pre-tokenised word: its text in context begins with whitespace."""
        return self.token_text(t)[:1].isspace()

    def window_start(self, prefix: Sequence[int]) -> int:
        """Index of the last word start in ``prefix`` (at most ``window`` tokens back)."""
        lo = max(0, len(prefix) - self.window)
        for j in range(len(prefix) - 1, lo - 1, -1):
            if self.word_start(prefix[j]):
                return j
        return lo

    def __call__(self, prefix: Sequence[int], v: int) -> bool:
        return self.many(prefix, [v])[0]

    def many(self, prefix: Sequence[int], vs: Sequence[int]) -> list[bool]:
        ok = [not (self.no_cr and "\r" in self.token_text(v)) for v in vs]
        if not self.canonical:
            return ok
        j = self.window_start(prefix)
        base = list(prefix[j:])
        # after a token that ends in a non-space (and no pending byte), a candidate that begins with
        # whitespace starts a new word on its own (nothing before it can re-merge with it)
        last = self.token_text(prefix[-1])[-1:] if prefix else ""
        ends_word = bool(last) and not last.isspace() and last != _PENDING
        # a window inside the cover that starts at a word start is checked after the anchor word; one at
        # the cover's start is checked as the start of a text (exactly the whole-prefix check)
        a = self.anchor
        base_anchor = a if j > 0 and base and self.word_start(base[0]) else []
        todo = [i for i, good in enumerate(ok) if good]
        windows: list[list[int] | None] = [
            [*a, vs[i]] if ends_word and self.word_start(vs[i]) else [*base_anchor, *base, vs[i]]
            for i in todo
        ]
        texts = decode_many(self.lm, windows)
        head_len: dict[int, int] = {}  # pending windows: compare only the complete head
        for k, (w, text) in enumerate(zip(windows, texts)):
            if text.endswith(_PENDING):  # an incomplete UTF-8 character at the end: check what is complete
                part = self._complete_part(w)
                if part is None:
                    windows[k] = None
                    continue
                # the character to come is not a space: the head must stay canonical before one
                windows[k], texts[k] = part[0], part[1] + _PENDING
                head_len[k] = len(part[0])
        checked = [k for k, w in enumerate(windows) if w]
        ids = encode_many(self.lm, [texts[k] for k in checked])
        verdict = {k: w is not None for k, w in enumerate(windows)}
        for k, got in zip(checked, ids):
            n = head_len.get(k)
            verdict[k] = (list(got) if n is None else list(got)[:n]) == windows[k]
        for k, i in enumerate(todo):
            ok[i] = verdict[k]
        return ok

    def _complete_part(self, w: list[int]) -> tuple[list[int], str] | None:
        """``w`` without its pending tail (≤ 3 tokens of one unfinished character) and its text; ``None``
        when the tail is not the start of one character (two lead bytes, or more than 3 tokens)."""
        for m in range(1, min(3, len(w)) + 1):
            head = w[: len(w) - m]
            text = self.lm.decode_ids(head) if head else ""
            if not text.endswith(_PENDING):
                tail = self.lm.decode_ids(w[len(w) - m :])
                return (head, text) if tail.endswith(_PENDING) and tail.count(_PENDING) == 1 else None
        return None
