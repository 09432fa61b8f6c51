"""Closed forms against Monte-Carlo episodes and against hand-derived special cases."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26_routing_game import RoutingGame, outcomes, simulate
from iclr26_routing_game.closed_form import user_utility_m1

from .conftest import game_at, random_games


def test_closed_forms_match_monte_carlo():
    g = random_games(20, seed=3)
    rng = np.random.default_rng(4)
    worst = 0.0
    for k in range(20):
        game = game_at(g, k)
        i, s, q = int(rng.integers(1, 3)), float(rng.uniform()), float(rng.uniform())
        exact = game.outcome(i, s, q)
        mc = simulate(game, i, s, q, n=20_000, seed=k)
        for key in ("success", "latency", "cost", "user_utility", "provider_cost"):
            se = mc.se[key]
            diff = abs(getattr(mc, key) - getattr(exact, key))
            z = diff / se if se > 0 else (0.0 if diff < 1e-9 else np.inf)
            worst = max(worst, z)
    assert worst < 4.5, worst  # 100 comparisons; Bonferroni at ~1e-3 overall


def test_special_cases_are_the_hand_formulas():
    p1, p2, t1, t2, c1, c2, V, P = 0.3, 0.7, 1.5, 2.5, 0.8, 2.0, 6.0, 1.7
    game = RoutingGame(p1, p2, t1, t2, c1, c2, V, P)
    # q = 0: the user always stays, every task is solved; M2 costs c2/p2 ("cost of pass")
    o = game.outcome(2, 0.3, 0.0)
    assert o.success == 1.0 and o.cost == pytest.approx(c2 / p2, rel=1e-14)
    assert o.user_utility == pytest.approx(V - t2 / p2, rel=1e-14)
    # q = 1: one pass only, U = ξ_i, J = c_i + P (1 − p_i), whatever s
    for i, (p, t, c) in ((1, (p1, t1, c1)), (2, (p2, t2, c2))):
        o = game.outcome(i, 0.6, 1.0)
        assert o.user_utility == pytest.approx(V * p - t, rel=1e-14)
        assert o.provider_cost == pytest.approx(c + P * (1 - p), rel=1e-14)
    # s = 1, q = 0: one M1 pass, then M2 until solved
    o = game.outcome(1, 1.0, 0.0)
    assert o.cost == pytest.approx(c1 + (1 - p1) * c2 / p2, rel=1e-14)
    assert o.cost == pytest.approx(p1 * (c1 / p1) + (1 - p1) * (c2 / p2), rel=1e-14)
    # s = 0: M1 alone, geometric number of passes with stopping probability d1 = 1 − (1 − p1)(1 − q)
    q = 0.25
    d1 = 1 - (1 - p1) * (1 - q)
    o = game.outcome(1, 0.0, q)
    assert o.success == pytest.approx(p1 / d1) and o.latency == pytest.approx(t1 / d1)
    assert o.provider_cost == pytest.approx(c1 / d1 + P * (1 - p1 / d1))


def test_linear_over_quadratic_form_equals_the_outcome():
    g = random_games(50, seed=5)
    s = np.linspace(0, 1, 7)[:, None]
    x = np.linspace(0, 1, 11)[None, :, None]
    a = outcomes(g, 1, s[..., None], 1 - x).user_utility
    b = user_utility_m1(g, s[..., None], x)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
