"""Tier A experiments on the synthetic `OracleLLM` (claims C1-C5 and the GA comparison): one function per
experiment, each returning plain numbers (exact expected accuracies, never noisy estimates)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .oracle import OracleLLM
from .search import SearchResult, random_search, sprig
from .task_prompts import optimize_task_prompts

Tick = Callable[[str], None]


def make_oracle(cfg: Any, seed: int) -> OracleLLM:
    return OracleLLM(int(cfg.oracle.n_tasks), int(cfg.oracle.n_components), seed)


def run_sprig(cfg: Any, oracle: OracleLLM, seed: int, budget: int | None = None) -> SearchResult:
    s = cfg.search
    return sprig(
        oracle.fitness(int(cfg.oracle.n_questions), int(cfg.oracle.n_dev), seed),
        oracle.components,
        beam_size=int(s.beam_size),
        top_ucb=int(s.top_ucb),
        n_iters=int(s.n_iters),
        budget=budget,
        paraphraser=oracle.paraphraser if s.paraphrase else None,
        seed=seed,
    )


def curve(oracle: OracleLLM, result: SearchResult) -> list[list[float]]:
    """[(question-evaluations, exact mean accuracy of the best-so-far prompt)] along a search."""
    return [[int(h["evaluations"]), oracle.true_mean(h["best_prompt"])] for h in result.history]


def task_prompt_arms(cfg: Any, o: OracleLLM, r: SearchResult, seed: int) -> dict[str, Any]:
    """Per-task prompts (empty system prompt) and SPRIG + task prompts, by the configured method at SPRIG's
    budget (``task_opt.budget: null``) and by the spec's 0.1 greedy guard (``*_greedy``, an extra arm)."""
    t = cfg.task_opt
    budget = int(t.budget or r.evaluations)
    out: dict[str, Any] = {"task_budget": budget}
    for suffix, method in (("", str(t.method)), ("_greedy", "greedy")):
        for key, system, offset in (("per_task", None, 0), ("sprig_task", r.best, 1000)):
            tf = o.task_fitness(system, seed=seed + offset)
            chosen = optimize_task_prompts(
                tf,
                o.task_phrases(),
                method=method,
                budget=budget,
                z=float(t.z),
                n_questions=int(t.n_questions),
                max_len=int(t.max_len),
            )
            out[key + suffix] = o.true_mean(system or (), chosen)
            out[f"{key}{suffix}_evaluations"] = tf.evaluations
            out[f"{key}{suffix}_mean_length"] = sum(map(len, chosen.values())) / len(chosen)
    return out


def run_seed(cfg: Any, seed: int, tick: Tick) -> dict[str, Any]:
    """C1, C2, C3, C4 and C5 on one oracle seed."""
    o = make_oracle(cfg, seed)
    r = run_sprig(cfg, o, seed)
    tick(f"seed {seed}: sprig")
    task = task_prompt_arms(cfg, o, r, seed)
    tick(f"seed {seed}: task prompts")
    rs = random_search(
        o.fitness(int(cfg.oracle.n_questions), 1, seed + 2000), o.components, budget=r.evaluations, seed=seed
    )
    tick(f"seed {seed}: random search")
    transfer = {}
    targets = [(float(rho), 0.0) for rho in cfg.transfer.rhos]
    targets.append((float(cfg.transfer.larger_rho), float(cfg.transfer.larger_shift)))
    for rho, shift in targets:
        target = o.transfer(rho, shift)
        native = run_sprig(cfg, target, seed)
        base = target.true_mean()
        gain_transferred, gain_native = target.true_mean(r.best) - base, target.true_mean(native.best) - base
        transfer[f"rho={rho:g},shift={shift:g}"] = {
            "rho": rho,
            "base_shift": shift,
            "empty": base,
            "gain_transferred": gain_transferred,
            "gain_native": gain_native,
            "retention": gain_transferred / gain_native if gain_native > 0 else float("nan"),
        }
        tick(f"seed {seed}: transfer rho={rho:g} shift={shift:g}")
    return {
        "seed": seed,
        "empty": o.true_mean(),
        "cot": o.true_mean(o.cot_prompt()),
        "sprig": o.true_mean(r.best),
        "sprig_dev_score": r.best_score,
        "sprig_length": len(r.best),
        "sprig_evaluations": r.evaluations,
        "sprig_prompt": [c.text for c in r.best],
        **task,
        "random": o.true_mean(rs.best),
        "random_evaluations": rs.evaluations,
        "random_length": len(rs.best),
        "exact_gain_sprig": o.true_mean(r.best) - o.true_mean(),
        "transfer": transfer,
        "curves": {"sprig": curve(o, r), "random search": curve(o, rs)},
        "credits_top": sorted(r.config["credits"].items(), key=lambda kv: -kv[1][0] / kv[1][1])[:5],
    }


def run_ga(cfg: Any, seed: int, tick: Tick) -> dict[str, Any]:
    """``sprig_ga`` (ridge proxy) against ``sprig`` stopped at the GA's budget; reported without a verdict."""
    from .ga import sprig_ga

    o = make_oracle(cfg, seed)
    g = sprig_ga(
        o.fitness(int(cfg.oracle.n_questions), int(cfg.oracle.n_dev), seed + 3000),
        o.components,
        generations=int(cfg.ga.generations),
        proxy=str(cfg.ga.proxy),
        seed=seed,
    )
    tick(f"seed {seed}: sprig_ga")
    r = run_sprig(cfg, o, seed + 4000, budget=g.evaluations)
    tick(f"seed {seed}: sprig at the GA's budget")
    return {
        "seed": seed,
        "budget": g.evaluations,
        "ga": o.true_mean(g.best),
        "ga_length": len(g.best),
        "sprig_at_budget": o.true_mean(r.best),
        "sprig_at_budget_iterations": len(r.history),
        "curves": {"sprig_ga": curve(o, g)},
    }
