"""Side by side: established optimisers on SPRIG's search space, the same `Fitness` and the same question budget.

The genome of the generic optimisers is 10 slots, each a pool component or "none" (slot value M); it decodes
to the ordered prompt of the components present (a repeated component counts once, first place kept). Each
evaluates prompts through our noisy train fitness until the budget is spent and returns its own pick.

* ``deap`` — a generational GA written with DEAP's toolbox: tournament selection (3), two-point crossover
  (p 0.7), uniform integer mutation (p 0.2, 0.1 per slot).
* ``pygad`` — ``pygad.GA`` with integer gene space, steady-state selection, single-point crossover.
* ``nevergrad`` — ``DiscreteOnePlusOne`` on an integer array of 10 slots (ask/tell).
* ``promptolution`` — its ``EvoPromptGA`` loop (roulette-wheel parent selection, elitist survival) with an offline
  component-level meta-LLM in place of the LLM: it reads the two parent prompts from EvoPrompt's meta-prompt,
  takes the shuffled union of their components truncated to a random length and mutates it (add or delete one
  component, p 0.5). Prompts travel through promptolution as ``[[id id ...]]`` strings.

A peer that is not installed gives one row "not installed" (``pip install iclr26-sprig[peers]``).
"""

from __future__ import annotations

import importlib.util
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .components import Component, SystemPrompt
from .fitness import Fitness

SLOTS = 10
PEERS = ("deap", "pygad", "nevergrad", "promptolution")


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def decode(genome: Sequence[int], pool: Sequence[Component]) -> SystemPrompt:
    seen, out = set(), []
    for g in genome:
        g = int(g)
        if 0 <= g < len(pool) and g not in seen:
            seen.add(g)
            out.append(pool[g])
    return SystemPrompt(out)


class _Scorer:
    """Scores genomes with the fitness, stops at the budget, remembers the best noisy score seen."""

    def __init__(self, fitness: Fitness, pool: Sequence[Component], budget: int) -> None:
        self.fitness, self.pool, self.budget = fitness, pool, budget
        self.start = fitness.evaluations
        self.best, self.best_score, self.history = SystemPrompt(), -np.inf, []

    @property
    def left(self) -> int:
        return (self.budget - (self.fitness.evaluations - self.start)) // self.fitness.cost(1)

    def prompts(self, prompts: list[SystemPrompt]) -> np.ndarray:
        scores = self.fitness(prompts)
        i = int(np.argmax(scores))
        if scores[i] > self.best_score:
            self.best, self.best_score = prompts[i], float(scores[i])
        self.history.append({"evaluations": self.fitness.evaluations - self.start, "best_prompt": self.best})
        return scores

    def genomes(self, genomes: Sequence[Sequence[int]]) -> np.ndarray:
        return self.prompts([decode(g, self.pool) for g in genomes])


def run_deap(sc: _Scorer, rng: np.random.Generator, population: int) -> SystemPrompt:
    import random

    from deap import base, tools

    m = len(sc.pool)
    rnd = random.Random(int(rng.integers(2**31)))
    tb = base.Toolbox()
    tb.register("mate", tools.cxTwoPoint)
    tb.register("mutate", tools.mutUniformInt, low=0, up=m, indpb=0.1)
    pop = [[rnd.randint(0, m) for _ in range(SLOTS)] for _ in range(population)]
    fit = list(sc.genomes(pop))
    while sc.left >= population:
        chosen = [max(rnd.sample(range(population), 3), key=lambda i: fit[i]) for _ in range(population)]
        kids = [list(pop[i]) for i in chosen]
        for a, b in zip(kids[::2], kids[1::2], strict=False):
            if rnd.random() < 0.7:
                tb.mate(a, b)
        for k in kids:
            if rnd.random() < 0.2:
                tb.mutate(k)
        pop, fit = kids, list(sc.genomes(kids))
    return sc.best


def run_pygad(sc: _Scorer, rng: np.random.Generator, population: int) -> SystemPrompt:
    import logging

    import pygad

    m = len(sc.pool)
    generations = max(1, sc.left // population - 1)

    def fitness_func(ga, solutions, idx):
        return sc.genomes(np.atleast_2d(solutions)).tolist()

    quiet = logging.getLogger("sprig.pygad")
    quiet.setLevel(logging.ERROR)
    ga = pygad.GA(
        num_generations=generations,
        num_parents_mating=max(2, population // 2),
        fitness_func=fitness_func,
        fitness_batch_size=population,
        sol_per_pop=population,
        num_genes=SLOTS,
        gene_type=int,
        gene_space=list(range(m + 1)),
        parent_selection_type="sss",
        crossover_type="single_point",
        mutation_type="random",
        mutation_percent_genes=10,
        keep_elitism=1,
        random_seed=int(rng.integers(2**31)),
        suppress_warnings=True,
        logger=quiet,
        stop_criteria=None,
    )
    ga.run()
    return sc.best


def run_nevergrad(sc: _Scorer, rng: np.random.Generator, population: int) -> SystemPrompt:
    import nevergrad as ng

    m = len(sc.pool)
    param = ng.p.Array(shape=(SLOTS,), lower=0, upper=m + 0.999).set_integer_casting()
    param.random_state = np.random.RandomState(int(rng.integers(2**31)))
    opt = ng.optimizers.DiscreteOnePlusOne(parametrization=param, budget=int(sc.left))
    while sc.left >= population:
        cands = [opt.ask() for _ in range(population)]
        scores = sc.genomes([c.value for c in cands])
        for c, s in zip(cands, scores, strict=True):
            opt.tell(c, -float(s))
    return sc.best


def _ids_text(p: SystemPrompt) -> str:
    return "[[" + " ".join(c.id for c in p) + "]]"


def run_promptolution(sc: _Scorer, rng: np.random.Generator, population: int) -> SystemPrompt:
    from promptolution.llms.base_llm import BaseLLM
    from promptolution.optimizers import EvoPromptGA

    pool, by_id = sc.pool, {c.id: c for c in sc.pool}
    np.random.seed(int(rng.integers(2**31)))  # EvoPromptGA draws parents from numpy's global generator

    def parse(text: str) -> SystemPrompt:
        return SystemPrompt(by_id[i] for i in text.split() if i in by_id)

    class PoolMetaLLM(BaseLLM):
        """Offline meta-LLM: crossover + mutation of the two parents' components."""

        def _get_response(self, prompts: list[str], system_prompts: list[str]) -> list[str]:
            out = []
            for meta in prompts:
                parents = [parse(t) for t in re.findall(r"\[\[([^\]]*)\]\]", meta)[-2:]]
                union = list(dict.fromkeys(c for p in parents for c in p))
                rng.shuffle(union)
                size = int(np.clip(round(rng.normal(np.mean([len(p) for p in parents]), 1.5)), 1, SLOTS))
                child = union[:size]
                if rng.random() < 0.5:
                    free = [c for c in pool if c not in child]
                    if free and (rng.random() < 0.5 or len(child) < 2):
                        child.insert(int(rng.integers(len(child) + 1)), free[int(rng.integers(len(free)))])
                    elif len(child) >= 2:
                        child.pop(int(rng.integers(len(child))))
                out.append(f"<prompt>{_ids_text(SystemPrompt(child))}</prompt>")
            return out

    class Result:
        def __init__(self, scores):
            self.agg_scores = np.asarray(scores, float)

    class FitnessTask:
        task_description = "choose a system prompt that raises accuracy on many tasks"
        task_type = "classification"

        def evaluate(self, prompts, predictor, **_):
            return Result(sc.prompts([parse(p.instruction.strip("[]")) for p in prompts]))

    class Predictor:
        extraction_description = ""
        llm = None

    init = []
    for _ in range(population):
        k = int(rng.integers(1, SLOTS + 1))
        init.append(_ids_text(SystemPrompt(pool[i] for i in rng.choice(len(pool), k, replace=False))))
    opt = EvoPromptGA(
        predictor=Predictor(),
        task=FitnessTask(),
        meta_llm=PoolMetaLLM(),
        initial_prompts=init,
        selection_mode="wheel",
    )
    opt.optimize(n_steps=max(0, sc.left // population - 1))
    return sc.best


RUNNERS: dict[str, Callable[[_Scorer, np.random.Generator, int], SystemPrompt]] = {
    "deap": run_deap,
    "pygad": run_pygad,
    "nevergrad": run_nevergrad,
    "promptolution": run_promptolution,
}


def bench(
    make_fitness: Callable[[int], Fitness],
    pool: Sequence[Component],
    truth: Callable[[SystemPrompt], float],
    budget: int,
    *,
    population: int = 50,
    seed: int = 0,
    tick: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per peer: exact accuracy of its pick, evaluations used, wall time, its curve."""
    rows = []
    for k, name in enumerate(PEERS):
        if not installed(name):
            rows.append(
                {
                    "peer": name,
                    "accuracy": None,
                    "evaluations": 0,
                    "seconds": 0.0,
                    "note": "not installed (pip install iclr26-sprig[peers])",
                    "curve": [],
                }
            )
            continue
        sc = _Scorer(make_fitness(k), pool, budget)
        t0 = time.perf_counter()
        best = RUNNERS[name](sc, np.random.default_rng([seed, k]), population)
        rows.append(
            {
                "peer": name,
                "accuracy": truth(best),
                "length": len(best),
                "evaluations": sc.fitness.evaluations - sc.start,
                "seconds": round(time.perf_counter() - t0, 2),
                "note": "",
                "curve": [
                    [h["evaluations"], truth(h["best_prompt"])]
                    for h in sc.history[:: max(1, len(sc.history) // 60)]
                ],
            }
        )
        if tick is not None:
            tick(f"peer {name}")
    return rows
