"""ReLU closed form (Thm 5.1) vs Monte Carlo and numerical integration; Hermite eigenfunctions; fixed point."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from numpy.polynomial import hermite_e
from scipy import integrate

from iclr26_noise_stability import gaussian_noise_stability, relu_fixed_point, relu_stability
from iclr26_noise_stability.attention import propagate_interval
from iclr26_noise_stability.errors import NoiseStabilityError


@pytest.mark.parametrize("rho", [-0.9, -0.5, 0.0, 0.5, 0.9])
def test_relu_closed_form_matches_monte_carlo(rho):
    mc = gaussian_noise_stability(torch.relu, 1, rho, n_samples=1_000_000, seed=3)
    assert abs(mc - relu_stability(rho)) < 3e-3


def test_relu_closed_form_matches_dblquad():
    rho = 0.3
    c = 1 / (2 * math.pi * math.sqrt(1 - rho**2))

    def density(y, x):  # ReLU(x) ReLU(y) φ_ρ(x, y) on the positive quadrant
        return x * y * c * math.exp(-(x * x - 2 * rho * x * y + y * y) / (2 * (1 - rho**2)))

    value, _ = integrate.dblquad(density, 0, 12, 0, 12, epsabs=1e-10, epsrel=1e-10)
    assert abs(relu_stability(rho) - value) < 1e-6


def test_relu_closed_form_ends_and_tensor():
    assert relu_stability(1.0) == pytest.approx(0.5)  # E[ReLU(X)^2]
    assert relu_stability(-1.0) == pytest.approx(0.0, abs=1e-12)
    assert relu_stability(0.0) == pytest.approx(1 / (2 * math.pi))
    r = torch.tensor([-0.5, 0.0, 0.7], dtype=torch.float64)
    assert torch.allclose(
        relu_stability(r), torch.tensor([relu_stability(float(x)) for x in r], dtype=torch.float64)
    )


@pytest.mark.parametrize("k", [1, 2, 3])
def test_hermite_character_has_stability_rho_to_the_k(k):
    coef = [0.0] * k + [1.0]

    def f(x):
        v = hermite_e.hermeval(x[:, 0].numpy(), coef) / math.sqrt(math.factorial(k))
        return torch.from_numpy(np.asarray(v))

    rho = 0.6
    mc = gaussian_noise_stability(f, 2, rho, n_samples=4_000_000, seed=k)
    assert abs(mc - rho**k) < 0.01


def test_fixed_point_exact_and_taylor():
    s = relu_fixed_point()
    assert s == pytest.approx(0.21723, abs=1e-5)
    assert relu_stability(s) == pytest.approx(s, abs=1e-10)  # a fixed point of the map, checked directly
    assert relu_fixed_point(taylor=True) == pytest.approx(2 / (3 * math.pi))
    # the Taylor value solves s = 1/(2π) + s/4
    t = relu_fixed_point(taylor=True)
    assert t == pytest.approx(1 / (2 * math.pi) + t / 4)


def test_gaussian_rho_out_of_range_is_a_user_error():
    with pytest.raises(NoiseStabilityError, match=r"\[-1, 1\]"):
        relu_stability(1.5)
    with pytest.raises(NoiseStabilityError, match=r"\[-1, 1\]"):
        gaussian_noise_stability(torch.relu, 1, -1.2, n_samples=10)


def test_propagate_interval_is_monotone_and_contracts_to_the_fixed_point():
    path = propagate_interval(0.0, 0.99, ["relu"] * 30)
    lo, hi = path[-1]
    assert lo <= hi and abs(hi - lo) < 1e-9 and lo == pytest.approx(relu_fixed_point(), abs=1e-6)
    att = propagate_interval(0.2, 0.8, ["attention"] * 3, gamma=0.9)
    assert att[-1][1] == pytest.approx(0.8 * 0.9**6) and att[-1][0] == pytest.approx(0.2 * 0.9**6)
    with pytest.raises(NoiseStabilityError):
        propagate_interval(0.5, 0.1, ["relu"])
