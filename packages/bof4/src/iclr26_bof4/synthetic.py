"""Synthetic weights of the claims and the bench: held-out N(0,1) and the contaminated Gaussian of C5.

Seed offsets keep the experiments apart: no experiment reuses another's random numbers (held-out samples never
reuse the C1 derivation seed).
"""

from __future__ import annotations

import torch

# seed offsets, added to the run's ``seed``
DERIVE, HELDOUT, CONTAMINATED, BENCH, OUTLIER_INIT = 0, 10_000, 20_000, 30_000, 40_000


def contaminated_gaussian(n: int, p: float, factor: float, generator: torch.Generator) -> torch.Tensor:
    """w ~ N(0,1); each weight independently with probability ``p`` multiplied by ``factor``. Shape [n]."""
    w = torch.randn(n, generator=generator)
    hit = torch.rand(n, generator=generator) < p
    return torch.where(hit, w * factor, w)


def inject_outliers(weight: torch.Tensor, p: float, factor: float, generator: torch.Generator) -> int:
    """In place: each weight independently with probability ``p`` multiplied by ``factor``; returns the count.

    The contaminated-Gaussian rule of C5 applied to a model's (initial) weights: a documented stand-in for the
    heavy-tailed outlier weights of real LLM layers.
    """
    hit = torch.rand(weight.shape, generator=generator) < p
    weight.mul_(torch.where(hit, factor, 1.0).to(weight.dtype))
    return int(hit.sum())
