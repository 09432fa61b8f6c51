"""Equilibria on a grid of two parameters (the heat-maps of the policy, the gap and the throttling gain)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from iclr26_core.errors import UserError

from .closed_form import FIELDS, Params
from .provider import provider_optimum, regime
from .throttle import SUBSETS, throttling

POLICIES = ("M1", "M2", "cascade", "M1, s>0, user leaves")


def policy_code(i: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """0 M1 without cascade, 1 M2, 2 a cascade that escalates (s > 0, q* < 1), 3 M1 with s > 0 and q* = 1."""
    return np.select([i == 2, (s > 0) & (q < 1), s > 0], [1, 2, 3], default=0)


def check_axis(name: str) -> str:
    if name not in FIELDS:
        raise UserError(f"unknown sweep axis {name!r}; choose one of {', '.join(FIELDS)}")
    return name


def solve_grid(g: Params, tie_break: str = "provider", with_throttling: bool = True) -> dict[str, Any]:
    """Equilibrium, Δ_U and (optionally) throttling for every game of ``g``, as flat columns."""
    eq = provider_optimum(g, tie_break)
    cols: dict[str, Any] = {f: getattr(g, f).ravel() for f in FIELDS}
    cols.update(
        regime=regime(g).ravel(),
        i=eq.i.ravel(),
        s=eq.s.ravel(),
        q=eq.q.ravel(),
        provider_cost=eq.provider_cost.ravel(),
        user_utility=eq.user_utility.ravel(),
        escalates=eq.escalates.ravel(),
        policy=np.asarray(POLICIES, dtype=object)[policy_code(eq.i, eq.s, eq.q).ravel()],
        gap=eq.gap.ravel(),
    )
    if with_throttling:
        th = throttling(g, tie_break)
        cols.update(
            throttle_gain=th.gain.ravel(),
            throttle=np.asarray(SUBSETS, dtype=object)[th.subset.ravel()],
            user_utility_throttled=th.user_utility_after.ravel(),
        )
    return cols


def sweep(base: Any, x: str, y: str, xs: Sequence[float], ys: Sequence[float], with_throttling: bool = True):
    """A ``pandas.DataFrame`` with one row per (x, y) grid point: the game, its equilibrium, Δ_U, throttling.

    ``base`` is a `RoutingGame` whose other parameters stay fixed; ``x`` and ``y`` are parameter names
    (p1, p2, t1, t2, c1, c2, V, P). Values are validated as the game validates them.
    """
    import pandas as pd

    from .game import RoutingGame

    check_axis(x), check_axis(y)
    if x == y:
        raise UserError(f"sweep axes must differ, got x = y = {x!r}")
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if xs.ndim != 1 or ys.ndim != 1 or xs.size < 1 or ys.size < 1:
        raise UserError("sweep values must be non-empty 1-D sequences")
    for name, vals in ((x, xs), (y, ys)):  # validate the extremes through the game's own checks
        for v in (vals.min(), vals.max()):
            base.replace(**{name: float(v)})
    X, Y = np.meshgrid(xs, ys)  # rows: y, columns: x
    g = base.params.replace(**{x: X, y: Y})
    if not isinstance(base, RoutingGame):  # pragma: no cover - defensive
        raise UserError("base must be a RoutingGame")
    return pd.DataFrame(solve_grid(g, base.tie_break, with_throttling))
