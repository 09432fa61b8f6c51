"""Real multiple-choice task types for ``scale=real``, from the core's real four-option questions
(`iclr26_core.realtasks.mc_items`: sentences of Python's documentation as shipped in the stdlib's
``pydoc_data``, the true next / blanked word and three words of the same text split; our construction, not a
benchmark). Nothing is downloaded; deterministic given the seed.

What is ours is how a question reaches a *chat* model, because SPRIG optimises the system turn of the chat
template. Two formats, chosen by a pilot (README, "On a real model"):

- ``continuation`` (lm-eval's continuation scoring inside the chat template): the user turn holds the item's
  ``context`` (the sentence's first words), the assistant turn is scored as each option's continuation
  (" word").
- ``question``: the user turn holds the question (the sentence with its blank, or its first words) and the four
  words; the assistant turn is scored as each bare option word.

Train questions come from the ``calib`` split, test questions from the disjoint ``test`` split.
"""

from __future__ import annotations

from typing import Any

from iclr26_core.errors import UserError

from .tasks import MCQuestion, MCTask

# task name -> (question kind of iclr26_core.realtasks, format)
TASK_TYPES = {
    "next_word": ("next_word", "continuation"),
    "cloze_prefix": ("cloze", "continuation"),
    "cloze_question": ("cloze", "question"),
}
FORMATS = ("continuation", "question")


def to_question(item: dict[str, Any], fmt: str, split: str) -> MCQuestion:
    """An `MCQuestion` of one core item in format ``fmt`` (the module docstring)."""
    options = tuple(item["options"])
    if fmt == "continuation":
        return MCQuestion(
            item["context"], options, int(item["answer"]), split, "", tuple(item["continuations"])
        )
    if fmt == "question":
        text = f"{item['question']}\nOptions: {', '.join(options)}"
        return MCQuestion(text, options, int(item["answer"]), split, "", options)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def real_tasks(n_train: int = 48, n_test: int = 60, seed: int = 0, types: Any = None) -> list[MCTask]:
    """The task types (``types``: names of `TASK_TYPES`, default all) with ``n_train`` questions from the
    ``calib`` text and ``n_test`` from the ``test`` text each; task types of one question kind get disjoint
    items (different sentences)."""
    from iclr26_core.realtasks import mc_items

    names = list(types or TASK_TYPES)
    unknown = [n for n in names if n not in TASK_TYPES]
    if unknown:
        raise UserError(f"unknown real task type(s) {unknown}; choose from {', '.join(TASK_TYPES)}")
    questions: dict[str, list[MCQuestion]] = {n: [] for n in names}
    for split, n, name in (("calib", n_train, "train"), ("test", n_test, "test")):
        for kind in dict.fromkeys(TASK_TYPES[t][0] for t in names):
            mine = [t for t in names if TASK_TYPES[t][0] == kind]
            items = mc_items(split, n * len(mine), seed, kind)
            for k, t in enumerate(mine):
                questions[t] += [to_question(it, TASK_TYPES[t][1], name) for it in items[k * n : (k + 1) * n]]
    return [MCTask(t, questions[t]) for t in names]
