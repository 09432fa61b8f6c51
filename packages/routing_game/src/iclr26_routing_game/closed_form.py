"""The game's outcomes in closed form, vectorised over numpy arrays of games (broadcasting).

A game is the eight numbers ``(p1, p2, t1, t2, c1, c2, V, P)`` (`Params`, each an array or a float). The
provider's policy is ``(i, s)``: the first model ``i ∈ {1, 2}`` and the cascade probability ``s ∈ [0, 1]``
(escalate M1 → M2 after a failed pass); the user's policy is the abandonment probability ``q ∈ [0, 1]``
after each failed pass. The first pass always happens; M2 is absorbing. (Dynamics inferred, see README.)

On M2:   d2 = 1 − (1 − p2)(1 − q),  S2 = p2/d2,  L2 = t2/d2,  C2 = c2/d2.
On M1:   r = (1 − p1)(1 − q),  D = 1 − r(1 − s),
         S1 = (p1 + r s S2)/D,  L1 = (t1 + r s L2)/D,  C1 = (c1 + r s C2)/D.
User utility U = V·S − L; provider cost J = C + P·(1 − S).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

FIELDS = ("p1", "p2", "t1", "t2", "c1", "c2", "V", "P")


class Params(NamedTuple):
    """The parameters of one game or of an array of games (any broadcastable shapes)."""

    p1: np.ndarray
    p2: np.ndarray
    t1: np.ndarray
    t2: np.ndarray
    c1: np.ndarray
    c2: np.ndarray
    V: np.ndarray
    P: np.ndarray

    @classmethod
    def of(cls, **kw: object) -> Params:
        arrays = np.broadcast_arrays(*(np.asarray(kw[f], dtype=float) for f in FIELDS))
        return cls(*(np.array(a) for a in arrays))

    @property
    def shape(self) -> tuple[int, ...]:
        return np.shape(self.p1)

    def replace(self, **kw: object) -> Params:
        return Params.of(**{**self._asdict(), **kw})

    def expand(self, axis: int = -1) -> Params:
        """Each field with a new axis (for broadcasting against a grid of s or q)."""
        return Params(*(np.expand_dims(a, axis) for a in self))

    def take(self, mask: np.ndarray) -> Params:
        return Params(*(a[mask] for a in self))


def xi(g: Params) -> tuple[np.ndarray, np.ndarray]:
    """Single-pass net values ξ_i = V·p_i − t_i (> 0 value-dominated, < 0 latency-dominated)."""
    return g.V * g.p1 - g.t1, g.V * g.p2 - g.t2


class Outcomes(NamedTuple):
    """Success probability S, expected latency L, expected cost C, user utility U, provider cost J."""

    success: np.ndarray
    latency: np.ndarray
    cost: np.ndarray
    user_utility: np.ndarray
    provider_cost: np.ndarray


def outcomes(g: Params, i: object, s: object, q: object) -> Outcomes:
    """Closed-form outcomes of policy (i, s) against the user's q; every argument broadcasts.

    i: 1 or 2 (array or int), s, q in [0, 1]. Returns arrays of the broadcast shape.
    """
    i, s, q = np.asarray(i), np.asarray(s, dtype=float), np.asarray(q, dtype=float)
    stay = 1.0 - q
    d2 = 1.0 - (1.0 - g.p2) * stay
    S2, L2, C2 = g.p2 / d2, g.t2 / d2, g.c2 / d2
    r = (1.0 - g.p1) * stay
    D = 1.0 - r * (1.0 - s)
    rs = r * s
    S1 = (g.p1 + rs * S2) / D
    L1 = (g.t1 + rs * L2) / D
    C1 = (g.c1 + rs * C2) / D
    on1 = i == 1
    S = np.where(on1, S1, S2)
    L = np.where(on1, L1, L2)
    C = np.where(on1, C1, C2)
    U = g.V * S - L
    J = C + g.P * (1.0 - S)
    return Outcomes(S, L, C, U, J)


def user_utility_m1(g: Params, s: object, x: object) -> np.ndarray:
    """U1 as a function of x = 1 − q: (α + β x) / ((1 − a x)(1 − e x)).

    α = ξ1, β = (1 − p1) s ξ2 − (1 − p2) ξ1, a = 1 − p2, e = (1 − p1)(1 − s). Equal to
    ``outcomes(g, 1, s, 1 − x).user_utility`` (a second route to the same number, used by the tests).
    """
    x1, x2 = xi(g)
    s, x = np.asarray(s, dtype=float), np.asarray(x, dtype=float)
    a, b = 1.0 - g.p2, 1.0 - g.p1
    e = b * (1.0 - s)
    beta = b * s * x2 - a * x1
    return (x1 + beta * x) / ((1.0 - a * x) * (1.0 - e * x))
