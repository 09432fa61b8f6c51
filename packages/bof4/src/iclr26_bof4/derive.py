"""``derive_codebook``: a BOF4 codebook for any block size, by the weighted Lloyd of :mod:`.lloyd` (data-driven)
or the integration of :mod:`.theory`, started from NF4 with the paper's fixed levels (arXiv 2505.06653 Sec. 3).

Sits above both solvers; :mod:`.codebooks` calls it for block sizes that are not shipped.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

from iclr26_core.errors import UserError

from .config import check_block_size
from .lloyd import METRICS, gaussian_blocks, lloyd
from .tables import nf4_levels
from .theory import theory_lloyd

METHODS = ("empirical", "theory")


class LloydConvergenceWarning(RuntimeWarning):
    """The Lloyd iteration stopped at ``max_iter`` with a level still moving by more than ``tol``."""


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
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise UserError(f"max_iter must be a positive integer, got {max_iter!r}")
    init, fixed = resolve_fixed(torch.tensor(nf4_levels(), dtype=torch.float64), signed, fixed_levels)
    if method == "theory":
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
