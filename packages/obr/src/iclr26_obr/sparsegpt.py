"""SparseGPT (Frantar & Alistarh 2023): prune with OBS updates and adaptive masks, optionally quantising jointly.

Blocks of ``blocksize`` columns; in each block the unstructured mask prunes the ``sparsity`` fraction of the
block's weights with the lowest OBS saliency w²/U_jj² (a threshold over the whole [Cout, blocksize] block, chosen
on the weights as they are when the block starts), N:M masks are chosen every M columns from the M columns
ahead. Each column's forced change (pruned → 0, and with ``quantize`` the rounding) is fed to the later columns
through U, the upper Cholesky factor of H⁻¹, exactly as in GPTQ.

``sparsegpt_gptq`` in this package runs SparseGPT pruning, then mask-preserving GPTQ (the spec's reading);
``sparsegpt_joint`` is the one-pass joint prune + quantise of the official code's baseline.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .config import check_nm_fits
from .hessian import chol_upper_inverse


def sparsegpt_prune(
    weight: torch.Tensor,
    damped: torch.Tensor,
    sparsity: float = 0.5,
    nm: tuple[int, int] | None = None,
    *,
    blocksize: int = 128,
    quantize: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(pruned-and-updated weight, keep-mask) of ``weight`` [Cout, Cin] under the damped Hessian.

    With ``quantize`` (a column → quantised column function) every column is also quantised in the same pass.
    """
    W = weight.clone(memory_format=torch.contiguous_format)
    cols = W.shape[1]
    if nm is not None:
        check_nm_fits(nm, cols)
        if blocksize % nm[1]:
            blocksize = max(nm[1], blocksize - blocksize % nm[1])
    U = chol_upper_inverse(damped.to(W.dtype))
    pruned = torch.zeros_like(W, dtype=torch.bool)
    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        count = i2 - i1
        W1 = W[:, i1:i2].clone()
        Err1 = torch.zeros_like(W1)
        U1 = U[i1:i2, i1:i2]
        d = torch.diag(U1)
        if nm is None:
            sal = W1**2 / d.reshape(1, -1) ** 2
            k = int(sal.numel() * sparsity)
            mask1 = torch.zeros(W1.shape, dtype=torch.bool, device=W1.device)
            if k > 0:
                flat = torch.sort(sal.flatten(), stable=True).indices[:k]
                mask1.reshape(-1)[flat] = True  # mask1 is a fresh contiguous tensor: reshape is a view
        else:
            mask1 = torch.zeros(W1.shape, dtype=torch.bool, device=W1.device)
        for i in range(count):
            w = W1[:, i]
            if nm is not None and i % nm[1] == 0:
                n, m = nm
                sal = W1[:, i : i + m] ** 2 / d[i : i + m].reshape(1, -1) ** 2
                low = torch.sort(sal, dim=1, stable=True).indices[:, : m - n]
                mask1.scatter_(1, i + low, True)
            q = w.clone()
            q[mask1[:, i]] = 0
            if quantize is not None:
                q = quantize(q)
            err = (w - q) / U1[i, i]
            W1[:, i:] -= err.unsqueeze(1) * U1[i, i:].unsqueeze(0)
            W1[:, i] = q
            Err1[:, i] = err
        W[:, i1:i2] = W1
        pruned[:, i1:i2] = mask1
        W[:, i2:] -= Err1 @ U[i1:i2, i2:]
    W[pruned] = 0
    return W, ~pruned
