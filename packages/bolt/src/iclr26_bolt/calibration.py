"""Temperature calibration: τ_cal = argmin_τ mean NLL of softmax(s/τ) on validation, bounded on [0.05, 10]."""

from __future__ import annotations

from typing import Any

import numpy as np

from iclr26_core.errors import UserError


def _as_np(x: Any) -> np.ndarray:
    return x.detach().cpu().double().numpy() if hasattr(x, "detach") else np.asarray(x, dtype=np.float64)


def nll_at(scores: Any, gold: Any, tau: float) -> float:
    """Mean −log softmax(s/τ)[y] over items. scores: [N, K]; gold: [N]."""
    s = _as_np(scores) / float(tau)
    y = np.asarray(gold.tolist() if hasattr(gold, "tolist") else gold, dtype=np.int64)
    s = s - s.max(axis=1, keepdims=True)
    logz = np.log(np.exp(s).sum(axis=1))
    return float(np.mean(logz - s[np.arange(len(y)), y]))


def fit_temperature(scores: Any, gold: Any, bounds: tuple[float, float] = (0.05, 10.0)) -> float:
    """The temperature τ in ``bounds`` that minimises the validation NLL of softmax(scores/τ).

    scores: [N, K] (tensor or array); gold: [N] option indices. Bounded scalar minimisation (scipy).
    """
    from scipy.optimize import minimize_scalar

    s = _as_np(scores)
    y = np.asarray(gold.tolist() if hasattr(gold, "tolist") else gold, dtype=np.int64)
    if s.ndim != 2 or len(s) != len(y) or len(y) == 0:
        raise UserError(f"fit_temperature needs scores [N, K] and gold [N]; got {s.shape} and {y.shape}")
    if not np.isfinite(s).all():
        raise UserError("fit_temperature: the scores contain NaN or inf")
    if (y < 0).any() or (y >= s.shape[1]).any():
        raise UserError("fit_temperature: a gold index is out of range")
    lo, hi = float(bounds[0]), float(bounds[1])
    if not 0 < lo < hi:
        raise UserError(f"temperature bounds must satisfy 0 < low < high, got {bounds}")
    res = minimize_scalar(
        lambda t: nll_at(s, y, t), bounds=(lo, hi), method="bounded", options={"xatol": 1e-4}
    )
    return float(res.x)
