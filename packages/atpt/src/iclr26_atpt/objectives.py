"""The TPT objective and the three calibration regularisers (A-TPT, C-TPT, O-TPT) as pure functions.

Shapes: ``features`` [N, D] class text features (normalised inside), ``logits`` [V, N] over V augmented views.

* `angular_diversity` (A-TPT): AD = (1/N)·Σ_i arccos(clamp(max_{j≠i} ⟨ê_i, ê_j⟩, −τ, τ)), radians. A-TPT
  *maximises* AD, i.e. adds ``−λ·AD`` to the loss (`regularizer_loss`).
* `atfd` (C-TPT): ATFD = (1/N)·Σ_i ‖t_i − t̄‖₂ on normalised features; maximised (``−λ·ATFD``).
* `orthogonality` (O-TPT): ‖ÊÊᵀ − I‖²_F; minimised (``+λ·orth``).
* `tpt_loss`: entropy of the mean probability over the ``max(1, ⌊ρ·V⌋)`` lowest-entropy views.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

REGULARIZERS = ("atpt", "ctpt", "otpt", "none")
DEFAULT_CLAMP = 0.99999


def angular_diversity(features: torch.Tensor, clamp: float = DEFAULT_CLAMP) -> torch.Tensor:
    """Mean over classes of the angle (radians) to the nearest other class; differentiable scalar."""
    e = F.normalize(features.float(), dim=-1)
    n = e.shape[0]
    if n < 2:
        raise ValueError("angular diversity needs at least two classes")
    c = e @ e.T
    c = c.masked_fill(torch.eye(n, dtype=torch.bool, device=c.device), -1.0)
    m = c.max(dim=1).values.clamp(-clamp, clamp)
    return torch.arccos(m).mean()


def min_pairwise_angle(features: torch.Tensor) -> torch.Tensor:
    """The smallest angle (radians) between two distinct rows."""
    e = F.normalize(features.detach().double(), dim=-1)
    c = e @ e.T
    c.fill_diagonal_(-1.0)
    return torch.arccos(c.max().clamp(-1.0, 1.0))


def atfd(features: torch.Tensor) -> torch.Tensor:
    """C-TPT's average text feature dispersion: mean L2 distance of the normalised features to their centroid."""
    t = F.normalize(features.float(), dim=-1)
    return (t - t.mean(0, keepdim=True)).norm(dim=-1).mean()


def orthogonality(features: torch.Tensor) -> torch.Tensor:
    """O-TPT's penalty ‖ÊÊᵀ − I‖²_F on the normalised features (minimised)."""
    e = F.normalize(features.float(), dim=-1)
    g = e @ e.T
    return ((g - torch.eye(e.shape[0], device=e.device, dtype=g.dtype)) ** 2).sum()


def regularizer_loss(name: str, features: torch.Tensor, lam: float) -> torch.Tensor:
    """The term added to the TPT loss: ``−λ·AD`` (atpt), ``−λ·ATFD`` (ctpt), ``+λ·orth`` (otpt), 0 (none)."""
    if name == "atpt":
        return -lam * angular_diversity(features)
    if name == "ctpt":
        return -lam * atfd(features)
    if name == "otpt":
        return lam * orthogonality(features)
    if name == "none":
        return features.sum() * 0.0
    raise ValueError(f"unknown regularizer {name!r}; choose one of {', '.join(REGULARIZERS)}")


def n_selected(n_views: int, selection: float) -> int:
    """max(1, ⌊ρ·V⌋): how many views confidence selection keeps."""
    return max(1, math.floor(selection * n_views + 1e-9))


def select_confident(logits: torch.Tensor, selection: float = 0.1) -> torch.Tensor:
    """Indices of the ``max(1, ⌊ρ·V⌋)`` views with the lowest softmax entropy. logits [V, N] → [k]."""
    logp = logits.float().log_softmax(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    k = n_selected(logits.shape[0], selection)
    return torch.argsort(entropy, stable=True)[:k]


def tpt_loss(logits: torch.Tensor, selection: float = 0.1) -> torch.Tensor:
    """H(p̄) with p̄ the mean softmax over the confident views, computed in log space. logits [V, N] → scalar."""
    if not 0.0 < selection <= 1.0:
        raise ValueError(f"selection must be in (0, 1], got {selection}")
    kept = logits[select_confident(logits.detach(), selection)].float()
    logp = kept.log_softmax(-1)
    avg = torch.logsumexp(logp, dim=0) - math.log(kept.shape[0])
    return -(avg.exp() * avg).sum()


def simplex_angle(n: int) -> float:
    """The pairwise angle (radians) of a regular simplex of ``n`` unit vectors: arccos(−1/(n−1))."""
    return math.acos(-1.0 / (n - 1))
