"""C5: the regulariser at the paper's (γ, ρ) = (0.05, 0.05) speeds learning of noisy sparse parity; a γ/ρ sweep.

The paper reports ≈ 35 % faster learning of noisy sparse parity. Its architecture and task sizes are not public;
here a one-hidden-layer ReLU MLP (`BitMLP`) learns k-sparse parity of n bits with label noise on the training
labels, full batch AdamW, and "faster" is fixed before the run as *steps until the clean validation accuracy
first reaches ``target``* (evaluated every ``eval_every`` steps; a run that misses it counts as ``cap``). Every
seed draws its own dataset and initialisation, shared by every arm of that seed.

Rule (decided before the run, from the pilot's spread): per seed the ratio steps_reg / steps_base; the claim
holds when the geometric mean of the ratios is <= ``margin`` (0.85: at least 15 % fewer steps) *and* the
bootstrap 95 % interval of the mean log-ratio lies below 0 (the speed-up is resolved by the seeds).
"""

from __future__ import annotations

import math
from typing import Any

from iclr26_core.report import Claim

from .grok_claims import summarize


def parity_run_config(plain: dict[str, Any]) -> dict[str, Any]:
    """The config `run_grid` reads for the parity runs: ``grok`` = the parity task, ``reg`` = its (γ, ρ)."""
    pc = plain["parity"]
    grok = dict(pc, task="sparse_parity", model="mlp")
    reg = {"gamma": pc["gamma"], "rho": pc["rho"], "S": 1, "noise": plain["reg"]["noise"]}
    return dict(plain, grok=grok, reg=reg, stability={"rho": pc["rho"], "draws": 0})


def parity_jobs(pc: dict[str, Any], first_seed: int, arms: list[str]) -> list[tuple[str, int]]:
    """(arm, seed): base and reg on ``seeds`` seeds, the sweep arms on the first ``sweep_seeds``."""
    seeds = [first_seed + i for i in range(int(pc["seeds"]))]
    sweep = set(seeds[: int(pc["sweep_seeds"])])
    return [(a, s) for s in seeds for a in arms if a in ("base", "reg") or s in sweep]


def claim_c5(grid: dict[str, dict[int, dict]], pc: dict[str, Any]) -> tuple[Claim, dict[str, Any]]:
    from iclr26_core.evaluation import bootstrap_ci

    cap, margin = int(pc["cap"]), float(pc["margin"])
    base, reg = summarize(grid["base"], cap), summarize(grid["reg"], cap)
    seeds = base["seeds"]
    logs = [math.log(grid["reg"][s]["capped_steps"] / grid["base"][s]["capped_steps"]) for s in seeds]
    mean_log, lo, hi = bootstrap_ci(logs, n_boot=5000, seed=0)
    geo = math.exp(mean_log)
    holds = geo <= margin and hi < 0.0
    faster = sum(x < 0 for x in logs)
    claim = Claim(
        "C5",
        f"the regulariser (γ = {pc['gamma']}, ρ = {pc['rho']}) speeds learning of noisy sparse parity",
        "≈ 35 % faster",
        {
            "median steps base": base["median_steps"],
            "median steps reg": reg["median_steps"],
            "geo-mean ratio": round(geo, 3),
            "95% CI": [round(math.exp(lo), 3), round(math.exp(hi), 3)],
        },
        holds,
        f"steps to validation accuracy >= {pc['target']} (every {pc['eval_every']} steps, a miss counts as the "
        f"cap {cap}); geometric mean of steps_reg/steps_base over {len(seeds)} seeds <= {margin:g} and the "
        "bootstrap 95 % CI of the mean log-ratio below 0",
        f"{pc['k']}-sparse parity of n = {pc['n_bits']} bits, {pc['n_train']} training rows with "
        f"{pc['label_noise']:.0%} label noise, MLP width {pc['width']}, AdamW lr {pc['lr']}, weight decay "
        f"{pc['weight_decay']}; {faster}/{len(seeds)} seeds faster; solved base {base['solved']}/{len(seeds)}, "
        f"reg {reg['solved']}/{len(seeds)}; wall-clock ratio "
        f"{reg['median_seconds'] / max(base['median_seconds'], 1e-9):.2f}",
    )
    raw = {"base": base, "reg": reg, "log_ratios": logs, "geo_ratio": geo, "ci": [math.exp(lo), math.exp(hi)]}
    return claim, raw


def sweep_markdown(summaries: dict[str, dict[str, Any]], pc: dict[str, Any]) -> str:
    """parity_sweep.md: steps to the target per (γ, ρ) arm, with the ratio to the baseline on the same seeds."""
    base = summaries["base"]
    lines = [
        "# Noisy sparse parity: γ/ρ sweep of the regulariser (S = 1)",
        "",
        f"{pc['k']}-sparse parity, n = {pc['n_bits']}, {pc['n_train']} training rows, label noise "
        f"{pc['label_noise']}; MLP width {pc['width']}; AdamW lr {pc['lr']}, weight decay {pc['weight_decay']}; "
        f"steps to validation accuracy {pc['target']} (cap {pc['cap']}). Ratio: geometric mean of "
        "steps_arm / steps_base over the seeds the arm ran.",
        "",
        "| arm | seeds | median steps | geo-mean ratio to base | solved |",
        "| --- | --- | --- | --- | --- |",
    ]
    steps_base = dict(zip(base["seeds"], base["steps"], strict=True))
    for arm, s in summaries.items():
        ratios = [st / steps_base[seed] for seed, st in zip(s["seeds"], s["steps"], strict=True)]
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        lines.append(
            f"| {arm} | {len(s['seeds'])} | {s['median_steps']:g} | {geo:.3f} | {s['solved']}/{len(s['seeds'])} |"
        )
    return "\n".join(lines) + "\n"
