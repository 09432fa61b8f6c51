"""OPQ — outlier-preserving quantisation (arXiv 2505.06653, Sec. 4.2).

Absmax normalisation lets one large weight stretch its whole block. OPQ keeps such weights in 16 bit: for unit
Gaussian weights in blocks of I, the block maximum M = max_i |w_i| has the cdf F_M(t) = (2Φ(t) − 1)^I, so its
q-quantile is

    τ(q, I) = F_M⁻¹(q) = Φ⁻¹((1 + q^{1/I}) / 2)            (≈ 3.35 for q = 0.95, I = 64),

and w is an outlier of block b iff |w| > σ_b · τ(q, I), with σ_b the sample standard deviation (ddof = 1) of
the block's real (non-padding) weights. Outliers are stored as (int64 flat index, bfloat16 value), set to 0
before the (signed) max search and normalisation, and scattered back after dequantisation; the codebooks are
unchanged. On pure N(0, 1) weights about 0.08 % of the weights are outliers at q = 0.95, I = 64.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import torch


def tau(q: float, block_size: int) -> float:
    """τ(q, I) = Φ⁻¹((1 + q^{1/I}) / 2), computed from the upper tail for accuracy at large I."""
    tail = -math.expm1(math.log(q) / block_size) / 2.0  # (1 − q^{1/I}) / 2
    return -NormalDist().inv_cdf(tail)


def block_std(blocks: torch.Tensor, n_valid: int) -> torch.Tensor:
    """(B, I) → (B,) sample std (ddof = 1) over each block's first real weights (padding excluded).

    Elements with flat index ≥ ``n_valid`` are padding. Blocks with fewer than 2 real weights get +inf.
    """
    n_blocks, size = blocks.shape
    valid = (torch.arange(n_blocks * size, device=blocks.device) < n_valid).reshape(n_blocks, size)
    count = valid.sum(1).to(blocks.dtype)
    mean = (blocks * valid).sum(1) / count.clamp_min(1)
    dev = (blocks - mean[:, None]) * valid
    var = dev.square().sum(1) / (count - 1).clamp_min(1)
    return torch.where(count >= 2, var.sqrt(), torch.full_like(var, math.inf))


def find_outliers(blocks: torch.Tensor, n_valid: int, q: float, block_size: int) -> torch.Tensor:
    """(B, I) weights → (B, I) bool mask of OPQ outliers: |w| > σ_b · τ(q, I), padding never an outlier."""
    n_blocks, size = blocks.shape
    valid = (torch.arange(n_blocks * size, device=blocks.device) < n_valid).reshape(n_blocks, size)
    threshold = block_std(blocks, n_valid) * tau(q, block_size)
    return (blocks.abs() > threshold[:, None]) & valid
