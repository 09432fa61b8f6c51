"""Noise-aware reporting: the test gain of a prompt over another with a paired, task-stratified bootstrap
confidence interval.

Both prompts are scored on the same questions. The gain is the mean over tasks of the per-task accuracy
difference; the bootstrap resamples each task's questions with replacement (keeping the pairs) ``n_boot`` times
and reports the ``alpha/2`` and ``1 − alpha/2`` percentiles.
"""

from __future__ import annotations

import numpy as np


def paired_gain_ci(
    hits_base: np.ndarray,
    hits_new: np.ndarray,
    task_of: np.ndarray,
    *,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(gain, low, high) of ``hits_new`` over ``hits_base`` (0/1 per question, [Q] each; ``task_of`` [Q])."""
    d = np.asarray(hits_new, float) - np.asarray(hits_base, float)
    task_of = np.asarray(task_of)
    rng = np.random.default_rng(seed)
    tasks = np.unique(task_of)
    point, boots = [], np.zeros((n_boot, len(tasks)))
    for k, t in enumerate(tasks):
        dt = d[task_of == t]
        point.append(dt.mean())
        boots[:, k] = dt[rng.integers(0, len(dt), (n_boot, len(dt)))].mean(axis=1)
    lo, hi = np.quantile(boots.mean(axis=1), [alpha / 2, 1 - alpha / 2])
    return float(np.mean(point)), float(lo), float(hi)
