"""Gaussian Fourier features and the sinusoid latent table.

γ(p) = [sin(c·pB), cos(c·pB)], B ∈ R^{d_in×ℓ}, B_ij ~ N(0, σ²), c = 2π (``two_pi=True``) or 1 (official code).
B is a fixed buffer drawn from its own seeded generator: saved with the weights, never trained.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn


class GaussianFourierFeatures(nn.Module):
    """γ: [..., in_dim] → [..., 2·n_freq]; sin block first, then cos."""

    def __init__(self, in_dim: int, n_freq: int, sigma: float, two_pi: bool = True, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(int(seed))
        self.register_buffer("B", torch.randn(in_dim, n_freq, generator=g) * float(sigma))
        self.in_dim, self.n_freq, self.sigma, self.two_pi = in_dim, n_freq, float(sigma), bool(two_pi)

    @property
    def out_dim(self) -> int:
        return 2 * self.n_freq

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        proj = p @ self.B
        if self.two_pi:
            proj = 2 * math.pi * proj
        return torch.cat([torch.sin(proj), torch.cos(proj)], dim=-1)


def sinusoid_table(n: int, d: int) -> torch.Tensor:
    """PE(p, 2i) = sin(p / 10000^{2i/d}), PE(p, 2i+1) = cos(p / 10000^{2i/d}); shape [n, d]."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    i2 = torch.arange(0, d, 2, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, i2 / d)
    table = torch.zeros(n, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d // 2])
    return table.float()


def nyquist_check(sigma: float, two_pi: bool, coord_range: float, grid: int) -> str | None:
    """A warning text when the GFF frequency scale exceeds the grid's Nyquist frequency, else None.

    A frequency row b gives sin(c·b·x): c·σ/(2π) cycles per unit on average; over ``coord_range`` that is
    c·σ·range/(2π) cycles, against grid/2 resolvable ones (perceiver-pytorch #50, "stripy" outputs).
    """
    c = 2 * math.pi if two_pi else 1.0
    cycles = c * sigma * coord_range / (2 * math.pi)
    if cycles > grid / 2:
        msg = (
            f"GFF σ={sigma:g} (two_pi={two_pi}) gives ~{cycles:.1f} cycles over the coordinate range, above the "
            f"grid's Nyquist limit of {grid / 2:g}: expect aliased, stripy predictions (lower σ or normalise coords)"
        )
        warnings.warn(msg, stacklevel=2)
        return msg
    return None
