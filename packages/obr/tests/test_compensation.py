"""Group error compensation against a brute-force least-squares solve, and its objective."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26_obr import group_error_compensation
from iclr26_obr.compensation import row_objective


def _lstsq_reference(H: np.ndarray, retain: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """argmin over Δw_R of ½‖Lᵀ·Δw‖² (H = L·Lᵀ) with Δw_E fixed: a least-squares problem per row."""
    L = np.linalg.cholesky(H)
    out = np.zeros_like(delta)
    for i in range(delta.shape[0]):
        r = retain[i]
        fixed = np.where(r, 0.0, delta[i])
        A = L.T[:, r]
        b = -L.T @ fixed
        out[i, r] = np.linalg.lstsq(A, b, rcond=None)[0]
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_brute_force_least_squares(seed, random_spd):
    c, n = 12, 20
    g = torch.Generator().manual_seed(100 + seed)
    H = random_spd(c, seed)
    retain = torch.rand(n, c, generator=g) < 0.6
    retain[0] = True  # a row with nothing evicted
    retain[1] = False  # a row with nothing retained
    delta = torch.randn(n, c, generator=g, dtype=torch.float64)
    got = group_error_compensation(H, retain, delta)
    ref = _lstsq_reference(H.numpy(), retain.numpy(), delta.numpy())
    np.testing.assert_allclose(got.numpy(), ref, atol=1e-8, rtol=0)
    assert torch.all(got[~retain] == 0)


def test_lowers_the_row_objective_for_100_rows(random_spd):
    c, n = 24, 100
    g = torch.Generator().manual_seed(7)
    H = random_spd(c, 3)
    retain = torch.rand(n, c, generator=g) < 0.5
    delta = torch.where(retain, 0.0, torch.randn(n, c, generator=g, dtype=torch.float64))
    comp = group_error_compensation(H, retain, delta)
    before = row_objective(delta, H)
    after = row_objective(delta + comp, H)
    assert torch.all(after <= before + 1e-12)
    assert float((after / before.clamp(min=1e-30)).mean()) < 0.9  # and by a real margin on correlated inputs


def test_pruning_sign_lowers_output_error_on_data():
    """Pruning: Δw_E = −w_E, so Δw_R = +H_RR⁻¹·H_RE·w_E; the compensated weights reproduce W·X better."""
    g = torch.Generator().manual_seed(0)
    c, n, tokens = 16, 8, 256
    a = torch.eye(c, dtype=torch.float64) + 0.7 * torch.randn(c, c, generator=g, dtype=torch.float64) / c**0.5
    x = torch.randn(tokens, c, generator=g, dtype=torch.float64) @ a.t()
    H = 2 * x.t() @ x / tokens
    W = torch.randn(n, c, generator=g, dtype=torch.float64)
    keep = torch.rand(n, c, generator=g) < 0.5
    pruned = W * keep
    comp = pruned + group_error_compensation(H, keep, torch.where(keep, 0.0, -W))
    err = lambda w: float(((x @ (W - w).t()) ** 2).sum())  # noqa: E731
    assert err(comp) < 0.8 * err(pruned)
    assert torch.all(comp[~keep] == 0)


def test_chunking_and_padding_do_not_change_the_result(random_spd):
    c, n = 20, 30
    g = torch.Generator().manual_seed(5)
    H = random_spd(c, 5)
    retain = torch.rand(n, c, generator=g) < torch.linspace(0.2, 0.9, n).unsqueeze(1)  # |R| varies by row
    delta = torch.randn(n, c, generator=g, dtype=torch.float64)
    whole = group_error_compensation(H, retain, delta)
    tiny_chunks = group_error_compensation(H, retain, delta, chunk_bytes=1)  # one row per chunk
    np.testing.assert_allclose(whole.numpy(), tiny_chunks.numpy(), atol=1e-10)


def test_singular_block_is_damped_not_crashing():
    c = 8
    x = torch.randn(3, c, dtype=torch.float64)  # rank 3 < 8: H_RR singular
    H = 2 * x.t() @ x / 3
    retain = torch.ones(2, c, dtype=torch.bool)
    retain[:, :2] = False
    delta = torch.randn(2, c, dtype=torch.float64)
    out = group_error_compensation(H, retain, delta)
    assert torch.isfinite(out).all()


def test_float32_inputs_stay_float32(random_spd):
    H = random_spd(10, 1).float()
    retain = torch.rand(4, 10) < 0.5
    out = group_error_compensation(H, retain, torch.randn(4, 10))
    assert out.dtype == torch.float32
