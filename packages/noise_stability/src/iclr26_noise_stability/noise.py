"""Correlated token noise: the discrete analogue of Y = ρX + √(1−ρ²)Z.

Each noised position keeps its token with probability q and is otherwise resampled uniformly from the
vocabulary (possibly to the same token). On functions of uniform tokens this noise operator multiplies the
Efron–Stein component of degree |S| by q^{|S|}, so q — not ρ — is its eigenvalue:

* ``noise="paper"`` (default, the public description): q = (1 + ρ)/2. "Keep with probability (1+ρ)/2, else
  flip" is exactly ρ-correlated only for ±1 bits; with uniform resampling over U tokens the eigenvalue is
  (1 + ρ)/2 and the keep-rate is q + (1 − q)/U.
* ``noise="exact"``: q = ρ, so that the eigenvalue equals ρ as in the Gaussian definition.

``support`` restricts what a resampled position may become: ``None`` draws from the whole vocabulary
[0, vocab_size); an int n draws from [0, n) (e.g. the p residues of modular addition, never its "=" token);
a sequence draws from those ids. The keep-rate is then q + (1 − q)/|support| and, for inputs uniform on the
support, the eigenvalue is still q.

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


Support = int | Sequence[int] | None


def support_ids(support: Support, vocab_size: int, device=None) -> torch.Tensor | None:
    """The token ids a resampled position may take ([n] int64), or None for the whole vocabulary."""
    if support is None:
        return None
    if isinstance(support, bool):
        raise NoiseStabilityError(f"support must be an int or a sequence of token ids, got {support!r}")
    if isinstance(support, int):
        if not 1 <= support <= vocab_size:
            raise NoiseStabilityError(f"support={support} must be in [1, vocab_size={vocab_size}]")
        return torch.arange(support, device=device)
    ids = torch.as_tensor(list(support), dtype=torch.long, device=device)
    if ids.numel() == 0 or ids.dim() != 1 or int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise NoiseStabilityError(
            f"support must be non-empty token ids in [0, {vocab_size}), got {support!r}"
        )
    return ids


def _fresh(shape, vocab_size: int, support: Support, generator, like: torch.Tensor) -> torch.Tensor:
    """Uniform draws of ``shape`` from the support (default: the whole vocabulary), dtype of ``like``."""
    ids = support_ids(support, vocab_size, like.device)
    n = vocab_size if ids is None else len(ids)
    draw = torch.randint(0, n, shape, generator=generator, device=like.device)
    return (draw if ids is None else ids[draw]).to(like.dtype)


def correlated_tokens(
    input_ids: torch.Tensor,
    rho: float,
    vocab_size: int,
    noise: str = "paper",
    positions: Sequence[int] | None = None,
    generator: torch.Generator | None = None,
    support: Support = None,
) -> torch.Tensor:
    """A ρ-correlated copy of ``input_ids`` ([..., T] integer) with the same shape and dtype.

    At each position in ``positions`` (default: all) independently: keep the token with probability q
    (see the module docstring), else draw a uniform token from ``support`` (default [0, vocab_size)).
    Other positions never change.
    """
    check_input_ids(input_ids, vocab_size)
    q = noise_eigenvalue(rho, noise)
    mask = position_mask(input_ids.shape[-1], positions, input_ids.device)
    u = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    fresh = _fresh(input_ids.shape, vocab_size, support, generator, input_ids)
    resample = (u >= q) & mask
    return torch.where(resample, fresh, input_ids)


def resample_one_token(
    input_ids: torch.Tensor,
    vocab_size: int,
    positions: Sequence[int] | None = None,
    generator: torch.Generator | None = None,
    support: Support = None,
) -> torch.Tensor:
    """x^{(i)}: per sequence, one position i drawn uniformly from ``positions`` resampled uniformly (from
    ``support``, default the whole vocabulary)."""
    check_input_ids(input_ids, vocab_size)
    mask = position_mask(input_ids.shape[-1], positions, input_ids.device)
    allowed = mask.nonzero().flatten()
    lead = input_ids.shape[:-1]
    pick = allowed[torch.randint(0, len(allowed), lead, generator=generator, device=input_ids.device)]
    fresh = _fresh(lead, vocab_size, support, generator, input_ids)
    out = input_ids.clone()
    out.scatter_(-1, pick.unsqueeze(-1), fresh.unsqueeze(-1))
    return out
