"""Multiple-choice task types for `lm_fitness` and the task file of the CLI.

Task file: one JSON object per line ``{"task": str, "question": str, "options": [str, ...], "answer": int,
"split": "train"|"test" (optional)}``. Without ``split`` a task's questions are split 60/40 train/test with a
fixed seed; dev = the first 1/6 of train, kept apart from the questions the search samples (as in the paper:
selection on dev, report on test).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from iclr26_core.errors import UserError


@dataclass(frozen=True)
class MCQuestion:
    """One question. ``lead`` (optional) is the text that opens the answer (the assistant turn) before the
    scored continuation, instead of ``"Answer:"``; ``continuations`` (optional) are the scored texts of the
    options, instead of the option letters / texts (e.g. ``lead`` = a sentence's first words and
    ``continuations`` = " word" per option: lm-eval's continuation scoring inside the chat template)."""

    question: str
    options: tuple[str, ...]
    answer: int
    split: str | None = None
    lead: str | None = None
    continuations: tuple[str, ...] | None = None


@dataclass
class MCTask:
    """A task type: its questions and their train/dev/test split (``split_seed`` fixes the 60/40 split)."""

    name: str
    questions: list[MCQuestion]
    split_seed: int = 0
    splits: dict[str, list[MCQuestion]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.questions:
            raise UserError(f"task {self.name!r} has no questions")
        given = [q for q in self.questions if q.split is not None]
        if given:
            train = [q for q in self.questions if q.split in (None, "train")]
            test = [q for q in self.questions if q.split == "test"]
        else:
            order = np.random.default_rng([self.split_seed, len(self.questions)]).permutation(
                len(self.questions)
            )
            n_train = max(1, round(0.6 * len(self.questions)))
            train = [self.questions[i] for i in order[:n_train]]
            test = [self.questions[i] for i in order[n_train:]]
        n_dev = len(train) // 6 if len(train) >= 6 else 0
        self.dev_is_train, self.test_is_train = n_dev == 0, not test
        self.splits = {"dev": train[:n_dev] or train, "train": train[n_dev:], "test": test or train}


MIN_DEV = 20  # below this many dev questions in all, the final pick among prompts is mostly noise


def small_data_warnings(tasks: Sequence[MCTask]) -> list[str]:
    """One line per small-data hazard of a task set (empty when the splits are healthy)."""
    out = []
    n_dev = sum(len(t.splits["dev"]) for t in tasks if not t.dev_is_train)
    if n_dev < MIN_DEV:
        out.append(
            f"dev holds {n_dev} question(s) in all (< {MIN_DEV}): the final pick among prompts is noisy; "
            "add questions (dev is the first 1/6 of each task's train split)"
        )
    same_dev = [t.name for t in tasks if t.dev_is_train]
    if same_dev:
        out.append(f"fewer than 6 train questions: dev is the train split for task(s) {', '.join(same_dev)}")
    same_test = [t.name for t in tasks if t.test_is_train]
    if same_test:
        out.append(
            f"no test questions: test falls back to train for task(s) {', '.join(same_test)} "
            "(its accuracy is not held out)"
        )
    return out


def _question(obj: dict, where: str) -> MCQuestion:
    for key in ("task", "question", "options", "answer"):
        if key not in obj:
            raise UserError(f"{where}: missing {key!r} (each line needs task, question, options, answer)")
    options = obj["options"]
    if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) for o in options):
        raise UserError(f"{where}: 'options' must be a list of at least two strings")
    answer = obj["answer"]
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(options):
        raise UserError(f"{where}: answer index {answer!r} is out of range for {len(options)} options")
    split = obj.get("split")
    if split not in (None, "train", "test"):
        raise UserError(f"{where}: split must be 'train' or 'test', got {split!r}")
    return MCQuestion(str(obj["question"]), tuple(options), int(answer), split)


def load_tasks(path: str | Path, split_seed: int = 0) -> list[MCTask]:
    """The task types of a JSONL task file, in order of first appearance; bad lines are a `UserError`."""
    from iclr26_core.fs import read_jsonl

    by_task: dict[str, list[MCQuestion]] = {}
    for where, obj in read_jsonl(path, "task file"):
        q = _question(obj, where)  # checks the keys first
        by_task.setdefault(str(obj["task"]), []).append(q)
    return [MCTask(name, qs, split_seed) for name, qs in by_task.items()]


def tasks_from_records(records: Sequence[dict], split_seed: int = 0) -> list[MCTask]:
    """Task types from in-memory records shaped like the task file's lines."""
    by_task: dict[str, list[MCQuestion]] = {}
    for i, obj in enumerate(records):
        by_task.setdefault(str(obj.get("task")), []).append(_question(obj, f"record {i}"))
    return [MCTask(name, qs, split_seed) for name, qs in by_task.items()]
