"""Estimate a game's (p, t, c) from two sampling solvers on a task set, with intervals, then solve it.

What the game assumes is what is measured: every task gets ``retries`` independent passes, each a fresh
sample at the solver's temperature (> 0), so a retry can succeed where the first pass failed.

* p — the share of successful passes over tasks × retries, with a cluster-bootstrap interval (tasks resampled
  with replacement, all their retries kept: passes on one task are not independent across tasks' difficulty).
  Beside it, p after a failure = P(pass r+1 succeeds | pass r failed) on the same task: the game's i.i.d.
  retries mean it equals p; easy and impossible tasks make it smaller (reported with its interval).
* t — token counts × measured per-token time: (prompt tokens × prefill seconds/token + generated tokens ×
  decode seconds/token) per pass, the per-token seconds the median over ``repeats`` timed passes of process
  CPU time (``clock="cpu"``; wall clock moves with the machine's load), × ``time_value``.
* c — ``cost_per_call``, else FLOPs per pass / ``flops_unit`` with FLOPs = 2 · n_params · tokens per pass.

The intervals are carried through the game: the same bootstrap draws (tasks resampled jointly for both
solvers, the timing repeats resampled) give B games, each solved exactly; the result holds percentile
intervals of q*, s*, J, U, Δ_U and the throttling gain, and the share of draws routed like the point estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from iclr26_core.errors import UserError

from .solvers import CLOCKS

SUMMARY = ("q", "s", "provider_cost", "user_utility", "gap", "throttle_gain")


def sample_passes(solver: Any, tasks: Sequence[dict[str, Any]], retries: int, rng: np.random.Generator):
    """(correct, prompt tokens, new tokens), each (n_tasks, retries): independent passes per task."""
    rows = [solver.attempts(task, retries, rng) for task in tasks]
    return tuple(
        np.stack([np.asarray(getattr(r, f)) for r in rows])
        for f in ("correct", "prompt_tokens", "new_tokens")
    )


def interval(x: np.ndarray, level: float) -> list[float]:
    """The central ``level`` percentile interval of the draws ``x`` (NaNs dropped)."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return [float("nan"), float("nan")]
    a = (1 - level) / 2
    return [float(np.quantile(x, a)), float(np.quantile(x, 1 - a))]


def _after_failure(correct: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
    """P(pass r+1 succeeds | pass r failed), pooled over tasks (rows ``idx`` of each bootstrap draw)."""
    fail = ~correct[:, :-1]
    fails, hits = fail.sum(1), (fail & correct[:, 1:]).sum(1)
    if idx is None:
        return np.asarray(hits.sum() / max(fails.sum(), 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return hits[idx].sum(1) / fails[idx].sum(1)


def _floor(p: np.ndarray, n: int) -> np.ndarray:
    """p for the game: floored at 1/(2n) over n passes (the game needs p > 0; a model that solved none)."""
    return np.maximum(p, 0.5 / n)


def measure(
    solver: Any,
    tasks: Sequence[dict[str, Any]],
    *,
    retries: int,
    rng: np.random.Generator,
    idx: np.ndarray,
    repeats: int,
    clock: str,
    time_value: float,
    flops_unit: float,
    cost: float | None,
    level: float,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One solver's (p, t, c) with intervals, and its bootstrap draws (rows ``idx`` resample the tasks)."""
    correct, prompt, new = sample_passes(solver, tasks, retries, rng)
    n_pass = correct.size
    sec = {k: np.asarray(v, dtype=float) for k, v in solver.seconds_per_token(repeats, clock).items()}
    per_tok = {k: float(np.median(v)) for k, v in sec.items()}
    B = idx.shape[0]
    tok_b = {k: a[idx].mean((1, 2)) for k, a in (("prompt", prompt), ("new", new))}
    med_b = {k: np.median(v[rng.integers(0, v.size, (B, v.size))], 1) for k, v in sec.items()}
    p_b = _floor(correct[idx].mean((1, 2)), n_pass)
    t_b = (tok_b["prompt"] * med_b["prefill"] + tok_b["new"] * med_b["decode"]) * time_value
    flops_b = 2.0 * solver.n_params * (tok_b["prompt"] + tok_b["new"])
    c_b = np.full(B, cost) if cost is not None else flops_b / flops_unit
    tokens = {"prompt": float(prompt.mean()), "new": float(new.mean())}
    seconds = tokens["prompt"] * per_tok["prefill"] + tokens["new"] * per_tok["decode"]
    flops = 2.0 * solver.n_params * (tokens["prompt"] + tokens["new"])
    paf, paf_b = float(_after_failure(correct)), _after_failure(correct, idx)
    per_task = correct.mean(1)
    model = {
        "name": getattr(solver, "name", "solver"),
        "temperature": getattr(solver, "temperature", None),
        "passes": int(n_pass),
        "accuracy": float(correct.mean()),
        "p": float(_floor(np.asarray(correct.mean()), n_pass)),
        "p_ci": interval(p_b, level),
        "p_after_failure": paf,
        "p_after_failure_ci": interval(paf_b, level),
        "iid_gap_ci": interval(p_b - paf_b, level),
        "share_tasks_never_solved": float((per_task == 0).mean()),
        "share_tasks_always_solved": float((per_task == 1).mean()),
        "tokens_per_pass": tokens,
        "seconds_per_token": per_tok,
        "seconds_per_token_repeats": {k: v.tolist() for k, v in sec.items()},
        "clock": clock,
        "seconds_per_pass": seconds,
        "t": seconds * time_value,
        "t_ci": interval(t_b, level),
        "flops_per_call": flops,
        "c": float(cost) if cost is not None else flops / flops_unit,
        "c_ci": interval(c_b, level),
    }
    return model, {"p": p_b, "t": t_b, "c": c_b, "correct": correct}


def carry(draws: list[dict[str, np.ndarray]], value: float, churn: float, tie_break: str, point: dict, level):
    """Solve the B bootstrap games; percentile intervals and the share routed like the point estimate."""
    from .closed_form import Params
    from .grids import solve_grid

    g = Params.of(
        **{f"{k}{j + 1}": d[k] for j, d in enumerate(draws) for k in ("p", "t", "c")},
        V=np.full(draws[0]["p"].shape, value),
        P=np.full(draws[0]["p"].shape, churn),
    )
    cols = solve_grid(g, tie_break, with_throttling=True)
    policy = point["policy"]
    out: dict[str, Any] = {f"{k}_ci": interval(cols[k], level) for k in SUMMARY}
    out["share_same_policy"] = float(np.mean(cols["policy"] == policy))
    out["policy_shares"] = {str(k): float(np.mean(cols["policy"] == k)) for k in sorted(set(cols["policy"]))}
    out["regime_shares"] = {str(k): float(np.mean(cols["regime"] == k)) for k in sorted(set(cols["regime"]))}
    out["throttle_shares"] = {
        str(k): float(np.mean(cols["throttle"] == k)) for k in sorted(set(cols["throttle"]))
    }
    return out


def _check(solvers: Sequence[Any], tasks: Sequence[Any], cost_per_call, time_value, retries, n_boot, level):
    if len(solvers) != 2:
        raise UserError(f"estimate needs exactly two solvers (standard, reasoning), got {len(solvers)}")
    if len(tasks) == 0:
        raise UserError("estimate needs at least one task")
    if cost_per_call is not None and len(cost_per_call) != 2:
        raise UserError("cost_per_call needs one cost per solver (two numbers)")
    if not time_value > 0:
        raise UserError(f"time_value must be > 0, got {time_value}")
    if retries < 2:
        raise UserError(f"retries must be >= 2 (independent passes per task), got {retries}")
    if n_boot < 1 or not 0 < level < 1:
        raise UserError(f"n_boot must be >= 1 and level in (0, 1), got {n_boot}, {level}")
    for k, s in enumerate(solvers):
        if not hasattr(s, "attempts") or not hasattr(s, "seconds_per_token"):
            raise UserError(f"solver {k + 1} cannot sample passes (needs attempts() and seconds_per_token())")


def estimate_params(
    solvers: Sequence[Any],
    tasks: Sequence[dict[str, Any]],
    *,
    value: float,
    retries: int = 8,
    cost_per_call: Sequence[float] | None = None,
    time_value: float = 1.0,
    churn_penalty: float = 0.0,
    flops_unit: float = 1e9,
    tie_break: str = "provider",
    seed: int = 0,
    repeats: int = 7,
    clock: str = "cpu",
    n_boot: int = 1000,
    level: float = 0.95,
) -> dict[str, Any]:
    """(p, t, c) of two sampling solvers on ``tasks`` with intervals, and the game they define (solved).

    Returns {"models": [{name, p, p_ci, p_after_failure(_ci), t, t_ci, c, c_ci, ...}, ×2], "n_tasks",
    "retries", "game": `RoutingGame`, "solution": ``game.solve()``, "intervals": `carry`'s summary,
    "by_type": {type: {n, p, t, solution}} when tasks have types}.
    """
    from .game import RoutingGame
    from .grids import POLICIES, policy_code

    _check(solvers, tasks, cost_per_call, time_value, retries, n_boot, level)
    if clock not in CLOCKS:
        raise UserError(f"clock must be one of {', '.join(CLOCKS)}, got {clock!r}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(tasks), (n_boot, len(tasks)))[:, :, None]  # paired: the same tasks for both
    models, draws = [], []
    for k, solver in enumerate(solvers):
        cost = None if cost_per_call is None else float(cost_per_call[k])
        m, d = measure(
            solver,
            tasks,
            retries=retries,
            rng=np.random.default_rng([seed, k + 1]),
            idx=idx[..., 0],
            repeats=repeats,
            clock=clock,
            time_value=time_value,
            flops_unit=flops_unit,
            cost=cost,
            level=level,
        )
        models.append(m)
        draws.append(d)

    def game_of(ps: Sequence[float], ts: Sequence[float]) -> RoutingGame:
        cs = [m["c"] for m in models]
        return RoutingGame(
            ps[0], ps[1], ts[0], ts[1], cs[0], cs[1], value, churn_penalty, tie_break=tie_break
        )

    game = game_of([m["p"] for m in models], [m["t"] for m in models])
    eq = game.provider_optimum()
    point = {"policy": POLICIES[int(policy_code(np.array(eq.i), np.array(eq.s), np.array(eq.q)))]}
    out: dict[str, Any] = {
        "models": models,
        "n_tasks": len(tasks),
        "retries": int(retries),
        "level": level,
        "n_boot": int(n_boot),
        "game": game,
        "solution": game.solve(),
        "policy": point["policy"],
        "intervals": carry(draws, value, churn_penalty, tie_break, point, level),
    }
    types = sorted({t["type"] for t in tasks if "type" in t})
    if types:
        out["by_type"] = {}
        for kind in types:
            rows = np.array([t.get("type") == kind for t in tasks])
            ps = [float(_floor(d["correct"][rows].mean(), d["correct"][rows].size)) for d in draws]
            ts = [m["t"] for m in models]
            out["by_type"][kind] = {
                "n": int(rows.sum()),
                "p": ps,
                "t": ts,
                "solution": game_of(ps, ts).solve(),
            }
    return out
