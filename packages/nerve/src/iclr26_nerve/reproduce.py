"""``iclr26-nerve reproduce``: claims C1–C4 of the spec, in miniature (see `experiment` for the setup and
`claims` for the rules). The (arm, seed) runs are independent; with ``workers`` > 1 they train in that many
worker processes (one torch thread each), with the same numbers as in one process.
"""

from __future__ import annotations

import os
from typing import Any

from iclr26_core.report import Results

from .claims import (  # re-exported: the claim functions live in `claims`
    _final,
    _seed_mean_layers,
    claim_c1,
    claim_c2,
    claim_c3,
    claim_c4,
)

__all__ = ["claim_c1", "claim_c2", "claim_c3", "claim_c4", "run"]


def recipe(cfg: Any) -> dict:
    """The training recipe of the scale config, as `experiment.train_arm` keywords."""
    from .errors import NerVEError
    from .experiment import DECAY, SCHEDULES

    if str(cfg.schedule) not in SCHEDULES:
        raise NerVEError(f"schedule must be one of {', '.join(SCHEDULES)}, got {cfg.schedule!r}")
    if str(cfg.decay) not in DECAY:
        raise NerVEError(f"decay must be one of {', '.join(DECAY)}, got {cfg.decay!r}")
    return {
        "model": dict(cfg.model),
        "steps": int(cfg.steps),
        "log_steps": int(cfg.log_steps),
        "lr": float(cfg.lr),
        "weight_decay": float(cfg.weight_decay),
        "batch_size": int(cfg.batch_size),
        "warmup_steps": int(cfg.warmup_steps),
        "grad_clip": float(cfg.grad_clip),
        "betas": (float(cfg.betas[0]), float(cfg.betas[1])),
        "schedule": str(cfg.schedule),
        "min_lr_ratio": float(cfg.min_lr_ratio),
        "decay": str(cfg.decay),
    }


def _data_keys(cfg: Any) -> dict:
    return {
        "seq_len": int(cfg.seq_len),
        "probe_blocks": int(cfg.probe_blocks),
        "eval_blocks": int(cfg.eval_blocks),
    }


def run_job(
    arm: str,
    seed: int,
    data_keys: dict,
    kw: dict,
    threads: int = 1,
    position: int | None = None,
) -> dict:
    """One (arm, seed) run; in a worker process it rebuilds the (deterministic, cached) data itself."""
    import torch

    from .experiment import char_data, train_arm

    if threads:
        torch.set_num_threads(threads)
    return train_arm(arm, seed, char_data(**data_keys), position=position, **kw)


def _run_all(cfg: Any, ctx: Any, jobs: list[tuple[str, int]], kw: dict) -> dict[str, dict]:
    workers = max(1, min(int(cfg.get("workers", 1)), len(jobs), os.cpu_count() or 1))
    data_keys = _data_keys(cfg)

    def job_kw(k: int, arm: str, seed: int) -> dict:
        return {
            **kw,
            "device": ctx.device,
            "desc": f"{arm} seed {seed} ({k + 1}/{len(jobs)})",
            "identity_control": arm == "preln_gelu",
            "keep_state": bool(cfg.get("peers"))
            and seed == ctx.seed
            and arm in ("preln_gelu", "preln_gelu_stock"),
        }

    if workers == 1 or ctx.device != "cpu":
        runs = {}
        for k, (arm, seed) in enumerate(jobs):
            ctx.log(f"run {k + 1}/{len(jobs)}: {arm}, seed {seed}, {kw['steps']} steps")
            runs[f"{arm}/seed{seed}"] = run_job(arm, seed, data_keys, job_kw(k, arm, seed), threads=0)
        return runs
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from iclr26_core.runtime import quiet_worker

    threads = max(1, int(cfg.threads))
    ctx.log(
        f"{len(jobs)} runs of {kw['steps']} steps in {workers} worker processes ({threads} thread(s) each)"
    )
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=spawn, initializer=quiet_worker) as pool:
        futures = {
            f"{arm}/seed{seed}": pool.submit(
                run_job, arm, seed, data_keys, job_kw(k, arm, seed), threads, k % workers
            )
            for k, (arm, seed) in enumerate(jobs)
        }
        return {key: f.result() for key, f in futures.items()}


def _overhead_summary(runs: dict, log_steps: int) -> dict:
    import numpy as np

    rows = [r["overhead"] for r in runs.values() if r.get("overhead")]
    if not rows:
        return {}
    return {
        "measure_s": float(np.median([o["measure_s"] for o in rows])),
        "step_s": float(np.median([o["step_s"] for o in rows])),
        "ratio": float(np.median([o["ratio"] for o in rows])),
        "percent_at_log_steps": float(np.median([o["percent_at_log_steps"] for o in rows])),
        "log_steps": log_steps,
    }


def run(cfg: Any, ctx: Any) -> Results:
    from .errors import NerVEError
    from .experiment import ARMS, char_data, unigram_loss
    from .plots import plot_metrics_by_layer, plot_spectra_dict, plot_trajectory

    if str(cfg.scale.name) == "real":  # a pretrained LLM, no training: see `real`
        from .real import run_real

        return run_real(cfg, ctx)
    n_seeds = int(cfg.seeds)
    if n_seeds < 1:
        raise NerVEError(f"seeds must be ≥ 1, got {n_seeds}")
    unknown = [a for a in cfg.arms if a not in ARMS]
    if unknown:
        raise NerVEError(f"unknown arm {unknown[0]!r}; choose from {', '.join(ARMS)}")
    kw = recipe(cfg)
    data = char_data(**_data_keys(cfg))
    jobs = [(arm, ctx.seed + s) for s in range(n_seeds) for arm in cfg.arms]
    runs = _run_all(cfg, ctx, jobs, kw)
    model = kw["model"]
    n_layer = int(model["n_layer"])
    unigram = unigram_loss(data)
    claims = [claim_c1(runs, n_layer), claim_c2(runs), claim_c3(runs, unigram), claim_c4(runs)]
    overhead = _overhead_summary(runs, kw["log_steps"])
    if overhead:
        ctx.log(
            f"callback overhead: one NerVE measurement {overhead['measure_s'] * 1e3:.0f} ms = "
            f"{overhead['ratio']:.1f} training steps ({overhead['step_s'] * 1e3:.0f} ms); every "
            f"{kw['log_steps']} steps that is {overhead['percent_at_log_steps']:.1f} % of the time"
        )
    figures = []
    first = {arm: runs[f"{arm}/seed{ctx.seed}"] for arm in cfg.arms}
    by_layer = {arm: _seed_mean_layers(_final(runs, arm)) for arm in cfg.arms}
    if cfg.get("figures", True):
        for arm, r in first.items():
            if "eigenvalues" in r:
                figures.append(
                    plot_spectra_dict(
                        r["eigenvalues"],
                        ctx.run_dir / f"spectra_{arm}.png",
                        f"{arm}, seed {ctx.seed}, step {kw['steps']}: pre (blue) vs post (red)",
                    )
                )
        figures.append(
            plot_metrics_by_layer(
                {a: v for a, v in by_layer.items() if v}, ctx.run_dir / "metrics_by_layer.png"
            )
        )
        figures.append(
            plot_trajectory(
                {arm: r["trajectory"] for arm, r in first.items()}, ctx.run_dir / "trajectory.png"
            )
        )
    metrics = {
        "setup": {
            "model": model,
            "recipe": {k: v for k, v in kw.items() if k != "model"},
            "data": {
                "vocab": len(data.tokenizer),
                "train_blocks": len(data.train),
                "probe_tokens": int(data.probe.numel()),
                "eval_tokens": int(data.eval.numel()),
                "unigram_loss": unigram,
            },
            "seeds": n_seeds,
            "arms": list(cfg.arms),
        },
        "callback_overhead": overhead,
        "final_by_layer": by_layer,
        "runs": runs,
    }
    if cfg.get("peers"):
        from .peers import run_peers

        metrics["peers"] = run_peers(runs, data, model, cfg, ctx)
    for r in runs.values():  # tensors kept for the peers do not go into metrics.json
        r.pop("snapshots", None)
        r.pop("state_dict", None)
    return Results(claims=claims, metrics=metrics, figures=figures)
