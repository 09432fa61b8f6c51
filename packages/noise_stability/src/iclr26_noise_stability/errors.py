"""The package's user-error type and the argument checks shared by its functions.

`NoiseStabilityError` is both an `iclr26_core.errors.UserError` (the CLI prints it as one line) and a
`ValueError` (what a library user expects to catch for a bad argument).
"""

from __future__ import annotations

import math
from typing import Any

from iclr26_core.errors import UserError

NOISE_KINDS = ("paper", "exact")


class NoiseStabilityError(UserError, ValueError):
    """A bad argument of a noise-stability function: one clear line."""


def check_rho(rho: Any, *, tokens: bool) -> float:
    """ρ as a float: in [0, 1] for token noise (a keep probability), in [-1, 1] for Gaussian noise."""
    try:
        value = float(rho)
    except (TypeError, ValueError):
        raise NoiseStabilityError(f"rho must be a number, got {rho!r}") from None
    lo = 0.0 if tokens else -1.0
    if math.isnan(value) or not lo <= value <= 1.0:
        kind = "token noise" if tokens else "Gaussian noise"
        raise NoiseStabilityError(f"rho must be in [{lo:g}, 1] for {kind}, got {rho!r}")
    return value


def check_gamma(gamma: Any) -> float:
    value = float(gamma)
    if math.isnan(value) or value < 0:
        raise NoiseStabilityError(f"gamma must be >= 0, got {gamma!r}")
    return value


def check_sign(S: Any) -> int:
    if S not in (0, 1) or isinstance(S, bool):
        raise NoiseStabilityError(f"S must be 0 (discourage stability) or 1 (encourage it), got {S!r}")
    return int(S)


def check_noise(noise: str) -> str:
    if noise not in NOISE_KINDS:
        raise NoiseStabilityError(f"noise must be one of {', '.join(NOISE_KINDS)}, got {noise!r}")
    return noise
