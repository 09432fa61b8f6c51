"""The user's best response: exact vs a 10,001-point grid, the worked examples, thresholds, tie-breaking."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26_routing_game import RoutingGame, best_response, outcomes
from iclr26_routing_game.closed_form import xi
from iclr26_routing_game.user_response import s_high, s_low, s_zero

from .conftest import random_games

Q = np.linspace(0, 1, 10_001)


def test_exact_best_response_beats_a_fine_grid():
    g = random_games(60, seed=1)
    rng = np.random.default_rng(2)
    for k in range(60):
        gk = type(g)(*(a[k] for a in g))
        for i in (1, 2):
            s = float(rng.uniform())
            q, o = best_response(gk, i, s)
            grid_max = outcomes(gk, i, s, Q).user_utility.max()
            assert float(o.user_utility) >= grid_max - 1e-9
            assert float(o.user_utility) == pytest.approx(
                float(outcomes(gk, i, s, q).user_utility), abs=1e-12
            )


def test_worked_example_switch_at_s0():
    game = RoutingGame(p1=0.3, t1=2, p2=0.8, t2=2.5, c1=1, c2=3, V=5, P=1)
    assert game.thresholds()["s0"] == pytest.approx(0.210526315789, abs=1e-9)  # 0.5 / 2.375
    assert game.user_best_response(1, 0.19) == 1.0
    assert game.user_best_response(1, 0.23) == 0.0


def test_worked_example_three_stages():
    game = RoutingGame(p1=0.5, t1=1, p2=0.6, t2=4, c1=1, c2=3, V=5, P=1)
    assert game.user_best_response(1, 0.35) == 0.0
    assert game.user_best_response(1, 0.4) == pytest.approx(0.080, abs=5e-4)
    assert game.user_best_response(1, 0.5) == pytest.approx(0.517, abs=5e-4)
    assert game.user_best_response(1, 0.6) == 1.0 and game.user_best_response(1, 0.9) == 1.0
    assert game.thresholds()["s_H"] == pytest.approx(0.6)


def test_stage_thresholds_against_independent_conditions():
    from iclr26_routing_game.user_response import switch_point

    g = random_games(4000, seed=7)
    x1, x2 = xi(g)
    g = g.take((x1 > 0) & (x2 < 0))
    n = g.shape[0]
    assert n > 100
    sl, sh = s_low(g), s_high(g)
    # s_H: q* = 1 from there on, < 1 below
    assert (best_response(g, 1, np.minimum(1.0, sh + 1e-7))[0] == 1.0).all()
    assert (best_response(g, 1, sh - 1e-3)[0] < 1.0).all()
    # s_L: a bisection on the exact best response (q* > 0 turns on) lands on the closed form; the last
    # ~1e-6 is the tie tolerance (an interior optimum within 1e-12 of U at q = 0 counts as a tie)
    s_hat = switch_point(g, np.zeros(n), sh, lambda q: q > 0)
    np.testing.assert_allclose(s_hat, sl, atol=1e-5)
    assert (sl > 0).all() and (sl < sh).all()


def test_s0_formula_equivalence():
    g = random_games(3000, seed=9)
    x1, x2 = xi(g)
    s0 = s_zero(g)
    ok = ~np.isnan(s0)
    # equivalently ξ1 (1 − s) + s ξ2/p2 = 0 at s0
    np.testing.assert_allclose((x1 * (1 - s0) + s0 * x2 / g.p2)[ok], 0, atol=1e-12)


def test_tie_break_only_matters_on_ties():
    # ξ2 = 0 exactly: the user is indifferent on M2; the provider prefers the user to leave (c2 > P p2)
    tie = RoutingGame(p1=0.5, p2=0.5, t1=1, t2=2, c1=1, c2=3, V=4, P=1)
    assert tie.xi[1] == 0.0
    assert tie.user_best_response(2, 0.0) == 1.0
    assert tie.replace(tie_break="user").user_best_response(2, 0.0) == 0.0
    # generic games: both conventions give the same equilibrium cost
    from iclr26_routing_game import provider_optimum

    g = random_games(200, seed=11)
    a, b = provider_optimum(g, "provider"), provider_optimum(g, "user")
    np.testing.assert_allclose(a.provider_cost, b.provider_cost, rtol=1e-7, atol=1e-9)
