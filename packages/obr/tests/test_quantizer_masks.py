"""The quantiser, the masks, Hadamard matrices: brute force and independent libraries."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from iclr26_core.errors import UserError
from iclr26_obr.hadamard import hadamard_matrix, random_hadamard
from iclr26_obr.masks import check_nm_pattern, magnitude_mask, mask_from_scores, wanda_mask
from iclr26_obr.quantizer import codes_of, find_scales, quantize


def test_symmetric_rtn_maps_zero_to_zero_and_stays_in_range():
    w = torch.randn(6, 40)
    w[:, ::3] = 0
    s = find_scales(w, 4)
    q = quantize(w, s, 4)
    assert torch.all(q[:, ::3] == 0)
    codes = codes_of(q, s, 4)
    assert int(codes.min()) >= -8 and int(codes.max()) <= 7
    assert float((codes.float() * s.unsqueeze(1) - q).abs().max()) < 1e-6


def test_mse_clip_search_matches_brute_force():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(5, 64, generator=g, dtype=torch.float64)
    w[0, 0] = 9.0  # an outlier makes clipping pay off
    s = find_scales(w, 4)
    for i in range(5):
        row = w[i].numpy()
        best, best_s = np.inf, None
        for k in range(80):  # p = 1.00, 0.99, ..., 0.21
            sc = (1 - k / 100) * np.abs(row).max() / 7
            err = np.sum(np.abs(np.clip(np.round(row / sc), -8, 7) * sc - row) ** 2.4)
            if err < best:
                best, best_s = err, sc
        assert abs(float(s[i]) - best_s) < 1e-12
    assert float(s[0]) < 9.0 / 7  # the outlier row is clipped


def test_wanda_mask_per_row_sparsity_and_scores():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(7, 20, generator=g)
    norms = torch.rand(20, generator=g) + 0.1
    keep = wanda_mask(w, norms, 0.6)
    assert torch.all((~keep).sum(1) == 12)
    score = w.abs() * norms
    for i in range(7):  # every pruned score is <= every kept score of its row
        assert score[i][~keep[i]].max() <= score[i][keep[i]].min()


@pytest.mark.parametrize(("n", "m"), [(2, 4), (1, 4), (16, 32), (3, 8)])
def test_nm_mask_valid_in_every_group(n, m):
    w = torch.randn(5, 64)
    keep = magnitude_mask(w, nm=(n, m))
    assert check_nm_pattern(keep, (n, m))
    groups = w.abs().reshape(5, 64 // m, m)
    kept = keep.reshape(5, 64 // m, m)
    lowest_kept = torch.where(kept, groups, torch.inf).amin(-1)
    highest_pruned = torch.where(~kept, groups, -torch.inf).amax(-1)
    assert torch.all(highest_pruned <= lowest_kept)


def test_nm_must_divide_columns():
    with pytest.raises(UserError, match="does not divide"):
        mask_from_scores(torch.rand(3, 10), nm=(2, 4))


@pytest.mark.parametrize("n", [1, 2, 4, 64, 256])
def test_sylvester_equals_scipy(n):
    assert np.array_equal(hadamard_matrix(n).numpy(), scipy.linalg.hadamard(n))


@pytest.mark.parametrize("n", [12, 20, 28, 24, 40, 56, 80, 112, 160])
def test_paley_based_orders_are_hadamard(n):
    H = hadamard_matrix(n, torch.float64)
    assert set(H.unique().tolist()) == {-1.0, 1.0}
    assert torch.equal(H @ H.t(), n * torch.eye(n, dtype=torch.float64))


@pytest.mark.parametrize("n", [6, 52, 156, 176])
def test_unsupported_orders_raise_one_clear_error(n):
    with pytest.raises(UserError, match=f"no Hadamard matrix of order {n}"):
        hadamard_matrix(n)


def test_rotation_invariance_of_a_layer():
    g = torch.Generator().manual_seed(2)
    W = torch.randn(8, 32, generator=g, dtype=torch.float64)
    X = torch.randn(32, 50, generator=g, dtype=torch.float64)
    Q = random_hadamard(32, seed=3)
    assert float((Q @ Q.t() - torch.eye(32, dtype=torch.float64)).abs().max()) < 1e-12
    Hd = hadamard_matrix(32, torch.float64) / 32**0.5
    assert float((W @ X - (W @ Hd.t()) @ (Hd @ X)).abs().max()) < 1e-10
    assert float((W @ X - (W @ Q) @ (Q.t() @ X)).abs().max()) < 1e-10
