"""SO(3) exponential and logarithm, and the bounded rotation of DeLiVR's angle head (spec Method 2 and 5).

Conventions: ``[ω]_×`` is the skew matrix with ``[ω]_× v = ω × v``; ``exp([ω]_×)`` is the rotation by ``‖ω‖``
radians about ``ω/‖ω‖`` (right-hand rule), as ``scipy.spatial.transform.Rotation.from_rotvec``. The SO(2) mode
embeds an in-plane angle θ as the rotation about the z axis, ``[[cos θ, −sin θ, 0], [sin θ, cos θ, 0], [0, 0, 1]]``.
"""

from __future__ import annotations

import math

import torch

SMALL_ANGLE = 1e-4  # below this ‖ω‖ the exp/log use Taylor series
NEAR_PI = 1e-3  # within this of π the log takes the axis from R + I


def hat(omega: torch.Tensor) -> torch.Tensor:
    """``[ω]_×``: [..., 3] -> [..., 3, 3] skew-symmetric."""
    x, y, z = omega.unbind(-1)
    o = torch.zeros_like(x)
    return torch.stack(
        [torch.stack([o, -z, y], -1), torch.stack([z, o, -x], -1), torch.stack([-y, x, o], -1)], -2
    )


def vee(m: torch.Tensor) -> torch.Tensor:
    """Inverse of `hat` on the skew part: [..., 3, 3] -> [..., 3], ``½(M − Mᵀ)ᵛ``."""
    return 0.5 * torch.stack(
        [m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]], -1
    )


def so3_exp(omega: torch.Tensor) -> torch.Tensor:
    """Rodrigues: ``R = I + a [ω]_× + b [ω]_×²`` with ``a = sin θ/θ``, ``b = (1 − cos θ)/θ²``, θ = ‖ω‖.

    omega: [..., 3] -> R: [..., 3, 3]. For θ < 1e-4 the coefficients use their Taylor series
    (``a = 1 − θ²/6``, ``b = ½ − θ²/24``), so the map and its gradient are smooth at ω = 0.
    """
    theta2 = (omega * omega).sum(-1)
    theta = theta2.clamp_min(0).sqrt()
    small = theta < SMALL_ANGLE
    safe = torch.where(small, torch.ones_like(theta), theta)
    a = torch.where(small, 1 - theta2 / 6, torch.sin(safe) / safe)
    b = torch.where(small, 0.5 - theta2 / 24, (1 - torch.cos(safe)) / (safe * safe))
    k = hat(omega)
    eye = torch.eye(3, dtype=omega.dtype, device=omega.device).expand(k.shape)
    return eye + a[..., None, None] * k + b[..., None, None] * (k @ k)


def so3_log(rot: torch.Tensor) -> torch.Tensor:
    """Rotation vector ω with ‖ω‖ ∈ [0, π] and ``exp([ω]_×) = R``: [..., 3, 3] -> [..., 3].

    Generic branch ``ω = θ/(2 sin θ) (R − Rᵀ)ᵛ``, θ = arccos((tr R − 1)/2); Taylor branch
    (θ/sin θ ≈ 1 + θ²/6) for θ < 1e-4; near π (θ > π − 1e-3) the axis comes from the largest column of
    ``k kᵀ = (½(R + Rᵀ) − cos θ I)/(1 − cos θ)``, its sign from the skew part.
    """
    tr = rot[..., 0, 0] + rot[..., 1, 1] + rot[..., 2, 2]
    cos = ((tr - 1) / 2).clamp(-1.0, 1.0)
    theta = torch.arccos(cos)
    skew = vee(rot)  # = sin θ · k
    small = theta < SMALL_ANGLE
    near_pi = theta > math.pi - NEAR_PI
    sin = torch.sin(theta)
    safe_sin = torch.where(small | near_pi, torch.ones_like(sin), sin)
    scale = torch.where(small, 1 + theta * theta / 6, theta / safe_sin)
    omega = scale[..., None] * skew
    if bool(near_pi.any()):
        eye = torch.eye(3, dtype=rot.dtype, device=rot.device)
        # ½(R + Rᵀ) = cos θ I + (1 − cos θ) k kᵀ, so k kᵀ follows exactly; its largest column is ±k_j k
        kk = (0.5 * (rot + rot.transpose(-1, -2)) - cos[..., None, None] * eye) / (1 - cos).clamp_min(1e-12)[
            ..., None, None
        ]
        diag = torch.diagonal(kk, dim1=-2, dim2=-1)
        col = torch.gather(kk, -1, diag.argmax(-1)[..., None, None].expand(*kk.shape[:-1], 1))[..., 0]
        axis = col / col.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        sign = torch.where((axis * skew).sum(-1) < 0, -1.0, 1.0).to(rot.dtype)
        omega = torch.where(near_pi[..., None], sign[..., None] * axis * theta[..., None], omega)
    return omega


def so2_matrix(theta: torch.Tensor) -> torch.Tensor:
    """The SO(2) ⊂ SO(3) embedding: [...] angles (radians) -> [..., 3, 3] rotations about z."""
    c, s = torch.cos(theta), torch.sin(theta)
    o, i = torch.zeros_like(theta), torch.ones_like(theta)
    return torch.stack(
        [torch.stack([c, -s, o], -1), torch.stack([s, c, o], -1), torch.stack([o, o, i], -1)], -2
    )


def bounded_rotation(
    mu: torch.Tensor, theta_max: float, mode: str = "so2"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The angle head's bounded rotation (spec Method 2). mu: [..., 3] -> (R [..., 3, 3], ω [..., 3], θ [...]).

    so2: θ = θ_max·tanh(μ_z), ω = (0, 0, θ). so3: ω = θ_max·tanh(‖μ‖)·μ/‖μ‖ (ω = θ_max·μ for μ -> 0), θ = ‖ω‖.
    θ_max in radians.
    """
    if mode == "so2":
        theta = theta_max * torch.tanh(mu[..., 2])
        omega = torch.stack([torch.zeros_like(theta), torch.zeros_like(theta), theta], -1)
        return so2_matrix(theta), omega, theta
    if mode == "so3":
        norm = mu.norm(dim=-1, keepdim=True)
        small = norm < 1e-6
        factor = torch.where(small, torch.ones_like(norm), torch.tanh(norm) / norm.clamp_min(1e-6))
        omega = theta_max * factor * mu
        return so3_exp(omega), omega, omega.norm(dim=-1)
    raise ValueError(f"rotation must be 'so2' or 'so3', got {mode!r}")
