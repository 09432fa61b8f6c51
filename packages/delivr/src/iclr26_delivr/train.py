"""DeLiVR's training recipe (spec Method 11) on the core loop `iclr26_core.train.train_lm`: AdamW, warm-up + cosine
(or the official warm-up ×0.1 → 1 and warm restarts), gradient clipping, optional EMA (evaluated with the EMA weights),
the official augmentation, bf16 autocast on a GPU, checkpoints to resume from.

The official training (``train_video5.py`` with ``derain_heavy.yaml``) puts every parameter, the angle head's
included, in one ``AdamW(model.parameters(), lr=2e-4)`` group (torch's defaults: ε = 1e-8, weight decay 0.01) and
adds the angle regulariser (1e-3) and the Lie-velocity regulariser (0.01) at full weight from the first step. That
is the default here. ``head_lr_mult``/``head_eps`` (an own parameter group for the angle head) and ``reg_warmup``
(the two regularisers ramped in) are options for experiments, not the paper's recipe.

Batches come from ``sample(step) -> (frames [B, T, 3, H, W], target [B, 3, H, W])`` (plus, for the oracle arm
of `reproduce`, the true angles [B, T] in radians that replace the angle head's) so the same code trains on
in-memory synthetic clips (`reproduce`) and on a user's frame folders (`train`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from iclr26_core.train import TrainConfig, train_lm

from .loss import LossWeights, delivr_loss

HEAD_PREFIX = "so3_head."  # the angle head's parameters (its own group when head_lr_mult/head_eps differ)
_KEYS = {  # config key (conf/*.yaml ``train.*``) -> TrainSettings field
    "steps": "steps",
    "batch": "batch_size",
    "lr": "lr",
    "weight_decay": "weight_decay",
    "schedule": "schedule",
    "warmup": "warmup_steps",
    "grad_clip": "grad_clip",
    "ema": "ema",
    "eval_every": "eval_every",
    "head_lr_mult": "head_lr_mult",
    "head_eps": "head_eps",
    "reg_warmup": "reg_warmup",
    "precision": "precision",
    "checkpoint_every": "checkpoint_every",
}


@dataclass
class TrainSettings(TrainConfig):
    """`iclr26_core.train.TrainConfig` with DeLiVR's defaults (the miniature: batch 4, lr 1e-3, AdamW's default
    betas, weight decay 0.01, grad clip 0.5), the choice of schedule and the options above."""

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
    head_lr_mult: float = 1.0  # the angle head's lr = lr × this (official: 1, one group)
    head_eps: float = 1e-8  # AdamW ε of the angle head (official: torch's default 1e-8)
    reg_warmup: int = 0  # steps over which the angle/velocity regularisers ramp in from 0 (official: 0)
    precision: str = "auto"  # auto: bf16 autocast on CUDA, fp32 elsewhere; or "bf16", "fp32"

    def __post_init__(self):
        if self.schedule not in ("cosine", "restarts"):
            raise ValueError(f"schedule must be 'cosine' or 'restarts', got {self.schedule!r}")
        if self.precision not in ("auto", "bf16", "fp32"):
            raise ValueError(f"precision must be auto, bf16 or fp32, got {self.precision!r}")
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(f"steps and batch must be >= 1, got {self.steps} and {self.batch_size}")
        if self.lr <= 0 or self.head_lr_mult <= 0 or self.head_eps <= 0 or self.reg_warmup < 0:
            raise ValueError("lr, head_lr_mult and head_eps must be > 0 and reg_warmup >= 0")

    @classmethod
    def from_config(cls, node, **values) -> TrainSettings:
        """The settings of a composed config's ``train`` node (keys as in conf/*.yaml); ``values`` (TrainSettings
        field names: steps, seed, device, desc, ...) override it. The one place settings are built from a config."""
        known = {f.name for f in fields(cls)}
        out = {_KEYS[k]: v for k, v in dict(node).items() if k in _KEYS}
        out.update(values)
        unknown = sorted(set(out) - known)
        if unknown:
            raise ValueError(f"unknown training settings: {', '.join(unknown)}")
        if out.get("grad_clip") is not None:
            out["grad_clip"] = float(out["grad_clip"]) or None
        return cls(**out)

    def autocast_dtype(self, device_type: str) -> torch.dtype | None:
        """bf16 when asked for (or ``auto`` on CUDA), else None (fp32)."""
        if self.precision == "bf16" or (self.precision == "auto" and device_type == "cuda"):
            return torch.bfloat16
        return None


@dataclass
class TrainLog:
    losses: list[float] = field(default_factory=list)
    terms: list[dict[str, float]] = field(default_factory=list)  # every loss term per step
    evals: list[tuple[int, float]] = field(default_factory=list)  # (step, validation metric)
    seconds: float = 0.0
    start: int = 0  # the step training started (or resumed) from


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
    span = max(s.steps - s.warmup_steps, 1)
    return s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(k / span, 1.0)))


def reg_factor(step: int, s: TrainSettings) -> float:
    """Weight multiplier of the angle and velocity regularisers at ``step``: 1 (official) or a linear ramp."""
    return 1.0 if s.reg_warmup <= 0 else min(1.0, step / s.reg_warmup)


def make_optimizer(model: torch.nn.Module, s: TrainSettings) -> torch.optim.AdamW:
    """AdamW over every trainable parameter: one group (official), or the angle head in its own group with
    lr × ``head_lr_mult`` and ε = ``head_eps`` when either differs from the default."""
    head = [p for n, p in model.named_parameters() if p.requires_grad and n.startswith(HEAD_PREFIX)]
    rest = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith(HEAD_PREFIX)]
    kw = {"lr": s.lr, "betas": s.betas, "weight_decay": s.weight_decay}
    if (s.head_lr_mult == 1.0 and s.head_eps == 1e-8) or not head:
        return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], **kw)
    groups = [{"params": rest}, {"params": head, "lr": s.lr * s.head_lr_mult, "eps": s.head_eps}]
    return torch.optim.AdamW(groups, **kw)


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


def resume_step(directory: str | Path) -> int:
    """The step a ``checkpoint_dir/step-N`` training state was written at (read with weights_only=True)."""
    from iclr26_core.errors import CheckpointError

    path = Path(directory) / "trainer_state.pt"
    try:
        return int(torch.load(path, weights_only=True)["step"])
    except (OSError, RuntimeError, KeyError) as exc:
        raise CheckpointError(f"cannot resume from {str(directory)!r}: {str(exc).splitlines()[0]}") from None


def train_delivr(
    model,
    sample: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    settings: TrainSettings,
    *,
    evaluate: Callable[[torch.nn.Module], float] | None = None,
    weights: LossWeights | None = None,
    resume_from: str | Path | None = None,
) -> tuple[torch.nn.Module, TrainLog]:
    """Train ``model`` for ``settings.steps`` steps with `iclr26_core.train.train_lm`; returns (the model to
    evaluate — the EMA copy when ``settings.ema`` > 0 — and the log). ``evaluate(model) -> float`` runs every
    ``eval_every`` steps and at the end. ``resume_from``: a ``checkpoint_dir/step-N`` directory of an earlier run
    (``settings.checkpoint_dir``/``checkpoint_every`` write them); the batches after it are the same as without
    the interruption (``sample`` must be a function of the step). Raises `TrainingDiverged` on a non-finite loss."""
    w = weights or LossWeights()
    log = TrainLog(start=resume_step(resume_from) if resume_from is not None else 0)
    state = {"step": log.start}

    def loss_fn(m, batch) -> torch.Tensor:
        frames, target, *angles = batch  # angles [B, T]: the oracle arm's given rotations
        dtype = settings.autocast_dtype(frames.device.type)
        ctx = torch.autocast(frames.device.type, dtype=dtype) if dtype else contextlib.nullcontext()
        with ctx:
            out = m(frames, angles=angles[0]) if angles else m(frames)
        out.restored = out.restored.float()  # the loss (FFT, SSIM) in fp32
        k = reg_factor(state["step"], settings)
        terms = delivr_loss(out, target, replace(w, angle=w.angle * k, velocity=w.velocity * k))
        log.terms.append({k_: float(v.detach()) for k_, v in terms.items()})
        return terms["total"]

    def on_step(step: int, _loss: float) -> None:
        state["step"] = step + 1

    res = train_lm(
        model,
        None,
        cfg=settings,
        loss_fn=loss_fn,
        resume_from=resume_from,
        optimizer=make_optimizer(model, settings),
        batches=sample,
        lr_schedule=lambda step: lr_factor(step, settings),
        eval_fn=evaluate,
        on_step=on_step,
    )
    log.losses, log.evals, log.seconds = res.losses, res.evals, res.seconds
    final = res.ema_model if res.ema_model is not None else model
    return final.eval(), log
