"""sprig / random search / GA / per-task optimisation on small oracles: budgets, determinism, improvement."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26_core.errors import UserError
from iclr26_sprig import OracleLLM, optimize_task_prompts, random_search, sprig, sprig_ga
from iclr26_sprig.components import SystemPrompt


@pytest.fixture(scope="module")
def oracle():
    return OracleLLM(n_tasks=6, n_components=40, seed=0)


def test_budget_accounting_counts_every_question(oracle):
    fit = oracle.fitness(n_questions=10, n_dev=20)
    r = sprig(fit, oracle.components, beam_size=3, top_ucb=5, n_iters=3, seed=0)
    n_cand = sum(h["n_candidates"] for h in r.history)
    assert r.evaluations == fit.evaluations == (1 + n_cand) * 6 * 10 + 3 * 6 * 20
    assert r.history[0]["n_candidates"] == 5  # the empty prompt: ADD of the top 5 at one position
    budget = r.evaluations - 1
    fit2 = oracle.fitness(n_questions=10, n_dev=20)
    r2 = sprig(fit2, oracle.components, beam_size=3, top_ucb=5, n_iters=3, budget=budget, seed=0)
    assert r2.evaluations <= budget and len(r2.history) == 3
    assert r2.evaluations == (1 + sum(h["n_candidates"] for h in r2.history)) * 60 + 3 * 120


def test_budget_smaller_than_one_iteration_is_refused(oracle):
    with pytest.raises(UserError, match="smaller than one iteration") as err:
        sprig(oracle.fitness(), oracle.components, top_ucb=5, budget=100)
    assert "\n" not in str(err.value)


def test_same_seed_same_history(oracle):
    def run():
        r = sprig(oracle.fitness(seed=4), oracle.components, beam_size=3, top_ucb=6, n_iters=3, seed=2)
        return [(h["best_prompt"].ids, h["best_score"], h["evaluations"]) for h in r.history], r.best.ids

    assert run() == run()


def test_search_finds_better_prompts_than_empty_and_random(oracle):
    fit = oracle.fitness(n_questions=50, seed=1)
    r = sprig(fit, oracle.components, beam_size=5, top_ucb=20, n_iters=5, seed=0)
    assert oracle.true_mean(r.best) > oracle.true_mean() + 0.03
    rs = random_search(
        oracle.fitness(n_questions=50, seed=2), oracle.components, budget=r.evaluations, seed=0
    )
    assert rs.evaluations <= r.evaluations and len(rs.best) >= 1


def test_paraphraser_switches_sub_on(oracle):
    r = sprig(
        oracle.fitness(), oracle.components, beam_size=3, top_ucb=4, n_iters=3, paraphraser=oracle.paraphraser
    )
    assert r.config["paraphraser"] is not None
    off = sprig(oracle.fitness(), oracle.components, beam_size=3, top_ucb=4, n_iters=3)
    assert off.config["paraphraser"] is None
    # same fitness seed: the same first beam of 3 one-component prompts, then 3 paraphrases each (SUB)
    assert r.history[1]["n_candidates"] == off.history[1]["n_candidates"] + 9


def test_ga_respects_budget_and_improves(oracle):
    fit = oracle.fitness(n_questions=20, seed=3)
    g = sprig_ga(fit, oracle.components, generations=8, seed=0)
    assert g.evaluations == fit.evaluations
    assert oracle.true_mean(g.best) > oracle.true_mean()
    budget = oracle.fitness(n_questions=20).cost(40 + 10 + 5) + 10 * 6 * 100
    fit2 = oracle.fitness(n_questions=20, seed=3)
    g2 = sprig_ga(fit2, oracle.components, generations=50, budget=budget, seed=0)
    assert g2.evaluations <= budget
    with pytest.raises(UserError, match="unknown proxy"):
        sprig_ga(oracle.fitness(), oracle.components, proxy="forest")


def test_task_prompt_greedy_matches_exact_choice(oracle):
    """With a noiseless fitness the greedy selection picks, each round, the phrase an exhaustive scan finds best."""
    name = oracle.task_names[0]
    phrases = oracle.task_phrases()[name][:6]

    def exact(task_prompts, n):
        return np.array([oracle.expected_accuracy((), {name: list(tp)})[0] for tp in task_prompts])

    chosen = optimize_task_prompts({name: exact}, {name: phrases}, max_len=3)[name]
    first = max(phrases, key=lambda p: exact([[p]], 0)[0])
    assert chosen[0] == first
    if exact([chosen[:1]], 0)[0] >= exact([[]], 0)[0]:
        assert len(chosen) >= 1
    tf = oracle.task_fitness(SystemPrompt(), seed=0)
    out = optimize_task_prompts(tf, oracle.task_phrases(), n_questions=200, max_len=2)
    assert set(out) == set(oracle.task_names) and tf.evaluations > 0
