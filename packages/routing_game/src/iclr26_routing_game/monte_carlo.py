"""Monte-Carlo episodes of the routing game: an independent check of the closed forms.

Each episode plays the dynamics pass by pass (no formula of `closed_form` is used): the current model's pass
succeeds w.p. p (done); on a failure the user abandons w.p. q, else re-prompts, and if the current model is
M1 the provider escalates to M2 w.p. s before the next pass. All episodes advance together (numpy), one pass
per step, until every episode has ended.
"""

from __future__ import annotations

import math

import numpy as np

from .game import Outcome, RoutingGame, check_model, check_probability

MAX_PASSES = 1_000_000


def simulate(game: RoutingGame, i: int, s: float, q: float, n: int = 100_000, seed: int = 0) -> Outcome:
    """Mean success, latency, cost, U and J over ``n`` simulated episodes, with standard errors in ``se``."""
    from iclr26_core.errors import UserError

    i, s, q = check_model(i), check_probability("s", s), check_probability("q", q)
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise UserError(f"n must be an integer >= 2, got {n!r}")
    rng = np.random.default_rng(seed)
    p = np.array([game.p1, game.p2])
    t = np.array([game.t1, game.t2])
    c = np.array([game.c1, game.c2])
    model = np.full(n, i - 1)  # 0 = M1, 1 = M2
    active = np.ones(n, dtype=bool)
    success = np.zeros(n, dtype=bool)
    latency = np.zeros(n)
    cost = np.zeros(n)
    for _ in range(MAX_PASSES):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        m = model[idx]
        latency[idx] += t[m]
        cost[idx] += c[m]
        u = rng.random((3, idx.size))
        solved = u[0] < p[m]
        leave = ~solved & (u[1] < q)
        success[idx[solved]] = True
        active[idx[solved | leave]] = False
        escalate = ~solved & ~leave & (m == 0) & (u[2] < s)
        model[idx[escalate]] = 1
    else:  # pragma: no cover - needs p ~ 1e-6 with q = 0
        raise UserError(f"episodes did not end within {MAX_PASSES} passes")
    S = success.astype(float)
    U = game.V * S - latency
    J = cost + game.P * (1.0 - S)
    se = {
        k: float(v.std(ddof=1) / math.sqrt(n))
        for k, v in dict(success=S, latency=latency, cost=cost, user_utility=U, provider_cost=J).items()
    }
    return Outcome(
        success=float(S.mean()),
        latency=float(latency.mean()),
        cost=float(cost.mean()),
        user_utility=float(U.mean()),
        provider_cost=float(J.mean()),
        n=n,
        se=se,
    )
