"""The layer-wise Hessian H = 2·X·Xᵀ / L of ½‖ΔW·X‖² (GPTQ's), its damping and dead inputs.

OBR (Eq. 4-6 of the paper) approximates the Hessian of the task loss by G ⊗ H with G ≈ I, so every output row
w_i is restored independently under the quadratic form ½·Δw_i·H·Δw_iᵀ.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from iclr26_core.errors import UserError


class HessianAccumulator:
    """Running mean of 2·x·xᵀ over calibration tokens; ``add(x)`` takes inputs [..., C] as a Linear sees them."""

    def __init__(self, columns: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32):
        self.H = torch.zeros(columns, columns, device=device, dtype=dtype)
        self.tokens = 0

    def add(self, x: torch.Tensor) -> None:
        x = x.detach().reshape(-1, x.shape[-1]).to(self.H.dtype)
        n = x.shape[0]
        if n == 0:
            return
        self.H.mul_(self.tokens / (self.tokens + n))
        self.tokens += n
        self.H.addmm_(x.t(), x, alpha=2.0 / self.tokens)

    @property
    def hessian(self) -> torch.Tensor:
        if self.tokens == 0:
            raise UserError("no calibration tokens reached this layer")
        return self.H


def hessian_from_inputs(x: torch.Tensor) -> torch.Tensor:
    """H = 2·XᵀX / L for inputs x [L, C] (a one-shot `HessianAccumulator`)."""
    acc = HessianAccumulator(
        x.shape[-1], x.device, torch.float64 if x.dtype == torch.float64 else torch.float32
    )
    acc.add(x)
    return acc.hessian


def check_hessian(hessian: torch.Tensor, columns: int | None = None) -> None:
    """A square, finite Hessian whose size matches the weight's input columns; else a `UserError`."""
    if not isinstance(hessian, torch.Tensor) or hessian.dim() != 2 or hessian.shape[0] != hessian.shape[1]:
        shape = tuple(hessian.shape) if isinstance(hessian, torch.Tensor) else type(hessian).__name__
        raise UserError(f"the Hessian must be a square [Cin, Cin] matrix, got {shape}")
    if columns is not None and hessian.shape[0] != columns:
        raise UserError(
            f"the Hessian is {hessian.shape[0]}x{hessian.shape[0]} but the weight has {columns} inputs"
        )
    if not bool(torch.isfinite(hessian).all()):
        raise UserError("the Hessian has NaN or infinite entries")


@dataclass
class PreparedLayer:
    """A weight and its Hessian ready for compression (GPTQ's conventions).

    weight: [Cout, Cin] in the working dtype, dead input columns set to 0.
    hessian: undamped H with H_jj = 1 on dead inputs (for output errors and Wanda's ‖X_j‖).
    damped: H + percdamp·mean(diag H)·I (for every solve).
    dead: [Cin] bool, inputs that were always zero in the calibration data.
    """

    weight: torch.Tensor
    hessian: torch.Tensor
    damped: torch.Tensor
    dead: torch.Tensor


def working_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def prepare(weight: torch.Tensor, hessian: torch.Tensor, percdamp: float = 0.01) -> PreparedLayer:
    """Copy ``weight`` and ``hessian`` to the working dtype; dead inputs → H_jj = 1, W[:, j] = 0; damp."""
    if weight.dim() != 2:
        raise UserError(f"the weight must be a [Cout, Cin] matrix, got shape {tuple(weight.shape)}")
    check_hessian(hessian, weight.shape[1])
    if not bool(torch.isfinite(weight).all()):
        raise UserError("the weight has NaN or infinite entries")
    dtype = working_dtype(weight)
    W = weight.detach().to(dtype).clone(memory_format=torch.contiguous_format)
    H = hessian.detach().to(device=W.device, dtype=dtype).clone()
    H = (H + H.t()) / 2
    dead = torch.diag(H) == 0
    idx = torch.nonzero(dead).flatten()
    H[idx, idx] = 1.0
    W[:, dead] = 0.0
    damped = H.clone()
    damp = percdamp * torch.mean(torch.diag(H))
    damped.diagonal().add_(damp)
    return PreparedLayer(W, H, damped, dead)


def chol_upper_inverse(damped: torch.Tensor) -> torch.Tensor:
    """U upper triangular with H⁻¹ = Uᵀ·U (GPTQ's ``Hinv``); adds damping until H is positive definite."""
    H = damped
    for attempt in range(6):
        L, info = torch.linalg.cholesky_ex(H)
        if int(info) == 0:
            Hinv = torch.cholesky_inverse(L)
            U, info2 = torch.linalg.cholesky_ex(Hinv, upper=True)
            if int(info2) == 0:
                return U
        H = damped.clone()
        H.diagonal().add_(torch.mean(torch.diag(damped)) * 0.01 * 10**attempt)
    raise UserError("the Hessian is not positive definite even with damping (check the calibration data)")
