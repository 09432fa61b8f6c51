"""DeLiVR's training recipe (spec Method 11) on the core loop `iclr26_core.train.train_lm`: AdamW, warm-up + cosine
(or the official warm-up ×0.1 → 1 and warm restarts), gradient clipping, optional EMA (evaluated with the EMA weights),
the official augmentation.

Batches come from ``sample(step) -> (frames [B, T, 3, H, W], target [B, 3, H, W])`` so the same code trains on
in-memory synthetic clips (`reproduce`) and on a user's frame folders (`train`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from iclr26_core.train import TrainConfig, train_lm

from .loss import LossWeights, delivr_loss


@dataclass
class TrainSettings(TrainConfig):
    """`iclr26_core.train.TrainConfig` with DeLiVR's defaults (the miniature: batch 4, lr 1e-3, AdamW's default
    betas, weight decay 0.01, grad clip 0.5) and the choice of schedule."""

    steps: int = 300
    batch_size: int = 4
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    min_lr_ratio: float = 0.01
    grad_clip: float | None = 0.5
    schedule: str = (
        "cosine"  # cosine: warm-up then cosine to lr·min_lr_ratio; restarts: the official schedule
    )
    restart_t0: int = 500  # CosineAnnealingWarmRestarts(T_0, T_mult=2, eta_min=1e-6)


@dataclass
class TrainLog:
    losses: list[float] = field(default_factory=list)
    terms: list[dict[str, float]] = field(default_factory=list)  # every loss term per step
    evals: list[tuple[int, float]] = field(default_factory=list)  # (step, validation metric)
    seconds: float = 0.0


def lr_factor(step: int, s: TrainSettings) -> float:
    """Multiplier of the base lr at ``step`` (the ``restarts`` branch reproduces the official schedule)."""
    if s.warmup_steps and step < s.warmup_steps:
        return 0.1 + 0.9 * step / s.warmup_steps
    k = step - s.warmup_steps
    if s.schedule == "restarts":
        t_i = s.restart_t0
        while k >= t_i:
            k -= t_i
            t_i *= 2
        eta_min = 1e-6 / s.lr
        return eta_min + (1 - eta_min) * 0.5 * (1 + math.cos(math.pi * k / t_i))
    if s.schedule != "cosine":
        raise ValueError(f"schedule must be 'cosine' or 'restarts', got {s.schedule!r}")
    span = max(s.steps - s.warmup_steps, 1)
    return s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(k / span, 1.0)))


def augment(frames: torch.Tensor, target: torch.Tensor, gen: torch.Generator, max_deg: float = 8.0):
    """Official augmentation: h-flip with p = 0.5; with p = 0.9 one rotation U(−8°, 8°) of all frames and the
    target (bilinear, reflection padding). frames [B, T, 3, H, W], target [B, 3, H, W]."""
    b, t = frames.shape[:2]
    flip = torch.rand(b, generator=gen) < 0.5
    frames = torch.where(flip[:, None, None, None, None], frames.flip(-1), frames)
    target = torch.where(flip[:, None, None, None], target.flip(-1), target)
    rotate = torch.rand(b, generator=gen) < 0.9
    angle = torch.deg2rad((torch.rand(b, generator=gen) * 2 - 1) * max_deg) * rotate
    cos, sin = torch.cos(angle), torch.sin(angle)
    zero = torch.zeros_like(cos)
    theta = torch.stack([torch.stack([cos, -sin, zero], -1), torch.stack([sin, cos, zero], -1)], 1)
    both = torch.cat([frames, target[:, None]], 1).flatten(1, 2)  # [B, 3(T+1), H, W]
    grid = F.affine_grid(theta.to(both), list(both.shape), align_corners=False)
    both = F.grid_sample(both, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
    both = both.view(b, t + 1, 3, *both.shape[-2:])
    return both[:, :t], both[:, t]


def train_delivr(
    model,
    sample: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    settings: TrainSettings,
    *,
    evaluate: Callable[[torch.nn.Module], float] | None = None,
    weights: LossWeights | None = None,
) -> tuple[torch.nn.Module, TrainLog]:
    """Train ``model`` for ``settings.steps`` steps with `iclr26_core.train.train_lm`; returns (the model to
    evaluate — the EMA copy when ``settings.ema`` > 0 — and the log). ``evaluate(model) -> float`` runs every
    ``eval_every`` steps and at the end. Raises `TrainingDiverged` on a non-finite loss."""
    log = TrainLog()

    def loss_fn(m, batch) -> torch.Tensor:
        frames, target = batch
        terms = delivr_loss(m(frames), target, weights)
        log.terms.append({k: float(v.detach()) for k, v in terms.items()})
        return terms["total"]

    if settings.schedule not in ("cosine", "restarts"):
        raise ValueError(f"schedule must be 'cosine' or 'restarts', got {settings.schedule!r}")
    res = train_lm(
        model,
        None,
        cfg=settings,
        loss_fn=loss_fn,
        batches=sample,
        lr_schedule=lambda step: lr_factor(step, settings),
        eval_fn=evaluate,
    )
    log.losses, log.evals, log.seconds = res.losses, res.evals, res.seconds
    final = res.ema_model if res.ema_model is not None else model
    return final.eval(), log
