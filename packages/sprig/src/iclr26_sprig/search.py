"""SPRIG's edit-based beam search (the paper's "edit-based genetic algorithm"; arXiv 2410.14826, Sec. 3) and the
random-search control at an equal question-evaluation budget.

1. Beam B = [empty prompt].
2. For each prompt in B enumerate ADD (top-``top_ucb`` components by UCB, every position), DEL, SWAP and, with a
   paraphraser, SUB children; deduplicate.
3. Score all children with the fitness on fresh train questions; the top ``beam_size`` form the next beam.
4. Credit the ADD/DEL edits (see `iclr26_sprig.edits`) and update UCB.
5. Stop after ``n_iters`` iterations or when the budget is spent; return the best by dev score of the final beam,
   its parents (the previous beam) and the empty prompt (ours: a safeguard for small dev sets, see the README).

Budget: every question-evaluation counts (the empty prompt's score, the children, the final dev scoring). A
budget smaller than the first iteration is refused; a later iteration that does not fit scores a random subset
of its children that does, and is the last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iclr26_core.errors import UserError

from .components import Component, SystemPrompt, check_pool
from .edits import CreditTable, Edit, enumerate_edits
from .fitness import Fitness

MAX_PARAPHRASES = 10


@dataclass
class SearchResult:
    """What an optimiser returns: the chosen prompt, its dev score, the history and the evaluations it used."""

    best: SystemPrompt
    best_score: float
    history: list[dict[str, Any]] = field(default_factory=list)
    evaluations: int = 0
    final: list[SystemPrompt] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def on_dev(
        cls, final: list[SystemPrompt], fitness: Any, start: int, history: list, config: dict[str, Any]
    ) -> SearchResult:
        """The search's final candidates and the empty prompt scored on the dev split: the best of them is the
        result (so a search that found nothing better on dev returns the empty prompt, never a worse one). Ties go
        to the earlier of [empty, *final]: without evidence on dev, the empty prompt is kept."""
        final = list(dict.fromkeys([SystemPrompt(), *final]))
        dev = fitness(final, "dev")
        i = int(np.argmax(dev))
        evaluations = fitness.evaluations - start
        return cls(final[i], float(dev[i]), history, evaluations, final, config)


def qualname(fn: Any) -> str | None:
    """How a config records a callable (None stays None)."""
    return None if fn is None else getattr(fn, "__qualname__", repr(fn))


def _paraphrase_fn(paraphraser: Callable[[str], list[str]] | None, pool: Sequence[Component]):
    if paraphraser is None:
        return None
    by_id = {c.id: c for c in pool}
    cache: dict[str, list[Component]] = {}

    def paraphrases(c: Component) -> list[Component]:
        src = by_id.get(c.identity, c)
        if src.id not in cache:
            texts = [t for t in dict.fromkeys(paraphraser(src.text)) if t and t != src.text][:MAX_PARAPHRASES]
            cache[src.id] = [
                Component(f"{src.id}~{j + 1}", t, src.category, source=src.id) for j, t in enumerate(texts)
            ]
        return cache[src.id]

    return paraphrases


def _check_budget(budget: int | None, first: int, what: str) -> None:
    if budget is None:
        return
    if not isinstance(budget, int | np.integer) or budget < 1:
        raise UserError(f"budget must be a positive number of question-evaluations, got {budget!r}")
    if budget < first:
        raise UserError(
            f"budget {budget} is smaller than one iteration of {what} ({first} question-evaluations); raise the budget"
        )


def _top(prompts: Sequence[SystemPrompt], scores: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    order = rng.permutation(len(prompts))
    return [int(order[i]) for i in np.argsort(-scores[order], kind="stable")[:k]]


def sprig(
    fitness: Fitness,
    components: Sequence[Component],
    *,
    beam_size: int = 10,
    top_ucb: int = 60,
    n_iters: int = 10,
    budget: int | None = None,
    paraphraser: Callable[[str], list[str]] | None = None,
    seed: int = 0,
    callback: Callable[[dict[str, Any]], None] | None = None,
) -> SearchResult:
    """Run SPRIG's beam search over edits; ``budget`` in question-evaluations (None: ``n_iters`` only)."""
    pool = check_pool(components)
    for name, v in (("beam_size", beam_size), ("top_ucb", top_ucb), ("n_iters", n_iters)):
        if int(v) < 1:
            raise UserError(f"{name} must be >= 1, got {v}")
    rng = np.random.default_rng(seed)
    start = fitness.evaluations
    dev_cost = fitness.cost(2 * beam_size + 1, "dev")  # the final beam, its parents and the empty prompt
    _check_budget(budget, fitness.cost(1 + min(top_ucb, len(pool))) + dev_cost, "sprig")
    paraphrases = _paraphrase_fn(paraphraser, pool)
    credits = CreditTable()
    root = SystemPrompt()
    beam = [(root, float(fitness([root])[0]))]
    parents: list[SystemPrompt] = []
    history: list[dict[str, Any]] = []
    for it in range(1, n_iters + 1):
        top = credits.top(pool, top_ucb, rng)
        origin: dict[SystemPrompt, tuple[float, Edit]] = {}
        for parent, parent_score in beam:
            for child, edit in enumerate_edits(parent, top, paraphrases):
                origin.setdefault(child, (parent_score, edit))
        candidates = list(origin)
        last = it == n_iters
        if budget is not None:
            fits = (budget - (fitness.evaluations - start) - dev_cost) // max(fitness.cost(1), 1)
            if fits < len(candidates):
                if fits <= 0:
                    break
                keep = sorted(rng.choice(len(candidates), size=int(fits), replace=False))
                candidates, last = [candidates[i] for i in keep], True
        scores = fitness(candidates)
        for child, score in zip(candidates, scores, strict=True):
            parent_score, edit = origin[child]
            credits.record(edit, parent_score, float(score))
        best = _top(candidates, scores, beam_size, rng)
        parents = [p for p, _ in beam]
        beam = [(candidates[i], float(scores[i])) for i in best]
        entry = {
            "iteration": it,
            "evaluations": fitness.evaluations - start,
            "n_candidates": len(candidates),
            "best_score": beam[0][1],
            "best_prompt": beam[0][0],
        }
        history.append(entry)
        if callback is not None:
            callback(entry)
        if last:
            break
    final = parents + [
        p for p, _ in beam
    ]  # the parents stay in the final pick (a noisy last step can regress)
    config = {
        "algorithm": "sprig",
        "beam_size": beam_size,
        "top_ucb": top_ucb,
        "n_iters": n_iters,
        "budget": budget,
        "paraphraser": qualname(paraphraser),
        "seed": seed,
        "credits": {k: [round(t, 6), n] for k, (t, n) in credits.as_dict().items()},
    }
    return SearchResult.on_dev(final, fitness, start, history, config)


def random_search(
    fitness: Fitness,
    components: Sequence[Component],
    *,
    budget: int,
    max_len: int = 10,
    chunk: int = 1000,
    seed: int = 0,
) -> SearchResult:
    """Prompts of 1..``max_len`` random components in random order, each scored once on train questions; the
    best by that noisy score is returned. Uses at most ``budget`` question-evaluations."""
    pool = check_pool(components)
    _check_budget(budget, fitness.cost(1), "random search")
    rng = np.random.default_rng(seed)
    start = fitness.evaluations
    n = int(budget // fitness.cost(1))
    best, best_score, history = SystemPrompt(), -np.inf, []
    done = 0
    while done < n:
        k = min(chunk, n - done)
        prompts = []
        for _ in range(k):
            m = int(rng.integers(1, min(max_len, len(pool)) + 1))
            prompts.append(SystemPrompt(pool[i] for i in rng.choice(len(pool), size=m, replace=False)))
        scores = fitness(prompts)
        i = int(np.argmax(scores))
        if scores[i] > best_score:
            best, best_score = prompts[i], float(scores[i])
        done += k
        history.append(
            {"evaluations": fitness.evaluations - start, "best_score": best_score, "best_prompt": best}
        )
    return SearchResult(
        best=best,
        best_score=best_score,
        history=history,
        evaluations=fitness.evaluations - start,
        config={"algorithm": "random", "budget": budget, "max_len": max_len, "seed": seed},
    )
