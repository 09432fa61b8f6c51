"""Correlated token noise: the discrete analogue of Y = ρX + √(1−ρ²)Z.

Each noised position keeps its token with probability q and is otherwise resampled uniformly from the
vocabulary (possibly to the same token). On functions of uniform tokens this noise operator multiplies the
Efron–Stein component of degree |S| by q^{|S|}, so q — not ρ — is its eigenvalue:

* ``noise="paper"`` (default, the public description): q = (1 + ρ)/2. "Keep with probability (1+ρ)/2, else
  flip" is exactly ρ-correlated only for ±1 bits; with uniform resampling over U tokens the eigenvalue is
  (1 + ρ)/2 and the keep-rate is q + (1 − q)/U.
* ``noise="exact"``: q = ρ, so that the eigenvalue equals ρ as in the Gaussian definition.

`resample_one_token` is the average-sensitivity perturbation x^{(i)}: one uniformly chosen position per
sequence resampled uniformly.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .errors import NoiseStabilityError, check_noise, check_rho


def noise_eigenvalue(rho: float, noise: str = "paper") -> float:
    """The eigenvalue λ of the token-noise operator: (1 + ρ)/2 for ``paper``, ρ for ``exact``."""
    rho = check_rho(rho, tokens=True)
    return (1.0 + rho) / 2.0 if check_noise(noise) == "paper" else rho


def check_input_ids(input_ids: torch.Tensor, vocab_size: int | None = None) -> None:
    """Integer ids in [0, vocab_size); a float tensor or an id beyond the vocabulary is a user error."""
    if not isinstance(input_ids, torch.Tensor):
        raise NoiseStabilityError(f"input_ids must be a torch.Tensor, got {type(input_ids).__name__}")
    if input_ids.is_floating_point() or input_ids.is_complex() or input_ids.dtype == torch.bool:
        raise NoiseStabilityError(f"input_ids must be an integer tensor, got dtype {input_ids.dtype}")
    if input_ids.dim() == 0:
        raise NoiseStabilityError("input_ids must have a sequence dimension, got a scalar")
    if vocab_size is not None and input_ids.numel():
        lo, hi = int(input_ids.min()), int(input_ids.max())
        if lo < 0:
            raise NoiseStabilityError(f"input_ids contain a negative id ({lo})")
        if hi >= vocab_size:
            raise NoiseStabilityError(
                f"vocab_size={vocab_size} is smaller than the largest id + 1 ({hi + 1})"
            )


def position_mask(seq_len: int, positions: Sequence[int] | None, device=None) -> torch.Tensor:
    """Boolean [seq_len] mask of the noised positions (``None``: all); negative indices count from the end."""
    mask = torch.zeros(seq_len, dtype=torch.bool, device=device)
    if positions is None:
        mask[:] = True
        return mask
    for p in positions:
        if isinstance(p, bool) or not isinstance(p, int) or not -seq_len <= p < seq_len:
            raise NoiseStabilityError(f"position {p!r} is out of range for sequences of length {seq_len}")
        mask[p] = True
    return mask


def correlated_tokens(
    input_ids: torch.Tensor,
    rho: float,
    vocab_size: int,
    noise: str = "paper",
    positions: Sequence[int] | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """A ρ-correlated copy of ``input_ids`` ([..., T] integer) with the same shape and dtype.

    At each position in ``positions`` (default: all) independently: keep the token with probability q
    (see the module docstring), else draw a uniform token from [0, vocab_size). Other positions never change.
    """
    check_input_ids(input_ids, vocab_size)
    q = noise_eigenvalue(rho, noise)
    mask = position_mask(input_ids.shape[-1], positions, input_ids.device)
    u = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    fresh = torch.randint(
        0, vocab_size, input_ids.shape, generator=generator, device=input_ids.device, dtype=input_ids.dtype
    )
    resample = (u >= q) & mask
    return torch.where(resample, fresh, input_ids)


def resample_one_token(
    input_ids: torch.Tensor,
    vocab_size: int,
    positions: Sequence[int] | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """x^{(i)}: per sequence, one position i drawn uniformly from ``positions`` resampled uniformly."""
    check_input_ids(input_ids, vocab_size)
    mask = position_mask(input_ids.shape[-1], positions, input_ids.device)
    allowed = mask.nonzero().flatten()
    lead = input_ids.shape[:-1]
    pick = allowed[torch.randint(0, len(allowed), lead, generator=generator, device=input_ids.device)]
    fresh = torch.randint(
        0, vocab_size, lead, generator=generator, device=input_ids.device, dtype=input_ids.dtype
    )
    out = input_ids.clone()
    out.scatter_(-1, pick.unsqueeze(-1), fresh.unsqueeze(-1))
    return out
