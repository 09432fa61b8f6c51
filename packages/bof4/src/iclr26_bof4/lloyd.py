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

import warnings
from collections.abc import Sequence
from typing import NamedTuple

import torch

from iclr26_core.errors import UserError

from .config import check_block_size

METRICS = ("mse", "mae")
METHODS = ("empirical", "theory")


class LloydConvergenceWarning(RuntimeWarning):
    """The Lloyd iteration stopped at ``max_iter`` with a level still moving by more than ``tol``."""


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
    from .quantizer import absmax

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


def resolve_fixed(
    init: torch.Tensor, signed: bool, fixed_levels: Sequence[float] | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Place the fixed levels into the start codebook; returns (levels, fixed mask).

    Default: {0, +1} for signed absmax (BOF4-S: the lowest level is free), {−1, 0, +1} otherwise. Each fixed
    value replaces the nearest start level (they must hit distinct levels and stay sorted).
    """
    if fixed_levels is None:
        fixed_levels = (0.0, 1.0) if signed else (-1.0, 0.0, 1.0)
    levels = init.clone().double()
    mask = torch.zeros_like(levels, dtype=torch.bool)
    for value in fixed_levels:
        v = float(value)
        if not -1.0 <= v <= 1.0:
            raise UserError(f"fixed level {v} is outside [-1, 1]")
        i = int((levels - v).abs().argmin())
        if mask[i]:
            raise UserError(f"fixed levels {tuple(fixed_levels)} are too close to each other")
        levels[i], mask[i] = v, True
    if not bool((levels[1:] > levels[:-1]).all()):
        raise UserError(f"fixed levels {tuple(fixed_levels)} do not fit an ascending 16-level codebook")
    return levels, mask


def derive_codebook(
    block_size: int = 64,
    metric: str = "mse",
    signed: bool = True,
    method: str = "empirical",
    n_samples: int = 2**22,
    seed: int = 0,
    weighted: bool = True,
    fixed_levels: Sequence[float] | None = None,
    max_iter: int = 2000,
) -> torch.Tensor:
    """A 16-level BOF4 codebook for block size I, optimised for the MSE or MAE of the original weights.

    ``method="empirical"``: weighted Lloyd on ``n_samples`` N(0,1) weights in blocks of I (seed ``seed``);
    ``method="theory"``: the same fixed point by numerical integration (:mod:`iclr26_bof4.theory`; ``n_samples``
    and ``seed`` unused). ``signed=True`` gives BOF4-S (signed absmax). ``weighted=False`` drops the m²/|m|
    weights — the AF4-style objective of Appendix D, for ablations only. ``fixed_levels``: default
    {0, 1} (signed) or {−1, 0, 1}; ``()`` fixes nothing. Initialised from NF4; iterates until the largest level
    change is < 1e-8 or ``max_iter`` iterations, and warns (:class:`LloydConvergenceWarning`) when the latter
    came first. Returns (16,) float32, ascending.
    """
    check_block_size(block_size)
    if metric not in METRICS:
        raise UserError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    if method not in METHODS:
        raise UserError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    from .codebooks import codebook

    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise UserError(f"max_iter must be a positive integer, got {max_iter!r}")
    init, fixed = resolve_fixed(codebook("nf4").double(), signed, fixed_levels)
    if method == "theory":
        from .theory import theory_lloyd

        res = theory_lloyd(
            block_size, init, fixed, metric=metric, weighted=weighted, signed=signed, max_iter=max_iter
        )
    else:
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < block_size:
            raise UserError(f"n_samples must be an integer >= block_size ({block_size}), got {n_samples!r}")
        x, m = gaussian_blocks(block_size, n_samples, seed=seed, signed=signed)
        if not weighted:
            w = torch.ones_like(m)
        else:
            w = m.square() if metric == "mse" else m.abs()
        del m
        res = lloyd(x, w, init, fixed, metric=metric, max_iter=max_iter)
    if not res.converged:
        warnings.warn(
            f"derive_codebook(block_size={block_size}, metric={metric!r}, signed={signed}, method={method!r}) "
            f"did not converge in {res.iterations} iterations (a level still moved by > 1e-8); "
            "the levels are the last iterate",
            LloydConvergenceWarning,
            stacklevel=2,
        )
    return res.levels.float()
