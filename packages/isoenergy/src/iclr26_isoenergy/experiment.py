"""One cell of the synthetic study: a toy world (θ or φ, α), a seed, SAE (β = 0) and SAE-A (β > 0), all metrics.

For each arm: R², L0, W against the full truth set and against {S_c}, mma, merged rate, the energy report's
counts and fractions, and (when asked) the gap table of the interventions: reconstructed, bimodal-only,
unimodal-only, and the two classic baselines (mean-centred, ∓Δ/2 shift) on the original embeddings.
"""

from __future__ import annotations

from typing import Any

import torch

from .energy import energy_report, restrict
from .gap import gap_table, mean_center, recall_at_1, shift_gap
from .recovery import dictionary_distance, max_cosine_agreement, merged_rate, r2_score
from .toy import IsoEnergyToy
from .training import train_aligned_sae

EVAL_SEED = 10_000  # evaluation pairs never reuse a training seed


def make_toy(cfg: Any, setting: Any) -> IsoEnergyToy:
    return IsoEnergyToy(
        d=int(cfg.toy.d),
        n_shared=int(cfg.toy.n_shared),
        n_image=int(cfg.toy.n_image),
        n_text=int(cfg.toy.n_text),
        active_shared=int(cfg.toy.active_shared),
        bias=float(cfg.toy.bias),
        noise=float(cfg.toy.noise),
        seed=int(cfg.toy.seed),
        concept_freq=str(cfg.toy.concept_freq),
        rotation_deg=float(setting.get("rotation_deg", 0.0)),
        text_amplitude=float(setting.text_amplitude),
        view_offset_deg=float(setting.get("view_offset_deg", 0.0)),
        gap_rank=int(setting.get("gap_rank", 0)),
    )


def score_sae(sae, toy: IsoEnergyToy, ei: torch.Tensor, et: torch.Tensor, eps: float) -> tuple[dict, Any]:
    """Recovery and reconstruction metrics of one trained SAE on evaluation pairs; also its energy report."""
    rep = energy_report(sae, ei, et, eps=eps)
    with torch.no_grad():
        x = torch.cat([ei, et])
        x_hat, z = sae(x)
    atoms = sae.atoms().detach()
    out = {
        "r2": r2_score(x, x_hat),
        "l0": float((z != 0).sum(dim=1).double().mean()),
        "W": dictionary_distance(toy.truth("full"), atoms),
        "W_shared": dictionary_distance(toy.truth("shared"), atoms),
        "mma": max_cosine_agreement(toy.truth("full"), atoms),
        "mma_shared": max_cosine_agreement(toy.truth("shared"), atoms),
        "merged": merged_rate(atoms, toy.atoms["image_shared"], toy.atoms["text_shared"], rep.labels),
        "counts": rep.counts,
        "energy_fractions": rep.fractions,
    }
    return out, rep


def baseline_gaps(ei: torch.Tensor, et: torch.Tensor, n: int, batch: int, seed: int) -> dict:
    """The gap table of the embeddings themselves: original, mean-centred, ∓Δ/2-shifted."""
    variants = {"original": (ei, et), "mean-centred": mean_center(ei, et), "shifted": shift_gap(ei, et)}
    return gap_table(variants, n=n, batch=batch, seed=seed)


def gap_interventions(
    sae, rep, ei: torch.Tensor, et: torch.Tensor, n: int, batch: int, seed: int, baselines: dict | None = None
) -> dict:
    """The gap table: reconstructed, bimodal-only, unimodal-only, then the baselines (computed unless given)."""
    variants = {
        "reconstructed": (restrict(sae, ei, rep, "all"), restrict(sae, et, rep, "all")),
        "bimodal-only": (restrict(sae, ei, rep, "bimodal"), restrict(sae, et, rep, "bimodal")),
        "unimodal-only": (restrict(sae, ei, rep, "unimodal"), restrict(sae, et, rep, "unimodal")),
    }
    table = gap_table(variants, n=n, batch=batch, seed=seed)
    return {**table, **(baselines or baseline_gaps(ei, et, n, batch, seed))}


def run_cell(
    cfg: Any,
    setting: Any,
    seed: int,
    arms: dict[str, dict[str, Any]],
    *,
    gaps: bool = False,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train every arm ({name: train kwargs overriding cfg.train}) on the same pairs; score each."""
    toy = make_toy(cfg, setting)
    img, txt = toy.sample(int(cfg.data.train_pairs), seed=seed)
    ei, et = toy.sample(int(cfg.data.eval_pairs), seed=EVAL_SEED + seed)
    n_w, batch = int(cfg.eval.wasserstein_n), int(cfg.eval.recall_batch)
    # the world's own cross-modal signal: recall@1 of the original evaluation pairs (chance 1/batch)
    out: dict[str, Any] = {"reports": {}, "recall_original": recall_at_1(ei, et, batch=batch, seed=seed)}
    baselines = baseline_gaps(ei, et, n_w, batch, seed) if gaps else None
    for arm, over in arms.items():
        kw = {
            "beta": float(cfg.train.beta),
            "n_atoms": int(cfg.sae.n_atoms),
            "k": int(cfg.sae.k),
            "normalize_atoms": bool(cfg.sae.normalize_atoms),
            "epochs": int(setting.get("epochs") or cfg.train.epochs),  # a cell may train longer
            "batch_pairs": int(cfg.train.batch_pairs),
            "lr": float(cfg.train.lr),
            "align": str(cfg.train.align),
            "mask_top1": bool(cfg.train.mask_top1),
            "schedule": str(cfg.train.get("schedule", "onecycle")),
            **over,
        }
        trained = train_aligned_sae(img, txt, seed=seed, device=device, **kw)
        metrics, rep = score_sae(trained.sae, toy, ei, et, float(cfg.eval.eps))
        metrics["seconds"] = round(trained.seconds, 2)
        metrics["beta"] = kw["beta"]
        metrics["epochs"] = kw["epochs"]
        metrics["final_loss"] = trained.history["loss"][-1]
        tail = trained.history["align"][-20:]  # the masked pair-code cosine term (−cos), end of training
        metrics["final_align"] = sum(tail) / len(tail)
        if gaps:
            metrics["gap"] = gap_interventions(trained.sae, rep, ei, et, n_w, batch, seed, baselines)
        out[arm] = metrics
        out["reports"][arm] = rep
        out.setdefault("_sae", {})[arm] = trained.sae
    out["_data"] = (img, txt, ei, et)
    return out
