"""``sprig_ga``: the genetic algorithm with a proxy reward from SPRIG's later official code. How it maps to the
final paper is not stated; it is an option here, not the headline method (that is `iclr26_sprig.sprig`).

Population = one single-component prompt per pool component, all scored for real. Each generation: rank the
population by the proxy R, survivors = top half; each child's parent is drawn with replacement from the top 10 %;
operators with probabilities crossover 0.815 (partner from the top 50 %; child = shuffled union truncated to
L ~ round(N(mean(l1, l2), max(l1, l2)/4)), clipped to [1, l1 + l2]), add_useful 0.025, add_useless 0.01,
refine_subset 0.025, rephrase 0.025, swap 0.05, delete 0.05. New population = survivors + children; the top
``n_real`` new prompts by R are scored for real and R is refit. The final pick is the best by dev score among the
``n_real`` best real scores.

The four LLM-driven operators call ``proposer(op, prompt) -> SystemPrompt | None``; with None (or a None answer)
the offline fallback runs: a random pool component inserted at a random position (add_*); identity for
refine_subset (the concatenation of a subset renders to the same text as the subset itself); a paraphrase of one
component from ``paraphraser``, else identity (rephrase).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .components import Component, SystemPrompt, check_pool
from .fitness import Fitness
from .proxy import make_proxy
from .search import SearchResult, _check_budget, _paraphrase_fn, qualname

OPERATORS = ("crossover", "add_useful", "add_useless", "refine_subset", "rephrase", "swap", "delete")
PROBABILITIES = (0.815, 0.025, 0.01, 0.025, 0.025, 0.05, 0.05)

Proposer = Callable[[str, SystemPrompt], SystemPrompt | None]


def crossover(a: SystemPrompt, b: SystemPrompt, rng: np.random.Generator) -> SystemPrompt:
    """Shuffled union (by identity) truncated to L ~ round(N(mean(l1, l2), max(l1, l2)/4)), L in [1, l1 + l2]."""
    union = list({c.identity: c for c in (*a, *b)}.values())
    rng.shuffle(union)
    l1, l2 = len(a), len(b)
    length = round(rng.normal((l1 + l2) / 2, ((l1 + l2) - min(l1, l2)) / 4))
    return SystemPrompt(union[: int(np.clip(length, 1, max(1, min(l1 + l2, len(union)))))])


def mutate(
    op: str,
    parent: SystemPrompt,
    pool: Sequence[Component],
    rng: np.random.Generator,
    proposer: Proposer | None,
    paraphrases,
) -> SystemPrompt:
    """One of the non-crossover operators (see the module docstring)."""
    p = list(parent)
    if op in ("add_useful", "add_useless", "refine_subset", "rephrase") and proposer is not None:
        proposed = proposer(op, parent)
        if proposed is not None:
            return SystemPrompt(proposed)
    if op in ("add_useful", "add_useless"):
        present = {c.identity for c in p}
        free = [c for c in pool if c.identity not in present]
        if free:
            p.insert(int(rng.integers(len(p) + 1)), free[int(rng.integers(len(free)))])
    elif op == "rephrase" and paraphrases is not None and p:
        i = int(rng.integers(len(p)))
        alts = paraphrases(p[i])
        if alts:
            p[i] = alts[int(rng.integers(len(alts)))]
    elif op == "swap" and len(p) >= 2:
        i, j = rng.choice(len(p), 2, replace=False)
        p[i], p[j] = p[j], p[i]
    elif op == "delete" and len(p) >= 2:
        p.pop(int(rng.integers(len(p))))
    return SystemPrompt(p)


def sprig_ga(
    fitness: Fitness,
    components: Sequence[Component],
    *,
    generations: int = 50,
    proxy: str = "ridge",
    proposer: Proposer | None = None,
    paraphraser: Callable[[str], list[str]] | None = None,
    budget: int | None = None,
    n_real: int = 10,
    refit: bool = True,
    seed: int = 0,
    callback: Callable[[dict[str, Any]], None] | None = None,
) -> SearchResult:
    """The GA with a proxy reward; ``budget`` in question-evaluations (None: ``generations`` only)."""
    pool = check_pool(components)
    rng = np.random.default_rng(seed)
    start = fitness.evaluations
    dev_cost = fitness.cost(n_real + 1, "dev")  # the final pick and the empty prompt
    _check_budget(budget, fitness.cost(len(pool) + n_real) + dev_cost, "sprig_ga")
    paraphrases = _paraphrase_fn(paraphraser, pool)
    population = [SystemPrompt([c]) for c in pool]
    real: dict[SystemPrompt, float] = dict(zip(population, fitness(population).tolist(), strict=True))
    reward = make_proxy(proxy, pool, seed).fit(list(real), list(real.values()))
    size, history = len(population), []
    for gen in range(1, generations + 1):
        ranked = [population[i] for i in np.argsort(-reward.predict(population), kind="stable")]
        survivors = ranked[: max(1, size // 2)]
        top10, top50 = ranked[: max(1, math.ceil(0.1 * size))], ranked[: max(1, math.ceil(0.5 * size))]
        new, seen = [], set(survivors)
        for _ in range(20 * size):
            if len(survivors) + len(new) >= size:
                break
            parent = top10[int(rng.integers(len(top10)))]
            op = OPERATORS[int(rng.choice(len(OPERATORS), p=PROBABILITIES))]
            if op == "crossover":
                child = crossover(parent, top50[int(rng.integers(len(top50)))], rng)
            else:
                child = mutate(op, parent, pool, rng, proposer, paraphrases)
            if child and child not in seen:
                seen.add(child)
                new.append(child)
        population = survivors + new
        fresh = [p for p in (population[i] for i in np.argsort(-reward.predict(population))) if p not in real]
        fresh = fresh[:n_real]
        if budget is not None:
            fits = (budget - (fitness.evaluations - start) - dev_cost) // max(fitness.cost(1), 1)
            fresh = fresh[: max(0, int(fits))]
        if not fresh:
            break
        real.update(zip(fresh, fitness(fresh).tolist(), strict=True))
        if refit:
            reward.fit(list(real), list(real.values()))
        best = max(real, key=real.get)
        entry = {
            "generation": gen,
            "evaluations": fitness.evaluations - start,
            "best_score": real[best],
            "best_prompt": best,
        }
        history.append(entry)
        if callback is not None:
            callback(entry)
    final = sorted(real, key=real.get, reverse=True)[:n_real]
    config = {
        "algorithm": "sprig_ga",
        "generations": generations,
        "proxy": proxy,
        "proposer": qualname(proposer),
        "paraphraser": qualname(paraphraser),
        "n_real": n_real,
        "budget": budget,
        "seed": seed,
    }
    return SearchResult.on_dev(final, fitness, start, history, config)
