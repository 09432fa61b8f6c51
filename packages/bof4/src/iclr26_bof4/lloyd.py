"""The modified Lloyd / EM algorithm of BOF4 (Sec. 3 of arXiv 2505.06653), data-driven version.

Block-wise absmax quantisation writes a weight as w = m_b · x with x ∈ [−1, 1], so the error on the
*original* weights is

    MSE(W) = (1/B) Σ_b m_b² · MSE(X_b),        MAE(W) = (1/B) Σ_b |m_b| · MAE(X_b).

Optimising the codebook for W (not for the normalised X, which is the AF4-style objective) therefore means a
Lloyd iteration in which every normalised sample x_k carries the weight ω_k = m_k² (MSE) or |m_k| (MAE) of its
block:

1. assignment: x_k → nearest level (midpoint thresholds, a tie goes to the upper level);
2. update of every free level ℓ over its region R_ℓ:
   MSE: x̂(ℓ) = Σ_{k∈R_ℓ} ω_k x_k / Σ_{k∈R_ℓ} ω_k;   MAE: x̂(ℓ) = weighted median of {x_k ∈ R_ℓ} (weights ω_k).
   Fixed levels never move; a level whose region is empty keeps its value.

The samples are sorted once; with prefix sums of ω and ω·x each iteration costs one ``searchsorted`` over the
15 thresholds (weighted means by prefix-sum differences, weighted medians by searching the half-weight point).
Stop when the largest level change is < ``tol`` (1e-8) or after ``max_iter`` (2000) iterations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from iclr26_core.errors import UserError

from .blockwise import absmax

METRICS = ("mse", "mae")


class LloydResult(NamedTuple):
    levels: torch.Tensor  # (L,) float64, ascending
    iterations: int
    converged: bool


def gaussian_blocks(
    block_size: int, n_samples: int, seed: int = 0, signed: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalised Gaussian blocks: W ~ N(0, 1) of shape (n_samples // I, I), x = W / m_b.

    Returns ``(x, m)``, both float64 of shape (n_samples // I, I): the normalised values and the scale m_b of
    each sample's block (broadcast). Unsigned absmax: m_b = max_i |w_{b,i}|; signed (BOF4-S): m_b = w_{b,j*},
    j* = argmax_i |w_{b,i}|, so the max-magnitude weight becomes exactly +1. σ of W is irrelevant (scale
    invariance).
    """
    n_blocks = n_samples // block_size
    if n_blocks < 1:
        raise UserError(f"n_samples={n_samples} is smaller than one block of {block_size} weights")
    gen = torch.Generator().manual_seed(int(seed))
    w = torch.randn(n_blocks, block_size, generator=gen, dtype=torch.float32).double()
    m = absmax(w, signed)[:, None]
    return w / m, m.expand_as(w)


def lloyd(
    x: torch.Tensor,
    weights: torch.Tensor,
    init: Sequence[float] | torch.Tensor,
    fixed: Sequence[bool] | torch.Tensor | None = None,
    metric: str = "mse",
    tol: float = 1e-8,
    max_iter: int = 2000,
) -> LloydResult:
    """Weighted Lloyd iteration on samples ``x`` (any shape, flattened) with sample weights ``weights``.

    ``init``: (L,) ascending start levels; ``fixed``: (L,) bool, True = the level never moves.
    MSE update: weighted mean of the region; MAE update: (lower) weighted median of the region.
    Regions are half-open, [ξ_{ℓ−1}, ξ_ℓ), with ξ the midpoints, so a sample on a threshold goes up.
    """
    if metric not in METRICS:
        raise UserError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    levels = torch.as_tensor(init, dtype=torch.float64).clone().reshape(-1)
    fixed_t = (
        torch.zeros_like(levels, dtype=torch.bool)
        if fixed is None
        else torch.as_tensor(fixed, dtype=torch.bool).reshape(-1)
    )
    if fixed_t.numel() != levels.numel():
        raise ValueError("init and fixed must have the same length")
    if not bool((levels[1:] > levels[:-1]).all()):
        raise ValueError("init levels must be strictly increasing")

    xs, order = x.reshape(-1).double().sort()
    ws = weights.reshape(-1).double()[order]
    del order
    zero = torch.zeros(1, dtype=torch.float64)
    cum_w = torch.cat([zero, ws.cumsum(0)])  # (N+1,) prefix sums of ω
    cum_wx = torch.cat([zero, (ws * xs).cumsum(0)]) if metric == "mse" else None
    n = xs.numel()

    def centroids(levels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        thresholds = (levels[:-1] + levels[1:]) / 2
        bounds = torch.searchsorted(xs, thresholds, side="left")  # first sample >= ξ
        starts = torch.cat([bounds.new_zeros(1), bounds])
        ends = torch.cat([bounds, bounds.new_full((1,), n)])
        mass = cum_w[ends] - cum_w[starts]
        if metric == "mse":
            return (cum_wx[ends] - cum_wx[starts]) / mass.clamp_min(1e-300), mass <= 0
        half = (cum_w[starts] + cum_w[ends]) / 2
        k = torch.searchsorted(cum_w[1:], half, side="left")  # first k with Σ_{≤k} ω ≥ half
        k = torch.minimum(torch.maximum(k, starts), (ends - 1).clamp_min(0))
        return xs[k.clamp(0, n - 1)], mass <= 0

    return iterate(levels, centroids, fixed_t, tol, max_iter)


def iterate(
    levels: torch.Tensor,
    centroids,
    fixed: torch.Tensor,
    tol: float,
    max_iter: int,
) -> LloydResult:
    """Lloyd's fixed-point loop: ``centroids(levels) -> (update, empty)`` gives each region's new level and
    which regions are empty; fixed levels and empty regions keep theirs; stops when no level moves by ``tol``."""
    converged, it = False, 0
    for it in range(1, max_iter + 1):  # noqa: B007 - `it` is reported
        update, empty = centroids(levels)
        new = torch.where(fixed | empty, levels, update)
        delta = float((new - levels).abs().max())
        levels = new
        if delta < tol:
            converged = True
            break
    return LloydResult(levels, it, converged)
