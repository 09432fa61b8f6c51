"""Correlations behind C4 and the peer comparisons (numpy only; tested against scipy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson r; NaN with fewer than 3 points or a constant series (no verdict material)."""
    x_, y_ = np.asarray(x, float), np.asarray(y, float)
    if x_.size < 3 or x_.std() == 0 or y_.std() == 0:
        return float("nan")
    return float(np.corrcoef(x_, y_)[0, 1])


def ranks(x: Sequence[float]) -> list[float]:
    """1-based ranks with ties averaged (Spearman's ρ = Pearson r of the ranks)."""
    _, inv, counts = np.unique(np.asarray(x, float), return_inverse=True, return_counts=True)
    avg = np.cumsum(counts) - (counts - 1) / 2
    return [float(v) for v in avg[inv]]


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman ρ with ties averaged."""
    return pearson(ranks(x), ranks(y))
