"""The held-out registry of a study: evaluation problems never appear in any training source.

One registry per plan and run: the evaluation set is built first, every synthetic source is sampled with its
problems excluded (`ReasoningTasks(exclude=...)`, by canonical problem, so no template of an evaluation problem is
trained on), every other source is filtered (`drop_eval`), and the overlap that remains is measured
(`overlap`) and recorded (``eval.json`` of ``run``, ``metrics.json`` of ``reproduce``). An evaluation item is
found in a training source when

* both carry the same canonical problem (``family`` + ``problem``: `Example`s, rows written by ``generate``), or
* a training row has the same prompt, or
* a training text contains the evaluation question (the prompt without its ``Q: `` / ``A: `` wrapper).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .tasks import problem_key

_WRAPPER = re.compile(r"^\s*(?:Q|Question)\s*:\s*|\s*(?:A|Answer)\s*:\s*$")


def question_of(prompt: str) -> str:
    """The question text of a prompt (``"Q: max 1 2?\\nA: "`` -> ``"max 1 2?"``)."""
    return _WRAPPER.sub("", str(prompt)).strip()


def _field(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


class Registry:
    """The evaluation items of one study, indexed by canonical problem, prompt and question text."""

    def __init__(self, examples: Sequence[Any]) -> None:
        self.examples = list(examples)
        self.problems = {k for k in map(problem_key, self.examples) if k is not None}
        self.prompts = {str(_field(e, "prompt")) for e in self.examples if _field(e, "prompt") is not None}
        self.questions = sorted({q for q in map(question_of, self.prompts) if q}, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, self.questions))) if self.questions else None

    def hits(self, item: Any) -> set[str]:
        """The evaluation questions (or problems) that one training item contains."""
        if isinstance(item, str):
            return set(self._pattern.findall(item)) if self._pattern is not None else set()
        key = problem_key(item)
        out = {f"problem:{key}"} if key is not None and key in self.problems else set()
        prompt = _field(item, "prompt")
        if prompt is not None:
            q = question_of(prompt)
            if str(prompt) in self.prompts or q in self.questions:
                out.add(q)
            return out
        text = _field(item, "text")
        return out | (self.hits(str(text)) if text is not None else set())

    def overlap(self, items: Sequence[Any]) -> int:
        """How many distinct evaluation items (questions or canonical problems) ``items`` contain."""
        found: set[str] = set()
        for item in items:
            found |= self.hits(item)
        return len(found)

    def drop(self, items: Sequence[Any]) -> tuple[list[Any], int]:
        """``items`` without those that contain an evaluation item, and how many were dropped."""
        kept = [x for x in items if not self.hits(x)]
        return kept, len(items) - len(kept)


def overlap(eval_examples: Sequence[Any], sources: Mapping[str, Sequence[Any]]) -> dict[str, int]:
    """{source: number of evaluation items found in it} (0 everywhere when nothing leaked)."""
    reg = Registry(eval_examples)
    return {name: reg.overlap(_items(items)) for name, items in sources.items()}


def drop_eval(
    eval_examples: Sequence[Any], sources: Mapping[str, Sequence[Any]]
) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """The sources without any item that contains an evaluation item, and how many each lost."""
    reg = Registry(eval_examples)
    out, removed = {}, {}
    for name, items in sources.items():
        out[name], removed[name] = reg.drop(_items(items))
    return out, removed


def _items(source: Any) -> list[Any]:
    if hasattr(source, "column_names") and hasattr(source, "to_list"):
        return source.to_list()
    return list(source)
