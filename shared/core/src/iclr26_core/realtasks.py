"""Real multiple-choice questions built from real English text, offline and deterministically.

Provenance: the paragraphs of `iclr26_core.pretrained.real_text` (Python's own documentation: the pydoc help
topics of the running interpreter), in its disjoint splits (``calib`` → training, ``val`` → validation,
``test`` → reported). Our construction, not a benchmark: the items are sentences of 8–40 words from the prose
(code-like sentences are skipped), and two kinds of question are built from them:

- ``next_word``: the first words of a sentence (at least 5; a cloze blank has at least 2 before it) and four candidate next words — the true one and
  three content words of the same split of similar length that are not in the sentence. Scored by
  log-likelihood of each continuation (``context`` + ``continuations[i]``, lm-eval's way), a small LM is well
  above chance (SmolLM2-135M-Instruct: see the core README).
- ``cloze``: a sentence with one content word blanked (``____``) and four candidate words, as a lettered
  question (``prompt``: "Question … A. … D. … Answer:"). Scored by the letter a model puts after "Answer:",
  a 135M model is near chance: a hard task, for prompt-format work.

Every item is a dict: ``id``, ``kind``, ``split``, ``question`` (the text before the options), ``options``
(four bare words), ``answer`` (index of the true one), ``context`` and ``continuations`` (for continuation
scoring: ``context`` ends without a space, each continuation starts with one), ``prompt`` (the lettered
question ending in "Answer:"), ``context_hr`` (up to two neighbouring sentences of the same paragraph: more of the
same scene) and ``source``. Deterministic for ``(split, n, seed, kind)``; items of one call share no sentence.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import UserError

KINDS = ("next_word", "cloze")
LETTERS = "ABCD"
WORD = re.compile(r"\b[A-Za-z]{4,}\b")
SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
# frequent function words: never the answer, never a distractor (they would make items trivial or ambiguous)
STOP = frozenset(
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
        "being",
        "here",
        "just",
        "must",
        "many",
        "much",
        "very",
        "your",
        "about",
        "after",
        "before",
        "under",
        "between",
        "while",
        "because",
        "both",
        "either",
        "whether",
        "until",
        "unless",
        "over",
        "through",
        "within",
        "without",
    ]
)


def sentences(paragraph: str) -> list[str]:
    """The sentences of a paragraph (whitespace collapsed)."""
    flat = " ".join(paragraph.split())
    return [s.strip() for s in SENT.split(flat) if s.strip()]


def _prose(sentence: str) -> bool:
    words = sentence.split()
    alpha = sum(w.strip(".,;:()\"'").isalpha() for w in words)
    return (
        8 <= len(words) <= 40 and alpha >= 0.8 * len(words) and not any(c in sentence for c in '{}[]>=<_`*"')
    )


def lettered(question: str, options: list[str]) -> str:
    """``question`` then the options as "A. …" lines, ending in "Answer:"."""
    lines = [question, *(f"{LETTERS[i]}. {o}" for i, o in enumerate(options)), "Answer:"]
    return "\n".join(lines)


def mc_items(
    split: str = "test", n: int = 100, seed: int = 0, kind: str = "next_word"
) -> list[dict[str, Any]]:
    """``n`` four-option questions of ``kind`` from ``real_text(split)`` (fewer if the text runs out)."""
    import numpy as np

    from .pretrained import real_text

    if kind not in KINDS:
        raise UserError(f"unknown question kind {kind!r}; choose one of {', '.join(KINDS)}")
    if n < 1:
        raise UserError(f"n must be >= 1, got {n}")
    texts = real_text(split)
    rng = np.random.default_rng([int(seed), sum(map(ord, split)), KINDS.index(kind)])
    counts: dict[str, int] = {}
    for p in texts:
        for w in WORD.findall(p):
            if w.islower():  # names and acronyms ("Sjoerd", "ASCII") are never distractors
                counts[w] = counts.get(w, 0) + 1
    pool = sorted(w for w, c in counts.items() if c >= 2 and w not in STOP)
    known = set(pool)
    by_len: dict[int, list[str]] = {}
    for w in pool:
        by_len.setdefault(len(w), []).append(w)
    paragraphs = [sentences(p) for p in texts]
    slots = [(i, j) for i, sents in enumerate(paragraphs) for j, s in enumerate(sents) if _prose(s)]
    seen: set[str] = set()
    items: list[dict[str, Any]] = []
    for k in rng.permutation(len(slots)):
        if len(items) >= n:
            break
        i, j = slots[int(k)]
        sents = paragraphs[i]
        sent = sents[j]
        if sent in seen:
            continue
        lower = [m.group().lower() for m in WORD.finditer(sent)]
        targets = [
            m
            for idx, m in enumerate(WORD.finditer(sent))
            if lower[idx] in known
            and (m.start() == 0 or sent[m.start() - 1] == " ")  # the continuation " word" is the text itself
            and len(sent[: m.start()].split()) >= (5 if kind == "next_word" else 2)
        ]
        if not targets:
            continue
        m = targets[int(rng.integers(len(targets)))]
        word = m.group()
        inside = set(lower)
        near = [w for d in (0, 1, -1, 2, -2) for w in by_len.get(len(word) + d, []) if w not in inside]
        if len(near) < 3:
            continue
        picks = [near[int(x)] for x in rng.choice(len(near), size=3, replace=False)]
        if word[0].isupper():
            picks = [w.capitalize() for w in picks]
        perm = rng.permutation(4)
        options = [[word, *picks][int(p)] for p in perm]
        answer = int(np.flatnonzero(perm == 0)[0])
        before = sent[: m.start()].rstrip()
        if kind == "next_word":
            question = f'Which word comes next? "{before} ..."'
        else:
            question = f'Which word fills the blank? "{before} ____{sent[m.end() :]}"'.replace('" ', '"')
        seen.add(sent)
        items.append(
            {
                "id": f"{split}-{kind}-{i}-{j}",
                "kind": kind,
                "split": split,
                "question": question,
                "options": options,
                "answer": answer,
                "context": before,
                "continuations": [" " + o for o in options],
                "prompt": lettered(question, options),
                "context_hr": " ".join(sents[max(0, j - 2) : j] or sents[j + 1 : j + 3]),
                "source": f"real_text({split!r}) (Python's pydoc help topics), paragraph {i}, sentence {j}",
            }
        )
    return items
