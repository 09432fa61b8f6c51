"""GPTQ (Frantar et al. 2023) with an optional sparsity mask kept through quantisation.

Column by column j = 0 … C−1: q_j = Q(w_j) (masked: q_ij = 0 where the mask prunes), the error
e_j = (w_j − q_j)/U_jj is fed only to the later columns, W[:, j:] −= e_j·U[j, j:], where U is the upper
Cholesky factor of H⁻¹ (U's row j is the first row of (H_{F_j,F_j})⁻¹/√· with F_j = {j, …, C−1}). Lazy
batch updates over blocks of ``blocksize`` columns give the same result as the plain loop.

Re-applying the mask after each quantised column keeps pruned weights exactly 0 — llm-compressor removed its
mask-aware GPTQ (PR #2860); this is it.
"""

from __future__ import annotations

import torch

from .hessian import chol_upper_inverse
from .quantizer import quantize


def gptq_quantize(
    weight: torch.Tensor,
    damped: torch.Tensor,
    scales: torch.Tensor,
    bits: int,
    *,
    mask: torch.Tensor | None = None,
    blocksize: int = 128,
) -> torch.Tensor:
    """GPTQ-quantised copy of ``weight`` [Cout, Cin] with the (damped) Hessian [Cin, Cin] and per-row ``scales``.

    ``mask`` [Cout, Cin] (True = kept): pruned entries come out exactly 0 and their change is compensated
    like any quantisation error.
    """
    W = weight.clone()
    cols = W.shape[1]
    U = chol_upper_inverse(damped.to(W.dtype))
    s = scales.to(W.dtype)
    Q = torch.zeros_like(W)
    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        W1 = W[:, i1:i2].clone()
        Err1 = torch.zeros_like(W1)
        U1 = U[i1:i2, i1:i2]
        for i in range(i2 - i1):
            w = W1[:, i]
            q = quantize(w, s, bits)
            if mask is not None:
                q = q * mask[:, i1 + i].to(q.dtype)
            Q[:, i1 + i] = q
            err = (w - q) / U1[i, i]
            W1[:, i:] -= err.unsqueeze(1) * U1[i, i:].unsqueeze(0)
            Err1[:, i] = err
        W[:, i2:] -= Err1 @ U[i1:i2, i2:]
    return Q
