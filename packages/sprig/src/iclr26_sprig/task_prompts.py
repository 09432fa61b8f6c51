"""Per-task task-prompt optimisation, the comparison baseline of the paper (it uses ProTeGi; arXiv 2410.14826,
Sec. 4.2): greedy forward selection over per-task candidate phrases, in two forms.

``method="halving"`` (default; the fair baseline under a question-evaluation budget, ProTeGi-like): each round
is a best-arm identification over {incumbent} ∪ {incumbent + one unused phrase} by successive halving (ProTeGi
selects its beam with bandits; Karnin et al. 2013): the round's budget is split evenly over the stages, every
stage scores the incumbent and the surviving challengers on fresh questions, and the better half of the
challengers (by accumulated accuracy) survive until one is left. That last challenger is then scored once more
against the incumbent on fresh questions, and accepted by a one-sided two-proportion z-test on that final stage
alone (selection and test use disjoint samples, so the test is free of the winner's curse):

    accept  iff  p̂_ch − p̂_inc > z · sqrt((p̂_ch(1 − p̂_ch) + p̂_inc(1 − p̂_inc)) / n)

A rejected round ends the task's search. Each task gets ``budget / n_tasks`` question-evaluations and each round
``remaining / rounds left``, so the questions per score grow with the budget instead of staying at a fixed 1,000.

``method="greedy"`` (the package spec's 0.1 baseline): each round re-scores the incumbent, scores every
incumbent + one phrase, takes the best and accepts it only if a fresh score beats the incumbent's re-score, with
``n_questions`` questions per score (no budget).

Both stop at ``max_len`` phrases. Used on top of an empty system prompt (per-task) and of the SPRIG prompt
(SPRIG + task).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from iclr26_core.errors import UserError

TaskScore = Callable[[Sequence[Sequence[str]], int | None], np.ndarray]
METHODS = ("halving", "greedy")


def accept(p_challenger: float, p_incumbent: float, n: int, z: float) -> bool:
    """The one-sided two-proportion z-test of the module docstring (n questions per arm)."""
    var = p_challenger * (1 - p_challenger) + p_incumbent * (1 - p_incumbent)
    se = math.sqrt(max(var, 0.25 / n) / n)  # floored: p̂ of 0 or 1 would give se 0
    diff = p_challenger - p_incumbent
    return bool(diff > 0 and diff > z * se)


def halving_round(
    score: TaskScore, incumbent: list[str], pool: Sequence[str], budget: int, z: float
) -> tuple[list[str] | None, int]:
    """One round: (the accepted incumbent + phrase, or None; question-evaluations used). Half the budget selects
    the challenger by successive halving, the other half is the adaptive acceptance test."""
    alive = [[*incumbent, c] for c in pool]
    stages = math.ceil(math.log2(len(alive))) if len(alive) > 1 else 0
    sums, counts = np.zeros(len(alive)), np.zeros(len(alive))
    idx = list(range(len(alive)))
    used = 0
    for _ in range(stages):
        n = max(1, budget // 2 // stages // len(idx))
        acc = np.asarray(score([alive[i] for i in idx], n), float)
        used += n * len(idx)
        sums[idx] += acc * n
        counts[idx] += n
        means = sums[idx] / counts[idx]
        idx = [idx[j] for j in np.argsort(-means, kind="stable")[: math.ceil(len(idx) / 2)]]
    challenger = alive[idx[0]]
    return sequential_test(score, challenger, incumbent, budget - used, z, used)


def sequential_test(
    score: TaskScore, challenger: list[str], incumbent: list[str], budget: int, z: float, used: int = 0
) -> tuple[list[str] | None, int]:
    """Fresh questions for both arms, doubled until the z-test is conclusive either way or ``budget`` is spent;
    then the pooled fresh samples decide by sign. Returns (challenger or None, ``used`` + evaluations)."""
    n = max(1, budget // 2 // 8)  # doublings 1 + 2 + 4 = 7 of 8 shares fit
    hits, total = np.zeros(2), 0
    while True:
        acc = np.asarray(score([challenger, incumbent], n), float)
        used, budget = used + 2 * n, budget - 2 * n
        hits += acc * n
        total += n
        p_ch, p_inc = hits / total
        if accept(p_ch, p_inc, total, z):
            return challenger, used
        if accept(p_inc, p_ch, total, z) or budget < 4 * n:
            return (challenger if p_ch > p_inc else None), used
        n *= 2


def _greedy_round(score: TaskScore, chosen: list[str], pool: Sequence[str], n: int | None):
    incumbent = float(score([chosen], n)[0])
    trials = [[*chosen, c] for c in pool]
    best = trials[int(np.argmax(score(trials, n)))]
    return best if float(score([best], n)[0]) > incumbent else None


def optimize_task_prompts(
    fitness_per_task: Mapping[str, TaskScore],
    candidates: Mapping[str, Sequence[str]],
    *,
    method: str = "halving",
    budget: int | None = None,
    z: float = 1.645,
    n_questions: int | None = 1000,
    max_len: int = 8,
    callback: Callable[[str], None] | None = None,
) -> dict[str, list[str]]:
    """{task: chosen phrases in order}. ``fitness_per_task[task](task_prompts, n_questions) -> [P]`` accuracies
    (``n_questions=None``: all train questions of that task). ``method="halving"`` needs ``budget`` (total
    question-evaluations over all tasks); ``method="greedy"`` uses ``n_questions`` per score."""
    if max_len < 1:
        raise UserError(f"max_len must be >= 1, got {max_len}")
    if method not in METHODS:
        raise UserError(f"unknown task-prompt method {method!r}; choose one of {', '.join(METHODS)}")
    missing = sorted(set(fitness_per_task) - set(candidates))
    if missing:
        raise UserError(f"no candidate task phrases for task {missing[0]!r}")
    per_task = 0
    if method == "halving":
        if budget is None or budget < 1:
            raise UserError(
                f"method='halving' needs a positive budget of question-evaluations, got {budget!r}"
            )
        per_task = int(budget) // max(len(fitness_per_task), 1)
    out: dict[str, list[str]] = {}
    for task, score in fitness_per_task.items():
        chosen: list[str] = []
        left = per_task
        while len(chosen) < max_len:
            pool = [c for c in dict.fromkeys(candidates[task]) if c not in chosen]
            if not pool:
                break
            if method == "greedy":
                nxt = _greedy_round(score, chosen, pool, n_questions)
            else:
                round_budget = left // (max_len - len(chosen))
                if round_budget < 2 * (len(pool) + 1):
                    break  # not one question per arm per stage left
                nxt, used = halving_round(score, chosen, pool, round_budget, z)
                left -= used
            if nxt is None:
                break
            chosen = nxt
        out[task] = chosen
        if callback is not None:
            callback(task)
    return out
