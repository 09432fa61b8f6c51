"""The parameter law of the random games (fixed and documented in the spec) and regime-conditioned draws.

t, c ~ U(0.1, 5) sorted so that t1 < t2 and c1 < c2; p ~ U(0.02, 0.98) sorted (p1 < p2); V ~ U(0.5, 10);
P ~ U(0, 10). Regime-conditioned draws are rejection-sampled from the same law.
"""

from __future__ import annotations

import numpy as np

from .closed_form import Params
from .provider import REGIMES, regime

LAW = {"t": (0.1, 5.0), "c": (0.1, 5.0), "p": (0.02, 0.98), "V": (0.5, 10.0), "P": (0.0, 10.0)}


def draw_games(n: int, rng: np.random.Generator) -> Params:
    """``n`` games from the law above."""
    t = np.sort(rng.uniform(*LAW["t"], (n, 2)), 1)
    c = np.sort(rng.uniform(*LAW["c"], (n, 2)), 1)
    p = np.sort(rng.uniform(*LAW["p"], (n, 2)), 1)
    V = rng.uniform(*LAW["V"], n)
    P = rng.uniform(*LAW["P"], n)
    return Params.of(p1=p[:, 0], p2=p[:, 1], t1=t[:, 0], t2=t[:, 1], c1=c[:, 0], c2=c[:, 1], V=V, P=P)


def draw_regime(n: int, name: str, rng: np.random.Generator, batch: int = 4096) -> Params:
    """``n`` games of regime ``name`` (one of `provider.REGIMES[:4]`), by rejection from the same law."""
    if name not in REGIMES[:4]:
        raise ValueError(f"unknown regime {name!r}")
    parts, have = [], 0
    while have < n:
        g = draw_games(batch, rng)
        keep = regime(g) == name
        parts.append(g.take(keep))
        have += int(keep.sum())
    return Params(*(np.concatenate([getattr(p, f) for p in parts])[:n] for f in Params._fields))
