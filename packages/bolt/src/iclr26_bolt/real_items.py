"""Real multiple-choice questions generated from real English text (``scale=real``).

Provenance: the paragraphs of `iclr26_core.pretrained.real_text` (Python's own documentation, the pydoc help
topics of the running interpreter), in its disjoint splits: ``calib`` → training items, ``val`` → validation
(temperature, router), ``test`` → reported. Each item is a cloze question: one sentence of 8–40 words with one
content word blanked; the options are that word and 3 other words of the same split (4+ letters, similar
length, not in the sentence), shuffled. ``context`` (pass-1) is empty; ``context_hr`` holds the two sentences
before it in its paragraph (the following one for a first sentence): the text analogue of a higher
resolution — more of the same scene. Deterministic for (split, n, seed).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

WORD = re.compile(r"\b[A-Za-z]{4,}\b")
SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
STOP = set(
    [
        "that",
        "this",
        "with",
        "from",
        "have",
        "which",
        "when",
        "where",
        "there",
        "their",
        "then",
        "than",
        "they",
        "them",
        "these",
        "those",
        "will",
        "would",
        "should",
        "could",
        "into",
        "also",
        "only",
        "such",
        "other",
        "more",
        "most",
        "some",
        "same",
        "each",
        "what",
        "been",
        "were",
        "does",
        "done",
        "used",
        "using",
        "uses",
        "here",
        "very",
        "just",
        "like",
        "must",
        "many",
        "your",
        "about",
        "after",
        "before",
        "because",
        "while",
        "until",
        "over",
        "under",
        "between",
    ]
)


def _sentences(paragraph: str) -> list[str]:
    flat = " ".join(paragraph.split())
    return [s.strip() for s in SENT.split(flat) if s.strip()]


def _ok(sentence: str) -> bool:
    words = sentence.split()
    alpha = sum(w.strip(".,;:()\"'").isalpha() for w in words)
    return 8 <= len(words) <= 40 and alpha >= 0.8 * len(words) and not any(c in sentence for c in "{}[]>=<")


def cloze_items(texts: list[str], n: int, seed: int, split: str) -> list[dict[str, Any]]:
    """``n`` cloze items (fewer if the text runs out) from paragraphs ``texts``."""
    rng = np.random.default_rng([seed, sum(map(ord, split))])
    counts: dict[str, int] = {}
    for p in texts:
        for w in WORD.findall(p):
            counts[w.lower()] = counts.get(w.lower(), 0) + 1
    pool = sorted(w for w, c in counts.items() if c >= 2 and w not in STOP)
    by_len: dict[int, list[str]] = {}
    for w in pool:
        by_len.setdefault(len(w), []).append(w)
    slots = [(i, j) for i, p in enumerate(texts) for j, s in enumerate(_sentences(p)) if _ok(s)]
    order = rng.permutation(len(slots))
    items: list[dict[str, Any]] = []
    for k in order:
        if len(items) >= n:
            break
        i, j = slots[int(k)]
        sents = _sentences(texts[i])
        sent = sents[j]
        inside = {w.lower() for w in WORD.findall(sent)}
        targets = [
            m for m in WORD.finditer(sent) if m.group().lower() in pool and m.group().lower() not in STOP
        ]
        if not targets:
            continue
        m = targets[int(rng.integers(len(targets)))]
        word = m.group()
        near = [w for d in (0, 1, -1, 2, -2) for w in by_len.get(len(word) + d, []) if w not in inside]
        if len(near) < 3:
            continue
        picks = [near[int(x)] for x in rng.choice(len(near), size=3, replace=False)]
        if word[0].isupper():
            picks = [w.capitalize() for w in picks]
        options = [word, *picks]
        perm = rng.permutation(4)
        options = [options[int(p)] for p in perm]
        before = sents[max(0, j - 2) : j] or sents[j + 1 : j + 2]
        items.append(
            {
                "id": f"{split}-{i}-{j}",
                "question": f'Which word fills the blank? "{sent[: m.start()]}____{sent[m.end() :]}"',
                "options": options,
                "answer": int(np.where(perm == 0)[0][0]),
                "context_hr": " ".join(before),
                "type": "cloze",
            }
        )
    return items
