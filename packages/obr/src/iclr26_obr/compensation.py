"""Group error compensation: the closed-form core of OBR (Eq. 8-10 of the paper), batched over rows.

For one output row w split into a retain set R and an evict set E, the evict set receives a forced change
Δw_E (pruning: −w_E; quantisation: Q(w̄_E) − w̄_E). The free change on R minimising ½·Δw·H·Δwᵀ is

    Δw_R* = −H_RR⁻¹ · H_RE · Δw_E          (set the gradient H_RR·Δw_R + H_RE·Δw_E to zero).

With pruning this is +H_RR⁻¹·H_RE·w_E, with quantisation +H_RR⁻¹·H_RE·(w̄_E − Q(w̄_E)). The paper's printed
(9)/(10) carry a minus sign with e_E defined as w_E resp. w̄ − Q(w̄); the official code and the derivation use
the plus sign, as here (tests check that compensation lowers the row objective).

Rows have different retain sets, so each row needs its own H_RR solve: rows are processed in chunks, each row's
H_RR gathered into a batch (padded to the chunk's largest |R| with identity rows, whose right-hand side is 0),
factorised with one batched Cholesky and solved with ``cholesky_solve``. A block that is not positive definite
is damped by 1 %, 10 %, … of its mean diagonal until it is. Cost per row: O(|R|³).
"""

from __future__ import annotations

import torch

from iclr26_core.errors import UserError

#: memory budget (bytes) of one chunk of gathered H_RR blocks
CHUNK_BYTES = 256 * 2**20


def _solve_spd(blocks: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """x with blocks·x = rhs for a batch of SPD blocks [n, k, k], rhs [n, k]; damps failing blocks."""
    L, info = torch.linalg.cholesky_ex(blocks)
    bad = info > 0
    attempt = 0
    while bool(bad.any()):
        if attempt >= 6:
            raise UserError("a retained block of the Hessian is not positive definite even with damping")
        sub = blocks[bad].clone()
        mean_diag = torch.diagonal(sub, dim1=-2, dim2=-1).mean(-1).clamp(min=1e-12)
        sub.diagonal(dim1=-2, dim2=-1).add_(mean_diag.unsqueeze(-1) * (0.01 * 10**attempt))
        L_sub, info_sub = torch.linalg.cholesky_ex(sub)
        idx = torch.nonzero(bad).flatten()
        L[idx] = L_sub
        bad = torch.zeros_like(bad)
        bad[idx] = info_sub > 0
        attempt += 1
    return torch.cholesky_solve(rhs.unsqueeze(-1), L).squeeze(-1)


def group_error_compensation(
    hessian: torch.Tensor, retain: torch.Tensor, delta_evict: torch.Tensor, *, chunk_bytes: int = CHUNK_BYTES
) -> torch.Tensor:
    """Δw [n, C] on each row's retain set (0 elsewhere) that best absorbs the forced change ``delta_evict``.

    hessian: [C, C] symmetric positive definite (damped). retain: [n, C] bool. delta_evict: [n, C], the forced
    change on each row's evict set; entries on the retain set are ignored, columns that are neither retained nor
    changed must hold 0 (they stay fixed). Computed in the dtype of ``delta_evict`` (float32 or float64).
    """
    if retain.shape != delta_evict.shape or retain.dim() != 2:
        raise UserError(
            f"retain {tuple(retain.shape)} and delta_evict {tuple(delta_evict.shape)} must both be [n, C]"
        )
    C = retain.shape[1]
    if hessian.shape != (C, C):
        raise UserError(f"the Hessian is {tuple(hessian.shape)} but the rows have {C} columns")
    dtype = torch.float64 if delta_evict.dtype == torch.float64 else torch.float32
    H = hessian.to(device=delta_evict.device, dtype=dtype)
    retain = retain.to(device=delta_evict.device, dtype=torch.bool)
    delta = torch.where(retain, torch.zeros((), dtype=dtype, device=H.device), delta_evict.to(dtype))
    out = torch.zeros_like(delta)
    counts = retain.sum(dim=1)
    active = torch.nonzero((counts > 0) & (delta != 0).any(dim=1)).flatten()
    if active.numel() == 0:
        return out
    b_full = delta[active] @ H  # (H·Δw_E) for every column; H is symmetric
    # columns of the retained set, in increasing order, first in each row
    order = torch.sort((~retain[active]).to(torch.int8), dim=1, stable=True).indices
    k_all = counts[active]
    elem = torch.finfo(dtype).bits // 8
    start = 0
    while start < active.numel():
        k = int(k_all[start:].max())
        rows_per_chunk = max(1, chunk_bytes // max(1, k * k * elem))
        stop = min(active.numel(), start + rows_per_chunk)
        k = int(k_all[start:stop].max())
        idx = order[start:stop, :k]  # [m, k]
        valid = torch.arange(k, device=H.device).unsqueeze(0) < k_all[start:stop].unsqueeze(1)
        blocks = H[idx.unsqueeze(2), idx.unsqueeze(1)]  # [m, k, k]
        pair = valid.unsqueeze(2) & valid.unsqueeze(1)
        eye = torch.eye(k, dtype=dtype, device=H.device).expand_as(blocks)
        blocks = torch.where(pair, blocks, eye)
        rhs = -torch.gather(b_full[start:stop], 1, idx) * valid
        x = _solve_spd(blocks, rhs) * valid
        rows = active[start:stop]
        sub = torch.zeros(rows.numel(), C, dtype=dtype, device=H.device)
        sub.scatter_add_(1, idx, x)
        out[rows] = sub
        start = stop
    return out


def row_objective(delta: torch.Tensor, hessian: torch.Tensor) -> torch.Tensor:
    """½·Δw_i·H·Δw_iᵀ per row of ``delta`` [n, C] → [n]."""
    return 0.5 * ((delta @ hessian.to(delta.dtype)) * delta).sum(dim=1)
