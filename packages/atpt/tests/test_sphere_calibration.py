"""The sphere experiment and the calibration metrics (vs naive and independent implementations)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26_atpt.calibration import ece20, fit_temperature
from iclr26_atpt.sphere import sphere_experiment
from iclr26_core.testing import naive_ece


def test_sphere_deterministic_per_seed_and_spreads():
    a = sphere_experiment(10, 32, "atpt", steps=60, seed=1)
    b = sphere_experiment(10, 32, "atpt", steps=60, seed=1)
    c = sphere_experiment(10, 32, "atpt", steps=60, seed=2)
    assert a.min_angle_deg == b.min_angle_deg and a.curve_deg == b.curve_deg
    assert a.min_angle_deg != c.min_angle_deg
    assert a.curve_deg[-1] > a.curve_deg[0] + 20  # it spreads the collapsed start
    with pytest.raises(ValueError):
        sphere_experiment(10, 32, "none")


def test_ece20_against_naive_and_torchmetrics():
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=2.0, size=(500, 10))
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = rng.integers(0, 10, 500)
    ours = ece20(probs, labels)
    assert ours == pytest.approx(100 * naive_ece(probs, labels, n_bins=20), abs=1e-9)
    from torchmetrics.functional.classification import multiclass_calibration_error

    tm = multiclass_calibration_error(
        torch.tensor(probs), torch.tensor(labels), num_classes=10, n_bins=20, norm="l1"
    )
    assert ours == pytest.approx(100 * float(tm), abs=1e-3)


def test_ece_over_whole_set_not_per_batch():
    # per-sample ECE (Bala93/CLIPCalib #2) is |1[correct] - conf| averaged: a different number
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(10) * 0.3, size=200)
    labels = rng.integers(0, 10, 200)
    whole = ece20(probs, labels)
    per_sample = np.mean([ece20(probs[i : i + 1], labels[i : i + 1]) for i in range(200)])
    assert whole == pytest.approx(100 * naive_ece(probs, labels, n_bins=20))
    assert abs(whole - per_sample) > 1.0


def test_fit_temperature_against_grid():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 5, 400)
    z = rng.normal(size=(400, 5))
    z[np.arange(400), labels] += 1.5
    z *= 3.0  # overconfident
    temp = fit_temperature(z, labels)
    grid = np.exp(np.linspace(-3, 3, 4001))

    def nll(t):
        s = z / t
        s = s - s.max(1, keepdims=True)
        return -(s[np.arange(400), labels] - np.log(np.exp(s).sum(1))).mean()

    best = grid[np.argmin([nll(t) for t in grid])]
    assert temp == pytest.approx(best, rel=5e-3) and temp > 1.0
