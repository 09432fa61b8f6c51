"""`iclr26-safemoe reproduce`: claims C1–C5 on the synthetic alignment-then-attack miniature.

One aligned tiny OLMoE (θ₀); per attack seed the arms SFT, SafeMoE and SafeMoE-without-attack, the in-package
peers (data mixing; proximal L2 with ρ swept) and trl's SFTTrainer (with `SafeMoECallback` for SafeMoE);
a τ sweep (plain KL and KL·τ²) on the first seed(s); optionally the other alignment design (``ablation_premise_weight``) in full. The headline
SafeMoE arm uses the paper's τ/σ (see `temperature`). Every verdict and note is computed from the numbers.
"""

from __future__ import annotations

from statistics import mean
from typing import Any

from iclr26_core.errors import UserError
from iclr26_core.report import Results

from . import toy
from .claims import UTILITY_MARGIN, c5_verdict, claims, table
from .experiment import Setting, attack_data, build_setting, evaluate, run_arm
from .experts import mask_experts, safety_critical_experts, selection_frequency
from .figures import fig_drift, fig_heatmap, fig_tau_sweep, table_md
from .temperature import miniature_tau, paper_tau


def _avg(rows: list[dict], key: str) -> float:
    return float(mean(r[key] for r in rows))


def _temperature(cfg, st: Setting) -> dict[str, Any]:
    return paper_tau(cfg, st.safe_ref.sigma)


def _pick_rho(rows_by_rho: dict[float, list[dict]], sft: list[dict]) -> float:
    """The proximal peer's ρ: lowest harmfulness among the ρ whose token accuracy is within the C5 margin of
    SFT's on the same seeds; if none is, the ρ with the highest token accuracy."""
    seeds = {r["seed"] for rows in rows_by_rho.values() for r in rows}
    ref_acc = _avg([r for r in sft if r["seed"] in seeds], "token_accuracy")
    ok = {
        rho: rows
        for rho, rows in rows_by_rho.items()
        if _avg(rows, "token_accuracy") >= ref_acc - UTILITY_MARGIN
    }
    if ok:
        return min(ok, key=lambda rho: (_avg(ok[rho], "harmfulness"), -rho))
    return max(rows_by_rho, key=lambda rho: _avg(rows_by_rho[rho], "token_accuracy"))


def _main_setting(cfg, ctx, st: Setting, temp: dict, seeds: list[int], sweep_seeds: list[int]) -> dict:
    tau = temp["tau"]
    keys = ("sft", "safemoe", "sft_no_attack", "safemoe_no_attack", "datamix")
    arms: dict[str, list[dict]] = {k: [] for k in keys}
    for seed in ctx.progress(seeds, total=len(seeds), desc="attack seeds"):
        arms["sft"].append(run_arm(st, cfg, seed, defense=False, tau=tau))
        arms["safemoe"].append(run_arm(st, cfg, seed, defense=True, tau=tau))
        benign = attack_data(cfg, seed, harmful=False)
        arms["sft_no_attack"].append(run_arm(st, cfg, seed, defense=False, tau=tau, data=benign))
        arms["safemoe_no_attack"].append(run_arm(st, cfg, seed, defense=True, tau=tau, data=benign))
        if cfg.datamix:
            mix = attack_data(cfg, seed, safety=int(cfg.safemoe.n_safe))
            arms["datamix"].append(run_arm(st, cfg, seed, defense=False, tau=tau, data=mix))
    out: dict[str, Any] = {"proximal_sweep": {}, "tau_sweep": [], "trl": {}, "c5_arms": {}}
    for name, arm in (cfg.get("c5_arms") or {}).items():  # C5 re-decided per arm (SFT and SafeMoE alike)
        kw = {k: arm[k] for k in ("route_grad_clip", "lr", "epochs") if k in arm}
        c5_seeds = seeds[: int(arm.get("seeds", len(seeds)))]
        same_sft = not {"lr", "epochs"} & set(kw)  # phase (b) settings only: SFT is the headline's SFT
        out["c5_arms"][name] = {
            "settings": kw,
            "sft": [r for r in arms["sft"] if r["seed"] in c5_seeds]
            if same_sft
            else [run_arm(st, cfg, s, defense=False, tau=tau, **kw) for s in c5_seeds],
            "safemoe": [run_arm(st, cfg, s, defense=True, tau=tau, **kw) for s in c5_seeds],
        }
        if arm.get("no_attack"):
            out["c5_arms"][name]["sft_no_attack"] = [
                run_arm(st, cfg, s, defense=False, tau=tau, data=attack_data(cfg, s, harmful=False), **kw)
                for s in c5_seeds
            ]
    rhos = cfg.proximal if cfg.proximal is not None else []
    rhos = [float(r) for r in ([rhos] if isinstance(rhos, int | float) else rhos) if float(r) > 0]
    if rhos:
        sweep = {
            rho: [run_arm(st, cfg, s, defense=False, tau=tau, proximal=rho) for s in sweep_seeds]
            for rho in rhos
        }
        best = _pick_rho(sweep, arms["sft"])
        rest = [s for s in seeds if s not in sweep_seeds]
        arms["proximal"] = sweep[best] + [
            run_arm(st, cfg, s, defense=False, tau=tau, proximal=best) for s in rest
        ]
        out["proximal_sweep"] = {str(rho): rows for rho, rows in sweep.items()}
        out["proximal_best"] = best
        ctx.log(
            "proximal peer: rho "
            + ", ".join(
                f"{rho:g} (H {_avg(rows, 'harmfulness'):.2f}, tokacc {_avg(rows, 'token_accuracy'):.3f})"
                for rho, rows in sweep.items()
            )
            + f" -> rho {best:g}"
        )
    if cfg.peers:
        from .trl_arm import have_trl

        if have_trl():
            trl_seeds = seeds[: int(cfg.trl_seeds)]
            arms["trl_sft"] = [run_arm(st, cfg, s, defense=False, tau=tau, engine="trl") for s in trl_seeds]
            arms["trl_safemoe"] = [
                run_arm(st, cfg, s, defense=True, tau=tau, engine="trl") for s in trl_seeds
            ]
        else:
            ctx.peers_missing(["trl"])
    sigma = temp["sigma_mini"]
    points = [(float(r), False) for r in cfg.sweep.tau_over_sigma] + [
        (float(r), True) for r in cfg.sweep.tau2_at
    ]
    for ratio, tau2 in ctx.progress(points, total=len(points), desc="tau sweep"):
        for s in sweep_seeds:
            row = run_arm(st, cfg, s, defense=True, tau=ratio * sigma, tau2_scaling=tau2)
            out["tau_sweep"].append({**row, "tau_over_sigma": ratio})
    for row in arms["safemoe"]:  # the headline point of the sweep
        if row["seed"] in sweep_seeds:
            out["tau_sweep"].append({**row, "tau_over_sigma": temp["tau_over_sigma"]})
    out["arms"] = {k: v for k, v in arms.items() if v}
    return out


def _premise(st: Setting, cfg) -> dict[str, Any]:
    """C1's measurement: harmfulness of θ₀ with its safety-critical experts masked, the control that masks as
    many benign-preferred experts instead, the largest harmful-minus-benign selection difference per layer,
    θ₀'s refusal rate on benign task-B prompts (a refusal cued by the task token alone) and the heatmap."""
    harm, ben = toy.prompt_inputs(st.ev["harmful"]), toy.prompt_inputs(st.ev["benign_a"])
    top = int(cfg.eval.mask_top)
    crit = safety_critical_experts(st.aligned, harm, ben, top=top)
    control = safety_critical_experts(st.aligned, ben, harm, top=top)
    with mask_experts(st.aligned, crit):
        masked = toy.harmfulness(st.aligned, st.ev["harmful"])
    with mask_experts(st.aligned, control):
        masked_control = toy.harmfulness(st.aligned, st.ev["harmful"])
    fh, fb = selection_frequency(st.aligned, harm), selection_frequency(st.aligned, ben)
    return {
        "masked_harmfulness": masked,
        "masked_benign_preferred_harmfulness": masked_control,
        "critical_experts": crit.tolist(),
        "benign_preferred_experts": control.tolist(),
        "max_selection_difference": (fh - fb).max(-1).values.tolist(),
        "benign_b_refusal": toy.refusal_rate(st.aligned, st.ev["benign_b"]),
        "frequency": {"harmful": fh.tolist(), "benign": fb.tolist()},
    }


def run(cfg, ctx) -> Results:
    if cfg.get("real") is not None:
        from .real import run_real

        return run_real(cfg, ctx)
    if cfg.scale.name == "paper":
        raise UserError(
            "scale=paper needs the real OLMoE, datasets and a GPU: use the verbs extract, prepare, finetune, "
            "evaluate (see the README)"
        )
    seeds = [ctx.seed + i for i in range(int(cfg.seeds))]
    sweep_seeds = seeds[: max(1, int(cfg.sweep.seeds))]
    st = build_setting(cfg, ctx, float(cfg.align.premise_weight))
    temp = _temperature(cfg, st)
    ctx.log(
        f"tau: {temp['tau_paper']:g} x sigma_mini {temp['sigma_mini']:.3g} / sigma_ref {temp['sigma_ref']:.3g} "
        f"= {temp['tau']:.3g} (tau/sigma {temp['tau_over_sigma']:.3g}; rule {temp['rule']})"
    )
    base = evaluate(st.aligned, st, float(cfg.safemoe.drift_tau))
    base.update(train_seconds=st.align_seconds)
    main = {"base": base, **_premise(st, cfg), **_main_setting(cfg, ctx, st, temp, seeds, sweep_seeds)}
    main["premise_weight"] = st.premise_weight
    ablation = None
    other = cfg.get("ablation_premise_weight")  # the other alignment design, reported in full (not a claim)
    if other is not None and float(other) != float(cfg.align.premise_weight):
        ab = build_setting(cfg, ctx, float(other))
        rows = {
            "sft": [run_arm(ab, cfg, s, defense=False, tau=temp["tau"]) for s in seeds],
            "sft_no_attack": [
                run_arm(ab, cfg, s, defense=False, tau=temp["tau"], data=attack_data(cfg, s, harmful=False))
                for s in seeds
            ],
            "safemoe": [
                run_arm(
                    ab,
                    cfg,
                    s,
                    defense=True,
                    tau=miniature_tau(temp["tau_paper"], ab.safe_ref.sigma, temp["sigma_ref"])
                    if temp["rule"] == "relative"
                    else temp["tau"],
                )
                for s in seeds
            ],
        }
        ablation = {
            "base": {
                **evaluate(ab.aligned, ab, float(cfg.safemoe.drift_tau)),
                "train_seconds": ab.align_seconds,
            },
            **_premise(ab, cfg),
            "arms": rows,
            "premise_weight": ab.premise_weight,
        }
    rows = table(main, cfg)
    metrics = {"main": main, "ablation": ablation, "seeds": seeds, "temperature": temp, "table": rows}
    figures = [
        fig_drift(main, ctx.run_dir),
        fig_heatmap(main, ctx.run_dir),
        fig_tau_sweep(main, temp, ctx.run_dir),
    ]
    text = table_md(rows)
    for name, arm in main["c5_arms"].items():
        v = c5_verdict(arm["sft"], arm["safemoe"])
        settings = ", ".join(f"{k}={val}" for k, val in arm["settings"].items())
        text += (
            f"\n\nC5 arm {name} ({settings}; seeds {len(arm['sft'])}): C5 {'holds' if v['holds'] else 'fails'}, "
            f"time ratio {v['time_ratio']:.2f}, phase-(b) grad norm median {v['grad_norms']['route_median']:.2f}"
            f" (max {v['grad_norms']['route_max']:.1f}), task {v['grad_norms']['task_median']:.2f}\n\n"
        )
        text += table_md(
            table({"base": main["base"], "arms": {k: r for k, r in arm.items() if k != "settings"}}, cfg)
        )
    if ablation is not None:
        text += (
            f"\n\nAblation: align.premise_weight={ablation['premise_weight']:g} (critical experts "
            f"{ablation['critical_experts']}):\n\n" + table_md(table(ablation, cfg))
        )
    (ctx.run_dir / "arms.md").write_text(text + "\n")
    ctx.log("\n" + text)
    return Results(claims=claims(main, ablation, temp, cfg), metrics=metrics, figures=figures)
