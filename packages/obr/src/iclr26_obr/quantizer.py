"""Symmetric per-output-channel integer weight quantiser with GPTQ-style MSE clipping (the official code's).

Levels: q ∈ {−2^(b−1), …, 2^(b−1) − 1} (b = 4: −8 … 7), Q(w) = clamp(round(w / s), −2^(b−1), 2^(b−1) − 1) · s,
one scale s per output row. s = p·absmax/(2^(b−1) − 1) with p searched over {1.00, 0.99, …, 0.21} to minimise
Σ_j |Q(w_j) − w_j|^2.4 per row (``mse=True``), or p = 1. The quantiser is symmetric, so Q(0) = 0: pruned weights
stay exactly zero under round-to-nearest.
"""

from __future__ import annotations

import torch


def qmax(bits: int) -> int:
    """Largest positive code: 2^(bits−1) − 1 (7 for 4 bits)."""
    return 2 ** (bits - 1) - 1


def find_scales(
    weight: torch.Tensor,
    bits: int = 4,
    *,
    mse: bool = True,
    grid: int = 100,
    maxshrink: float = 0.8,
    norm: float = 2.4,
) -> torch.Tensor:
    """Per-row scales s [Cout] of ``weight`` [Cout, Cin] (float32 or the input's float64)."""
    w = weight.to(torch.float64 if weight.dtype == torch.float64 else torch.float32)
    maxq = qmax(bits)
    absmax = w.abs().amax(dim=1).clamp(min=1e-5)
    scale = absmax / maxq
    if not mse:
        return scale
    best = torch.full_like(absmax, float("inf"))
    for i in range(int(maxshrink * grid)):
        p = 1 - i / grid
        s = p * absmax / maxq
        err = (quantize(w, s, bits) - w).abs_().pow_(norm).sum(dim=1)
        better = err < best
        best = torch.where(better, err, best)
        scale = torch.where(better, s, scale)
    return scale


def codes_of(weight: torch.Tensor, scales: torch.Tensor, bits: int) -> torch.Tensor:
    """Integer codes clamp(round(w/s), −2^(b−1), 2^(b−1) − 1) as int8, same shape as ``weight``."""
    s = scales.reshape(-1, *([1] * (weight.dim() - 1))) if scales.dim() == 1 and weight.dim() > 1 else scales
    maxq = qmax(bits)
    return torch.clamp(torch.round(weight / s), -maxq - 1, maxq).to(torch.int8)


def quantize(weight: torch.Tensor, scales: torch.Tensor, bits: int) -> torch.Tensor:
    """Round-to-nearest fake quantisation Q(w) with per-row ``scales`` [Cout] (or a scalar / [Cout, 1])."""
    s = scales.reshape(-1, *([1] * (weight.dim() - 1))) if scales.dim() == 1 and weight.dim() > 1 else scales
    maxq = qmax(bits)
    return torch.clamp(torch.round(weight / s), -maxq - 1, maxq) * s


def rtn(weight: torch.Tensor, bits: int = 4, *, mse: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Round-to-nearest of a whole matrix → (Q(W), scales)."""
    scales = find_scales(weight, bits, mse=mse)
    return quantize(weight.to(scales.dtype), scales, bits), scales
