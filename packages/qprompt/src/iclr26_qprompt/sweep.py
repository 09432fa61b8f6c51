"""``iclr26-qprompt sweep``: GRQA's λ per objective reading against the plain arm, paired per seed.

Same data, initialisation and batches as `reproduce` (its config and scale; any override applies), one plain arm
per seed and one GRQA arm per (objective, λ). Separate from `reproduce` so that its default output and budget stay
as they are; the package README ("λ sweep") holds the table this printed.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from iclr26_core.errors import UserError


def _floats(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--weights must be comma-separated numbers, got {text!r}") from None
    if not values or any(not v > 0 for v in values):
        raise UserError(f"--weights must be positive numbers, got {text!r}")
    return values


def sweep(cfg: Any, objectives: list[str], weights: list[float], seeds: list[int], log=print) -> list[dict]:
    """Rows (seed, objective, λ, per-domain mIoU, target, Δ target vs the same seed's plain arm)."""
    from .data import DOMAINS
    from .experiment import grqa_config, make_data, qprompt_model, train_arm

    data = make_data(cfg)
    rows: list[dict] = []
    for seed in seeds:
        arms: list[tuple[str, float | None]] = [("plain", None)]
        arms += [(o, w) for o in objectives for w in weights]
        plain_target = None
        for objective, weight in arms:
            g = None if weight is None else grqa_config(cfg, objective=objective, weight=weight)
            t0 = time.process_time()
            r = train_arm(cfg, data, qprompt_model(cfg, seed), seed, g, desc=f"{objective} {weight} s{seed}")
            if plain_target is None:
                plain_target = r["target"]
            row = {
                "seed": seed,
                "objective": objective,
                "weight": weight,
                **{d: float(r["miou"][d]) for d in DOMAINS},
                "target": float(r["target"]),
                "delta": float(r["target"] - plain_target),
                "final_loss": r["final_loss"],
                "cpu_s": time.process_time() - t0,
            }
            rows.append(row)
            log(render([row], header=not rows[:-1]))
    return rows


def render(rows: list[dict], header: bool = True) -> str:
    from .data import DOMAINS

    head = ["seed", "objective", "λ", *DOMAINS, "target", "Δ target vs plain"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)] if header else []
    for r in rows:
        w = "" if r["weight"] is None else f"{r['weight']:g}"
        cells = [str(r["seed"]), r["objective"], w, *(f"{r[d]:.4f}" for d in DOMAINS)]
        cells += [f"{r['target']:.4f}", f"{r['delta']:+.4f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(rows: list[dict]) -> str:
    """Mean Δ target over seeds per (objective, λ), and whether it is positive in every seed."""
    lines = [
        "| objective | λ | seeds | mean Δ target | Δ > 0 in every seed |",
        "| --- | --- | --- | --- | --- |",
    ]
    keys = sorted({(r["objective"], r["weight"]) for r in rows if r["weight"] is not None})
    for objective, weight in keys:
        ds = [r["delta"] for r in rows if r["objective"] == objective and r["weight"] == weight]
        every = "yes" if all(d > 0 for d in ds) else "no"
        lines.append(f"| {objective} | {weight:g} | {len(ds)} | {np.mean(ds):+.4f} | {every} |")
    return "\n".join(lines)


def sweep_cmd(args: argparse.Namespace) -> int:
    from iclr26_core.configs import compose
    from iclr26_core.fs import write_json

    from .config import OBJECTIVES

    objectives = [o.strip() for o in args.objectives.split(",") if o.strip()]
    bad = [o for o in objectives if o not in OBJECTIVES]
    if bad or not objectives:
        raise UserError(f"--objectives must be among {', '.join(OBJECTIVES)}, got {args.objectives!r}")
    weights = _floats(args.weights)
    cfg = compose("iclr26_qprompt.conf", "reproduce", args.overrides)
    seeds = [int(cfg.seed) + i for i in range(int(args.seeds))]
    rows = sweep(cfg, objectives, weights, seeds)
    print(summary(rows))
    if args.out:
        write_json(args.out, {"rows": rows, "overrides": list(args.overrides)})
    return 0
