"""Task sets for `estimate`: multiple-choice (JSON lines or generated arithmetic) and cloze tasks from real text.

Multiple choice: ``{"question": str, "choices": [str, ...], "answer": int, "type"?: str}``. Cloze:
``{"prompt": str, "target": str, "type"?: str}`` (the next word of real text; ``target`` starts with its space).
With a ``type`` field the game is also solved per task type.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_core.errors import UserError


# ---------------------------------------------------------------------------------------------- tasks
def load_tasks(path: str | Path) -> list[dict[str, Any]]:
    """Multiple-choice or cloze tasks from a JSON-lines file (one task per line); bad lines are a `UserError`."""
    from iclr26_core.fs import read_jsonl

    return [check_task(task, where) for where, task in read_jsonl(path, "task file")]


def check_task(task: Any, where: str) -> dict[str, Any]:
    if isinstance(task, dict) and {"prompt", "target"} <= set(task):
        if not (
            isinstance(task["prompt"], str) and isinstance(task["target"], str) and task["target"].strip()
        ):
            raise UserError(f"{where}: a cloze task's prompt and target must be strings, target non-empty")
        return task
    if not isinstance(task, dict) or not {"question", "choices", "answer"} <= set(task):
        raise UserError(f"{where}: a task needs the keys question, choices, answer (or prompt, target)")
    choices, answer = task["choices"], task["answer"]
    if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
        raise UserError(f"{where}: choices must be a list of at least two strings")
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(choices):
        raise UserError(f"{where}: answer must be an index into choices, got {answer!r}")
    return task


def generated_tasks(n: int, seed: int = 0, n_choices: int = 4) -> list[dict[str, Any]]:
    """``n`` small arithmetic multiple-choice tasks ("add" and "multiply" types), deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    tasks = []
    for k in range(n):
        a, b = (int(v) for v in rng.integers(1, 10, 2))
        kind = "add" if k % 2 == 0 else "multiply"
        right = a + b if kind == "add" else a * b
        wrong = {right}
        while len(wrong) < n_choices:
            wrong.add(max(0, right + int(rng.integers(-5, 6))))
        options = sorted(wrong)
        rng.shuffle(options)
        op = "+" if kind == "add" else "*"
        tasks.append(
            {
                "question": f"Q: {a} {op} {b} = ? A:",
                "choices": [f" {v}" for v in options],
                "answer": options.index(right),
                "type": kind,
            }
        )
    return tasks


def cloze_tasks(
    texts: Sequence[str], n: int, seed: int = 0, min_words: int = 20, max_chars: int = 300
) -> list[dict[str, Any]]:
    """``n`` next-word tasks from real paragraphs: in a random paragraph with more than ``min_words`` words
    (of 3+ letters), a random word after the first ``min_words`` is the target and the text before it (its last
    ``max_chars`` characters) the prompt. One task per paragraph, deterministic in ``seed``; typed by the
    target's length ("short" ≤ 5 letters, else "long")."""
    rng = np.random.default_rng(seed)
    tasks = []
    for k in rng.permutation(len(texts)):
        words = list(re.finditer(r"(?<![A-Za-z0-9_.])[A-Za-z]{3,}\b", texts[k]))
        if len(words) <= min_words:
            continue
        w = words[int(rng.integers(min_words, len(words)))]
        if texts[k][w.start() - 1] != " ":
            continue
        word = w.group()
        tasks.append(
            {
                "prompt": texts[k][: w.start() - 1][-max_chars:],
                "target": " " + word,
                "type": "short" if len(word) <= 5 else "long",
                "source": int(k),
            }
        )
        if len(tasks) == n:
            break
    if len(tasks) < n:
        raise UserError(f"only {len(tasks)} cloze tasks in {len(texts)} paragraphs; asked for {n}")
    return tasks
