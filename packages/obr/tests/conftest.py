"""Shared fixtures of the iclr26-obr tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def random_spd():
    return _random_spd


def _random_spd(c: int, seed: int = 0, tokens: int | None = None) -> torch.Tensor:
    """A random SPD Hessian 2XXᵀ/L from L Gaussian tokens with correlated channels (float64)."""
    g = torch.Generator().manual_seed(seed)
    tokens = tokens or 4 * c
    a = torch.eye(c, dtype=torch.float64) + 0.5 * torch.randn(c, c, generator=g, dtype=torch.float64) / c**0.5
    x = torch.randn(tokens, c, generator=g, dtype=torch.float64) @ a.t()
    return 2 * x.t() @ x / tokens
