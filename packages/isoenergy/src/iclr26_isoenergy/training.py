"""Training SAE (β = 0) and SAE-A (β > 0) on paired embeddings, on the core's accelerate loop.

A batch is b pairs stacked as [b image rows; b text rows]; its loss is Eq. 1,
L = mean_rows ‖x − x̂‖² + β·L_align(z_I, z_T). Adam, OneCycle schedule (max = ``lr``), grad-clip 1.0,
``epochs`` passes of ⌊N / b⌋ batches over a seeded permutation (the official demo's recipe).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from .config import ALIGN
from .losses import alignment_loss, iso_energy_loss, reconstruction_loss
from .sae import MatchingPursuitSAE
from .validate import IsoEnergyError, check_beta, check_pairs


@dataclass
class TrainedSAE:
    """What `train_aligned_sae` returns: the SAE (eval mode), per-step ``history`` (loss, rec, align, lr),
    the wall-clock ``seconds`` and the ``config`` it was trained with."""

    sae: MatchingPursuitSAE
    history: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0
    config: dict[str, Any] = field(default_factory=dict)


def one_cycle(
    step: int, total: int, pct_start: float = 0.3, div_factor: float = 25.0, final_div_factor: float = 1e4
) -> float:
    """Multiplier of the max lr at ``step`` of ``total``: torch's ``OneCycleLR`` (cosine, two phases).

    Warm-up from max/div_factor to max over the first ``pct_start·total − 1`` steps, then cosine decay to
    max/(div_factor·final_div_factor) at step ``total − 1``.
    """
    initial, final = 1.0 / div_factor, 1.0 / (div_factor * final_div_factor)
    up_end = float(pct_start * total) - 1
    if step <= up_end:
        start, end, pct = initial, 1.0, step / up_end
    else:
        start, end, pct = 1.0, final, (step - up_end) / (total - 1 - up_end)
    pct = min(max(pct, 0.0), 1.0)
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def shuffle_some_pairs(txt: torch.Tensor, fraction: float, seed: int) -> torch.Tensor:
    """A copy of ``txt`` in which a ``fraction`` of rows is permuted among themselves (mismatched pairs)."""
    if not 0.0 <= fraction <= 1.0:
        raise IsoEnergyError(f"shuffle_pairs must be in [0, 1], got {fraction}")
    m = round(fraction * txt.shape[0])
    if m < 2:
        return txt
    g = torch.Generator().manual_seed(int(seed) + 7919)
    chosen = torch.randperm(txt.shape[0], generator=g)[:m]
    out = txt.clone()
    out[chosen] = txt[chosen.roll(1)]  # a cyclic shift: no chosen pair keeps its own caption
    return out


def train_aligned_sae(
    img: torch.Tensor,
    txt: torch.Tensor,
    *,
    beta: float,
    n_atoms: int | None = None,
    k: int = 20,
    epochs: int = 5,
    batch_pairs: int = 512,
    lr: float = 5e-4,
    align: str = "cosine",
    seed: int = 0,
    normalize_atoms: bool = False,
    mask_top1: bool = True,
    grad_clip: float = 1.0,
    shuffle_pairs: float = 0.0,
    schedule: str = "onecycle",
    device: str = "cpu",
    progress: bool = False,
    desc: str | None = None,
) -> TrainedSAE:
    """Train an MP-SAE on matched pairs (img[i], txt[i]) with Eq. 1; β = 0 is the plain SAE.

    ``align``: "cosine" (top-1 masked pair cosine, Eq. 1) or "energy" (explicit Iso-Energy loss).
    ``schedule``: "onecycle" (the paper's, max = ``lr``) or "constant" (a pilot control).
    Raises `IsoEnergyError` for bad input (unpaired rows, other dimensions, NaN, β < 0, k > n_atoms, fewer
    pairs than one batch) and `iclr26_core.errors.TrainingDiverged` for a NaN loss.
    """
    from iclr26_core.train import TrainConfig, batch_indices, train_lm

    img, txt = check_pairs(img, txt)
    beta = check_beta(beta)
    if align not in ALIGN:
        raise IsoEnergyError(f"unknown align {align!r}; choose one of {', '.join(ALIGN)}")
    epochs, batch_pairs = int(epochs), int(batch_pairs)
    if epochs < 1 or batch_pairs < 1:
        raise IsoEnergyError(f"epochs and batch_pairs must be >= 1, got {epochs} and {batch_pairs}")
    if not lr > 0:
        raise IsoEnergyError(f"lr must be > 0, got {lr}")
    if schedule not in ("onecycle", "constant"):
        raise IsoEnergyError(f"unknown schedule {schedule!r}; choose onecycle or constant")
    n = img.shape[0]
    if n < batch_pairs:
        raise IsoEnergyError(f"{n} pairs are fewer than one batch of {batch_pairs}; lower batch_pairs")
    sae = MatchingPursuitSAE(img.shape[1], n_atoms, k, normalize_atoms, seed=seed)
    txt = shuffle_some_pairs(txt, float(shuffle_pairs), seed)
    steps = epochs * (n // batch_pairs)

    def multiplier(step: int) -> float:
        return one_cycle(step, steps) if schedule == "onecycle" else 1.0

    history: dict[str, list[float]] = {"loss": [], "rec": [], "align": [], "lr": []}

    def batches(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = batch_indices(n, batch_pairs, step, seed)
        return img[idx], txt[idx]

    def loss_fn(model: MatchingPursuitSAE, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        xi, xt = batch
        x = torch.cat([xi, xt])
        x_hat, z = model(x)
        rec = reconstruction_loss(x, x_hat)
        z_img, z_txt = z[: xi.shape[0]], z[xi.shape[0] :]
        with torch.set_grad_enabled(beta > 0 and torch.is_grad_enabled()):
            if align == "cosine":
                term = alignment_loss(z_img, z_txt, mask_top1=mask_top1)
            else:
                term = iso_energy_loss(z_img, z_txt)
        history["rec"].append(float(rec.detach()))
        history["align"].append(float(term.detach()))
        return rec + beta * term if beta > 0 else rec

    params = list(sae.parameters())
    try:  # the fused kernel is faster for small modules on a CPU
        opt = torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError):
        opt = torch.optim.Adam(params, lr=lr)
    cfg = TrainConfig(
        steps=steps,
        batch_size=batch_pairs,
        lr=lr,
        grad_clip=grad_clip or None,
        seed=seed,
        device=device,
        progress=progress,
        desc=desc or f"train {'SAE-A' if beta > 0 else 'SAE'}",
    )
    t0 = time.perf_counter()
    result = train_lm(
        sae,
        None,
        cfg=cfg,
        loss_fn=loss_fn,
        optimizer=opt,
        batches=batches,
        lr_schedule=multiplier,
        on_step=lambda s, loss: history["lr"].append(lr * multiplier(s)),
    )
    history["loss"] = list(result.losses)
    sae = sae.cpu().eval()
    config = {
        **sae.config(),
        "beta": beta,
        "epochs": epochs,
        "batch_pairs": batch_pairs,
        "lr": lr,
        "align": align,
        "mask_top1": mask_top1,
        "grad_clip": grad_clip,
        "shuffle_pairs": shuffle_pairs,
        "schedule": schedule,
        "seed": seed,
        "steps": steps,
        "pairs": n,
    }
    return TrainedSAE(sae=sae, history=history, seconds=time.perf_counter() - t0, config=config)


def beta_sweep(
    img: torch.Tensor,
    txt: torch.Tensor,
    betas: list[float] | tuple[float, ...],
    *,
    max_r2_drop: float = 0.05,
    val_fraction: float = 0.2,
    seed: int = 0,
    **train_kw: Any,
) -> dict[str, Any]:
    """Pick the largest β whose validation R² is within ``max_r2_drop`` of β = 0's (no ground truth used).

    The pairs are split once (seeded) into train / validation; every β trains on the same split.
    Returns {"betas", "r2", "chosen"}.
    """
    from .recovery import r2_score

    img, txt = check_pairs(img, txt)
    betas = sorted({0.0, *(check_beta(b) for b in betas)})
    perm = torch.randperm(img.shape[0], generator=torch.Generator().manual_seed(int(seed)))
    n_val = max(1, round(val_fraction * img.shape[0]))
    val, tr = perm[:n_val], perm[n_val:]
    r2 = []
    for b in betas:
        trained = train_aligned_sae(img[tr], txt[tr], beta=b, seed=seed, **train_kw)
        with torch.no_grad():
            x = torch.cat([img[val], txt[val]])
            r2.append(r2_score(x, trained.sae(x)[0]))
    ok = [b for b, r in zip(betas, r2) if r >= r2[0] - max_r2_drop]
    return {"betas": betas, "r2": r2, "chosen": max(ok)}
