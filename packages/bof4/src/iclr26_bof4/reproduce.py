"""The paper's claims C1-C6 in miniature (``iclr26-bof4 reproduce``), one function per claim.

Every verdict is computed from the measured numbers with the rule of the spec; nothing is typed in.
Setups (all seeded from ``cfg.seed``; held-out samples never reuse a derivation seed):

* C1 — data-driven weighted Lloyd (2^22 N(0,1) samples, I = 64) regenerates Table 6.
* C2 — the numerical-integration solver agrees with Table 6 and with C1.
* C3/C4 — MSE/MAE per codebook and block size, relative to NF4: held-out N(0,1) weights
  (``weights.source=gaussian``) or the Linear layers of the language model(s) (``weights.source=model``).
* C5 — OPQ: MSE ratio with/without OPQ over I, on a contaminated Gaussian (0.2 % of weights ×8) or the
  model's layers.
* C6 — a tiny llama trained on pydoc text (or ``lm.model``), every Linear quantised at I = 64: weight MSE and
  ΔPPL, mean over training seeds (headline arm) and an outlier-initialised second arm.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from iclr26_core.report import Claim, Results, pyplot, save_figure

from .claims import _short, _where, claim_c3, claim_c4, claim_c5, claim_c6
from .codebooks import codebook
from .config import BOF4_VARIANTS, CODEBOOK_NAMES
from .derive import derive_codebook
from .synthetic import DERIVE


def _maxdiff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


# ------------------------------------------------------------------------------------------------ C1, C2
def claim_c1(cfg: Any, ctx: Any) -> tuple[Claim, dict[str, Any]]:
    derived, diffs = {}, {}
    for name in ctx.progress(list(BOF4_VARIANTS), desc="C1 Lloyd codebooks"):
        metric, signed = BOF4_VARIANTS[name]
        levels = derive_codebook(
            64, metric=metric, signed=signed, n_samples=int(cfg.c1.n_samples), seed=cfg.seed + DERIVE
        )
        derived[name] = levels
        diffs[name] = _maxdiff(levels, codebook(name, 64))
    worst = max(diffs.values())
    tol = float(cfg.c1.tol)
    claim = Claim(
        "C1",
        "weighted Lloyd/EM regenerates the BOF4/BOF4-S codebooks (I=64)",
        "Table 6 levels",
        {k: round(v, 6) for k, v in diffs.items()},
        worst <= tol,
        f"max |level - Table 6| <= {tol:g} for all four",
        f"{int(cfg.c1.n_samples):,} samples per codebook; worst {worst:.2e}",
    )
    return claim, {"derived": {k: v.tolist() for k, v in derived.items()}, "max_abs_diff": diffs}


def claim_c2(cfg: Any, ctx: Any, c1: dict[str, Any]) -> tuple[Claim, dict[str, Any]]:
    theory, vs_table, vs_data = {}, {}, {}
    for name in ctx.progress(["bof4-mse", "bof4s-mse"], desc="C2 integration"):
        metric, signed = BOF4_VARIANTS[name]
        levels = derive_codebook(64, metric=metric, signed=signed, method="theory")
        theory[name] = levels.tolist()
        vs_table[name] = _maxdiff(levels, codebook(name, 64))
        vs_data[name] = _maxdiff(levels, torch.tensor(c1["derived"][name]))
    tt, td = float(cfg.c2.tol_table), float(cfg.c2.tol_data)
    holds = max(vs_table.values()) <= tt and max(vs_data.values()) <= td
    claim = Claim(
        "C2",
        "theoretical (integration) and data-driven codebooks are practically equivalent",
        "< 1.3e-4 (-56.3 dB)",
        {"vs_table6": max(vs_table.values()), "vs_C1": max(vs_data.values())},
        holds,
        f"max diff vs Table 6 <= {tt:g} and vs C1 <= {td:g}",
        "BOF4(MSE), BOF4-S(MSE), I=64",
    )
    return claim, {"levels": theory, "vs_table6": vs_table, "vs_c1": vs_data}


# ---------------------------------------------------------------------------------------------- figures
def error_figure(errs: dict[str, Any], opq: dict[str, Any], path: Any, where: str = "N(0,1) weights") -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, metric in zip(axes[:2], ("mse", "mae")):
        for name, by_i in errs[metric].items():
            sizes = sorted(by_i)
            ax.plot(sizes, [by_i[i] / errs[metric]["nf4"][i] for i in sizes], "o-", label=name)
        ax.set_xscale("log", base=2)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("block size I")
        ax.set_ylabel(f"{metric.upper()} / {metric.upper()}(NF4)")
        ax.set_title(f"{metric.upper()} relative to NF4", fontsize=10)
    axes[0].legend(fontsize=8)
    sizes = sorted(opq["ratio"])
    axes[2].plot(sizes, [opq["ratio"][i] for i in sizes], "o-", color="C3")
    axes[2].set_xscale("log", base=2)
    axes[2].set_xlabel("block size I")
    axes[2].set_ylabel("MSE(BOF4-S+OPQ) / MSE(BOF4-S)")
    axes[2].set_title("OPQ", fontsize=10)
    fig.suptitle(where, fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def run(cfg: Any, ctx: Any) -> Results:
    """C1-C6, then the bench (``bench=true``); figures, codebooks.json and bench files in ``ctx.run_dir``.
    ``scale=real`` (a ``real`` section): C3-C6 on SmolLM2-135M-Instruct instead (:mod:`.real`)."""
    if cfg.get("real") is not None:
        from .real import run_real

        return run_real(cfg, ctx)
    from .bench import reproduce_bench
    from .lm import evaluate_arms, language_models, summarise_arm
    from .measure import contaminated_opq, gaussian_errors, model_errors

    c1, c1_raw = claim_c1(cfg, ctx)
    c2, c2_raw = claim_c2(cfg, ctx, c1_raw)
    sizes = [int(i) for i in cfg.errors.block_sizes]
    source = str(cfg.weights.source)
    if source not in ("gaussian", "model"):
        from iclr26_core.errors import UserError

        raise UserError(f"weights.source must be gaussian or model, got {source!r}")
    errs: dict[str, Any] = {}
    opq: dict[str, Any] = {}
    if source == "gaussian":
        errs["N(0,1)"] = gaussian_errors(cfg, ctx)
        opq["contaminated"] = contaminated_opq(cfg, ctx)
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    bench, benched = None, False
    for item in language_models(cfg.lm, ctx, seed=cfg.seed):
        model, key = item["model"], (item["arm"], item["name"])
        if source == "model" and item["arm"] == "headline" and item["name"] not in errs:
            errs[item["name"]], opq[item["name"]] = model_errors(model, cfg, ctx, _short(item["name"]))
        row = evaluate_arms(model, item["val"], cfg.lm, ctx, desc=f"C6 {item['arm']} seed {item['seed']}")
        rows.setdefault(key, []).append({"seed": item["seed"], **row})
        if not benched and item["arm"] == "headline":  # the first headline model's layers go into the bench
            bench, benched = reproduce_bench(cfg, ctx, model=model), True
        del model, item
    c6: dict[str, dict[str, Any]] = {"headline": {}, "outliers": {}}
    for (arm, name), arm_rows in rows.items():
        c6[arm][name] = summarise_arm(arm_rows)
        if arm == "outliers":
            o = cfg.lm.outlier_arm
            c6[arm][name]["what"] = f"{o.p:.1%} of the initial Linear weights x{o.factor:g}"
    c3, c4 = claim_c3(errs, sizes), claim_c4(errs, sizes)
    c5 = claim_c5(opq, cfg)
    c6_claim = claim_c6(c6)
    first = next(iter(errs.values()))
    figures = [
        error_figure(first, next(iter(opq.values())), ctx.run_dir / "error_vs_blocksize.png", _where(errs))
    ]
    books = {
        "table6_and_baselines": {n: codebook(n, 64).tolist() for n in CODEBOOK_NAMES},
        "c1_data_driven": c1_raw["derived"],
        "c2_theory": c2_raw["levels"],
        "other_block_sizes": {
            i: {n: codebook(n, i).tolist() for n in BOF4_VARIANTS} for i in sizes if i != 64
        },
    }
    (ctx.run_dir / "codebooks.json").write_text(json.dumps(books, indent=1))
    metrics: dict[str, Any] = {
        "c1": c1_raw["max_abs_diff"],
        "c2": {k: v for k, v in c2_raw.items() if k != "levels"},
        "weights_source": source,
        "errors": first if len(errs) == 1 else None,
        "errors_by_source": errs,
        "opq": next(iter(opq.values())) if len(opq) == 1 else None,
        "opq_by_source": opq,
        "lm": next(iter(c6["headline"].values())) if len(c6["headline"]) == 1 else None,
        "c6": c6,
    }
    if bench is not None:
        metrics["bench"] = bench
    return Results([c1, c2, c3, c4, c5, c6_claim], metrics=metrics, figures=figures)
