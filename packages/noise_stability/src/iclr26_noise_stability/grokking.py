"""The grokking experiment: arms × seeds of `train_with_regularizer` on one task, split and initialisation.

Arms (``arms=[...]``):

* ``base`` — AdamW only; ``reg`` — + the regulariser (S = 1, the paper's setting); ``anti`` — S = 0;
  ``avgsens`` — the regulariser with a single resampled token (average-sensitivity control);
* ``grokfast``, ``grokfast_pytorch``, ``reg+grokfast`` — peers (see `iclr26_noise_stability.peers`);
* ``wd<x>`` — AdamW with weight decay x (e.g. ``wd0.1``), the standard grokking knob;
* ``reg_g<γ>_r<ρ>`` — the regulariser at another (γ, ρ) (from ``sweep.gamma`` / ``sweep.rho``).

Every arm of a seed starts from the same initialisation (``task_model(seed=seed)``) on the same split. Runs are
independent jobs, run in ``workers`` processes (spawned; one torch thread each).
"""

from __future__ import annotations

import os
import re
from typing import Any

from .errors import NoiseStabilityError

FIXED_ARMS = ("base", "reg", "anti", "avgsens", "grokfast", "grokfast_pytorch", "reg+grokfast")
_WD = re.compile(r"^wd(\d+(?:\.\d*)?(?:e-?\d+)?)$")
_SWEEP = re.compile(r"^reg_g([\d.e-]+)_r([\d.e-]+)$")


def check_arm(arm: str) -> str:
    if arm in FIXED_ARMS or _WD.match(arm) or _SWEEP.match(arm):
        return arm
    raise NoiseStabilityError(
        f"unknown arm {arm!r}; use {', '.join(FIXED_ARMS)}, wd<x> (e.g. wd0.1) or reg_g<gamma>_r<rho>"
    )


def sweep_arms(gammas: list[float], rhos: list[float], default_gamma: float, default_rho: float) -> list[str]:
    """``reg_g<γ>_r<ρ>`` arms for a γ sweep (at the default ρ) and a ρ sweep (at the default γ)."""
    out = [f"reg_g{float(g):g}_r{default_rho:g}" for g in gammas]
    out += [f"reg_g{default_gamma:g}_r{float(r):g}" for r in rhos]
    return list(dict.fromkeys(out))


def build_task(g: dict[str, Any]):
    from .tasks import modular_addition, sparse_parity

    if g["task"] == "modular_addition":
        return modular_addition(int(g["p"]), float(g["train_fraction"]), int(g["split_seed"]))
    if g["task"] == "sparse_parity":
        return sparse_parity(
            int(g["n_bits"]),
            int(g["k"]),
            int(g["n_train"]),
            int(g["n_val"]),
            float(g["label_noise"]),
            int(g["split_seed"]),
        )
    raise NoiseStabilityError(f"unknown task {g['task']!r}; use modular_addition or sparse_parity")


def _regularizer(arm: str, cfg: dict[str, Any], task):
    from .regularizer import NoiseStabilityRegularizer

    r = cfg["reg"]
    kw = dict(
        noise=r["noise"],
        positions=task.positions,
        vocab_size=task.vocab_size,
        readout=task.readout,
        classes=task.n_classes,
        support=task.support,
    )
    sweep = _SWEEP.match(arm)
    if sweep:
        return NoiseStabilityRegularizer(float(sweep.group(1)), float(sweep.group(2)), 1, **kw)
    if arm in ("reg", "reg+grokfast"):
        return NoiseStabilityRegularizer(r["gamma"], r["rho"], r["S"], **kw)
    if arm == "anti":
        return NoiseStabilityRegularizer(r["gamma"], r["rho"], 0, **kw)
    if arm == "avgsens":
        return NoiseStabilityRegularizer(r["gamma"], r["rho"], r["S"], mode="avgsens", **kw)
    return None


def run_job(cfg: dict[str, Any], arm: str, seed: int, device: str = "cpu") -> dict[str, Any]:
    """One run (arm, seed); ``cfg`` is the plain resolved config. Returns `RunResult.to_dict()` plus labels."""
    import torch

    from .peers import make_optimizer
    from .tasks import BitMLP, task_model
    from .training import train_with_regularizer

    threads = int(cfg.get("threads") or 0)
    if threads:  # the core's setting (1 at the miniature scales); 0 leaves torch's default
        torch.set_num_threads(threads)
    g = cfg["grok"]
    if g.get("data_per_seed"):  # each seed its own dataset (shared by every arm of that seed)
        g = dict(g, split_seed=int(g["split_seed"]) + seed)
    task = build_task(g)
    if g.get("model", "gpt2") == "mlp":
        model = BitMLP(task.seq_len, int(g["width"]), task.n_classes, seed=seed)
    else:
        model = task_model(
            task, int(g["n_layer"]), int(g["n_embd"]), int(g["n_head"]), int(g["n_inner"]), seed=seed
        )
    model.to(device)
    wd_match = _WD.match(arm)
    wd = float(wd_match.group(1)) if wd_match else float(g["weight_decay"])
    betas = tuple(float(b) for b in g["betas"])
    gf = cfg["grokfast"]
    optimizer = make_optimizer(arm, model, float(g["lr"]), wd, betas, float(gf["alpha"]), float(gf["lamb"]))
    res = train_with_regularizer(
        model,
        task,
        regularizer=_regularizer(arm, cfg, task),
        steps=int(g["cap"]),
        lr=float(g["lr"]),
        weight_decay=wd,
        eval_every=int(g["eval_every"]),
        target=float(g["target"]),
        betas=betas,
        batch_size=g.get("batch_size"),
        optimizer=optimizer,
        stability_rho=float(cfg["stability"]["rho"]),
        stability_draws=int(cfg["stability"]["draws"]),
        stability_noise=cfg["reg"]["noise"],
        seed=seed,
        device=device,
        progress=False,
    )
    out = res.to_dict()
    out.update(arm=arm, seed=seed, capped_steps=res.capped_steps(int(g["cap"])), reached=res.reached)
    return out


def _cost(arm: str) -> float:
    """Relative cost of an arm's step (the regulariser adds a forward and a backward)."""
    return 2.0 if arm.startswith("reg") or arm in ("anti", "avgsens") else 1.0


def run_grid(
    cfg: dict[str, Any], jobs: list[tuple[str, int]], ctx: Any, desc: str = "grokking runs"
) -> dict[str, dict[int, dict]]:
    """{arm: {seed: run}} for every (arm, seed) job; a progress bar over runs; ``cfg["workers"]`` processes."""
    arms = list(dict.fromkeys(a for a, _ in jobs))
    workers = max(1, min(int(cfg.get("workers", 1)), len(jobs), os.cpu_count() or 1))
    results: dict[str, dict[int, dict]] = {a: {} for a in arms}
    bar = ctx.progress(total=len(jobs), desc=desc)
    if workers == 1 or ctx.device != "cpu":
        for arm, seed in jobs:
            bar.set_postfix_str(f"{arm} seed {seed}", refresh=False)
            results[arm][seed] = run_job(cfg, arm, seed, ctx.device)
            bar.update(1)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        jobs = sorted(
            jobs, key=lambda j: -_cost(j[0])
        )  # the dearest runs first: the two workers finish together

        ctx.log(
            f"{len(jobs)} runs in {workers} worker processes ({cfg.get('threads') or 'default'} torch thread(s) each)"
        )
        from iclr26_core.runtime import quiet_worker

        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=spawn, initializer=quiet_worker) as pool:
            futures = {pool.submit(run_job, cfg, a, s, "cpu"): (a, s) for a, s in jobs}
            for fut in as_completed(futures):
                arm, seed = futures[fut]
                results[arm][seed] = fut.result()
                bar.set_postfix_str(f"{arm} seed {seed} done", refresh=False)
                bar.update(1)
    bar.close()
    return results
