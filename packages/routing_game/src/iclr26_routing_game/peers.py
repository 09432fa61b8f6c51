"""Side by side with the peers (``pip install iclr26-routing-game[peers]``); a missing peer is one line.

* ``nashpy`` — the grid game as a bimatrix game (rows: provider policies (2, ·), (1, s_j); columns: the user's
  q_k; payoffs −J and U); its Nash equilibria (Lemke–Howson from every label) against the provider's
  Stackelberg cost on the same grid: the value of commitment is J_NE − J_Stackelberg.
* ``routellm`` — RouteLLM's threshold routing (``Router.route``: strong model iff win rate ≥ threshold) with its
  offline ``RandomRouter`` and a confidence router built on its ``Router`` base class, on the digits demo: each
  threshold is a static mix of routes (s = 0) that our user model prices (U, J), beside the equilibrium.
"""

from __future__ import annotations

import importlib.util
import os
import time
import warnings
from typing import Any

import numpy as np

from iclr26_core.fs import atomic_write_text

from .closed_form import Params, outcomes
from .provider import provider_optimum
from .sampling import draw_games
from .user_response import best_response

PEERS = ("nashpy", "routellm")  # pygambit was dropped in 0.2: no Linux wheels, never run (README)


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def grid_game(g: Params, grid_s: int, grid_q: int) -> dict[str, np.ndarray]:
    """Payoff matrices of one game on the grid: rows (2, ·), (1, s_0..s_{n−1}); columns q_0..q_{m−1}."""
    s = np.linspace(0.0, 1.0, grid_s)
    q = np.linspace(0.0, 1.0, grid_q)
    i = np.r_[2, np.ones(grid_s, dtype=int)]
    srow = np.r_[0.0, s]
    out = outcomes(g, i[:, None], srow[:, None], q[None, :])
    return {"i": i, "s": srow, "q": q, "J": out.provider_cost, "U": out.user_utility}


def grid_stackelberg(m: dict[str, np.ndarray]) -> tuple[int, float]:
    """Our brute force on the grid: the user's best q per row (ties to the provider), the provider's best row
    (ties: s = 0, then M1, then the smallest s, as the exact solver)."""
    J, U = m["J"], m["U"]
    u_max = U.max(1, keepdims=True)
    tied = u_max - 1e-12 * (1 + np.abs(u_max)) <= U
    jr = np.where(tied, J, np.inf).min(1)
    best = jr.min()
    cand = np.flatnonzero(jr <= best + 1e-12 * (1 + abs(best)))
    key = [((m["s"][r] > 0) and m["i"][r] == 1, m["i"][r], m["s"][r]) for r in cand]
    return int(cand[min(range(len(cand)), key=key.__getitem__)]), float(best)


def _nashpy(m: dict[str, np.ndarray]) -> dict[str, Any]:
    import nashpy

    game = nashpy.Game(-m["J"], m["U"])
    costs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for sigma_r, sigma_c in game.lemke_howson_enumeration():
            if sigma_r.shape != (m["J"].shape[0],) or not (
                np.isfinite(sigma_r).all() and np.isfinite(sigma_c).all()
            ):
                continue
            if abs(sigma_r.sum() - 1) > 1e-6 or abs(sigma_c.sum() - 1) > 1e-6:
                continue
            if game.is_best_response(sigma_r, sigma_c) != (True, True):
                continue
            costs.append(round(float(sigma_r @ m["J"] @ sigma_c), 10))
    return {"n_equilibria": len(set(costs)), "J_nash_min": min(costs) if costs else None}


def _peer_games(cfg: Any) -> Params:
    return draw_games(int(cfg.peers.games), np.random.default_rng([int(cfg.seed), 6]))


def equilibrium_bench(cfg: Any) -> list[dict[str, Any]]:
    """Per random game: our exact optimum, our grid brute force and nashpy on the same grid."""
    g = _peer_games(cfg)
    eq = provider_optimum(g, str(cfg.tie_break))
    rows = []
    for j in range(int(cfg.peers.games)):
        gj = Params(*(a[j] for a in g))
        m = grid_game(gj, int(cfg.peers.grid_s), int(cfg.peers.grid_q))
        t0 = time.perf_counter()
        r, j_grid = grid_stackelberg(m)
        row: dict[str, Any] = {
            "game": j,
            "J_exact": float(eq.provider_cost[j]),
            "policy_exact": f"M{int(eq.i[j])} s={float(eq.s[j]):.3f}",
            "J_grid": j_grid,
            "policy_grid": "M2" if m["i"][r] == 2 else f"M1 s={m['s'][r]:.3f}",
            "seconds_grid": time.perf_counter() - t0,
        }
        if installed("nashpy"):
            t0 = time.perf_counter()
            try:
                res = _nashpy(m)
            except Exception as exc:  # a peer's failure is a row, never our failure
                res = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
            row["nashpy"] = {**res, "seconds": time.perf_counter() - t0}
        rows.append(row)
    return rows


def _routellm_router_classes():
    """RouteLLM's Router base and RandomRouter (its module builds an OpenAI client at import: a dummy key)."""
    had_key = "OPENAI_API_KEY" in os.environ
    os.environ.setdefault("OPENAI_API_KEY", "offline-not-used")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from routellm.routers.routers import RandomRouter, Router
    finally:
        if not had_key:
            os.environ.pop("OPENAI_API_KEY", None)
    return Router, RandomRouter


def routellm_bench(cfg: Any, digits: tuple[list[dict], list[Any], Any]) -> dict[str, Any]:
    """U and J of RouteLLM threshold policies under our user model, beside the equilibrium (digits demo)."""
    import random
    from collections import namedtuple

    Router, RandomRouter = _routellm_router_classes()
    tasks, solvers, game = digits
    standard, reasoning = solvers

    class ConfidenceRouter(Router):
        """Strong-model win rate = 1 − the standard model's confidence on the query."""

        def calculate_strong_win_rate(self, prompt: Any) -> float:
            return 1.0 - standard.confidence(prompt)

    pair = namedtuple("Pair", "strong weak")("M2", "M1")
    ok1 = np.array([standard(t) == t["answer"] for t in tasks])
    ok2 = np.array([reasoning(t) == t["answer"] for t in tasks])
    base = game.params
    eq = game.provider_optimum()
    out: dict[str, Any] = {"equilibrium": {"J": eq.provider_cost, "U": eq.user_utility, "i": eq.i}}
    for name, router in (("random", RandomRouter()), ("confidence", ConfidenceRouter())):
        random.seed(int(cfg.seed))
        curve = []
        for thr in np.linspace(0.0, 1.0, int(cfg.peers.thresholds)):
            to2 = np.array([router.route(t, float(thr), pair) == "M2" for t in tasks])
            f = float(to2.mean())
            U = J = 0.0
            for i, mask, ok in ((1, ~to2, ok1), (2, to2, ok2)):
                if not mask.any():
                    continue
                p = max(float(ok[mask].mean()), 0.5 / int(mask.sum()))
                sub = base.replace(**{f"p{i}": p})
                _, o = best_response(sub, i, 0.0, str(cfg.tie_break))
                w = f if i == 2 else 1 - f
                U, J = U + w * float(o.user_utility), J + w * float(o.provider_cost)
            curve.append({"threshold": float(thr), "share_M2": f, "U": U, "J": J})
        best = min(curve, key=lambda r: r["J"])
        out[name] = {
            "curve": curve,
            "best_J": best["J"],
            "best_threshold": best["threshold"],
            "U_at_best": best["U"],
        }
    return out


def _table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| game | exact optimum (J) | grid brute force (J) | nashpy: distinct NE costs, min J_NE |",
        "| --- | --- | --- | --- |",
    ]
    for r in rows:
        nash = r.get("nashpy")
        nash_s = "-" if nash is None else nash.get("error") or f"{nash['n_equilibria']}, {nash['J_nash_min']}"
        lines.append(
            f"| {r['game']} | {r['policy_exact']} ({r['J_exact']:.4f}) | {r['policy_grid']} ({r['J_grid']:.4f}) | "
            f"{nash_s} |"
        )
    return lines


def bench(cfg: Any, ctx: Any, digits: Any) -> dict[str, Any]:
    """Run every installed peer; write ``bench.md``; return the numbers and a one-line summary."""
    missing = [p for p in PEERS if not installed(p)]
    rows = equilibrium_bench(cfg)
    res: dict[str, Any] = {"equilibria": rows, "missing": missing}
    exact_le_grid = all(r["J_exact"] <= r["J_grid"] + 1e-9 for r in rows)
    parts = [f"exact <= grid optimum in {sum(r['J_exact'] <= r['J_grid'] + 1e-9 for r in rows)}/{len(rows)}"]
    if installed("nashpy"):
        ok = [
            r for r in rows if "J_nash_min" in r.get("nashpy", {}) and r["nashpy"]["J_nash_min"] is not None
        ]
        commit = [r for r in ok if r["J_grid"] <= r["nashpy"]["J_nash_min"] + 1e-9]
        res["nashpy_commitment"] = {"games_with_ne": len(ok), "stackelberg_le_nash": len(commit)}
        parts.append(f"nashpy: Stackelberg cost <= every NE found in {len(commit)}/{len(ok)}")
    if installed("routellm") and not cfg.peers.get("routellm", True):
        parts.append("routellm off at this scale (peers.routellm=false)")
    elif installed("routellm"):
        try:
            res["routellm"] = routellm_bench(cfg, digits)
            rl = res["routellm"]
            parts.append(
                f"routellm best threshold J: random {rl['random']['best_J']:.3g}, confidence "
                f"{rl['confidence']['best_J']:.3g} vs equilibrium {rl['equilibrium']['J']:.3g}"
            )
        except Exception as exc:  # a peer's failure is a line, never our failure
            res["routellm"] = {"error": f"{type(exc).__name__}: {exc}"}
            parts.append(f"routellm failed: {type(exc).__name__}")
    if missing and hasattr(ctx, "peers_missing"):
        ctx.peers_missing(missing)  # the core's one line, also in report.md and metrics.json
    if missing:
        parts.append(f"not installed: {', '.join(missing)}")
    res["exact_le_grid"] = exact_le_grid
    res["summary"] = "bench: " + "; ".join(parts)
    lines = ["# Peers bench", "", res["summary"], "", *_table(rows), ""]
    if "routellm" in res and "error" not in res["routellm"]:
        rl = res["routellm"]
        lines += [
            "## RouteLLM threshold routing on the digits demo (static mixes, s = 0)",
            "",
            f"Equilibrium of the pooled game: route M{rl['equilibrium']['i']}, J = {rl['equilibrium']['J']:.4f}, "
            f"U = {rl['equilibrium']['U']:.4f}.",
            "",
            "| router | best threshold | share to M2 | J | U |",
            "| --- | --- | --- | --- | --- |",
        ]
        for name in ("random", "confidence"):
            b = min(rl[name]["curve"], key=lambda r: r["J"])
            lines.append(
                f"| {name} | {b['threshold']:.2f} | {b['share_M2']:.2f} | {b['J']:.4f} | {b['U']:.4f} |"
            )
        lines.append("")
    atomic_write_text(ctx.run_dir / "bench.md", "\n".join(lines))
    return res
