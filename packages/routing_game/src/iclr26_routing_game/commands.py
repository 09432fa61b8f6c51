"""The CLI verbs ``solve``, ``sweep`` and ``estimate`` (argparse namespaces in, files and lines out)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError
from iclr26_core.fs import atomic_write_text, check_out_dir, staged_dir, write_json
from iclr26_core.lazy import package_version

DEFAULT_GAME = {"p1": 0.4, "p2": 0.8, "t1": 1.0, "t2": 3.0, "c1": 1.0, "c2": 3.0, "V": 5.0, "P": 2.0}


def _provenance(inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "package": "iclr26-routing-game",
        "version": package_version("iclr26-routing-game"),
        "inputs": inputs,
    }


def _fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.4g}"


def describe(sol: dict[str, Any]) -> str:
    """A few human lines for one `RoutingGame.solve()` result."""
    g, eq, th, thr, br = (
        sol["game"],
        sol["equilibrium"],
        sol["thresholds"],
        sol["throttling"],
        sol["best_response"],
    )
    lines = [
        f"game: p=({g['p1']:g}, {g['p2']:g}) t=({g['t1']:g}, {g['t2']:g}) c=({g['c1']:g}, {g['c2']:g}) "
        f"V={g['V']:g} P={g['P']:g} · regime {sol['regime']} (ξ = {th['xi'][0]:.4g}, {th['xi'][1]:.4g})",
        f"thresholds: s0={_fmt(th['s0'])} s_L={_fmt(th['s_L'])} s_H={_fmt(th['s_H'])} · cost of pass c/p = "
        f"({th['cost_of_pass'][0]:.4g}, {th['cost_of_pass'][1]:.4g}) · latency of pass t/p = "
        f"({th['latency_of_pass'][0]:.4g}, {th['latency_of_pass'][1]:.4g}) · M2 if both leave iff P > "
        f"{_fmt(th['P_route_m2_if_both_leave'])} · throttling pays iff P < {_fmt(th['P_star_throttle'])}",
        f"equilibrium: route M{eq['i']}, cascade s={eq['s']:.4g}, user q*={eq['q']:.4g} · provider cost "
        f"J={eq['provider_cost']:.4g}, user utility U={eq['user_utility']:.4g}, escalates "
        f"{'yes' if eq['escalates'] else 'no'}",
        f"user best responses: on M2 q*={br['M2']:.4g} · on M1 without cascade q*={br['M1_no_cascade']:.4g} · "
        f"on M1 with full cascade q*={br['M1_full_cascade']:.4g}",
        f"misalignment gap Δ_U = {sol['misalignment_gap']:.4g} (user's best policy gives U={eq['user_best']:.4g})",
        f"throttling: best = {thr['subset']}, gain = {thr['gain']:.4g} (J {thr['provider_cost_before']:.4g} -> "
        f"{thr['provider_cost_after']:.4g}), user utility {thr['user_utility_before']:.4g} -> "
        f"{thr['user_utility_after']:.4g} (throttle-both: {thr['user_utility_throttle_both']:.4g})",
    ]
    return "\n".join(lines)


def solve(args: argparse.Namespace) -> int:
    from .game import RoutingGame

    inputs = {k: getattr(args, k) for k in DEFAULT_GAME}
    game = RoutingGame(**inputs, tie_break=args.tie_break)
    if args.json and Path(args.json).exists():
        raise UserError(f"{args.json!r} exists; choose a new file")
    sol = game.solve()
    print(describe(sol))
    if args.json:
        write_json(args.json, {**_provenance({**inputs, "tie_break": args.tie_break}), "solution": sol})
        print(f"wrote {args.json}")
    return 0


def _pair(text: str | None, name: str, default: tuple[float, float]) -> tuple[float, float]:
    if text is None:
        return default
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise UserError(f"{name} must be LO,HI (two numbers), got {text!r}") from None
    if not lo < hi:
        raise UserError(f"{name} must have LO < HI, got {text!r}")
    return lo, hi


def parse_fixed(text: str) -> dict[str, float]:
    """``"p1=0.3,V=5"`` -> {"p1": 0.3, "V": 5.0}; unknown names and non-numbers are a `UserError`."""
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, val = item.partition("=")
        if not sep or key not in DEFAULT_GAME:
            raise UserError(
                f"--fixed: expected name=value with a name in {', '.join(DEFAULT_GAME)}, got {item!r}"
            )
        try:
            out[key] = float(val)
        except ValueError:
            raise UserError(f"--fixed: {key} must be a number, got {val!r}") from None
    return out


def sweep(args: argparse.Namespace) -> int:
    import numpy as np

    from .game import RoutingGame
    from .grids import check_axis
    from .grids import sweep as run_sweep
    from .plots import policy_map, value_map
    from .reproduce import AXIS_RANGE

    x, y = check_axis(args.x), check_axis(args.y)
    if not 2 <= args.n <= 2001:
        raise UserError(f"--n must be in [2, 2001], got {args.n}")
    base = RoutingGame(**{**DEFAULT_GAME, **parse_fixed(args.fixed)}, tie_break=args.tie_break)
    xs = np.linspace(*_pair(args.x_range, "--x-range", AXIS_RANGE[x]), args.n)
    ys = np.linspace(*_pair(args.y_range, "--y-range", AXIS_RANGE[y]), args.n)
    final = check_out_dir(args.out)
    df = run_sweep(base, x, y, xs, ys)
    with staged_dir(final) as tmp:
        atomic_write_text(tmp / "sweep.csv", df.to_csv(index=False, float_format="%.10g"))
        policy_map(df, x, y, tmp / "policy_map.png")
        value_map(df, x, y, "gap", tmp / "misalignment.png", "misalignment gap Δ_U")
        value_map(df, x, y, "throttle_gain", tmp / "throttling.png", "throttling gain")
        write_json(
            tmp / "sweep.json", _provenance({"x": x, "y": y, "xs": xs, "ys": ys, "base": base.to_dict()})
        )
    shares = df["policy"].value_counts(normalize=True)
    print(
        f"{len(df):,} games on {x} x {y}: "
        + ", ".join(f"{k} {v:.1%}" for k, v in shares.items())
        + f"; Δ_U > 0 in {(df['gap'] > 1e-9).mean():.1%}, throttling pays in {(df['throttle_gain'] > 0).mean():.1%}"
    )
    print(f"wrote {final}/sweep.csv, policy_map.png, misalignment.png, throttling.png")
    return 0


def _solvers(args: argparse.Namespace) -> tuple[list[Any], list[dict[str, Any]]]:
    from .solvers import digits_solvers, hf_solver
    from .tasks import generated_tasks, load_tasks

    if args.tasks == "digits":
        if args.model_a or args.model_b:
            raise UserError("--tasks digits uses its own scikit-learn solvers; omit --model-a/--model-b")
        tasks, solvers = digits_solvers(args.seed, temperature=args.temperature)
        return solvers, tasks
    if not (args.model_a and args.model_b):
        raise UserError("--model-a and --model-b are required (or --tasks digits for the offline demo)")
    if args.tasks == "generated":
        if args.n_tasks < 1:
            raise UserError(f"--n-tasks must be >= 1, got {args.n_tasks}")
        tasks = generated_tasks(args.n_tasks, args.seed)
    else:
        tasks = load_tasks(args.tasks)
    import torch

    from iclr26_core.models import load_causal_lm, load_tokenizer

    torch.set_num_threads(1)
    solvers = []
    for ref in (args.model_a, args.model_b):
        tok = load_tokenizer(ref)
        solvers.append(hf_solver(load_causal_lm(ref).to(args.device), tok, ref, args.temperature))
    return solvers, tasks


def estimate(args: argparse.Namespace) -> int:
    from .estimate import estimate_params

    final = check_out_dir(args.out)
    if args.n_tasks < 1:
        raise UserError(f"--n-tasks must be >= 1, got {args.n_tasks}")
    if args.retries < 2 or not args.temperature > 0:
        raise UserError(f"retries must be >= 2 and --temperature > 0, got {args.retries}, {args.temperature}")
    solvers, tasks = _solvers(args)
    est = estimate_params(
        solvers,
        tasks,
        value=args.value,
        cost_per_call=args.cost,
        time_value=args.time_value,
        churn_penalty=args.churn_penalty,
        flops_unit=args.flops_unit,
        retries=args.retries,
        seed=args.seed,
        repeats=args.repeats,
        clock=args.clock,
        n_boot=args.n_boot,
    )
    est.pop("game")
    inputs = {k: v for k, v in vars(args).items() if k not in ("func",)}
    with staged_dir(final) as tmp:
        write_json(tmp / "estimate.json", {**_provenance(inputs), **est})
    ci = lambda x: f"[{x[0]:.4g}, {x[1]:.4g}]"  # noqa: E731
    for k, m in enumerate(est["models"], 1):
        print(
            f"M{k} {m['name']}: p={m['p']:.4g} {ci(m['p_ci'])} ({m['passes']} passes: {est['n_tasks']} tasks x "
            f"{est['retries']} retries), p after a failure={m['p_after_failure']:.4g} {ci(m['p_after_failure_ci'])}, "
            f"t={m['t']:.4g} {ci(m['t_ci'])} ({m['seconds_per_pass']:.4g} {m['clock']} s per pass), "
            f"c={m['c']:.4g} {ci(m['c_ci'])}"
        )
    print(describe(est["solution"]))
    iv = est["intervals"]
    print(
        f"over {est['n_boot']} bootstrap games ({est['level']:.0%} intervals): {est['policy']} in "
        f"{iv['share_same_policy']:.1%}; q* {ci(iv['q_ci'])}, J {ci(iv['provider_cost_ci'])}, "
        f"U {ci(iv['user_utility_ci'])}, Δ_U {ci(iv['gap_ci'])}, throttle gain {ci(iv['throttle_gain_ci'])}"
    )
    for kind, res in est.get("by_type", {}).items():
        eq = res["solution"]["equilibrium"]
        print(
            f"type {kind} ({res['n']} tasks): p=({res['p'][0]:.3g}, {res['p'][1]:.3g}) -> route M{eq['i']} "
            f"s={eq['s']:.3g} q*={eq['q']:.3g}"
        )
    print(f"wrote {final}/estimate.json")
    return 0
