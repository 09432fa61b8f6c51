"""The sphere experiment (claim C1): N unit vectors in R^D start collapsed (a common direction + 0.05 noise) and
each regulariser alone is optimised with Adam; the global minimum pairwise angle measures how well it spreads them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .objectives import REGULARIZERS, min_pairwise_angle, regularizer_loss


@dataclass
class SphereResult:
    min_angle_deg: float
    mean_nn_angle_deg: float
    curve_deg: list[float] = field(default_factory=list)  # minimum angle every 10 steps


def collapsed_start(n: int, d: int, seed: int = 0, noise: float = 0.05) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    common = torch.randn(d, generator=g)
    common = common / common.norm()
    return common + noise * torch.randn(n, d, generator=g)


def sphere_experiment(
    n: int, d: int, regularizer: str, *, steps: int = 500, lr: float = 1e-2, seed: int = 0
) -> SphereResult:
    """Optimise ``regularizer`` (atpt | ctpt | otpt) alone on N vectors in R^D from a collapsed start."""
    if regularizer not in REGULARIZERS or regularizer == "none":
        raise ValueError(f"regularizer must be atpt, ctpt or otpt, got {regularizer!r}")
    if n < 2 or d < 1 or steps < 0:
        raise ValueError(f"need n >= 2, d >= 1, steps >= 0 (got n={n}, d={d}, steps={steps})")
    x = collapsed_start(n, d, seed).requires_grad_(True)
    opt = torch.optim.Adam([x], lr=lr)
    curve = []
    for step in range(steps):
        if step % 10 == 0:
            curve.append(math.degrees(float(min_pairwise_angle(x))))
        opt.zero_grad()
        regularizer_loss(regularizer, x, 1.0).backward()
        opt.step()
    curve.append(math.degrees(float(min_pairwise_angle(x))))
    e = torch.nn.functional.normalize(x.detach().double(), dim=-1)
    c = e @ e.T
    c.fill_diagonal_(-1.0)
    nn_angle = torch.arccos(c.max(1).values.clamp(-1, 1)).mean()
    return SphereResult(curve[-1], math.degrees(float(nn_angle)), curve)
