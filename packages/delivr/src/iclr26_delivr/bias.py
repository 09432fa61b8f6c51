"""The differential spatiotemporal Lie bias (spec Method 3–6), on plain tensors.

Token order: the sequence index of cell i (row-major on the H'×W' grid) of frame t is ``t·N + i``, N = H'W'.
`lie_bias` returns the combined bias *before* the per-head MLP g and a boolean ``mask`` that is True where
attention is allowed (|t − s| ≤ band); the model applies g and then the mask (or, officially, the mask first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch

from .lie import vee


@lru_cache(maxsize=32)
def _base_rays(h: int, w: int) -> torch.Tensor:
    ys, xs = torch.meshgrid(
        torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64), indexing="ij"
    )
    xn = (xs - (w - 1) / 2) / (w - 1) if w > 1 else torch.zeros_like(xs)
    yn = (ys - (h - 1) / 2) / (h - 1) if h > 1 else torch.zeros_like(ys)
    p = torch.stack([xn, yn, torch.ones_like(xn)], -1).reshape(h * w, 3)
    return p / p.norm(dim=-1, keepdim=True)


def base_rays(grid: tuple[int, int], dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """P [N, 3]: cell (x, y) -> (x_n, y_n, 1)/‖·‖ with x_n = (x − (W'−1)/2)/(W'−1) ∈ [−½, ½] (0 if W' = 1)."""
    h, w = grid
    return _base_rays(int(h), int(w)).to(dtype=dtype, device=device)


def rotation_angle(rot: torch.Tensor) -> torch.Tensor:
    """θ = ‖log R‖ = atan2(‖(R − Rᵀ)ᵛ/2‖, (tr R − 1)/2) ∈ [0, π]: [..., 3, 3] -> [...].

    Same value as ``so3_log(R).norm(-1)`` but with finite gradients at R = I (where arccos has none).
    """
    s2 = (vee(rot) ** 2).sum(-1)
    pos = s2 > 0
    sin = torch.where(pos, torch.where(pos, s2, torch.ones_like(s2)).sqrt(), torch.zeros_like(s2))
    cos = (rot[..., 0, 0] + rot[..., 1, 1] + rot[..., 2, 2] - 1) / 2
    return torch.atan2(sin, cos)


def lie_velocity(rot: torch.Tensor) -> torch.Tensor:
    """v_t = ‖log(R_{t−1}ᵀ R_t)‖ for t = 1..T−1: [B, T, 3, 3] -> [B, T−1]."""
    return rotation_angle(rot[:, :-1].transpose(-1, -2) @ rot[:, 1:])


def band_mask(frames: int, n_tokens: int, band: int, device=None) -> torch.Tensor:
    """[TN, TN] bool, True where |t − s| ≤ band (attention allowed); band < 0 allows everything."""
    t = torch.arange(frames, device=device)
    ok = (
        (t[:, None] - t[None, :]).abs() <= band if band >= 0 else torch.ones(frames, frames, dtype=torch.bool)
    )
    return ok[:, None, :, None].expand(frames, n_tokens, frames, n_tokens).reshape(frames * n_tokens, -1)


def temporal_decay(frames: int, tau: torch.Tensor | float, dtype=torch.float32, device=None) -> torch.Tensor:
    """[T, T] exp(−|t − s|/τ) (differentiable in τ when τ is a tensor)."""
    t = torch.arange(frames, device=device, dtype=dtype)
    dt = (t[:, None] - t[None, :]).abs()
    tau = tau if isinstance(tau, torch.Tensor) else torch.tensor(float(tau), dtype=dtype, device=device)
    return torch.exp(-dt / tau.to(dtype))


@dataclass
class LieBias:
    bias: torch.Tensor  # [B, TN, TN] combined bias, before the per-head MLP (masked pairs not filled)
    mask: torch.Tensor  # [TN, TN] bool, True = attention allowed
    velocity: torch.Tensor  # [B, T-1] Lie velocity (always with gradient)
    spatial: torch.Tensor | None = None  # [B, T, N, T, N] B_sp, when asked for
    theta_rel: torch.Tensor | None = None  # [B, T, T]


def lie_bias(
    rot: torch.Tensor,
    grid: tuple[int, int],
    *,
    bias_form: str = "relative",
    time_weight: float = 0.5,
    time_kappa: float = 1.0,
    tau: torch.Tensor | float = 2.0,
    band: int = 1,
    spatial: bool = True,
    temporal: bool = True,
    decay: bool = True,
    use_band_mask: bool = True,
    temporal_grad: bool = False,
    keep_parts: bool = False,
) -> LieBias:
    """B = (B_sp + w_time·b_time) ⊙ exp(−|t−s|/τ) and the band mask (spec Method 4–6).

    rot: [B, T, 3, 3] per-frame rotations R_t; grid: (H', W').
    B_sp[(t,i),(s,j)] = ⟨R_t p_i, R_s p_j⟩ (``relative``, the official forward) or ⟨R_t p_i, p_j⟩ (``to_base``).
    b_time(t, s) = −‖log(R_tᵀR_s)‖/κ for all (i, j), computed without gradient unless ``temporal_grad``.
    """
    if bias_form not in ("relative", "to_base"):
        raise ValueError(f"bias_form must be 'relative' or 'to_base', got {bias_form!r}")
    if time_kappa <= 0:
        raise ValueError(f"time_kappa must be > 0, got {time_kappa}")
    b, t = rot.shape[:2]
    h, w = grid
    n = h * w
    p = base_rays(grid, rot.dtype, rot.device)  # [N, 3]
    rp = torch.einsum("btxy,ny->btnx", rot, p)  # [B, T, N, 3]: R_t p_i
    if spatial:
        other = rp if bias_form == "relative" else p.expand(b, t, n, 3)
        sp = torch.einsum("btix,bsjx->btisj", rp, other)
    else:
        sp = rot.new_zeros(b, t, n, t, n)
    total = sp
    theta_rel = None
    if temporal:
        with torch.set_grad_enabled(temporal_grad and torch.is_grad_enabled()):
            rel = rot.transpose(-1, -2)[:, :, None] @ rot[:, None, :]  # [B, T, T, 3, 3]: R_tᵀ R_s
            theta_rel = rotation_angle(rel)
            b_time = -theta_rel / time_kappa
        total = total + time_weight * b_time[:, :, None, :, None]
    if decay:
        total = total * temporal_decay(t, tau, rot.dtype, rot.device)[None, :, None, :, None]
    bias = total.expand(b, t, n, t, n).reshape(b, t * n, t * n)
    mask = band_mask(t, n, band if use_band_mask else -1, rot.device)
    return LieBias(
        bias=bias,
        mask=mask,
        velocity=lie_velocity(rot),
        spatial=sp if keep_parts else None,
        theta_rel=theta_rel if keep_parts else None,
    )


def tau_from_raw(tau_raw: torch.Tensor) -> torch.Tensor:
    """τ = softplus(τ_raw) + 0.5 ≥ 0.5."""
    return torch.nn.functional.softplus(tau_raw) + 0.5


def tau_raw_init(tau: float) -> float:
    """The τ_raw with softplus(τ_raw) + 0.5 = τ (τ > 0.5)."""
    if tau <= 0.5:
        raise ValueError(f"tau_init must be > 0.5, got {tau}")
    return math.log(math.expm1(tau - 0.5))
