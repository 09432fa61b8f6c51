"""Shared helpers of the iclr26-routing-game tests: random games from the spec's law, one torch thread."""

from __future__ import annotations

import numpy as np

from iclr26_core.testing import one_thread_fixture

_one_thread = one_thread_fixture()  # tiny models on a shared 2-core machine


def random_games(n: int, seed: int = 0):
    """``n`` games from the spec's parameter law, drawn here (not with the package's sampler)."""
    from iclr26_routing_game import Params

    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.1, 5, (n, 2)), 1)
    c = np.sort(rng.uniform(0.1, 5, (n, 2)), 1)
    p = np.sort(rng.uniform(0.02, 0.98, (n, 2)), 1)
    return Params.of(
        p1=p[:, 0],
        p2=p[:, 1],
        t1=t[:, 0],
        t2=t[:, 1],
        c1=c[:, 0],
        c2=c[:, 1],
        V=rng.uniform(0.5, 10, n),
        P=rng.uniform(0, 10, n),
    )


def game_at(g, k: int):
    from iclr26_routing_game import RoutingGame

    return RoutingGame(*(float(a[k]) for a in g))
