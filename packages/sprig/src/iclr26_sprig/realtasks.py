"""Real multiple-choice tasks built from real English text (the core's ``real_text``: Python's documentation as
shipped in the stdlib's ``pydoc_data``), for ``scale=real``. Nothing is downloaded; the construction is
deterministic given the seed and the tokenizer.

Three task types, each question built from one prose sentence, four single-word options (each one token of the
scoring model with a leading space, so one forward pass scores all four), answered by the word's
log-likelihood after ``Answer:``:

- ``cloze``: one content word of the sentence is blanked; which word fills the blank?
- ``next_word``: the sentence is cut after a few words; which word comes next?
- ``odd_one_out``: three words of the sentence and one that is not in it; which word does not appear?

Distractors are other single-token words of the same text split. Train questions come from the ``calib``
split, test questions from the disjoint ``test`` split (different documentation topics).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .tasks import MCQuestion, MCTask

TASK_TYPES = ("cloze", "next_word", "odd_one_out")
WORD = re.compile(r"^[a-z]{4,12}$")


def sentences(paragraphs: list[str]) -> list[list[str]]:
    """Prose sentences of 8-30 words whose words are mostly plain lowercase letters (code and grammar lines out)."""
    out = []
    for p in paragraphs:
        if p.startswith(" ") or ">>>" in p:
            continue
        for s in re.split(r"(?<=[.!?])\s+", " ".join(p.split())):
            words = s.split()
            plain = sum(bool(re.fullmatch(r"[A-Za-z,;:.()'-]+", w)) for w in words)
            if 8 <= len(words) <= 30 and plain >= 0.85 * len(words) and s[0].isupper():
                out.append(words)
    return out


def _single(tok: Any, word: str) -> bool:
    return len(tok(" " + word, add_special_tokens=False)["input_ids"]) == 1


def _options(rng, answer: str, pool: list[str], exclude: set[str]) -> tuple[tuple[str, ...], int]:
    distract = [w for w in rng.permutation(pool)[:40] if w not in exclude and w != answer][:3]
    opts = [answer, *distract]
    order = rng.permutation(4)
    return tuple(opts[i] for i in order), int(np.argmax(order == 0))


def build_questions(
    task: str, sents: list[list[str]], vocab: list[str], single: set[str], n: int, rng
) -> list[MCQuestion]:
    out: list[MCQuestion] = []
    for i in rng.permutation(len(sents)):
        if len(out) == n:
            break
        words = sents[i]
        clean = [w.strip(",;:.()'").lower() for w in words]
        present = set(clean)
        spots = [j for j, w in enumerate(clean) if 2 <= j < len(words) - 1 and w in single]
        if task == "odd_one_out":
            inside = list(dict.fromkeys(w for w in clean if w in single))
            if len(inside) < 3:
                continue
            outside = [w for w in rng.permutation(vocab)[:40] if w not in present]
            if not outside:
                continue
            picks = [inside[k] for k in rng.permutation(len(inside))[:3]]
            opts = [outside[0], *picks]
            order = rng.permutation(4)
            options, answer = tuple(opts[k] for k in order), int(np.argmax(order == 0))
            text = f'Which word does not appear in this sentence?\n"{" ".join(words)}"'
        elif not spots:
            continue
        else:
            j = spots[int(rng.integers(len(spots)))] if task == "cloze" else max(spots[0], 4)
            if task == "next_word" and (j >= len(words) or clean[j] not in single):
                continue
            options, answer = _options(rng, clean[j], vocab, present)
            if task == "cloze":
                blanked = [*words[:j], "___", *words[j + 1 :]]
                text = f'Which word fills the blank?\n"{" ".join(blanked)}"'
            else:
                text = f'Which word comes next?\n"{" ".join(words[:j])} ..."'
        out.append(MCQuestion(f"{text}\nOptions: {', '.join(options)}", options, answer))
    return out


def real_tasks(tokenizer: Any, n_train: int = 60, n_test: int = 30, seed: int = 0) -> list[MCTask]:
    """The three task types with ``n_train`` questions from ``calib`` and ``n_test`` from ``test`` each."""
    from iclr26_core.pretrained import real_text

    by_split = {}
    for split in ("calib", "test"):
        sents = sentences(real_text(split))
        words = sorted({w.strip(",;:.()'").lower() for s in sents for w in s})
        single = {w for w in words if WORD.match(w) and _single(tokenizer, w)}
        by_split[split] = (sents, sorted(single), single)
    tasks = []
    for k, task in enumerate(TASK_TYPES):
        qs = []
        for split, n in (("calib", n_train), ("test", n_test)):
            sents, vocab, single = by_split[split]
            rng = np.random.default_rng([seed, k, n, len(split)])
            got = build_questions(task, sents, vocab, single, n, rng)
            qs += [
                MCQuestion(q.question, q.options, q.answer, "train" if split == "calib" else "test")
                for q in got
            ]
        tasks.append(MCTask(task, qs))
    return tasks
