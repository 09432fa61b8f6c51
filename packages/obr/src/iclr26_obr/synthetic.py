"""A synthetic linear layer with correlated, outlier-heavy inputs, Hadamard-rotated as in QuaRot (claims C1-C4).

X = Hd·(A·Z) with Z ~ N(0, 1)^{Cin × 2L}, A = I + 0.5·G/√Cin (G standard normal: correlated channels), and
``outliers`` random input channels of A·Z multiplied by ``outlier_scale`` before the rotation (activation
outliers); Hd = normalised Sylvester-Hadamard matrix (H·Hᵀ = I). W ~ N(0, 1/Cin), rotated as W·Hdᵀ, so that
(W·Hdᵀ)·(Hd·X') = W·X': the rotation changes the weights the compressor sees, never the layer's function.
The first L tokens calibrate (H = 2XXᵀ/L), the last L evaluate the output error.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .hadamard import hadamard_matrix
from .hessian import hessian_from_inputs


@dataclass
class SyntheticLayer:
    weight: torch.Tensor  # [Cout, Cin], rotated
    calib: torch.Tensor  # [L, Cin] calibration inputs (rows are tokens), rotated
    heldout: torch.Tensor  # [L, Cin] held-out inputs, rotated
    hessian: torch.Tensor  # [Cin, Cin] = 2·calibᵀ·calib / L


def synthetic_layer(
    cin: int = 128,
    cout: int = 64,
    tokens: int = 2048,
    seed: int = 0,
    *,
    outliers: int = 8,
    outlier_scale: float = 10.0,
    mixing: float = 0.5,
    rotate: bool = True,
    dtype: torch.dtype = torch.float64,
) -> SyntheticLayer:
    """One synthetic layer (see the module docstring); deterministic for ``seed``."""
    g = torch.Generator().manual_seed(seed)
    A = torch.eye(cin, dtype=dtype) + mixing * torch.randn(cin, cin, generator=g, dtype=dtype) / cin**0.5
    Z = torch.randn(cin, 2 * tokens, generator=g, dtype=dtype)
    X = A @ Z
    hot = torch.randperm(cin, generator=g)[:outliers]
    X[hot] *= outlier_scale
    W = torch.randn(cout, cin, generator=g, dtype=dtype) / cin**0.5
    if rotate:
        Hd = hadamard_matrix(cin, dtype=dtype) / cin**0.5
        X = Hd @ X
        W = W @ Hd.t()
    x = X.t().contiguous()  # [2L, Cin]
    calib, heldout = x[:tokens], x[tokens:]
    return SyntheticLayer(W, calib, heldout, hessian_from_inputs(calib))
