"""Pruning masks (True = kept): Wanda, magnitude, and N:M patterns of either score.

Wanda (Sun et al. 2024): score S_ij = |W_ij|·‖X_j‖₂; prune the ⌊sparsity·Cin⌋ lowest scores of every output row,
or with ``nm=(N, M)`` the M − N lowest of every group of M consecutive input columns (2:4 keeps 2 of 4).
Ties are broken by column index (a stable sort), as in the official code.
"""

from __future__ import annotations

import torch

from .config import check_nm_fits, check_sparsity, parse_nm


def mask_from_scores(
    scores: torch.Tensor, sparsity: float = 0.5, nm: tuple[int, int] | None = None
) -> torch.Tensor:
    """Keep-mask [Cout, Cin] that prunes the lowest ``scores`` per row (or per N:M group)."""
    nm = parse_nm(nm)
    rows, cols = scores.shape
    if nm is not None:
        n, m = nm
        check_nm_fits(nm, cols)
        groups = scores.reshape(rows, cols // m, m)
        order = torch.sort(groups, dim=-1, stable=True).indices
        pruned = torch.zeros_like(groups, dtype=torch.bool)
        pruned.scatter_(-1, order[..., : m - n], True)
        return ~pruned.reshape(rows, cols)
    k = int(cols * check_sparsity(sparsity))
    pruned = torch.zeros_like(scores, dtype=torch.bool)
    if k > 0:
        order = torch.sort(scores, dim=-1, stable=True).indices
        pruned.scatter_(1, order[:, :k], True)
    return ~pruned


def wanda_mask(
    weight: torch.Tensor, act_norms: torch.Tensor, sparsity: float = 0.5, nm: tuple[int, int] | None = None
) -> torch.Tensor:
    """Wanda keep-mask: scores |W_ij|·‖X_j‖₂ with ``act_norms`` [Cin] the input-column norms."""
    return mask_from_scores(weight.abs() * act_norms.reshape(1, -1).to(weight.dtype), sparsity, nm)


def magnitude_mask(
    weight: torch.Tensor, sparsity: float = 0.5, nm: tuple[int, int] | None = None
) -> torch.Tensor:
    """Magnitude keep-mask: scores |W_ij| per output row."""
    return mask_from_scores(weight.abs(), sparsity, nm)


def act_norms_from_hessian(hessian: torch.Tensor, tokens: int | None = None) -> torch.Tensor:
    """‖X_j‖₂ = sqrt(L·H_jj/2) from H = 2XXᵀ/L (without L: the same up to one factor, same Wanda ranking)."""
    diag = torch.diag(hessian).clamp(min=0)
    return torch.sqrt(diag * ((tokens or 1) / 2))


def sparsity_of(mask: torch.Tensor) -> float:
    """Fraction of pruned (False) entries."""
    return 1.0 - float(mask.float().mean())


def check_nm_pattern(mask: torch.Tensor, nm: tuple[int, int]) -> bool:
    """Whether every group of M consecutive columns in every row keeps exactly N entries."""
    n, m = nm
    rows, cols = mask.shape
    return bool((mask.reshape(rows, cols // m, m).sum(-1) == n).all())
