"""Claims C3 (steps to grokking with the regulariser) and C4 (stability stays high), plus the peers table."""

from __future__ import annotations

import statistics
from typing import Any

from iclr26_core.report import Claim


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def summarize(runs: dict[int, dict], cap: int) -> dict[str, Any]:
    """Per-arm summary: steps (cap when missed) per seed, median, solve rate, seconds, final stability."""
    seeds = sorted(runs)
    steps = [runs[s]["capped_steps"] for s in seeds]
    secs = [runs[s]["seconds_to_target"] if runs[s]["reached"] else runs[s]["seconds"] for s in seeds]
    return {
        "seeds": seeds,
        "steps": steps,
        "median_steps": _median(steps),
        "spread_steps": [min(steps), max(steps)] if steps else [],
        "solved": sum(runs[s]["reached"] for s in seeds),
        "seconds": secs,
        "median_seconds": _median(secs),
        "seconds_per_step": _median([runs[s]["seconds"] / max(runs[s]["steps"], 1) for s in seeds]),
        "final_val_acc": [runs[s]["final_val_acc"] for s in seeds],
    }


def _stability_at(run: dict, step: int, key: str = "stability") -> float | None:
    pts = [p for p in run["curve"] if p["step"] <= step and key in p]
    return pts[-1][key] if pts else None


def claim_c3(grid: dict[str, dict[int, dict]], g: dict[str, Any], r: dict[str, Any]) -> tuple[Claim, dict]:
    cap = int(g["cap"])
    base, reg = summarize(grid["base"], cap), summarize(grid["reg"], cap)
    seeds = base["seeds"]
    per_seed = [(grid["reg"][s]["capped_steps"], grid["base"][s]["capped_steps"]) for s in seeds]
    margin = float(g["margin"])
    wins = sum(rs <= margin * bs for rs, bs in per_seed)
    need = -(-2 * len(seeds) // 3)  # ≥ 2 of 3
    holds = reg["median_steps"] <= margin * base["median_steps"] and wins >= need
    step_ratio = reg["median_steps"] / base["median_steps"]
    wall_ratio = reg["median_seconds"] / base["median_seconds"]
    claim = Claim(
        "C3",
        "the noise-stability regulariser catalyses grokking on modular addition",
        "K = 113: ≈4500 → ≈3300 steps (≈36 % fewer)",
        {"steps base": base["steps"], "steps reg": reg["steps"], "median ratio": round(step_ratio, 3)},
        holds,
        f"median steps_reg <= {margin:g}·median steps_base and steps_reg <= {margin:g}·steps_base in >= {need} "
        f"of {len(seeds)} seeds (a missed target counts as the cap {cap})",
        f"p = {g['p']}, {g['train_fraction']:.0%} split, S = {r['S']}, γ = {r['gamma']}, ρ = {r['rho']} "
        f"({r['noise']} noise); {wins}/{len(seeds)} seeds faster; solved base {base['solved']}/{len(seeds)}, "
        f"reg {reg['solved']}/{len(seeds)}; wall-clock ratio {wall_ratio:.2f} (one extra forward/backward)",
    )
    return claim, {"base": base, "reg": reg, "step_ratio": step_ratio, "wall_ratio": wall_ratio, "wins": wins}


def claim_c4(
    grid: dict[str, dict[int, dict]], c4: dict[str, Any], stab: dict[str, Any]
) -> tuple[Claim, dict]:
    rows = {}
    for s in sorted(grid["base"]):
        b, r = grid["base"][s], grid["reg"][s]
        last = min(b["curve"][-1]["step"], r["curve"][-1]["step"]) if b["curve"] and r["curve"] else 0
        rows[s] = {"step": last}
        for key, name in (("stability", ""), ("centered", "centered_")):
            rows[s][name + "base"] = _stability_at(b, last, key)
            rows[s][name + "reg"] = _stability_at(r, last, key)
    valid = [v for v in rows.values() if None not in v.values()]

    def mean(key: str) -> float:
        return sum(v[key] for v in valid) / max(len(valid), 1)

    mean_b, mean_r = mean("base"), mean("reg")
    margin = float(c4["margin"])
    holds = bool(valid) and mean_r >= mean_b + margin
    claim = Claim(
        "C4",
        "with the regulariser, stability stays high while the baseline becomes less stable",
        "qualitative",
        {
            "stab base": round(mean_b, 4),
            "stab reg": round(mean_r, 4),
            "centred base": round(mean("centered_base"), 4),
            "centred reg": round(mean("centered_reg"), 4),
        },
        holds,
        f"mean over seeds of normalised Stab_ρ at the last step both arms ran: reg >= base + {margin:g}",
        f"ρ = {stab['rho']}, {stab['draws']} draws on the validation inputs; centred = E⟨M(X), M(Y)⟩ − ‖E M‖² "
        "(0 for a flat output, reported beside the verdict); per seed (step, base, reg, centred base, centred "
        "reg): "
        + "; ".join(
            f"({v['step']}, {v['base']:.3f}, {v['reg']:.3f}, {v['centered_base']:.3f}, {v['centered_reg']:.3f})"
            for v in valid
        ),
    )
    return claim, {
        "per_seed": rows,
        "mean_base": mean_b,
        "mean_reg": mean_r,
        "mean_centered_base": mean("centered_base"),
        "mean_centered_reg": mean("centered_reg"),
    }


def peers_markdown(
    summaries: dict[str, dict[str, Any]], g: dict[str, Any], missing: list[str], task: str
) -> str:
    """peers.md: steps and seconds to the target for every arm, with solve rate and spread."""
    lines = [
        "# Grokking accelerators side by side",
        "",
        f"Task: {task}. AdamW lr {g['lr']}, weight decay {g['weight_decay']}, betas {list(g['betas'])}, "
        f"full batch, cap {g['cap']} steps, target validation accuracy {g['target']} (evaluated every "
        f"{g['eval_every']} steps). Same split and initialisation per seed.",
        "",
        "| arm | steps per seed | median steps | spread | solved | median seconds | s/step |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arm, s in summaries.items():
        lines.append(
            f"| {arm} | {s['steps']} | {s['median_steps']:g} | {s['spread_steps']} | "
            f"{s['solved']}/{len(s['seeds'])} | {s['median_seconds']:.1f} | {s['seconds_per_step'] * 1000:.0f} ms |"
        )
    if missing:
        lines += [
            "",
            f"peers not installed: {', '.join(missing)} (pip install iclr26-noise-stability[peers])",
        ]
    return "\n".join(lines) + "\n"
