"""Lie maths and the bias against independent computations: scipy rotations, a naive four-level loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from iclr26_delivr.bias import base_rays, lie_bias, rotation_angle, tau_from_raw, tau_raw_init
from iclr26_delivr.lie import bounded_rotation, so2_matrix, so3_exp, so3_log


def _rotvecs(n: int, norm: float | None = None, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, 3))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    mags = rng.uniform(0, math.pi - 1e-3, size=(n, 1)) if norm is None else np.full((n, 1), norm)
    return v * mags


@pytest.mark.parametrize("norm", [None, 1e-7, 5e-5, 1.0, math.pi - 1e-4])
def test_so3_exp_matches_scipy(norm):
    w = _rotvecs(200, norm)
    ours = so3_exp(torch.from_numpy(w)).numpy()
    ref = Rotation.from_rotvec(w).as_matrix()
    assert np.abs(ours - ref).max() < 1e-10


@pytest.mark.parametrize("norm", [None, 1e-7, 5e-5, 2.0, math.pi - 1e-4, math.pi - 1e-6])
def test_so3_log_matches_scipy(norm):
    w = _rotvecs(200, norm, seed=1)
    r = Rotation.from_rotvec(w).as_matrix()
    ours = so3_log(torch.from_numpy(r)).numpy()
    ref = Rotation.from_matrix(r).as_rotvec()
    assert np.abs(ours - ref).max() < 1e-7


def test_exp_log_round_trip_below_pi():
    w = torch.from_numpy(_rotvecs(500, None, seed=2))  # ‖ω‖ < π − 1e-3
    assert (so3_log(so3_exp(w)) - w).abs().max() < 1e-6


def test_so2_embedding_closed_form():
    th = torch.linspace(-1.2, 1.2, 7, dtype=torch.float64)
    r = so2_matrix(th)
    for k, t in enumerate(th.tolist()):
        ref = np.array([[math.cos(t), -math.sin(t), 0], [math.sin(t), math.cos(t), 0], [0, 0, 1]])
        assert np.abs(r[k].numpy() - ref).max() < 1e-15
    # SO(2) is exp of θ about z
    w = torch.stack([torch.zeros_like(th), torch.zeros_like(th), th], -1)
    assert (so3_exp(w) - r).abs().max() < 1e-12


def test_bounded_rotation_bounds_and_zero_init():
    lim = math.radians(35)
    mu = torch.randn(100, 3, dtype=torch.float64) * 10
    for mode in ("so2", "so3"):
        r, omega, theta = bounded_rotation(mu, lim, mode)
        assert omega.norm(dim=-1).max() <= lim + 1e-12
        assert (r.transpose(-1, -2) @ r - torch.eye(3, dtype=r.dtype)).abs().max() < 1e-12
        r0, _, th0 = bounded_rotation(torch.zeros(4, 3), lim, mode)
        assert torch.equal(r0, torch.eye(3).expand(4, 3, 3)) and torch.all(th0 == 0)
    _, _, theta = bounded_rotation(torch.tensor([[0.0, 0.0, 0.3]]), lim, "so2")
    assert theta.item() == pytest.approx(lim * math.tanh(0.3))
    with pytest.raises(ValueError, match="rotation must be"):
        bounded_rotation(mu, lim, "se3")


def test_rotation_angle_has_finite_gradient_at_identity():
    th = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    rotation_angle(so2_matrix(th)).sum().backward()
    assert torch.isfinite(th.grad).all()


def test_base_rays():
    p = base_rays((2, 3), torch.float64)
    assert p.shape == (6, 3) and torch.allclose(p.norm(dim=-1), torch.ones(6, dtype=torch.float64))
    ref = np.array([-0.5, -0.5, 1.0]) / np.linalg.norm([-0.5, -0.5, 1.0])
    assert np.allclose(p[0].numpy(), ref)  # cell (x=0, y=0)
    assert torch.allclose(
        base_rays((1, 1), torch.float64), torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)
    )


def _naive(rot, grid, form, w_time, kappa, tau, band, decay):
    """Four nested loops over (t, i, s, j), straight from the spec's formulas."""
    b_, t_ = rot.shape[:2]
    h, w = grid
    pts = []
    for y in range(h):
        for x in range(w):
            xn = (x - (w - 1) / 2) / (w - 1) if w > 1 else 0.0
            yn = (y - (h - 1) / 2) / (h - 1) if h > 1 else 0.0
            v = np.array([xn, yn, 1.0])
            pts.append(v / np.linalg.norm(v))
    n = len(pts)
    out = np.zeros((b_, t_ * n, t_ * n))
    mask = np.zeros((t_ * n, t_ * n), dtype=bool)
    r = rot.numpy()
    for b in range(b_):
        for t in range(t_):
            for i in range(n):
                for s in range(t_):
                    for j in range(n):
                        a = r[b, t] @ pts[i]
                        c = r[b, s] @ pts[j] if form == "relative" else pts[j]
                        rel = Rotation.from_matrix(r[b, t].T @ r[b, s]).magnitude()
                        val = a @ c + w_time * (-rel / kappa)
                        if decay:
                            val *= math.exp(-abs(t - s) / tau)
                        out[b, t * n + i, s * n + j] = val
                        mask[t * n + i, s * n + j] = abs(t - s) <= band
    return out, mask


@pytest.mark.parametrize("form", ["relative", "to_base"])
@pytest.mark.parametrize("decay", [True, False])
def test_lie_bias_matches_naive_loop(form, decay):
    g = torch.Generator().manual_seed(3)
    omega = (torch.rand(2, 3, 3, generator=g, dtype=torch.float64) - 0.5) * 1.2
    rot = so3_exp(omega)
    lb = lie_bias(rot, (2, 3), bias_form=form, time_weight=0.7, time_kappa=1.3, tau=1.7, band=1, decay=decay)
    ref, mask = _naive(rot, (2, 3), form, 0.7, 1.3, 1.7, 1, decay)
    assert np.abs(lb.bias.numpy() - ref).max() < 1e-10
    assert np.array_equal(lb.mask.numpy(), mask)


def test_relative_bias_and_velocity_depend_only_on_relative_rotations():
    """C1: a common in-plane offset leaves the relative bias unchanged; v_t = |θ_t − θ_{t−1}|."""
    g = torch.Generator().manual_seed(4)
    theta = (torch.rand(50, 5, generator=g, dtype=torch.float64) * 2 - 1) * math.radians(35)
    off = (torch.rand(50, 1, generator=g, dtype=torch.float64) * 2 - 1) * math.radians(30)
    a, b = lie_bias(so2_matrix(theta), (8, 8)), lie_bias(so2_matrix(theta + off), (8, 8))
    assert (a.bias - b.bias).abs().max() < 1e-12
    assert (a.velocity - (theta[:, 1:] - theta[:, :-1]).abs()).abs().max() < 1e-12
    # the to_base form is not invariant (a check that the test can fail)
    c, d = (lie_bias(so2_matrix(x), (8, 8), bias_form="to_base") for x in (theta, theta + off))
    assert (c.bias - d.bias).abs().max() > 1e-3


def test_switches_and_band():
    rot = so2_matrix(torch.tensor([[0.1, -0.2, 0.3]], dtype=torch.float64))
    none = lie_bias(rot, (2, 2), spatial=False, temporal=False)
    assert torch.all(none.bias == 0)
    full = lie_bias(rot, (2, 2), band=0)
    assert full.mask.sum() == 3 * 4 * 4  # only same-frame pairs
    assert lie_bias(rot, (2, 2), use_band_mask=False).mask.all()


def test_tau_parametrisation():
    for raw in (-50.0, -1.0, 0.0, 3.0):
        assert tau_from_raw(torch.tensor(raw)) >= 0.5
    assert float(tau_from_raw(torch.tensor(tau_raw_init(2.0)))) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="tau_init"):
        tau_raw_init(0.5)
