"""The provider's optimum against brute force, the same-sign rules, the misalignment gap, throttling."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26_routing_game import RoutingGame, outcomes, provider_optimum, throttling
from iclr26_routing_game.closed_form import xi

from .conftest import game_at, random_games

S_GRID = np.linspace(0, 1, 2001)
Q_GRID = np.linspace(0, 1, 1001)


def brute_force(game: RoutingGame) -> tuple[float, float]:
    """(min J, max U over policies): every (i, s) on a 2,001-point grid, the user best on a 1,001-point grid,
    refined to 5e-6 within one grid step of it. Without the refinement a grid user who rounds an interior best
    response (q ≈ 0.0004) to q = 0 can hand the provider a cost below the true optimum (seed 22, game 181)."""
    g = game.params
    o1 = outcomes(g, 1, S_GRID[:, None], Q_GRID[None, :])
    k1 = o1.user_utility.argmax(1)
    dq = Q_GRID[1] - Q_GRID[0]
    q_fine = np.clip(Q_GRID[k1][:, None] + np.linspace(-dq, dq, 401)[None, :], 0.0, 1.0)
    f1 = outcomes(g, 1, S_GRID[:, None], q_fine)
    j1 = f1.provider_cost[np.arange(S_GRID.size), f1.user_utility.argmax(1)]
    o2 = outcomes(g, 2, 0.0, Q_GRID)
    k2 = o2.user_utility.argmax()
    u_best = max(o1.user_utility.max(), o2.user_utility.max())
    return min(j1.min(), o2.provider_cost[k2]), u_best


def _check(n: int, seed: int) -> None:
    g = random_games(n, seed=seed)
    eq = provider_optimum(g)
    for k in range(n):
        game = game_at(g, k)
        j_bf, u_bf = brute_force(game)
        scale = 1 + abs(j_bf)
        # exact is at least as good as any grid policy (up to the refined user's 5e-6 rounding of q)
        assert eq.provider_cost[k] <= j_bf + 1e-4 * scale
        assert eq.provider_cost[k] >= j_bf - 2e-3 * scale  # and the grid gets close to it
        assert eq.user_best[k] == pytest.approx(u_bf, abs=2e-3 * (1 + abs(u_bf)))


def test_provider_optimum_vs_brute_force():
    _check(40, seed=21)


@pytest.mark.slow
def test_provider_optimum_vs_brute_force_200():
    _check(200, seed=22)


def test_same_sign_rules():
    g = random_games(3000, seed=23)
    x1, x2 = xi(g)
    eq = provider_optimum(g)
    vd = (x1 > 0) & (x2 > 0)
    cop = np.stack([g.c1 / g.p1, g.c2 / g.p2], -1)
    assert (eq.i[vd] == cop[vd].argmin(-1) + 1).all() and (eq.s[vd] == 0).all()
    np.testing.assert_allclose(eq.provider_cost[vd], cop[vd].min(-1), rtol=1e-12)
    ld = (x1 < 0) & (x2 < 0)
    m2 = (g.c2 - g.c1) / (g.p2 - g.p1) < g.P
    assert (eq.i[ld] == np.where(m2, 2, 1)[ld]).all() and (eq.q[ld] == 1).all()
    assert not eq.escalates[vd | ld].any()


def test_misalignment_gap_value_dominated():
    game = RoutingGame(p1=0.4, p2=0.8, t1=2.0, t2=1.0, c1=1, c2=3, V=10, P=1)  # user prefers M2, provider M1
    assert game.regime == "value-dominated"
    eq = game.provider_optimum()
    assert eq.i == 1 and eq.s == 0
    assert game.misalignment_gap() == pytest.approx(abs(2.0 / 0.4 - 1.0 / 0.8), rel=1e-12)
    aligned = game.replace(c2=1.5)  # c2/p2 = 1.875 < c1/p1 = 2.5: both rank M2 first
    assert aligned.misalignment_gap() == pytest.approx(0.0, abs=1e-12)


def test_throttling_example():
    base = dict(p1=0.4, p2=0.8, t1=0.5, t2=1.0, c1=1, c2=3, V=5)
    low = RoutingGame(**base, P=1).throttling()
    assert low.gain == pytest.approx(2.5 - 1.6, rel=1e-12) and low.gain > 0
    assert low.user_utility_after < low.user_utility_before
    assert low.user_utility_throttle_both <= 0
    high = RoutingGame(**base, P=5).throttling()
    assert high.gain == 0 and high.subset == "none"  # 4.0 > 2.5: throttling does not pay
    assert low.P_star == pytest.approx(max(2.5, (2.5 - 3) / 0.2), rel=1e-12)


def test_four_subset_search_equals_the_closed_form_gain():
    g = random_games(4000, seed=25)
    x1, x2 = xi(g)
    g = g.take(np.flatnonzero((x1 > 0) & (x2 > 0))[:200])
    th = throttling(g)
    both_stay = np.minimum(g.c1 / g.p1, g.c2 / g.p2)
    one_pass = np.minimum(g.c1 + g.P * (1 - g.p1), g.c2 + g.P * (1 - g.p2))
    np.testing.assert_allclose(th.gain, np.maximum(0, both_stay - one_pass), atol=1e-6)


@pytest.mark.slow  # slow: 80 games × a 25 × 25 grid (≈ 12 s); CI runs it in the slow stage
def test_partial_throttles_never_beat_the_four_subset_search():
    """Any latencies t̂_i ≥ t_i (a 25 × 25 grid per game, well past V p_i) cost the provider at least the
    four-subset search's optimum, on 80 random games; and the grid finds a throttle that pays where it does."""
    from iclr26_routing_game import Params

    g = random_games(80, seed=7)
    th = throttling(g)
    n = 25
    span = np.linspace(0.0, 1.0, n)
    hi1, hi2 = 1.5 * g.V * g.p1 + 1.0, 1.5 * g.V * g.p2 + 1.0  # beyond the flip at t̂_i = V p_i
    t1 = g.t1[:, None, None] + np.maximum(hi1 - g.t1, 0)[:, None, None] * span[None, :, None]
    t2 = g.t2[:, None, None] + np.maximum(hi2 - g.t2, 0)[:, None, None] * span[None, None, :]
    t1, t2 = np.broadcast_arrays(t1, t2)
    full = Params(*(np.broadcast_to(np.asarray(a)[:, None, None], t1.shape) for a in g)).replace(t1=t1, t2=t2)
    J_grid = provider_optimum(full).provider_cost.reshape(80, -1).min(1)
    after = th.provider_cost_after
    assert (J_grid >= after - 1e-9 * (1 + np.abs(after))).all()
    assert (th.gain > 1e-6).sum() >= 5  # non-vacuous: throttling pays in some of these games
    pays = th.gain > 1e-6
    assert (J_grid[pays] < th.provider_cost_before[pays] - 1e-9).all()  # ...and the grid sees it too
