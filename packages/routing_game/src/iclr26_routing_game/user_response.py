"""The user's best response q*(i, s) and its thresholds (Theorems 1-2), vectorised over games.

Routed to M2, U2 = ξ2 / (1 − (1 − p2) x) with x = 1 − q is monotone in x: q* = 1{ξ2 < 0}.
Routed to M1, U1(x) = (α + β x) / ((1 − a x)(1 − e x)) (see `closed_form.user_utility_m1`): linear over
quadratic in x, so dU1/dx = 0 is the quadratic

    N(x) = −a e β x² − 2 a e α x + (β + α (a + e)) = 0,

and q* = 1 − argmax of U1 over x ∈ {1, 0, real roots of N in (0, 1)}: exact, no grid.

Ties (the user indifferent between several q) go to the q the provider prefers (``tie_break="provider"``,
strong Stackelberg) or to the q it likes least (``tie_break="user"``: the user breaks its ties against the
provider, weak Stackelberg). Both are inferred conventions (the paper's statements do not say).

Thresholds (regimes by the signs of ξ_i = V p_i − t_i):
* ξ1 < 0 < ξ2: the user stays iff s > s0 = −ξ1 / (ξ2/p2 − ξ1)  (`s_zero`).
* ξ1 > 0 > ξ2: q* = 0 for s ≤ s_L, interior for s_L < s < s_H, q* = 1 for s ≥ s_H = ξ1 / (ξ1 − ξ2)
  (`s_high`: from N(0) = b (s ξ2 + (1 − s) ξ1) ≤ 0); s_L from N(1) = 0, a quadratic in s (`s_low`).
"""

from __future__ import annotations

import numpy as np

from .closed_form import Params, outcomes, xi

TIE_BREAKS = ("provider", "user")
TIE_TOL = 1e-12  # relative tolerance under which two utilities (or costs) count as equal


def _check_tie_break(tie_break: str) -> None:
    if tie_break not in TIE_BREAKS:
        from iclr26_core.errors import UserError

        raise UserError(f"unknown tie_break {tie_break!r}; choose one of {', '.join(TIE_BREAKS)}")


def stationary_points(g: Params, s: object) -> tuple[np.ndarray, np.ndarray]:
    """The real roots in (0, 1) of dU1/dx = 0 (NaN where there is none), shape of broadcast(g, s)."""
    x1, x2 = xi(g)
    s = np.asarray(s, dtype=float)
    a, b = 1.0 - g.p2, 1.0 - g.p1
    e = b * (1.0 - s)
    alpha, beta = x1, b * s * x2 - a * x1
    A = -a * e * beta
    B = -2.0 * a * e * alpha
    C0 = beta + alpha * (a + e)
    A, B, C0 = np.broadcast_arrays(A, B, C0)
    with np.errstate(all="ignore"):
        disc = B * B - 4.0 * A * C0
        sq = np.sqrt(np.where(disc >= 0, disc, np.nan))
        qq = -0.5 * (B + np.copysign(sq, B))  # numerically stable roots qq/A and C0/qq
        r1 = np.where(A != 0, qq / A, np.where(B != 0, -C0 / B, np.nan))
        r2 = np.where(A != 0, C0 / qq, np.nan)
    inside = lambda r: np.where((r > 0) & (r < 1), r, np.nan)  # noqa: E731
    return inside(r1), inside(r2)


def best_response(g: Params, i: object, s: object, tie_break: str = "provider") -> tuple[np.ndarray, object]:
    """(q*, outcomes at q*) for provider policy (i, s); every argument broadcasts.

    The candidates are q ∈ {0, 1} and, on M1, the interior stationary points; the user's utility is
    evaluated in closed form at each and the best kept (ties by ``tie_break``).
    """
    _check_tie_break(tie_break)
    i, s = np.asarray(i), np.asarray(s, dtype=float)
    r1, r2 = stationary_points(g, s)
    on1 = np.broadcast_to(i == 1, r1.shape)
    x = np.stack(
        [np.ones_like(r1), np.zeros_like(r1), np.where(on1, r1, np.nan), np.where(on1, r2, np.nan)], -1
    )
    valid = ~np.isnan(x)
    q = 1.0 - np.where(valid, x, 1.0)
    out = outcomes(g.expand(), i[..., None], s[..., None], q)
    U = np.where(valid, out.user_utility, -np.inf)
    u_max = U.max(-1, keepdims=True)
    tied = u_max - TIE_TOL * (1.0 + np.abs(u_max)) <= U
    if tie_break == "provider":
        k = np.where(tied, out.provider_cost, np.inf).argmin(-1)
    else:
        k = np.where(tied, out.provider_cost, -np.inf).argmax(-1)
    pick = lambda a: np.take_along_axis(a, k[..., None], -1)[..., 0]  # noqa: E731
    return pick(q), type(out)(*(pick(a) for a in out))


def best_response_q(g: Params, i: object, s: object, tie_break: str = "provider") -> np.ndarray:
    return best_response(g, i, s, tie_break)[0]


def s_zero(g: Params) -> np.ndarray:
    """s0 = −ξ1 / (ξ2/p2 − ξ1) where ξ1 < 0 < ξ2, else NaN."""
    x1, x2 = xi(g)
    ok = (x1 < 0) & (x2 > 0)
    with np.errstate(all="ignore"):
        return np.where(ok, -x1 / (x2 / g.p2 - x1), np.nan)


def s_high(g: Params) -> np.ndarray:
    """s_H = ξ1 / (ξ1 − ξ2) where ξ1 > 0 > ξ2 (smallest s with q* = 1), else NaN."""
    x1, x2 = xi(g)
    ok = (x1 > 0) & (x2 < 0)
    with np.errstate(all="ignore"):
        return np.where(ok, x1 / (x1 - x2), np.nan)


def switch_point(
    g: Params, lo: np.ndarray, hi: np.ndarray, above, tie_break: str = "provider", iters: int = 64
) -> np.ndarray:
    """Bisection for the s in [lo, hi] where ``above(q*(1, s))`` turns true (false at lo, true at hi)."""
    lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        up = above(best_response_q(g, 1, mid, tie_break))
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    return hi


def s_low(g: Params, tie_break: str = "provider") -> np.ndarray:
    """s_L where ξ1 > 0 > ξ2 (else NaN): the s at which dU1/dx at x = 1 changes sign, in closed form.

    With u = 1 − s, N(1)/(1 − p1) = a b ξ2 u² + (ξ1 (1 − a)² − ξ2 (1 + a b)) u + ξ2 (a = 1 − p2, b = 1 − p1):
    negative at u = 0, equal to ξ1 p2² > 0 at u = 1 and concave, so it has exactly one root in (0, 1).
    (``tie_break`` is accepted for symmetry; the threshold does not depend on it.) The tests check it
    against a bisection on the exact best response.
    """
    del tie_break
    x1, x2 = xi(g)
    ok = (x1 > 0) & (x2 < 0)
    a, b = 1.0 - g.p2, 1.0 - g.p1
    A = a * b * x2
    B = x1 * (1.0 - a) ** 2 - x2 * (1.0 + a * b)
    C = x2
    with np.errstate(all="ignore"):
        disc = np.sqrt(np.maximum(B * B - 4.0 * A * C, 0.0))
        qq = -0.5 * (B + np.copysign(disc, B))
        roots = np.stack([np.where(A != 0, qq / A, np.nan), C / qq], -1)
        u = np.where((roots > 0) & (roots < 1), roots, np.nan)
        u = np.where(A != 0, np.nanmax(np.where(np.isnan(u), -np.inf, u), -1), -C / B)
    return np.where(ok, np.minimum(1.0 - u, s_high(g)), np.nan)
