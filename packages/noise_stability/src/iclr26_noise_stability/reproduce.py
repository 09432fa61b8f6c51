"""The paper's claims C1-C4 in miniature (``iclr26-noise-stability reproduce``).

* C1 — ReLU noise stability: Monte Carlo vs the closed form of Thm 5.1; the iterated map's fixed point.
* C2 — attention stability with identity vs Gaussian W_QK (Thm 5.2/5.3).
* C3/C4 — grokking on modular addition with a 1-layer GPT-2, baseline AdamW vs + the regulariser (S = 1,
  γ 0.75, ρ 0.25), over seeds: steps to 0.99 validation accuracy, and the stability trajectory.

Peer arms (Grokfast through pytorch-optimizer and grokfast-pytorch, and the regulariser + Grokfast) run on the
same split, initialisations and cap when ``peers=true`` and write ``peers.md``; ``bench=true`` adds the
weight-decay control arms; ``arms=[...]`` adds ablations (``anti`` = S 0, ``avgsens``) and
``sweep.gamma``/``sweep.rho`` add γ/ρ arms. Verdicts come from the spec's rules applied to the measurements.
"""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from iclr26_core.errors import UserError
from iclr26_core.report import Results

from . import figures
from .errors import check_gamma, check_noise, check_rho, check_sign
from .grok_claims import claim_c3, claim_c4, peers_markdown, summarize
from .grokking import build_task, check_arm, run_grid, sweep_arms
from .parity_claims import claim_c5, parity_jobs, parity_run_config, sweep_markdown
from .peers import missing_peers
from .theory_claims import claim_c1, claim_c2

PEER_ARMS = ["grokfast", "grokfast_pytorch", "reg+grokfast"]


def plan_arms(cfg: Any) -> tuple[list[str], list[str]]:
    """(arms to run, peers not installed): headline base/reg first, then ablations, peers, bench, sweeps."""
    arms = ["base", "reg"] + [str(a) for a in cfg.arms]
    if cfg.peers:
        arms += PEER_ARMS
    if cfg.bench:
        arms += [f"wd{float(w):g}" for w in cfg.bench_weight_decays]
    arms += sweep_arms(list(cfg.sweep.gamma), list(cfg.sweep.rho), float(cfg.reg.gamma), float(cfg.reg.rho))
    arms = [check_arm(a) for a in dict.fromkeys(arms)]
    check_gamma(cfg.reg.gamma)
    check_rho(cfg.reg.rho, tokens=True)
    check_sign(cfg.reg.S)
    check_noise(cfg.reg.noise)
    check_rho(cfg.stability.rho, tokens=True)
    missing = missing_peers(arms)
    from .peers import PEER_DISTS

    skip = {a for a in arms if PEER_DISTS.get(a.replace("reg+", "")) in missing}
    return [a for a in arms if a not in skip], missing


def run(cfg: Any, ctx: Any) -> Results:
    if int(cfg.seeds) < 1 or int(cfg.extra_seeds) < 1:
        raise UserError(f"seeds and extra_seeds must be >= 1, got {cfg.seeds}, {cfg.extra_seeds}")
    arms, missing = plan_arms(cfg)
    g = OmegaConf.to_container(cfg.grok, resolve=True)
    ctx.log(
        f"grokking setup: {g['task']} p={g['p']}, train split {g['train_fraction']:.0%}, AdamW lr {g['lr']}, "
        f"weight decay {g['weight_decay']}, betas {g['betas']}, full batch, cap {g['cap']} steps; arms {arms}"
    )
    if missing:
        ctx.peers_missing(missing)

    c1, c1_raw = claim_c1(OmegaConf.to_container(cfg.c1, resolve=True), ctx.seed)
    c2, c2_raw = claim_c2(OmegaConf.to_container(cfg.c2, resolve=True), ctx.seed, ctx.progress)
    plain = OmegaConf.to_container(cfg, resolve=True)
    seeds = [ctx.seed + i for i in range(int(cfg.seeds))]
    extra = seeds[: max(1, int(cfg.extra_seeds))]
    jobs = [(a, s) for s in seeds for a in arms if a in ("base", "reg") or s in extra]
    grid = run_grid(plain, jobs, ctx)
    c3, c3_raw = claim_c3(grid, g, plain["reg"])
    c4, c4_raw = claim_c4(grid, plain["c4"], plain["stability"])
    claims = [c1, c2, c3, c4]
    parity: dict[str, Any] = {}
    if cfg.parity.enabled:
        claims.append(run_parity(plain, ctx, parity))
    summaries = {a: summarize(grid[a], int(g["cap"])) for a in arms}
    if len(arms) > 2 or missing:
        (ctx.run_dir / "peers.md").write_text(peers_markdown(summaries, g, missing, build_task(g).describe()))
    figs = [
        figures.grokking(ctx.run_dir / "grokking.png", grid, float(g["target"])),
        figures.stability(ctx.run_dir / "stability.png", grid, float(cfg.stability.rho)),
        figures.relu(ctx.run_dir / "relu_stability.png", c1_raw),
    ]
    metrics = {
        "c1": c1_raw,
        "c2": c2_raw,
        "c3": c3_raw,
        "c4": c4_raw,
        "arms": summaries,
        "peers_missing": missing,
        "runs": {a: {str(s): grid[a][s] for s in grid[a]} for a in arms},
        "parity": parity,
    }
    return Results(claims, metrics=metrics, figures=figs)


def run_parity(plain: dict[str, Any], ctx: Any, out: dict[str, Any]):
    """C5 and the γ/ρ sweep on noisy sparse parity (``parity.enabled=true``); fills ``out`` for metrics.json."""
    pc = plain["parity"]
    check_gamma(pc["gamma"])
    check_rho(pc["rho"], tokens=True)
    arms = ["base", "reg"] + [
        a
        for a in sweep_arms(list(pc["sweep"]["gamma"]), list(pc["sweep"]["rho"]), pc["gamma"], pc["rho"])
        if a != f"reg_g{float(pc['gamma']):g}_r{float(pc['rho']):g}"
    ]
    for a in arms:
        check_arm(a)
    if int(pc["seeds"]) < 2:
        raise UserError(f"parity.seeds must be >= 2 for a confidence interval, got {pc['seeds']}")
    ctx.log(
        f"noisy sparse parity: n={pc['n_bits']}, k={pc['k']}, {pc['n_train']} train rows, label noise "
        f"{pc['label_noise']}, MLP width {pc['width']}, AdamW lr {pc['lr']}, weight decay {pc['weight_decay']}, "
        f"target {pc['target']}, cap {pc['cap']}; {pc['seeds']} seeds; arms {arms}"
    )
    grid = run_grid(parity_run_config(plain), parity_jobs(pc, ctx.seed, arms), ctx, "parity runs")
    claim, raw = claim_c5(grid, pc)
    summaries = {a: summarize(grid[a], int(pc["cap"])) for a in arms}
    if len(arms) > 2:
        (ctx.run_dir / "parity_sweep.md").write_text(sweep_markdown(summaries, pc))
    out.update(c5=raw, arms=summaries, runs={a: {str(s): grid[a][s] for s in grid[a]} for a in arms})
    return claim
