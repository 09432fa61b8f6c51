"""Temperature fit against a dense grid; entropy, margin and JS in closed form / against scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon

from iclr26_bolt import fit_temperature, router_features
from iclr26_bolt.calibration import nll_at
from iclr26_bolt.features import agreement, entropy, js_divergence, margin, question_type


def test_fit_temperature_matches_grid():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 400)
    s = rng.normal(size=(400, 4))
    s[np.arange(400), y] += 1.0
    s *= 3.0  # over-confident: the best temperature is > 1
    tau = fit_temperature(torch.tensor(s), torch.tensor(y))
    grid = np.linspace(0.05, 10, 20000)
    best = grid[np.argmin([nll_at(s, y, t) for t in grid])]
    assert abs(tau - best) < 1e-2 and tau > 1


def test_entropy_margin_closed_form():
    p = torch.tensor([[0.5, 0.25, 0.25, 0.0], [1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(entropy(p), torch.tensor([1.5 * math.log(2), 0.0], dtype=torch.float64))
    assert torch.allclose(margin(p), torch.tensor([0.25, 1.0], dtype=torch.float64))
    f = router_features(p)
    assert f.shape == (2, 5) and torch.isnan(f[:, 3:]).all()
    assert torch.allclose(f[:, 0], torch.tensor([0.5, 1.0]))


def test_js_against_scipy_and_agreement():
    rng = np.random.default_rng(1)
    for _ in range(5):
        p, q = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
        ref = jensenshannon(p, q) ** 2  # natural log
        assert float(js_divergence(torch.tensor(p), torch.tensor(q))) == pytest.approx(ref, abs=1e-9)
    d = torch.tensor(rng.dirichlet(np.ones(4), size=(2, 3)))
    pairs = [(0, 1), (0, 2), (1, 2)]
    ref = [1 - np.mean([jensenshannon(d[b, i], d[b, j]) ** 2 for i, j in pairs]) for b in range(2)]
    assert torch.allclose(agreement(d), torch.tensor(ref, dtype=torch.float64), atol=1e-9)
    assert float(agreement(torch.tensor([[[0.3, 0.7], [0.3, 0.7]]]))[0]) == pytest.approx(1.0)


def test_question_type_heuristic():
    assert question_type("Is the gripper open?", ["yes", "no"]) == "yn"
    assert question_type("Which colored arrow points to the goal?", ["a", "b"]) == "arrows"
    assert question_type("Which object?", ["cup", "plate"]) == "other"
