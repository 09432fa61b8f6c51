"""Per-task task-prompt optimisation, the comparison baseline of the paper (it uses ProTeGi; arXiv 2410.14826,
Sec. 4.2) in the form the package spec fixes: greedy forward selection over per-task candidate phrases.

For each task: start from the empty task prompt; each round re-scores the incumbent, scores every incumbent +
one unused phrase (appended), takes the best, and accepts it only if a *fresh* score of it beats the incumbent's
re-score (the guard against the winner's curse of picking a maximum of noisy scores). At most ``max_len``
phrases. Used on top of an empty system prompt (per-task) and of the SPRIG prompt (SPRIG + task).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from iclr26_core.errors import UserError

TaskScore = Callable[[Sequence[Sequence[str]], int | None], np.ndarray]


def optimize_task_prompts(
    fitness_per_task: Mapping[str, TaskScore],
    candidates: Mapping[str, Sequence[str]],
    *,
    n_questions: int | None = 1000,
    max_len: int = 8,
    callback: Callable[[str], None] | None = None,
) -> dict[str, list[str]]:
    """{task: chosen phrases in order}. ``fitness_per_task[task](task_prompts, n_questions) -> [P]`` accuracies
    (``n_questions=None``: all train questions of that task)."""
    if max_len < 1:
        raise UserError(f"max_len must be >= 1, got {max_len}")
    missing = sorted(set(fitness_per_task) - set(candidates))
    if missing:
        raise UserError(f"no candidate task phrases for task {missing[0]!r}")
    out: dict[str, list[str]] = {}
    for task, score in fitness_per_task.items():
        chosen: list[str] = []
        while len(chosen) < max_len:
            pool = [c for c in dict.fromkeys(candidates[task]) if c not in chosen]
            if not pool:
                break
            incumbent = float(score([chosen], n_questions)[0])
            trials = [[*chosen, c] for c in pool]
            best = trials[int(np.argmax(score(trials, n_questions)))]
            if float(score([best], n_questions)[0]) > incumbent:
                chosen = best
            else:
                break
        out[task] = chosen
        if callback is not None:
            callback(task)
    return out
