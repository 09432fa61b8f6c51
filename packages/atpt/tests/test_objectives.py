"""The maths of A-TPT, C-TPT, O-TPT and TPT against closed forms and naive numpy implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr26_atpt.objectives import (
    angular_diversity,
    atfd,
    min_pairwise_angle,
    n_selected,
    orthogonality,
    regularizer_loss,
    simplex_angle,
    tpt_loss,
)


def simplex(n: int) -> torch.Tensor:
    """A regular simplex of n unit vectors in R^(n-1): the centred identity, projected, normalised."""
    e = torch.eye(n, dtype=torch.float64) - 1.0 / n
    q, _ = torch.linalg.qr(e.T)  # orthonormal basis of the centred subspace (first n-1 columns)
    x = e @ q[:, : n - 1]
    return x / x.norm(dim=1, keepdim=True)


def test_simplex_gives_arccos_minus_one_over_n_minus_one():
    x = simplex(5)
    assert x.shape == (5, 4)
    assert float(angular_diversity(x)) == pytest.approx(math.acos(-1 / 4), abs=1e-5)
    assert math.degrees(simplex_angle(10)) == pytest.approx(96.379, abs=1e-3)
    assert math.degrees(float(angular_diversity(simplex(10)))) == pytest.approx(96.379, abs=1e-3)


def test_orthonormal_gives_right_angle_and_scale_invariance():
    q, _ = torch.linalg.qr(torch.randn(16, 16, generator=torch.Generator().manual_seed(0)))
    x = q[:6] * torch.linspace(0.5, 3.0, 6)[:, None]  # norms do not matter
    assert float(angular_diversity(x)) == pytest.approx(math.pi / 2, abs=1e-5)
    assert float(min_pairwise_angle(x)) == pytest.approx(math.pi / 2, abs=1e-6)


def test_duplicates_clamped_with_finite_gradient():
    x = torch.ones(3, 4, requires_grad=True)
    ad = angular_diversity(x)
    assert float(ad.detach()) == pytest.approx(math.acos(0.99999), rel=1e-3)
    ad.backward()
    assert torch.isfinite(x.grad).all()


def test_ad_matches_bruteforce_numpy():
    x = np.random.default_rng(1).normal(size=(7, 5))
    e = x / np.linalg.norm(x, axis=1, keepdims=True)
    angles = [min(math.acos(np.clip(e[i] @ e[j], -1, 1)) for j in range(7) if j != i) for i in range(7)]
    assert float(angular_diversity(torch.tensor(x))) == pytest.approx(np.mean(angles), abs=1e-5)


def test_sign_one_gradient_step_increases_ad():
    g = torch.Generator().manual_seed(3)
    for _ in range(5):
        x = torch.randn(10, 8, generator=g, requires_grad=True)
        before = float(angular_diversity(x.detach()))
        regularizer_loss("atpt", x, lam=10.0).backward()
        with torch.no_grad():
            x -= 1e-3 * x.grad
        assert float(angular_diversity(x.detach())) > before
    # the official fine-grained script's sign (−λ) would minimise it
    x = torch.randn(10, 8, generator=g, requires_grad=True)
    before = float(angular_diversity(x.detach()))
    regularizer_loss("atpt", x, lam=-10.0).backward()
    with torch.no_grad():
        x -= 1e-3 * x.grad
    assert float(angular_diversity(x.detach())) < before


def test_atfd_and_orthogonality_against_numpy():
    x = np.random.default_rng(2).normal(size=(6, 9))
    t = x / np.linalg.norm(x, axis=1, keepdims=True)
    ref_atfd = np.mean(np.linalg.norm(t - t.mean(0), axis=1))
    ref_orth = np.sum((t @ t.T - np.eye(6)) ** 2)
    assert float(atfd(torch.tensor(x))) == pytest.approx(ref_atfd, rel=1e-5)
    assert float(orthogonality(torch.tensor(x))) == pytest.approx(ref_orth, rel=1e-5)
    xt = torch.tensor(x, requires_grad=True)
    assert float(regularizer_loss("ctpt", xt, 2.0).detach()) == pytest.approx(-2 * ref_atfd, rel=1e-5)
    assert float(regularizer_loss("otpt", xt, 2.0).detach()) == pytest.approx(2 * ref_orth, rel=1e-5)


def naive_tpt(logits: np.ndarray, rho: float) -> float:
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    ent = -(p * np.log(p)).sum(1)
    k = max(1, int(np.floor(rho * len(logits))))
    keep = np.argsort(ent, kind="stable")[:k]
    avg = p[keep].mean(0)
    return float(-(avg * np.log(avg)).sum())


@pytest.mark.parametrize(("views", "rho"), [(64, 0.1), (8, 0.1), (20, 0.5), (5, 1.0)])
def test_tpt_loss_against_naive(views, rho):
    z = np.random.default_rng(views).normal(scale=3.0, size=(views, 10))
    assert float(tpt_loss(torch.tensor(z), rho)) == pytest.approx(naive_tpt(z, rho), abs=1e-5)


def test_selection_keeps_at_least_one_view():
    assert n_selected(64, 0.1) == 6 and n_selected(8, 0.1) == 1 and n_selected(10, 1.0) == 10
    assert torch.isfinite(tpt_loss(torch.randn(8, 10), 0.1))
    with pytest.raises(ValueError):
        tpt_loss(torch.randn(8, 10), 0.0)
