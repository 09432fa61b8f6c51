"""The miniature test cases (spec, Data): held-out pydoc paragraphs as secrets, first sentences of other
held-out topics as keys, and the genuine continuation of each key as the "real text" reference.

Reading of the spec (it is unsure here): the held-out split has only ~18 paragraphs of 150–300 characters, so
longer paragraphs are also cut at line breaks into 150–300-character pieces; the first ``n`` candidates in
a seeded shuffle are the secrets. A key is the first sentence (≤ ``key_max`` characters, ending at ". " or
a line end) of a paragraph of a *different* topic whose topic text continues for at least max_chars + 20
characters after it; that continuation is the genuine text.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass


@dataclass
class Case:
    secret: str
    key: str
    genuine: str  # the real continuation of the key in its topic (cut to the secret's token length later)
    secret_topic: str
    key_topic: str


def _pieces(text: str, lo: int, hi: int) -> list[str]:
    out = []
    for para in text.split("\n\n"):
        para = para.strip("\n")
        if lo <= len(para) <= hi:
            out.append(para)
        elif len(para) > hi:
            cur = ""
            for line in para.split("\n"):
                if cur and len(cur) + 1 + len(line) > hi:
                    if len(cur) >= lo:
                        out.append(cur)
                    cur = line
                else:
                    cur = f"{cur}\n{line}" if cur else line
            if lo <= len(cur) <= hi:
                out.append(cur)
    return out


def _keys(topic: str, text: str, key_max: int, need: int) -> list[tuple[str, str, str]]:
    out = []
    pos = 0
    for para in text.split("\n\n"):
        start = text.find(para, pos)
        pos = start + len(para)
        m = re.match(r"([A-Z][^*>=|]{19,}?[.:])(\s|$)", para, re.S)
        if not m or len(m.group(1)) > key_max:
            continue
        key = m.group(1)
        rest = text[start + len(key) :]
        if len(rest) >= need:
            out.append((topic, key, rest))
    return out


def make_cases(
    n: int,
    min_chars: int = 150,
    max_chars: int = 300,
    key_max: int = 120,
    seed: int = 0,
    val_fraction: float = 0.1,
) -> list[Case]:
    """``n`` (secret, key, genuine) cases from the held-out pydoc topics (deterministic for ``seed``)."""
    from iclr26_core.corpus import pydoc_dataset

    val = pydoc_dataset(val_fraction, seed=0)["validation"]
    secrets = [(t, p) for t, x in zip(val["topic"], val["text"]) for p in _pieces(x, min_chars, max_chars)]
    keys = [k for t, x in zip(val["topic"], val["text"]) for k in _keys(t, x, key_max, max_chars + 20)]
    if len(secrets) < n or not keys:
        raise ValueError(
            f"only {len(secrets)} held-out paragraphs of {min_chars}-{max_chars} chars for n={n}"
        )
    rng = random.Random(seed)
    rng.shuffle(secrets)
    rng.shuffle(keys)
    cases = []
    for i, (topic, secret) in enumerate(secrets[:n]):
        others = [k for k in keys if k[0] != topic] or keys
        kt, key, rest = others[i % len(others)]
        cases.append(Case(secret=secret, key=key, genuine=rest, secret_topic=topic, key_topic=kt))
    return cases


def long_secret(chars: int, seed: int = 0) -> str:
    """A ~``chars``-character held-out text (paragraphs joined), for the speed claim."""
    from iclr26_core.corpus import pydoc_dataset

    val = pydoc_dataset(0.1, seed=0)["validation"]
    text = "\n\n".join(val["text"])
    start = random.Random(seed).randrange(0, max(1, len(text) - chars))
    return text[start : start + chars]


def char_error_rate(hyp: str, ref: str) -> float:
    """Levenshtein distance(hyp, ref) / len(ref) (insertions, deletions, substitutions cost 1)."""
    if not ref:
        return float(len(hyp) > 0)
    prev = list(range(len(hyp) + 1))
    for i, rc in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, hc in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (rc != hc))
        prev = cur
    return prev[-1] / len(ref)


def replace_last_word(key: str, word: str = "banana") -> str:
    """The key with its last word replaced (a wrong key for C5)."""
    m = list(re.finditer(r"\w+", key))
    if not m:
        return key + " " + word
    last = m[-1]
    repl = word if last.group(0) != word else "apple"
    return key[: last.start()] + repl + key[last.end() :]


def encoder_judge_split(texts: list[str]) -> tuple[list[str], list[str]]:
    """Split training texts into two halves of about equal size (largest first, each to the lighter half):
    the C4 encoders learn from the first, the judge from the second, so the judge never saw their text."""
    enc: list[str] = []
    judge: list[str] = []
    n_enc = n_judge = 0
    for t in sorted(texts, key=len, reverse=True):
        if n_enc <= n_judge:
            enc.append(t)
            n_enc += len(t)
        else:
            judge.append(t)
            n_judge += len(t)
    return enc, judge


def aligned_copy(cover_ids: list[int], secret_ids: list[int], min_run: int = 8) -> tuple[float, int]:
    """Copying of the secret into its cover, position by position (both have the same token length):
    (fraction of cover tokens inside aligned verbatim runs ``cover[i:j] == secret[i:j]`` of at least
    ``min_run`` tokens, longest such run)."""
    runs, cur = [], 0
    for a, b in zip(cover_ids, secret_ids):
        if a == b:
            cur += 1
        elif cur:
            runs.append(cur)
            cur = 0
    if cur:
        runs.append(cur)
    longest = max(runs, default=0)
    n = max(len(cover_ids), 1)
    return sum(r for r in runs if r >= min_run) / n, longest
