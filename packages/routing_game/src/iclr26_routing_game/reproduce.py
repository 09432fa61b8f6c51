"""``iclr26-routing-game reproduce``: claims C1-C4 and V1, heat-maps, the estimate section and the peers bench.

Sections (each draws from its own random stream ``default_rng([seed, k])``):

* C1-C4, V1 — `claims` (the verdicts); ``draws.csv`` holds the C2 draws with their equilibria.
* maps — ``policy_map.png``, ``misalignment.png``, ``throttling.png``: n × n sweeps around a base game.
* estimate — (p, t, c) from sampled i.i.d. retries of two tiny random-init gpt2 models (or the user's two) on a generated
  multiple-choice task, and of the scikit-learn digits pair; each game solved.
* bench — nashpy and routellm side by side (``bench.md``), when installed.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import numpy as np

from iclr26_core.fs import atomic_write_text
from iclr26_core.report import Results

from .claims import claim_c1, claim_c2, claim_c3, claim_c4, claim_v1
from .grids import solve_grid, sweep
from .plots import policy_map, value_map
from .sampling import LAW
from .throttle import throttling

AXIS_RANGE = {
    "p1": LAW["p"],
    "p2": LAW["p"],
    "t1": LAW["t"],
    "t2": LAW["t"],
    "c1": LAW["c"],
    "c2": LAW["c"],
    "V": LAW["V"],
    "P": LAW["P"],
}
SECTIONS = ("C1", "C2", "C3", "C4", "V1", "maps", "estimate", "bench")


def _rng(cfg: Any, k: int) -> np.random.Generator:
    return np.random.default_rng([int(cfg.seed), k])


def write_draws(path: Any, g: Any, tie_break: str) -> None:
    import pandas as pd

    cols = solve_grid(g, tie_break, with_throttling=False)
    th = throttling(g, tie_break)
    cols.update(throttle_gain=th.gain, user_utility_throttled=th.user_utility_after)
    atomic_write_text(path, pd.DataFrame(cols).to_csv(index=False, float_format="%.10g"))


def maps(cfg: Any, ctx: Any) -> tuple[list[str], dict[str, Any]]:
    from .game import RoutingGame

    base = RoutingGame(**{k: float(v) for k, v in cfg.maps.base.items()}, tie_break=cfg.tie_break)
    n = int(cfg.maps.n)
    figs, out = [], {}
    specs = [
        ("policy", "policy_map.png", None, "provider-optimal policy"),
        ("misalignment", "misalignment.png", "gap", "misalignment gap Δ_U"),
        ("throttling", "throttling.png", "throttle_gain", "throttling gain (provider)"),
    ]
    for key, fname, column, title in specs:
        x, y = str(cfg.maps[key].x), str(cfg.maps[key].y)
        xs, ys = np.linspace(*AXIS_RANGE[x], n), np.linspace(*AXIS_RANGE[y], n)
        if x.startswith("p"):
            xs = np.clip(xs, 1e-3, 1.0)
        df = sweep(base, x, y, xs, ys, with_throttling=key == "throttling")
        fixed = ", ".join(f"{k}={v:g}" for k, v in base.params._asdict().items() if k not in (x, y))
        full = f"{title}\n({fixed})"
        if column is None:
            figs.append(policy_map(df, x, y, ctx.run_dir / fname, full))
            out[key] = df["policy"].value_counts(normalize=True).round(4).to_dict()
        else:
            figs.append(value_map(df, x, y, column, ctx.run_dir / fname, full, column))
            out[key] = {"mean": float(df[column].mean()), "share_positive": float((df[column] > 1e-9).mean())}
    return figs, out


def estimate_section(cfg: Any, ctx: Any) -> dict[str, Any]:
    import torch

    from iclr26_core.models import load_causal_lm, load_tokenizer, tiny_model
    from iclr26_core.tokenizers import train_bpe

    from .solvers import digits_solvers, hf_solver
    from .tasks import generated_tasks, load_tasks

    torch.set_num_threads(1)
    lm = cfg.estimate.lm
    T = float(lm.temperature)
    if lm.models:
        if len(lm.models) != 2:
            from iclr26_core.errors import UserError

            raise UserError("estimate.lm.models needs two models (standard, reasoning)")
        solvers = []
        for name in lm.models:
            model = load_causal_lm(str(name)).to(ctx.device)
            solvers.append(hf_solver(model, load_tokenizer(str(name)), str(name), T))
    else:
        tok = train_bpe(512)
        solvers = [
            hf_solver(tiny_model("gpt2", str(size), seed=int(cfg.seed) + k), tok, f"tiny-gpt2:{size}", T)
            for k, size in enumerate(lm.sizes)
        ]
    tasks = load_tasks(lm.task_file) if lm.task_file else generated_tasks(int(lm.tasks), int(cfg.seed))
    res = {}
    est = _estimate(solvers, tasks, lm, cfg)
    res["lm"] = {k: v for k, v in est.items() if k != "game"}
    d = cfg.estimate.digits
    tasks, solvers = digits_solvers(
        int(cfg.seed),
        n_test=int(d.n_test),
        ensemble=int(d.ensemble),
        hidden=int(d.hidden),
        temperature=float(d.temperature),
    )
    est = _estimate(solvers, tasks, d, cfg)
    res["digits"] = {k: v for k, v in est.items() if k != "game"}
    res["_digits"] = (tasks, solvers, est["game"])  # for the routellm bench; dropped before writing
    if cfg.estimate.get("real"):
        from .real import real_tasks, smollm2_pair

        r = cfg.estimate.real
        solvers = smollm2_pair(list(r.drop), float(r.temperature), int(r.max_prompt_tokens))
        est = _estimate(solvers, real_tasks(int(r.tasks), int(cfg.seed)), r, cfg)
        res["real"] = {k: v for k, v in est.items() if k != "game"}
    return res


def _estimate(solvers: list, tasks: list, c: Any, cfg: Any) -> dict[str, Any]:
    """`estimate_params` with the settings of config section ``c`` (value, time value, retries, ...)."""
    import torch

    from .estimate import estimate_params

    with torch.no_grad():
        return estimate_params(
            solvers,
            tasks,
            value=float(c.value),
            retries=int(c.retries),
            time_value=float(c.time_value),
            churn_penalty=float(c.churn_penalty),
            flops_unit=float(c.flops_unit),
            tie_break=str(cfg.tie_break),
            seed=int(cfg.seed),
            repeats=int(c.repeats),
            n_boot=int(c.n_boot),
        )


def _describe(name: str, est: dict[str, Any]) -> str:
    m, sol, iv = est["models"], est["solution"], est["intervals"]
    eq = sol["equilibrium"]
    ci = lambda x: f"[{x[0]:.3g}, {x[1]:.3g}]"  # noqa: E731
    return (
        f"estimate {name}: p=({m[0]['p']:.3f} {ci(m[0]['p_ci'])}, {m[1]['p']:.3f} {ci(m[1]['p_ci'])}) "
        f"p after a failure=({m[0]['p_after_failure']:.3f}, {m[1]['p_after_failure']:.3f}) "
        f"t=({m[0]['t']:.3g}, {m[1]['t']:.3g}) c=({m[0]['c']:.3g}, {m[1]['c']:.3g}) -> {sol['regime']}, "
        f"route M{eq['i']} s={eq['s']:.3g} q*={eq['q']:.3g} ({est['policy']} in {iv['share_same_policy']:.0%} of "
        f"{est['n_boot']} bootstrap games), Δ_U={sol['misalignment_gap']:.3g} {ci(iv['gap_ci'])}, "
        f"throttle gain={sol['throttling']['gain']:.3g} {ci(iv['throttle_gain_ci'])}"
    )


def run(cfg: Any, ctx: Any) -> Results:
    tb = str(cfg.tie_break)
    metrics: dict[str, Any] = {"tie_break": tb, "seconds_by_section": {}}
    claims, figures = [], []
    bar = ctx.progress(total=len(SECTIONS), desc="routing game")

    @contextlib.contextmanager
    def section(name: str, postfix: str | None = None):
        """One section of the bar: its label while it runs, then its seconds in the metrics."""
        t0 = time.perf_counter()
        if postfix:
            bar.set_postfix_str(postfix)
        yield
        metrics["seconds_by_section"][name] = round(time.perf_counter() - t0, 2)
        bar.update(1)

    with section("C1", "C1 best responses"):
        c1, metrics["c1"] = claim_c1(cfg, _rng(cfg, 1), tb)
        claims.append(c1)
    with section("C2", "C2 provider optima"):
        c2, metrics["c2"], g2, _ = claim_c2(cfg, _rng(cfg, 2), tb)
        claims.append(c2)
        write_draws(ctx.run_dir / "draws.csv", g2, tb)
    with section("C3", "C3 misalignment"):
        c3, metrics["c3"] = claim_c3(cfg, _rng(cfg, 3), tb, metrics["c2"]["share_gap_positive"])
        claims.append(c3)
    with section("C4", "C4 throttling"):
        c4, metrics["c4"] = claim_c4(cfg, _rng(cfg, 4), tb)
        claims.append(c4)
    with section("V1", "V1 Monte Carlo"):
        v1, metrics["v1"] = claim_v1(
            cfg, _rng(cfg, 5), lambda it, desc: ctx.progress(it, desc=desc, leave=False)
        )
        claims.append(v1)
    with section("maps", "heat-maps"):
        figs, metrics["maps"] = maps(cfg, ctx)
        figures += figs
    with section("estimate", "estimate (p, t, c)"):
        est = estimate_section(cfg, ctx)
        digits = est.pop("_digits")
        metrics["estimate"] = est
    with section("bench", "peers bench" if cfg.bench else None):
        if cfg.bench:
            from .peers import bench

            metrics["bench"] = bench(cfg, ctx, digits)
    bar.close()
    ctx.log(_describe("lm", est["lm"]))
    ctx.log(_describe("digits", est["digits"]))
    if "real" in est:
        from .real import real_table

        table = real_table(est["real"])
        atomic_write_text(ctx.run_dir / "real.md", "\n".join(["# On a real model", "", *table, ""]))
        ctx.log("\n".join(table))
    if cfg.bench:
        ctx.log(metrics["bench"]["summary"])
    return Results(claims=claims, metrics=metrics, figures=figures)
