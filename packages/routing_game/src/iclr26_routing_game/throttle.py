"""Latency throttling (Proposition 2), vectorised over games.

Before the game is played the provider may inflate latencies to any t̂_i ≥ t_i. The provider's cost depends
on latencies only through the user's response, and a throttle that matters flips a model from
value-dominated to latency-dominated; so the search is over the four throttle subsets (none, M1, M2, both),
a throttled model getting t̂_i = max(t_i, V p_i + ε) (ξ̂_i = −ε; an already latency-dominated model is
unchanged). Each subset's game is solved exactly (`provider.provider_optimum`); the cheapest subset wins,
ties among equally cheap subsets going to the user's favour (the higher user utility, then fewer throttles).

Closed form in the both-value-dominated case (inferred): throttling both makes the user leave after the first
failure, J = min_i c_i + P (1 − p_i), so the gain is max(0, min_i c_i/p_i − min_i (c_i + P (1 − p_i))),
positive for P below P* = max_i (m − c_i)/(1 − p_i) with m = min_i c_i/p_i (P* ≥ m).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .closed_form import Params, xi
from .provider import provider_optimum
from .user_response import TIE_TOL

EPS = 1e-6
SUBSETS = ("none", "M1", "M2", "both")
_MASKS = ((False, False), (True, False), (False, True), (True, True))


class Throttles(NamedTuple):
    """Throttling per game (arrays of the games' shape); utilities use the latencies the user experiences."""

    gain: np.ndarray  # J* unthrottled − J* at the best throttle (≥ 0)
    subset: np.ndarray  # index into SUBSETS
    provider_cost_before: np.ndarray
    provider_cost_after: np.ndarray
    user_utility_before: np.ndarray
    user_utility_after: np.ndarray
    user_utility_throttle_both: np.ndarray
    provider_cost_throttle_both: np.ndarray
    t1: np.ndarray  # the chosen latencies t̂
    t2: np.ndarray
    P_star: np.ndarray  # closed-form threshold (both value-dominated), NaN elsewhere


def throttled(g: Params, m1: bool, m2: bool, eps: float = EPS) -> Params:
    """The game with M1 and/or M2 throttled to t̂_i = max(t_i, V p_i + ε)."""
    t1 = np.maximum(g.t1, g.V * g.p1 + eps) if m1 else g.t1
    t2 = np.maximum(g.t2, g.V * g.p2 + eps) if m2 else g.t2
    return g.replace(t1=t1, t2=t2)


def closed_form_gain(g: Params) -> np.ndarray:
    """max(0, min_i c_i/p_i − min_i (c_i + P (1 − p_i))): the gain when both models are value-dominated."""
    both_stay = np.minimum(g.c1 / g.p1, g.c2 / g.p2)
    one_pass = np.minimum(g.c1 + g.P * (1 - g.p1), g.c2 + g.P * (1 - g.p2))
    return np.maximum(0.0, both_stay - one_pass)


def p_star(g: Params) -> np.ndarray:
    """P* = max_i (m − c_i)/(1 − p_i), m = min_i c_i/p_i: throttling pays iff P < P* (value-dominated)."""
    x1, x2 = xi(g)
    m = np.minimum(g.c1 / g.p1, g.c2 / g.p2)
    with np.errstate(all="ignore"):
        k1 = np.where(g.p1 < 1, (m - g.c1) / (1 - g.p1), -np.inf)
        k2 = np.where(g.p2 < 1, (m - g.c2) / (1 - g.p2), -np.inf)
    return np.where((x1 > 0) & (x2 > 0), np.maximum(k1, k2), np.nan)


def throttling(g: Params, tie_break: str = "provider", eps: float = EPS) -> Throttles:
    """The provider's best throttle for every game in ``g`` (see the module docstring)."""
    sols = [provider_optimum(throttled(g, m1, m2, eps), tie_break) for m1, m2 in _MASKS]
    J = np.stack([e.provider_cost for e in sols], -1)
    U = np.stack([e.user_utility for e in sols], -1)
    j_min = J.min(-1, keepdims=True)
    tied = j_min + TIE_TOL * (1.0 + np.abs(j_min)) >= J
    k = np.where(tied, U, -np.inf).argmax(-1)  # user-favoured ties; argmax keeps the first (fewest throttles)
    pick = lambda a: np.take_along_axis(a, k[..., None], -1)[..., 0]  # noqa: E731
    t1 = np.stack([throttled(g, m1, m2, eps).t1 for m1, m2 in _MASKS], -1)
    t2 = np.stack([throttled(g, m1, m2, eps).t2 for m1, m2 in _MASKS], -1)
    return Throttles(
        gain=np.maximum(J[..., 0] - pick(J), 0.0),
        subset=k,
        provider_cost_before=J[..., 0],
        provider_cost_after=pick(J),
        user_utility_before=U[..., 0],
        user_utility_after=pick(U),
        user_utility_throttle_both=U[..., 3],
        provider_cost_throttle_both=J[..., 3],
        t1=pick(t1),
        t2=pick(t2),
        P_star=p_star(g),
    )
