"""The fitness interface every optimiser in this package shares, and the question-evaluation count.

f(s) = mean over task types of the accuracy on a fresh random sample of ``n_questions`` train questions per task
(Zhang et al., arXiv 2410.14826, Sec. 3.2). The *budget* is counted in question-evaluations: scoring P prompts on
T tasks with n questions each costs P·T·n; it is the fairness axis for all optimisers here.

Subclasses implement `_per_task(prompts, split) -> [P, T]` and `_questions(split)` (questions per task one
evaluation of one prompt costs on that split; 0 for an exact expectation, which is free).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from iclr26_core.errors import UserError

from .components import SystemPrompt

SPLITS = ("train", "dev", "test")


class Fitness(ABC):
    """Scores system prompts; ``evaluations`` counts every question-evaluation made through it."""

    task_names: list[str]
    default_split: str = "train"

    def __init__(self) -> None:
        self.evaluations = 0

    @property
    def n_tasks(self) -> int:
        return len(self.task_names)

    @abstractmethod
    def _per_task(self, prompts: Sequence[SystemPrompt], split: str) -> np.ndarray: ...

    @abstractmethod
    def _questions(self, split: str) -> int: ...

    def cost(self, n_prompts: int, split: str | None = None) -> int:
        """Question-evaluations that scoring ``n_prompts`` prompts on ``split`` costs."""
        return int(n_prompts) * self._questions(split or self.default_split)

    def per_task(self, prompts: Sequence[SystemPrompt], split: str | None = None) -> np.ndarray:
        """Accuracy per prompt and task, [P, T]; counts the question-evaluations."""
        split = split or self.default_split
        if split not in SPLITS:
            raise UserError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
        prompts = [p if isinstance(p, SystemPrompt) else SystemPrompt(p) for p in prompts]
        if not prompts:
            return np.zeros((0, self.n_tasks))
        scores = np.asarray(self._per_task(prompts, split), dtype=float)
        self.evaluations += self.cost(len(prompts), split)
        return scores

    def __call__(self, prompts: Sequence[SystemPrompt], split: str | None = None) -> np.ndarray:
        """Mean accuracy over task types per prompt, [P]."""
        return self.per_task(prompts, split).mean(axis=1)
