"""The best-key diagnostic (issue #46): does the true inter-frame rotation change which key token the spatial Lie
bias favours?

For a query token i of frame t and the key tokens j of frame s the relative spatial bias is
⟨R_t p_i, R_s p_j⟩ = ⟨p_i, R(θ_s − θ_t) p_j⟩. Without rotation its best key is j = i (the same cell); with the true
relative rotation δ = φ_s − φ_t it is argmax_j ⟨p_i, R(δ) p_j⟩. If that is still i for every query, knowing the
rotation does not change which token the bias points to, and a miniature on that grid cannot show what the paper's
learned rotations are for. No training: rays and angles only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from iclr26_core.report import Claim

from .bias import base_rays
from .lie import so2_matrix

THRESHOLD = 0.05  # D1 passes when the rotation moves the best key of at least 5 % of the queries


def best_key_change(grid: tuple[int, int], relative_deg, chunk: int = 64) -> float:
    """Share of (angle, query) pairs whose best key argmax_j ⟨p_i, R(δ) p_j⟩ is not the query's own cell i, over
    the relative angles ``relative_deg`` (degrees, any shape) on an H'×W' ``grid``."""
    rays = base_rays(grid, torch.float64)
    deltas = torch.as_tensor(np.asarray(relative_deg, dtype=np.float64)).flatten()
    own = torch.arange(len(rays))
    moved = 0
    for k in range(0, len(deltas), chunk):
        rot = so2_matrix(torch.deg2rad(deltas[k : k + chunk]))  # [c, 3, 3]
        scores = torch.einsum("id,cde,je->cij", rays, rot, rays)  # ⟨p_i, R(δ) p_j⟩
        moved += int((scores.argmax(-1) != own).sum())
    return moved / max(1, len(deltas) * len(rays))


def band_pairs(phi_deg: torch.Tensor, band: int) -> np.ndarray:
    """Relative angles φ_s − φ_t (degrees) of the frame pairs attention sees, 0 < s − t ≤ band (the other order
    gives the mirror image of the grid: the same share), pooled over clips."""
    phi = phi_deg.double()
    t = phi.shape[1]
    out = [phi[:, s] - phi[:, r] for r in range(t) for s in range(r + 1, t) if s - r <= band]
    return torch.cat(out).numpy() if out else np.zeros(0)


def diagnostic(phi_deg: torch.Tensor, size: int, patch: int, band: int, omega_deg: float) -> dict[str, Any]:
    """The best-key shares on this run's token grid and, for comparison, on 0.2's (48 px, p = 8: 6×6), the
    spec's (64 px, p = 8: 8×8) and the paper's (256 px crop, p = 8: 32×32) grids: over the held-out clips'
    band pairs (``phi_deg`` [n, T]) and at the largest per-frame rotation ``omega_deg`` (the reviewer's measure)."""
    pairs = band_pairs(phi_deg, band)
    grids = {
        "this run": (math.ceil(size / patch),) * 2,
        "0.2 (48 px, p=8)": (6, 6),
        "spec (64 px, p=8)": (8, 8),
        "paper (256 crop, p=8)": (32, 32),
    }
    rows = {}
    for name, grid in grids.items():
        rows[name] = {
            "grid": list(grid),
            "clip_pairs": best_key_change(grid, pairs),
            "at_max_rotation": best_key_change(grid, [omega_deg]),
        }
    return {
        "rows": rows,
        "pairs": len(pairs),
        "mean_abs_relative_deg": float(np.abs(pairs).mean()) if len(pairs) else 0.0,
        "omega_deg": omega_deg,
    }


def claim_d1(diag: dict[str, Any]) -> Claim:
    """The check row D1: this run's grid lets the true rotation move the best key of ≥ THRESHOLD of the queries
    over the held-out clips' band pairs (not a claim of the paper: a precondition for C3–C5 to test it)."""
    here = diag["rows"]["this run"]
    others = "; ".join(
        f"{name} {r['grid'][0]}×{r['grid'][1]}: {r['clip_pairs']:.1%} ({r['at_max_rotation']:.1%} at "
        f"{diag['omega_deg']:g}°)"
        for name, r in diag["rows"].items()
        if name != "this run"
    )
    return Claim(
        "D1",
        "the miniature can exercise the method: the true inter-frame rotation changes the key token the spatial "
        "Lie bias favours",
        "— (a precondition, not a claim of the paper)",
        {
            "grid": here["grid"],
            "best_key_changed": here["clip_pairs"],
            "at_max_rotation": here["at_max_rotation"],
        },
        here["clip_pairs"] >= THRESHOLD,
        f"share of queries whose best key argmax_j ⟨p_i, R(φ_s − φ_t) p_j⟩ ≠ i, over the held-out clips' frame "
        f"pairs with 0 < |t − s| ≤ band, at least {THRESHOLD:.0%}",
        f"{diag['pairs']} pairs, mean |φ_s − φ_t| {diag['mean_abs_relative_deg']:.2f}°; at the largest "
        f"per-frame rotation {diag['omega_deg']:g}°: {here['at_max_rotation']:.1%}; other grids, same clips: "
        f"{others}",
    )
