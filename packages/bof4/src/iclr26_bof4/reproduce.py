"""The paper's claims C1-C6 in miniature (``iclr26-bof4 reproduce``), one function per claim.

Every verdict is computed from the measured numbers with the rule of the spec; nothing is typed in.
Setups (all seeded from ``cfg.seed``; held-out samples never reuse a derivation seed):

* C1 — data-driven weighted Lloyd (2^22 N(0,1) samples, I = 64) regenerates Table 6.
* C2 — the numerical-integration solver agrees with Table 6 and with C1.
* C3/C4 — MSE/MAE of held-out N(0,1) weights per codebook and block size, relative to NF4.
* C5 — OPQ on a contaminated Gaussian (0.2 % of weights ×8): MSE ratio with/without OPQ over I.
* C6 — a tiny llama trained on pydoc text, every Linear quantised at I = 64: weight MSE and ΔPPL.
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import torch

from iclr26_core.report import Claim, Results, pyplot, save_figure

from .codebooks import codebook
from .config import CODEBOOK_NAMES
from .lloyd import derive_codebook
from .quantizer import quantization_error

FAMILY = {
    "bof4-mse": ("mse", False),
    "bof4-mae": ("mae", False),
    "bof4s-mse": ("mse", True),
    "bof4s-mae": ("mae", True),
}
# seed offsets so that no experiment reuses another's random numbers
DERIVE, HELDOUT, CONTAMINATED, BENCH = 0, 10_000, 20_000, 30_000


def _available(name: str, block_size: int) -> bool:
    return not (name == "af4" and block_size != 64)


def _maxdiff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


# ------------------------------------------------------------------------------------------------ C1, C2
def claim_c1(cfg: Any, ctx: Any) -> tuple[Claim, dict[str, Any]]:
    derived, diffs = {}, {}
    for name in ctx.progress(list(FAMILY), desc="C1 Lloyd codebooks"):
        metric, signed = FAMILY[name]
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
        metric, signed = FAMILY[name]
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


# ------------------------------------------------------------------------------------------------ C3, C4
def measure_errors(cfg: Any, ctx: Any) -> dict[str, Any]:
    """{"mse"|"mae": {codebook: {I: mean over seeds}}} on held-out N(0,1) weights."""
    sizes = [int(i) for i in cfg.errors.block_sizes]
    out: dict[str, dict[str, dict[int, float]]] = {"mse": {}, "mae": {}}
    jobs = [
        (s, i, c)
        for s in range(int(cfg.errors.seeds))
        for i in sizes
        for c in CODEBOOK_NAMES
        if _available(c, i)
    ]
    sums: dict[tuple[str, int], list[float]] = {}
    weights: dict[int, torch.Tensor] = {}
    for seed, block, name in ctx.progress(jobs, desc="C3/C4 held-out errors"):
        if seed not in weights:
            gen = torch.Generator().manual_seed(cfg.seed + HELDOUT + seed)
            weights = {seed: torch.randn(int(cfg.errors.n_samples), generator=gen)}
        err = quantization_error(weights[seed], name, block)
        acc = sums.setdefault((name, block), [0.0, 0.0])
        acc[0] += err["mse"] / cfg.errors.seeds
        acc[1] += err["mae"] / cfg.errors.seeds
    for (name, block), (mse, mae) in sums.items():
        out["mse"].setdefault(name, {})[block] = mse
        out["mae"].setdefault(name, {})[block] = mae
    return out


def _rel(errs: dict[str, dict[int, float]], name: str, block: int) -> float:
    return errs[name][block] / errs["nf4"][block]


def claim_c3(errs: dict[str, Any], sizes: list[int]) -> Claim:
    mse = errs["mse"]
    every_i = all(mse["bof4-mse"][i] < mse["nf4"][i] for i in sizes)
    at64 = 64 in sizes and mse["bof4-mse"][64] < mse["af4"][64] and mse["af4"][64] > mse["nf4"][64]
    measured = {f"BOF4/NF4@{i}": round(_rel(mse, "bof4-mse", i), 4) for i in sizes}
    if 64 in sizes:
        measured["AF4/NF4@64"] = round(_rel(mse, "af4", 64), 4)
    return Claim(
        "C3",
        "BOF4 lowers the quantisation MSE vs NF4 at every block size, and vs AF4",
        "MSE 1.566 vs 1.637 (NF4), 1.762 (AF4); Fig. 2",
        measured,
        every_i and at64,
        "MSE(BOF4) < MSE(NF4) at every I; at I=64 MSE(BOF4) < MSE(AF4) and MSE(AF4) > MSE(NF4)",
        "held-out N(0,1) weights, mean over seeds",
    )


def claim_c4(errs: dict[str, Any], sizes: list[int]) -> Claim:
    mse, mae = errs["mse"], errs["mae"]
    below_bof4 = all(mse["bof4s-mse"][i] < mse["bof4-mse"][i] for i in sizes)
    rel64 = _rel(mse, "bof4s-mse", 64)
    lowest_mae = min(mae, key=lambda c: mae[c].get(64, math.inf))
    holds = below_bof4 and rel64 <= 0.92 and lowest_mae == "bof4s-mae"
    measured = {f"BOF4-S/NF4@{i}": round(_rel(mse, "bof4s-mse", i), 4) for i in sizes}
    measured["lowest MAE@64"] = lowest_mae
    measured["BOF4-S(MAE) MAE/NF4@64"] = round(_rel(mae, "bof4s-mae", 64), 4)
    return Claim(
        "C4",
        "signed absmax (BOF4-S) reduces the error further",
        "MSE 1.441 vs 1.566 (-8 %)",
        measured,
        holds,
        "MSE(BOF4-S) < MSE(BOF4) at every I, <= 0.92 x MSE(NF4) at I=64, BOF4-S(MAE) lowest MAE at I=64",
        "MSE codebooks scored on MSE, MAE codebooks on MAE",
    )


# ------------------------------------------------------------------------------------------------------ C5
def contaminated_gaussian(n: int, p: float, factor: float, generator: torch.Generator) -> torch.Tensor:
    """w ~ N(0,1); each weight independently with probability ``p`` multiplied by ``factor``. Shape [n]."""
    w = torch.randn(n, generator=generator)
    hit = torch.rand(n, generator=generator) < p
    return torch.where(hit, w * factor, w)


def claim_c5(cfg: Any, ctx: Any) -> tuple[Claim, dict[str, Any]]:
    sizes = [int(i) for i in cfg.opq.block_sizes]
    ratios = {i: 0.0 for i in sizes}
    frac = {i: 0.0 for i in sizes}
    seeds = int(cfg.opq.seeds)
    for s in ctx.progress(range(seeds), desc="C5 OPQ"):
        gen = torch.Generator().manual_seed(cfg.seed + CONTAMINATED + s)
        w = contaminated_gaussian(
            int(cfg.opq.n_samples), float(cfg.opq.p_outlier), float(cfg.opq.factor), gen
        )
        for i in sizes:
            plain = quantization_error(w, "bof4s-mse", i)
            opq = quantization_error(w, "bof4s-mse", i, opq_q=float(cfg.opq.q))
            ratios[i] += opq["mse"] / plain["mse"] / seeds
            frac[i] += opq["outlier_fraction"] / seeds
    decreasing = all(ratios[a] > ratios[b] for a, b in itertools.pairwise(sizes))
    holds = ratios.get(64, math.inf) <= 0.8 and decreasing
    claim = Claim(
        "C5",
        "OPQ removes the outlier mismatch; the benefit grows with the block size",
        "MSE 1.441 -> 1.367 (Table 1); Fig. 9",
        {f"I={i}": round(r, 4) for i, r in ratios.items()},
        holds,
        "MSE(BOF4-S+OPQ)/MSE(BOF4-S) <= 0.8 at I=64 and strictly decreasing in I",
        "outlier fraction " + ", ".join(f"{frac[i]:.2%}" for i in sizes) + f" (q={cfg.opq.q})",
    )
    return claim, {"ratio": ratios, "outlier_fraction": frac}


# ------------------------------------------------------------------------------------------------------ C6
def claim_c6(cfg: Any, ctx: Any) -> tuple[Claim, dict[str, Any]]:
    from .lm import quantised_lm_errors

    res = quantised_lm_errors(cfg.lm, ctx, seed=cfg.seed)
    mse, dppl = res["weight_mse"], res["delta_ppl"]
    ratio = mse["bof4s-mse+opq"] / mse["nf4"]
    holds = ratio <= 0.88 and dppl["bof4s-mse+opq"] <= dppl["nf4"]
    measured = {"MSE ratio vs NF4": round(ratio, 4), **{f"dPPL {k}": round(v, 4) for k, v in dppl.items()}}
    claim = Claim(
        "C6",
        "BOF4-S+OPQ degrades a language model least",
        "PPL 8.43 vs 8.53 (NF4), 8.51 (AF4)",
        measured,
        holds,
        "weight MSE(BOF4-S+OPQ) <= 0.88 x NF4's and mean dPPL(BOF4-S+OPQ) <= NF4's",
        f"{res['model']}: FP32 PPL {res['ppl_fp']:.3f}; mean over {len(res['seeds'])} seed(s)",
    )
    return claim, res


# ---------------------------------------------------------------------------------------------- figures
def error_figure(errs: dict[str, Any], opq: dict[str, Any], path: Any) -> str:
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
        ax.set_title(f"{metric.upper()} relative to NF4 (N(0,1) weights)")
    axes[0].legend(fontsize=8)
    sizes = sorted(opq["ratio"])
    axes[2].plot(sizes, [opq["ratio"][i] for i in sizes], "o-", color="C3")
    axes[2].set_xscale("log", base=2)
    axes[2].set_xlabel("block size I")
    axes[2].set_ylabel("MSE(BOF4-S+OPQ) / MSE(BOF4-S)")
    axes[2].set_title("OPQ on a contaminated Gaussian")
    fig.tight_layout()
    return save_figure(fig, path)


def run(cfg: Any, ctx: Any) -> Results:
    """Run C1-C6 (and the peers bench when asked or available); figures and codebooks.json in ctx.run_dir."""
    c1, c1_raw = claim_c1(cfg, ctx)
    c2, c2_raw = claim_c2(cfg, ctx, c1_raw)
    sizes = [int(i) for i in cfg.errors.block_sizes]
    errs = measure_errors(cfg, ctx)
    c3, c4 = claim_c3(errs, sizes), claim_c4(errs, sizes)
    c5, c5_raw = claim_c5(cfg, ctx)
    c6, c6_raw = claim_c6(cfg, ctx)
    lm_model = c6_raw.pop("_model")
    figures = [error_figure(errs, c5_raw, ctx.run_dir / "error_vs_blocksize.png")]
    books = {
        "table6_and_baselines": {n: codebook(n, 64).tolist() for n in CODEBOOK_NAMES},
        "c1_data_driven": c1_raw["derived"],
        "c2_theory": c2_raw["levels"],
        "other_block_sizes": {i: {n: codebook(n, i).tolist() for n in FAMILY} for i in sizes if i != 64},
    }
    (ctx.run_dir / "codebooks.json").write_text(json.dumps(books, indent=1))
    metrics: dict[str, Any] = {
        "c1": c1_raw["max_abs_diff"],
        "c2": {k: v for k, v in c2_raw.items() if k != "levels"},
        "errors": errs,
        "opq": c5_raw,
        "lm": c6_raw,
    }
    from .bench import maybe_bench

    bench = maybe_bench(cfg, ctx, model=lm_model)
    if bench is not None:
        metrics["bench"] = bench
    return Results([c1, c2, c3, c4, c5, c6], metrics=metrics, figures=figures)
