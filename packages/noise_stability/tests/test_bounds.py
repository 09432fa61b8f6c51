"""Spectral-tail bounds on functions with a known Efron-Stein spectrum (discrete characters)."""

from __future__ import annotations

import pytest
import torch

from iclr26_noise_stability import fourier_tail_bounds

CHI = torch.tensor([1.0, -1.0, 1.0, -1.0])  # balanced ±1 map on a vocabulary of 4


def character(k):
    def f(ids):
        return CHI[ids[:, :k]].prod(-1)

    return f


@pytest.mark.parametrize("noise", ["paper", "exact"])
def test_character_of_degree_k(noise):
    k, n = 3, 6
    res = fourier_tail_bounds(
        character(k), n, 4, degree=3, rhos=(0.5, 0.9), n_samples=20_000, noise=noise, output="raw", seed=1
    )
    # ‖f‖² = 1, all mass at degree k: Inf_i = 1 for i < k, 0 after; AS = k·‖f‖²
    assert res["norm_sq"] == pytest.approx(1.0)
    assert res["average_sensitivity"] == pytest.approx(k, rel=0.03)
    assert all(abs(v) < 1e-12 for v in res["influences"][k:])
    # formula: Stab = λ^k, so the bound at each ρ is (1 − λ^k)/(1 − λ^degree)
    for rho, row in res["per_rho"].items():
        lam = (1 + rho) / 2 if noise == "paper" else rho
        assert row["lambda"] == pytest.approx(lam)
        assert row["stability"] == pytest.approx(lam**k, abs=0.02)
        assert row["bound"] == pytest.approx((1 - row["stability"]) / (1 - lam**3))


@pytest.mark.parametrize("degree,true_mass", [(2, 1.0), (3, 1.0), (4, 0.0)])
def test_both_bounds_are_at_least_the_true_tail(degree, true_mass):
    res = fourier_tail_bounds(
        character(3),
        5,
        4,
        degree=degree,
        rhos=(0.5, 0.7, 0.9),
        n_samples=20_000,
        noise="exact",
        output="raw",
        seed=2,
    )
    slack = 0.05  # Monte-Carlo error of 20k samples
    assert res["stability_bound"] >= true_mass - slack
    assert res["sensitivity_bound"] >= true_mass - slack
    assert res["sensitivity_bound"] == pytest.approx(res["average_sensitivity"] / degree)


def test_paper_noise_bound_uses_the_noise_eigenvalue():
    # a degree-15 character at ρ = 0.99: dividing by 1 − ρ^15 would give ≈ 0.5 < the true mass 1
    res = fourier_tail_bounds(
        character(15), 15, 4, degree=15, rhos=(0.99,), n_samples=40_000, noise="paper", output="raw", seed=3
    )
    assert res["lambda"] == pytest.approx(0.995)
    assert res["stability_bound"] >= 0.9
