"""The allocation program: scipy's milp against brute force, budgets, infeasibility."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from iclr26_pmkvq import allocate_memory, mem_bytes
from iclr26_pmkvq.allocation import InfeasibleBudget, solve_brute_force, solve_milp


def _enumerate(sens, cost, budget):
    # a third, plain computation: every combination, best objective
    vals = [
        sum(sens[i][j] for i, j in enumerate(c))
        for c in itertools.product(range(len(cost)), repeat=len(sens))
        if sum(cost[j] for j in c) <= budget
    ]
    return min(vals)


@pytest.mark.parametrize("seed", range(5))
def test_milp_equals_brute_force_on_random_problems(seed):
    rng = np.random.default_rng(seed)
    sens = rng.random((5, 3))
    cost = [1.0, 2.0, 4.0]
    budget = float(rng.integers(6, 18))
    a, b = solve_milp(sens, cost, budget), solve_brute_force(sens, cost, budget)
    obj = lambda idx: sum(sens[i, j] for i, j in enumerate(idx))  # noqa: E731
    assert obj(a) == pytest.approx(obj(b)) == pytest.approx(_enumerate(sens, cost, budget))
    assert sum(cost[j] for j in a) <= budget and sum(cost[j] for j in b) <= budget


def test_allocate_memory_respects_the_budget_and_prefers_sensitive_blocks():
    sens = np.array([[1.0, 0.1], [5.0, 0.2], [1.0, 0.1], [0.9, 0.1]])  # block 1 loses most at 2 bit
    per = {b: mem_bytes(b, 512, 2, 32) for b in (2, 4)}
    budget = per[4] + 3 * per[2]
    for method in ("brute", "milp"):
        bits = allocate_memory(sens, [2, 4], budget, n_kv_heads=2, head_dim=32, max_len=512, method=method)
        assert bits == [2, 4, 2, 2]
        assert sum(per[b] for b in bits) <= budget


def test_infeasible_budget_is_a_clear_error():
    with pytest.raises(InfeasibleBudget, match="smallest allocation"):
        allocate_memory(np.ones((4, 2)), [2, 4], 1000, n_kv_heads=2, head_dim=32, max_len=512)
    with pytest.raises(InfeasibleBudget):
        solve_milp(np.ones((2, 2)), [5.0, 9.0], 4.0)
