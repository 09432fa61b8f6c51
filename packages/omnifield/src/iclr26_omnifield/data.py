"""Synthetic correlated fields and the Venn sensor partition (numpy, seeded).

Shared latent S(x, t) = Σ_j a_j sin(2π k_j·(x − v t) + φ_j) on the periodic unit square: 13 modes with
1 ≤ |k|_∞ ≤ 4 and 3 with 6 ≤ |k|_∞ ≤ 10, a_j ∝ 1/‖k_j‖ rescaled so Var S = 1, φ_j ~ U(0, 2π), one advection
velocity v = (0.03, −0.02) per step. Modalities (ClimSim's T, Q, V at one level, in miniature): T = S + P_T,
H = tanh(1.5 S) + P_H, W = the geostrophic meridional wind ∂S/∂x / std(∂S/∂x) + P_W (``wind="meridional"``, the
default since 0.2; ``wind="speed"``: the spec's W = ‖∇S‖/E‖∇S‖ − 1 + P_W, which no linear predictor can read S
from), with private fields P_m (4 modes, |k|_∞ ≤ 3, variance 0.1, advected alike). ``waves="fixed"`` (default):
the wave vectors are one fixed set (``structure_seed``), the phases are drawn per sample — a field with a fixed
spatial covariance, as a planet's climate has (EOFs); ``waves="per_sample"``: wave vectors drawn per sample too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODALITIES = ("T", "H", "W")
VELOCITY = (0.03, -0.02)


@dataclass
class FieldData:
    """fields [n, max(h)+1, M, g, g]; coords [g·g, 2] in [0, 1) (row-major, x then y); truth: the shared
    latent S [n, max(h)+1, g, g]."""

    fields: np.ndarray
    coords: np.ndarray
    truth: np.ndarray
    modalities: tuple[str, ...] = MODALITIES
    horizons: tuple[int, ...] = (0, 1, 2)


def _modes(rng: np.random.Generator, n: int, lo: int, hi: int) -> np.ndarray:
    out = []
    while len(out) < n:
        k = rng.integers(-hi, hi + 1, size=2)
        if lo <= np.abs(k).max() <= hi:
            out.append(k)
    return np.array(out, dtype=float).reshape(-1, 2)


def _wave_field(k, a, phi, X, Y, t):
    """Σ_j a_j sin(2π k_j·(x − v t) + φ_j) and its gradient, on grids X, Y."""
    sx, sy = X - VELOCITY[0] * t, Y - VELOCITY[1] * t
    arg = 2 * np.pi * (k[:, 0, None, None] * sx + k[:, 1, None, None] * sy) + phi[:, None, None]
    val = (a[:, None, None] * np.sin(arg)).sum(0)
    c = a[:, None, None] * np.cos(arg) * 2 * np.pi
    grad = np.stack([(c * k[:, 0, None, None]).sum(0), (c * k[:, 1, None, None]).sum(0)])
    return val, grad


def synthetic_fields(
    n_samples: int,
    grid: int = 32,
    horizons=(0, 1, 2),
    seed: int = 0,
    structure_seed: int = 2026,
    k_low: int = 4,
    n_high: int = 3,
    waves: str = "fixed",
    wind: str = "meridional",
) -> FieldData:
    """``n_samples`` independent samples of the three correlated fields at steps 0..max(horizons).

    ``waves="fixed"``: the wave vectors k_j (and the private fields' modes) are one set drawn from
    ``structure_seed``, shared by every sample; ``"per_sample"``: drawn for each sample from ``seed``. Each sample
    draws its phases φ_j from ``seed``. ``k_low`` (4) bounds |k|_∞ of the 16 − ``n_high`` low modes; ``n_high``
    (3) modes have 6 ≤ |k|_∞ ≤ 10. ``wind``: "meridional" (W = ∂S/∂x, unit variance, + P_W) or "speed" (the
    spec's W = ‖∇S‖/E‖∇S‖ − 1 + P_W); see the module docstring.
    """
    rng = np.random.default_rng(seed)
    srng = np.random.default_rng(structure_seed)

    def structure(r: np.random.Generator):
        k = np.concatenate([_modes(r, 16 - n_high, 1, k_low), _modes(r, n_high, 6, 10)])
        a = 1.0 / np.linalg.norm(k, axis=1)
        return k, a / np.sqrt((a**2).sum() / 2), [_modes(r, 4, 1, 3) for _ in range(3)]  # Var S = Σ a²/2 = 1

    if waves not in ("fixed", "per_sample"):
        raise ValueError(f"waves must be 'fixed' or 'per_sample', got {waves!r}")
    if wind not in ("meridional", "speed"):
        raise ValueError(f"wind must be 'meridional' or 'speed', got {wind!r}")
    k, a, kps = structure(srng)
    ap = np.full(4, np.sqrt(0.1 * 2 / 4))  # Σ a²/2 = 0.1
    lin = np.arange(grid) / grid
    X, Y = np.meshgrid(lin, lin, indexing="ij")
    T_steps = max(horizons) + 1
    fields = np.zeros((n_samples, T_steps, 3, grid, grid))
    truth = np.zeros((n_samples, T_steps, grid, grid))
    for i in range(n_samples):
        if waves == "per_sample":
            k, a, kps = structure(rng)
        phi = rng.uniform(0, 2 * np.pi, 16)
        priv = [(kp, ap, rng.uniform(0, 2 * np.pi, 4)) for kp in kps]
        for t in range(T_steps):
            S, gS = _wave_field(k, a, phi, X, Y, t)
            P = [_wave_field(kp, ap, pp, X, Y, t)[0] for kp, ap, pp in priv]
            gnorm = np.sqrt((gS**2).sum(0))
            truth[i, t] = S
            fields[i, t, 0] = S + P[0]
            fields[i, t, 1] = np.tanh(1.5 * S) + P[1]
            if wind == "speed":
                fields[i, t, 2] = gnorm / gnorm.mean() - 1 + P[2]
            else:  # the geostrophic meridional wind v ∝ ∂S/∂x, unit variance: Var ∂S/∂x = Σ a²(2πk_x)²/2
                fields[i, t, 2] = gS[0] / np.sqrt((a**2 * (2 * np.pi * k[:, 0]) ** 2).sum() / 2) + P[2]
    coords = np.stack([X.ravel(), Y.ravel()], axis=1)
    return FieldData(fields=fields, coords=coords, truth=truth, horizons=tuple(horizons))


def sensor_partition(
    n_points: int,
    n_modalities: int = 3,
    fraction: float = 0.02,
    triple: float = 0.25,
    seed: int = 123,
    names: tuple[str, ...] | None = None,
) -> dict[str, np.ndarray]:
    """The ClimSim Venn partition of ``n_points`` grid cells among 3 modalities.

    Each modality gets c = ⌊f·P/16⌋·16 points: a triple overlap of ``triple``·c, three pair-only regions of
    (1 − triple)/4·c each and an exclusive region of (1 − triple)/2·c per modality. Returns sorted index arrays:
    one per modality name, and the regions ``triple``, ``pair_<a><b>``, ``only_<a>``.
    """
    if n_modalities != 3:
        raise ValueError("the Venn partition is defined for 3 modalities")
    names = tuple(names or MODALITIES)
    c = int(fraction * n_points) // 16 * 16
    n3 = round(triple * c)
    n2 = round((c - n3) / 4)
    n1 = c - n3 - 2 * n2
    need = n3 + 3 * n2 + 3 * n1
    if c <= 0 or need > n_points:
        raise ValueError(f"fraction={fraction} of {n_points} points gives no valid partition")
    perm = np.random.default_rng(seed).permutation(n_points)
    out: dict[str, np.ndarray] = {}
    pos = 0

    def take(k: int) -> np.ndarray:
        nonlocal pos
        pos += k
        return np.sort(perm[pos - k : pos])

    out["triple"] = take(n3)
    pairs = [(0, 1), (0, 2), (1, 2)]
    for a, b in pairs:
        out[f"pair_{names[a]}{names[b]}"] = take(n2)
    for a in range(3):
        out[f"only_{names[a]}"] = take(n1)
    for a in range(3):
        parts = [out["triple"], out[f"only_{names[a]}"]]
        parts += [out[f"pair_{names[i]}{names[j]}"] for i, j in pairs if a in (i, j)]
        out[names[a]] = np.sort(np.concatenate(parts))
    return out
