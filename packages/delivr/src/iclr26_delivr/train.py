"""An explicit training loop for DeLiVR (spec Method 11): AdamW, warm-up + cosine (or the official warm restarts),
gradient clipping, optional EMA (evaluate with the EMA weights), augmentation, accelerate for device placement.

The loop draws batches from ``sample(step) -> (frames [B, T, 3, H, W], target [B, 3, H, W])`` so the same code
trains on in-memory synthetic clips (`reproduce`) and on a user's frame folders (`train`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from iclr26_core.errors import TrainingDiverged

from .loss import LossWeights, delivr_loss


@dataclass
class TrainSettings:
    steps: int = 300
    batch: int = 4
    lr: float = 1e-3
    weight_decay: float = 0.01
    schedule: str = (
        "cosine"  # cosine: warm-up then cosine to lr·min_lr_ratio; restarts: the official schedule
    )
    warmup: int = 0  # steps of the linear warm-up from 0.1·lr
    min_lr_ratio: float = 0.01
    restart_t0: int = 500  # CosineAnnealingWarmRestarts(T_0, T_mult=2, eta_min=1e-6)
    grad_clip: float = 0.5
    ema: float = 0.0  # 0 disables; the official value is 0.999
    eval_every: int = 0
    seed: int = 0
    device: str = "auto"
    progress: bool = True
    desc: str = "train"
    position: int | None = None  # tqdm bar line (parallel workers)


@dataclass
class TrainLog:
    losses: list[float] = field(default_factory=list)
    terms: list[dict[str, float]] = field(default_factory=list)
    evals: list[tuple[int, float]] = field(default_factory=list)  # (step, validation metric)
    seconds: float = 0.0


def lr_factor(step: int, s: TrainSettings) -> float:
    """Multiplier of the base lr at ``step`` (the ``restarts`` branch reproduces the official schedule)."""
    if s.warmup and step < s.warmup:
        return 0.1 + 0.9 * step / s.warmup
    k = step - s.warmup
    if s.schedule == "restarts":
        t_i = s.restart_t0
        while k >= t_i:
            k -= t_i
            t_i *= 2
        eta_min = 1e-6 / s.lr
        return eta_min + (1 - eta_min) * 0.5 * (1 + math.cos(math.pi * k / t_i))
    if s.schedule != "cosine":
        raise ValueError(f"schedule must be 'cosine' or 'restarts', got {s.schedule!r}")
    span = max(s.steps - s.warmup, 1)
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
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> tuple[torch.nn.Module, TrainLog]:
    """Train ``model`` for ``settings.steps`` steps; returns (the model to evaluate — the EMA copy when
    ``settings.ema`` > 0 — and the log). ``evaluate(model) -> float`` runs every ``eval_every`` steps and at the
    end. Raises `TrainingDiverged` on a non-finite loss."""
    from accelerate import Accelerator
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    from iclr26_core.cli import progress, seed_everything

    seed_everything(settings.seed)
    accel = Accelerator(cpu=settings.device == "cpu")
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, settings))
    model, opt = accel.prepare(model, opt)
    ema = None
    if settings.ema > 0:
        ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(settings.ema), use_buffers=True)
    log = TrainLog()
    steps = range(settings.steps)
    bar = (
        progress(steps, total=settings.steps, desc=settings.desc, position=settings.position)
        if settings.progress
        else steps
    )
    t0 = time.perf_counter()
    model.train()
    for step in bar:
        frames, target = sample(step)
        out = model(frames.to(accel.device))
        terms = delivr_loss(out, target.to(accel.device), weights)
        loss = terms["total"]
        if not torch.isfinite(loss.detach()):
            raise TrainingDiverged(
                f"the training loss became {float(loss.detach())} at step {step}; lower train.lr "
                f"(now {settings.lr}) or check the frames"
            )
        opt.zero_grad(set_to_none=True)
        accel.backward(loss)
        if settings.grad_clip:
            accel.clip_grad_norm_(model.parameters(), settings.grad_clip)
        opt.step()
        sched.step()
        if ema is not None:
            ema.update_parameters(model)
        values = {k: float(v.detach()) for k, v in terms.items()}
        log.losses.append(values["total"])
        log.terms.append(values)
        if on_step is not None:
            on_step(step, values)
        if settings.progress and hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{values['total']:.4f}", refresh=False)
        last = step + 1 == settings.steps
        if evaluate is not None and ((settings.eval_every and (step + 1) % settings.eval_every == 0) or last):
            current = ema.module if ema is not None else model
            current.eval()
            with torch.no_grad():
                log.evals.append((step + 1, float(evaluate(current))))
            model.train()
    log.seconds = time.perf_counter() - t0
    final = accel.unwrap_model(ema.module if ema is not None else model)
    final.eval()
    return final, log
