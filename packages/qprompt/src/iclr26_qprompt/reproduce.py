"""``iclr26-qprompt reproduce``: claims C1–C4 of QPrompt-R1 in miniature (the package README, "Claims").

C1 speed (FLOP overhead of the head, timed ms beside it); C2 GRQA on QPrompt, paired over seeds, with the spec's
reading (``spec_arm``) as an extra arm against the same plain runs; C3 GRQA on a Mask2Former head (``m2f.seeds``);
C4 zero inference cost of GRQA. Verdicts come from the rules in `claims`, applied to the measured numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iclr26_core.report import Results

from . import claims as rules
from .data import DOMAINS, TARGET_DOMAINS


def _arms(
    cfg: Any, ctx: Any, data: dict, build, name: str, seeds: list[int], grqa_cfg, spec=(None, 0)
) -> dict[str, Any]:
    """Plain and GRQA arms of one model family over ``seeds`` (same init, data and batches per seed); ``spec`` =
    (GRQAConfig, n) adds a "spec" arm on the first n seeds, paired with the same plain runs."""
    from .experiment import train_arm

    spec_cfg, n_spec = spec
    runs: dict[str, list[dict]] = {"plain": [], "grqa": [], **({"spec": []} if n_spec else {})}
    for i, seed in enumerate(seeds):
        arms = [("plain", None), ("grqa", grqa_cfg)] + ([("spec", spec_cfg)] if i < n_spec else [])
        for arm, g in arms:
            ctx.log(
                f"{name} {arm} seed {seed}: training {cfg.train.steps} steps on {len(data['train'][0])} images"
            )
            runs[arm].append(train_arm(cfg, data, build(seed), seed, g, desc=f"{name} {arm} s{seed}"))
    return runs


def _summary(runs: dict[str, list[dict]]) -> dict[str, Any]:
    keep = ("miou", "iou", "target", "curve", "final_loss", "seconds")
    return {arm: [{k: r[k] for k in keep} for r in rs] for arm, rs in runs.items()}


def run(cfg: Any, ctx: Any) -> Results:
    from .experiment import grqa_config, make_data, qprompt_model, speed_table, zero_cost
    from .figures import examples_figure
    from .peers import bench_peers, torchmetrics_miou

    seed0 = int(cfg.seed)
    seeds = [seed0 + i for i in range(int(cfg.seeds))]
    grqa_cfg = grqa_config(cfg)
    spec_cfg = grqa_config(cfg, objective=str(cfg.spec_arm.objective), weight=float(cfg.spec_arm.weight))
    n_spec = min(int(cfg.spec_arm.seeds), len(seeds))
    ctx.log(
        f"data: {cfg.data.n_train} source images, {cfg.data.n_test} held-out scenes x {len(DOMAINS)} domains"
    )
    data = make_data(cfg)
    metrics: dict[str, Any] = {
        "seeds": seeds,
        "domains": list(DOMAINS),
        "grqa_arms": {
            "grqa": {"objective": grqa_cfg.objective, "weight": grqa_cfg.weight},
            **({"spec": {"objective": spec_cfg.objective, "weight": spec_cfg.weight}} if n_spec else {}),
        },
    }

    ctx.log("C1: FLOPs and timing of QPrompt, EoMT-4 and Mask2Former (batch 1, inference_mode)")
    metrics["speed"] = speed_table(cfg)

    runs = _arms(
        cfg, ctx, data, lambda s: qprompt_model(cfg, s), "QPrompt", seeds, grqa_cfg, (spec_cfg, n_spec)
    )
    metrics["qprompt"] = _summary(runs)
    metrics["zero_cost"] = zero_cost(cfg, runs["grqa"][0]["model"], data["test"]["source"])
    tm = torchmetrics_miou(runs["plain"][0]["pred"]["source"], data["test_labels"], int(cfg.data.num_classes))
    if tm is None:
        ctx.peers_missing(["torchmetrics"])
    else:
        metrics["torchmetrics_check"] = {"ours": runs["plain"][0]["miou"]["source"], "torchmetrics": tm}

    run_c3 = int(cfg.m2f.seeds) > 0
    if run_c3:
        from .model import tiny_mask2former

        m = cfg.m2f

        def build_m2f(seed: int):
            return tiny_mask2former(
                int(cfg.data.num_classes),
                num_queries=int(m.num_queries),
                encoder_layers=int(m.encoder_layers),
                decoder_layers=int(m.decoder_layers),
                hidden=int(m.hidden),
                seed=seed,
            )

        m2f_seeds = [seed0 + i for i in range(int(m.seeds))]
        metrics["mask2former"] = _summary(
            _arms(cfg, ctx, data, build_m2f, "Mask2Former", m2f_seeds, grqa_cfg)
        )
    if bool(cfg.bench):
        metrics["peers"] = bench_peers(cfg, ctx, data)

    tol = float(cfg.converged_tolerance)
    figures = [examples_figure(ctx.run_dir, data, runs, int(cfg.data.num_classes))]
    metrics["table"] = domain_table(metrics)
    (ctx.run_dir / "table.md").write_text(render_table(metrics["table"]) + "\n")
    claims = [
        rules.c1(metrics["speed"]),
        rules.c2(metrics["qprompt"], tol, metrics["grqa_arms"]),
        *([rules.c3(metrics["mask2former"], tol, metrics["grqa_arms"])] if run_c3 else []),
        rules.c4(metrics["zero_cost"]),
    ]
    if not run_c3:
        ctx.log("C3 (GRQA on a Mask2Former head) not run: m2f.seeds=0")
    return Results(claims=claims, metrics=metrics, figures=figures)


def domain_table(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per model and arm: mean (over seeds) mIoU per domain, target mean, and FPS where timed."""
    rows = []
    speed = metrics.get("speed", {})
    suffix = {"plain": ""}
    for arm, g in metrics.get("grqa_arms", {}).items():
        suffix[arm] = f" + GRQA ({g['objective']}, λ = {g['weight']:g})"
    for family, label, fps_key in (("qprompt", "QPrompt", "QPrompt"), ("mask2former", "Mask2Former", None)):
        for arm, rs in metrics.get(family, {}).items():
            row = {"model": f"{label}{suffix.get(arm, ' + GRQA')}", "seeds": len(rs)}
            for dom in DOMAINS:
                row[dom] = float(np.mean([r["miou"][dom] for r in rs]))
            row["target"] = float(np.mean([r["target"] for r in rs]))
            row["fps"] = speed.get(fps_key, {}).get("fps") if fps_key else None
            rows.append(row)
    for name, peer in metrics.get("peers", {}).items():
        rows.append(
            {
                "model": name,
                "seeds": 1,
                **{d: peer["miou"][d] for d in DOMAINS},
                "target": peer["target"],
                "fps": peer.get("fps"),
            }
        )
    return rows


def render_table(rows: list[dict[str, Any]]) -> str:
    """Per-domain mIoU and FPS in one markdown table (FPS of QPrompt at C1's size, 128x128, batch 1)."""
    head = ["model", "seeds", *DOMAINS, "target mean", "FPS"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        fps = "" if r.get("fps") is None else f"{r['fps']:.1f}"
        cells = [r["model"], str(r["seeds"]), *(f"{r[d]:.4f}" for d in DOMAINS), f"{r['target']:.4f}", fps]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


__all__ = ["TARGET_DOMAINS", "run"]
