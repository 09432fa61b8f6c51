"""The provider's optimum (Theorems 3-5) and the misalignment gap (Proposition 1), vectorised over games.

The provider (leader) minimises J_i(s, q*(i, s)) over i ∈ {1, 2}, s ∈ [0, 1]. For a fixed q, J1 is
linear-fractional in s (numerator and denominator both linear), hence monotone; so on every piece of s
where q* is constant the optimum sits at an end of the piece. The exact candidates are therefore

* (2, ·), (1, 0), (1, 1);
* (1, s0) where ξ1 < 0 < ξ2 (the smallest cascade that keeps the user; under ``tie_break="user"`` also
  s0 + 1e-9, since there the user leaves at s0 itself);
* (1, s_L) and (1, s_H) where ξ1 > 0 > ξ2;

plus, for the interior stage s_L < s < s_H (where q* moves continuously and J1 is no longer monotone), a
1-D bounded search: a grid of ``grid`` points on [s_L, s_H] (and one on [0, 1], for safety) refined by
golden-section search around the best grid point. Ties: the cheapest candidates within a relative 1e-12;
among them s = 0 first (no cascade), then M1, then the smallest s.

Misalignment: for fixed q, U1 is linear-fractional in s too, so the user's favourite policy
max_(i,s) U_i(s, q*) is attained at (2, ·), (1, 0) or (1, 1); Δ_U = that maximum − U at the provider optimum.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .closed_form import Params, xi
from .user_response import TIE_TOL, _check_tie_break, best_response, s_high, s_low, s_zero

GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0
REGIMES = ("value-dominated", "latency-dominated", "xi1<0<xi2", "xi1>0>xi2", "boundary")


class Equilibria(NamedTuple):
    """The provider's optimum per game (arrays of the games' shape)."""

    i: np.ndarray
    s: np.ndarray
    q: np.ndarray
    provider_cost: np.ndarray
    user_utility: np.ndarray
    success: np.ndarray
    latency: np.ndarray
    cost: np.ndarray
    escalates: np.ndarray
    user_best: np.ndarray  # max over provider policies of the user's utility (at q*)
    gap: np.ndarray  # Δ_U = user_best − user_utility ≥ 0


def regime(g: Params) -> np.ndarray:
    """One of `REGIMES` per game, from the signs of ξ1, ξ2."""
    x1, x2 = xi(g)
    return np.select(
        [(x1 > 0) & (x2 > 0), (x1 < 0) & (x2 < 0), (x1 < 0) & (x2 > 0), (x1 > 0) & (x2 < 0)],
        list(REGIMES[:4]),
        default=REGIMES[4],
    ).astype(object)


def _cost(g: Params, s: np.ndarray, tie_break: str) -> np.ndarray:
    return best_response(g, 1, s, tie_break)[1].provider_cost


def _grid_golden(g: Params, lo: np.ndarray, hi: np.ndarray, grid: int, iters: int, tie_break: str):
    """argmin over s in [lo, hi] of J1(s, q*(s)): a grid, then golden-section search around the best point."""
    u = np.linspace(0.0, 1.0, grid)
    S = lo[..., None] + (hi - lo)[..., None] * u
    J = _cost(g.expand(), S, tie_break)
    k = J.argmin(-1)
    step = (hi - lo) / (grid - 1)
    best = np.take_along_axis(S, k[..., None], -1)[..., 0]
    a, b = np.maximum(lo, best - step), np.minimum(hi, best + step)
    c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    fc, fd = _cost(g, c, tie_break), _cost(g, d, tie_break)
    for _ in range(iters):
        left = fc < fd
        a, b = np.where(left, a, c), np.where(left, d, b)
        c_new, d_new = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
        c, d = np.where(left, c_new, d), np.where(left, c, d_new)  # right side uses the old c, d
        f_new = _cost(g, np.where(left, c, d), tie_break)
        fc, fd = np.where(left, f_new, fd), np.where(left, fc, f_new)  # old fc, fd on the right
    x = 0.5 * (a + b)
    fx = _cost(g, x, tie_break)
    return np.where(fx <= J.min(-1), x, best)


def candidates(g: Params, tie_break: str = "provider", grid: int = 65, iters: int = 60):
    """(i, s) candidate arrays of shape g.shape + (K,): the exact points and the searched interior optima."""
    n = g.shape
    zero, one = np.zeros(n), np.ones(n)
    s0, sh = s_zero(g), s_high(g)
    sl = s_low(g, tie_break)
    fill = lambda a: np.where(np.isnan(a), 0.0, a)  # noqa: E731 - a duplicate of (1, 0) where n/a
    ss = [zero, zero, one, fill(s0), fill(sl), fill(sh)]
    if tie_break == "user":
        ss.append(np.minimum(1.0, fill(s0) + 1e-9 * (s0 > 0)))
    ss.append(_grid_golden(g, zero, one, grid, iters, tie_break))
    piece = ~np.isnan(sh)
    ss.append(
        _grid_golden(g, np.where(piece, fill(sl), 0.0), np.where(piece, sh, 1.0), grid, iters, tie_break)
    )
    s = np.stack(ss, -1)
    i = np.ones(s.shape, dtype=int)
    i[..., 0] = 2
    return i, s


def provider_optimum(g: Params, tie_break: str = "provider", grid: int = 65, iters: int = 60) -> Equilibria:
    """The provider's exact optimum for every game in ``g`` (see the module docstring)."""
    _check_tie_break(tie_break)
    i, s = candidates(g, tie_break, grid, iters)
    q, out = best_response(g.expand(), i, s, tie_break)
    J = out.provider_cost
    j_min = J.min(-1, keepdims=True)
    tied = j_min + TIE_TOL * (1.0 + np.abs(j_min)) >= J
    primary = np.where(tied, 10 * (s > 0) * (i == 1) + i, 99)
    sel = primary == primary.min(-1, keepdims=True)
    k = np.where(sel, np.where(i == 2, 0.0, s), np.inf).argmin(-1)
    pick = lambda a: np.take_along_axis(a, k[..., None], -1)[..., 0]  # noqa: E731
    i_opt, s_opt, q_opt = pick(i), pick(s), pick(q)
    s_opt = np.where(i_opt == 2, 0.0, s_opt)
    u_opt = pick(out.user_utility)
    best = user_best(g, tie_break)
    return Equilibria(
        i=i_opt,
        s=s_opt,
        q=q_opt,
        provider_cost=pick(J),
        user_utility=u_opt,
        success=pick(out.success),
        latency=pick(out.latency),
        cost=pick(out.cost),
        escalates=(i_opt == 1) & (s_opt > 0) & (q_opt < 1),
        user_best=best,
        gap=np.maximum(best - u_opt, 0.0),
    )


def user_best(g: Params, tie_break: str = "provider") -> np.ndarray:
    """max over (i, s) of U_i(s, q*(i, s)): the best of (2, ·), (1, 0), (1, 1)."""
    i = np.array([2, 1, 1])
    s = np.array([0.0, 0.0, 1.0])
    return best_response(g.expand(), i, s, tie_break)[1].user_utility.max(-1)


def misalignment_gap(g: Params, tie_break: str = "provider") -> np.ndarray:
    """Δ_U = max_(i,s) U_i(s, q*) − U at the provider's optimum (≥ 0)."""
    return provider_optimum(g, tie_break).gap
