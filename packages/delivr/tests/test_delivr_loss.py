"""Loss terms and metrics against their formulas and scikit-image; derain tiling and blending."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from iclr26_delivr import DeLiVR, DeLiVRConfig, delivr_loss
from iclr26_delivr.derain import blend_weights, derain, tile_starts, window_indices
from iclr26_delivr.experiment import psnr_uint8
from iclr26_delivr.loss import (
    charbonnier,
    fft_loss,
    flicker_error,
    frame_metrics,
    global_ssim,
    rgb_to_y,
    to_uint8,
    velocity_loss,
)


def test_charbonnier_formula():
    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(2, 3, 5, 7, generator=g), torch.rand(2, 3, 5, 7, generator=g)
    ref = np.mean(np.sqrt((a.numpy() - b.numpy()) ** 2 + 1e-6))
    assert float(charbonnier(a, b)) == pytest.approx(ref, rel=1e-6)


def test_global_ssim_against_numpy():
    rng = np.random.default_rng(1)
    x, y = rng.random((2, 3, 9, 11)), rng.random((2, 3, 9, 11))
    vals = []
    for b in range(2):
        for c in range(3):
            p, t = x[b, c], y[b, c]
            mp, mt = p.mean(), t.mean()
            cov = ((p - mp) * (t - mt)).mean()
            s = ((2 * mp * mt + 1e-4) * (2 * cov + 9e-4)) / (
                (mp**2 + mt**2 + 1e-4) * (p.var() + t.var() + 9e-4)
            )
            vals.append(s)
    assert float(global_ssim(torch.from_numpy(x), torch.from_numpy(y))) == pytest.approx(
        np.mean(vals), rel=1e-10
    )
    assert float(global_ssim(torch.from_numpy(x), torch.from_numpy(x))) == pytest.approx(1.0)


def test_psnr_against_skimage():
    rng = np.random.default_rng(2)
    a, b = rng.random((4, 3, 16, 12)).astype(np.float32), rng.random((4, 3, 16, 12)).astype(np.float32)
    ours = psnr_uint8(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    for k in range(4):
        ref = peak_signal_noise_ratio(to_uint8(b[k]), to_uint8(a[k]), data_range=255)
        assert ours[k] == pytest.approx(ref, rel=1e-9)
        m = frame_metrics(torch.from_numpy(a[k]), torch.from_numpy(b[k]))
        assert m["psnr_rgb"] == pytest.approx(ref, rel=1e-12)
        ref_ssim = structural_similarity(to_uint8(b[k]), to_uint8(a[k]), data_range=255, channel_axis=2)
        assert m["ssim_rgb"] == pytest.approx(ref_ssim)


def test_y_channel_matlab_convention():
    white = np.full((2, 2, 3), 255, np.uint8)
    black = np.zeros((2, 2, 3), np.uint8)
    assert np.allclose(rgb_to_y(white), 235.0) and np.allclose(rgb_to_y(black), 16.0)


def test_fft_loss_and_velocity_loss():
    x = torch.rand(1, 3, 8, 8)
    assert float(fft_loss(x, x)) == 0.0
    assert float(fft_loss(x, x + 0.1)) > 0
    v = torch.tensor([[0.1, 0.3, 0.2]])
    assert float(velocity_loss(v, 0.5)) == pytest.approx(0.5 * 0.2 + 0.5 * (0.2 + 0.1) / 2)


def test_delivr_loss_terms_and_total():
    torch.manual_seed(0)
    m = DeLiVR(DeLiVRConfig(embed_dim=16, depth=1, heads=2, num_cab=1))
    x = torch.rand(2, 3, 3, 16, 16)
    with torch.no_grad():
        out = m(x)
    terms = delivr_loss(out, x[:, 1])
    w = {"charbonnier": 1.0, "edge": 0.05, "ssim": 0.05, "fft": 0.05, "angle": 1e-3, "velocity": 0.01}
    assert float(terms["total"]) == pytest.approx(sum(w[k] * float(terms[k]) for k in w), rel=1e-6)
    with pytest.raises(ValueError, match="does not match"):
        delivr_loss(out, x[:, 1, :, :8])


def test_flicker_error_formula():
    y = torch.rand(4, 3, 5, 5)
    assert flicker_error(y, y) == 0.0
    assert flicker_error(y + 0.3, y) == pytest.approx(0.0, abs=1e-6)  # a constant offset does not flicker
    d = torch.zeros(4, 3, 5, 5)
    d[1] = 0.2
    assert flicker_error(y + d, y) == pytest.approx((0.2 + 0.2) / 3, rel=1e-5)


def test_window_indices_replicate_edges():
    assert window_indices(3, 5) == [[0, 0, 0, 1, 2], [0, 0, 1, 2, 2], [0, 1, 2, 2, 2]]


@pytest.mark.parametrize(("h", "w", "tile", "overlap"), [(40, 56, 16, 4), (33, 70, 24, 8), (20, 20, 32, 8)])
def test_blend_weights_sum_to_one(h, w, tile, overlap):
    total = torch.zeros(h, w, dtype=torch.float64)
    for rows, cols, weight in blend_weights(h, w, tile, overlap):
        assert weight.min() > 0
        total[rows, cols] += weight
    assert torch.allclose(total, torch.ones_like(total), atol=1e-12)
    starts = tile_starts(w, tile, overlap)
    assert starts[0] == 0 and (starts[-1] + min(tile, w) == w)


@pytest.fixture(scope="module")
def small_model():
    torch.manual_seed(0)
    m = DeLiVR(DeLiVRConfig(embed_dim=16, depth=1, heads=2, num_cab=1, frames=3)).eval()
    with torch.no_grad():
        m.res_scale.fill_(1.0)
    return m


def test_derain_tile_at_least_frame_equals_untiled(small_model):
    video = torch.rand(4, 3, 24, 40)
    full = derain(small_model, video)
    assert torch.allclose(derain(small_model, video, tile=64, overlap=8), full, atol=1e-6)
    tiled = derain(small_model, video, tile=16, overlap=8, batch_size=3)
    assert tiled.shape == video.shape and torch.isfinite(tiled).all()
    assert (tiled - full).abs().mean() < 0.05  # the same model on overlapping crops: close, not equal


def test_derain_accepts_uint8_arrays_and_refuses_bad_input(small_model):
    arr = (np.random.default_rng(0).random((3, 16, 16, 3)) * 255).astype(np.uint8)
    assert derain(small_model, arr).shape == (3, 3, 16, 16)
    with pytest.raises(ValueError, match="F, H, W, 3"):
        derain(small_model, arr[..., :2])
    bad = torch.rand(3, 3, 16, 16)
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        derain(small_model, bad)
    with pytest.raises(ValueError, match="overlap"):
        derain(small_model, torch.rand(3, 3, 16, 16), tile=8, overlap=8)
