"""Tests of the synthetic rainy-clip generator (iclr26_delivr.data): shapes, seeding, geometry, rain."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.ndimage import map_coordinates
from skimage.transform import rotate

from iclr26_delivr import data
from iclr26_delivr.data import (
    SOURCES_HELDOUT,
    SOURCES_TRAIN,
    clip_with_angles,
    frame_coordinates,
    rainy_clips,
    rainy_sequences,
    render_frame,
    source_image,
)


@pytest.fixture(scope="module")
def clips():
    return rainy_clips(12, size=32, frames=5, split="train", seed=3)


def test_sources_are_cached_read_only_and_in_range():
    for name in SOURCES_TRAIN + SOURCES_HELDOUT:
        img = source_image(name)
        assert img.dtype == np.float32 and img.ndim == 3 and img.shape[2] == 3
        assert img.min() >= 0.0 and img.max() <= 1.0
        assert not img.flags.writeable
        assert source_image(name) is img
    assert source_image("astronaut").shape == (256, 256, 3)
    with pytest.raises(ValueError, match="valid: astronaut"):
        source_image("lena")


def test_shapes_dtypes_ranges(clips):
    assert len(clips) == 12
    assert clips.rainy.shape == clips.clean.shape == (12, 5, 3, 32, 32)
    assert clips.rainy.dtype == clips.clean.dtype == torch.float32
    assert clips.phi_deg.shape == (12, 5) and clips.phi_deg.dtype == torch.float64
    assert clips.centre_xy.shape == (12, 5, 2) and clips.rain_mask.shape == (12, 5, 32, 32)
    for t in (clips.rainy, clips.clean, clips.rain_mask):
        assert float(t.min()) >= 0.0 and float(t.max()) <= 1.0 and torch.isfinite(t).all()
    assert set(clips.source) == set(SOURCES_TRAIN)  # balanced round-robin: 3 clips per source
    assert all(clips.source.count(s) == 3 for s in SOURCES_TRAIN)
    assert float(clips.phi_deg.abs().max()) < 5 + 2 * 3 + 2  # |theta0| + c|omega| + jitter


def test_determinism_and_seeds(clips):
    again = rainy_clips(12, size=32, frames=5, split="train", seed=3)
    assert torch.equal(again.rainy, clips.rainy) and torch.equal(again.clean, clips.clean)
    assert torch.equal(again.phi_deg, clips.phi_deg) and again.source == clips.source
    other = rainy_clips(12, size=32, frames=5, split="train", seed=4)
    assert not torch.equal(other.clean, clips.clean) and not torch.equal(other.phi_deg, clips.phi_deg)


def test_heldout_uses_only_chelsea_and_never_a_train_source(clips):
    held = rainy_clips(6, size=32, split="heldout", seed=3)
    assert set(held.source) == {"chelsea"}
    assert not set(held.source) & set(clips.source)
    assert not set(SOURCES_TRAIN) & set(SOURCES_HELDOUT)
    seq = rainy_sequences(2, length=9, size=32, seed=0)
    assert seq.rainy.shape == (2, 9, 3, 32, 32) and set(seq.source) == {"chelsea"}
    assert rainy_sequences(1, length=4, size=16).clean.shape == (1, 4, 3, 16, 16)  # any length for sequences


def test_rotation_sense_matches_skimage_rotate():
    """Independent check: phi = +20 deg equals skimage.transform.rotate(img, +20) (CCW as displayed), cropped."""
    img = source_image("astronaut")
    h, w = img.shape[:2]
    size = 64
    y0, x0 = (h - size) // 2, (w - size) // 2
    centre = ((w - 1) / 2, (h - 1) / 2)  # skimage rotates about ((cols-1)/2, (rows-1)/2)
    ours = render_frame(img, centre, 20.0, size)
    assert ours.shape == (size, size, 3) and ours.dtype == np.float32

    def corr(angle: float) -> float:
        ref = rotate(np.array(img), angle, order=1)[y0 : y0 + size, x0 : x0 + size]
        return float(np.corrcoef(ours[8:-8, 8:-8].ravel(), ref[8:-8, 8:-8].ravel())[0, 1])

    assert corr(20.0) > 0.99
    assert corr(-20.0) < 0.8
    assert corr(20.0) - corr(-20.0) > 0.2


def test_frame_coordinates_and_bilinear_against_map_coordinates():
    img = source_image("coffee")
    centre, phi, size = (150.3, 99.7), 13.0, 24
    xs, ys = frame_coordinates(centre, phi, size)
    c = (size - 1) / 2
    # output pixel (i, j) = offset (u, v) = (j - c, i - c); source = centre + R(phi) (u, v)
    r = np.deg2rad(phi)
    assert np.isclose(xs[0, -1], centre[0] + np.cos(r) * c - np.sin(r) * -c)
    assert np.isclose(ys[0, -1], centre[1] + np.sin(r) * c + np.cos(r) * -c)
    ref = np.stack([map_coordinates(img[..., k], [ys, xs], order=1) for k in range(3)], axis=-1)
    np.testing.assert_allclose(render_frame(img, centre, phi, size), ref, atol=1e-5)
    with pytest.raises(ValueError, match="window leaves"):
        render_frame(img, (10.0, 10.0), 0.0, size)


def test_offset_formula_between_frames():
    """A scene point at offset o_t in frame t is at o_s = R(phi_t - phi_s) o_t - (s - t) R(-phi_s) vel in frame s."""
    phi, vel = np.array([-4.0, 1.0, 7.0]), np.array([0.8, -0.6])
    frames, _ = clip_with_angles("astronaut", phi, size=48, shift_px=tuple(vel))
    centres = np.array([127.5, 127.5]) + (np.arange(3) - 1.0)[:, None] * vel  # default centre: image centre

    def rot(a: float) -> np.ndarray:
        a = np.deg2rad(a)
        return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])

    def sample(frame: np.ndarray, o: np.ndarray) -> np.ndarray:  # frame [3, 48, 48] at offsets o [K, 2]
        return np.stack([map_coordinates(ch, [o[:, 1] + 23.5, o[:, 0] + 23.5], order=1) for ch in frame])

    rng = np.random.default_rng(0)
    for t, s in ((0, 2), (2, 0), (1, 0)):
        o_t = rng.uniform(-15, 15, (50, 2))
        o_s = o_t @ rot(phi[t] - phi[s]).T - (s - t) * (rot(-phi[s]) @ vel)
        p_t = centres[t] + o_t @ rot(phi[t]).T  # the same source points
        p_s = centres[s] + o_s @ rot(phi[s]).T
        np.testing.assert_allclose(p_s, p_t, atol=1e-9)
        # and the rendered pixels agree (nearest pixel positions, smooth image: small bilinear difference)
        o_t_int = np.round(o_t)
        o_s = o_t_int @ rot(phi[t] - phi[s]).T - (s - t) * (rot(-phi[s]) @ vel)
        assert np.abs(sample(frames[t], o_t_int) - sample(frames[s], o_s)).mean() < 0.02


def test_motion_changes_frames_and_zero_motion_freezes_them():
    moving, _ = clip_with_angles("rocket", [-6.0, -3.0, 0.0, 3.0, 6.0], size=32)
    assert all(np.abs(moving[t + 1] - moving[t]).mean() > 1e-3 for t in range(4))
    frozen = rainy_clips(4, size=32, frames=5, seed=1, motion_scale=0.0)
    assert torch.equal(frozen.clean, frozen.clean[:, :1].expand_as(frozen.clean))
    assert float(frozen.phi_deg.abs().max()) == 0.0
    free = rainy_clips(4, size=32, frames=5, seed=1)
    assert (free.clean[:, 1:] - free.clean[:, :-1]).abs().mean(dim=(2, 3, 4)).min() > 1e-3


def test_rain_only_brightens(clips):
    diff = clips.rainy - clips.clean
    # only the N(0, 0.01^2) noise can darken: 6 sigma (4 sigma is exceeded by chance among ~60k values)
    assert float(diff.min()) >= -6 * 0.01
    assert float((diff < -4 * 0.01).float().mean()) < 1e-3
    assert float(diff.mean()) > 0.005
    wet = clips.rain_mask[:, :, None].expand_as(diff) > 0.2
    assert float(diff[wet].mean()) > 5 * float(diff[~wet].mean().abs())  # brightening sits on the streaks


def test_streak_density_scales_with_d():
    rng = np.random.default_rng(0)
    alpha = np.zeros(8)
    low = data._rain_masks(rng, np.full(8, 0.5), alpha, 5, 32)
    high = data._rain_masks(rng, np.full(8, 1.5), alpha, 5, 32)
    assert low.shape == (8, 5, 32, 32) and low.dtype == np.float32
    ratio = float(high.mean() / low.mean())
    assert 2.0 < ratio < 4.0, ratio
    assert 0.0 < low.mean() < high.mean() < 0.2


def test_clip_with_angles_returns_given_angles_and_optional_rain():
    phi = [1.0, -2.0, 3.0]
    frames, got = clip_with_angles(source_image("chelsea"), phi, size=32)
    assert frames.shape == (3, 3, 32, 32) and frames.dtype == np.float32 and got.dtype == np.float64
    np.testing.assert_array_equal(got, phi)
    wet, _ = clip_with_angles("chelsea", phi, size=32, rain=True, seed=5)
    assert wet.shape == frames.shape and float((wet - frames).mean()) > 0
    again, _ = clip_with_angles("chelsea", phi, size=32, rain=True, seed=5)
    np.testing.assert_array_equal(wet, again)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 2, "frames": 4}, "frames must be odd, got 4"),
        ({"n": 2, "frames": 0}, "frames must be >= 1, got 0"),
        ({"n": 2, "size": 4}, "size must be >= 8, got 4"),
        ({"n": 0}, "n must be >= 1, got 0"),
        ({"n": 2, "split": "test"}, "split must be one of"),
        ({"n": 2, "size": 200, "split": "heldout"}, "too large for source 'chelsea'"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        rainy_clips(**kwargs)


def test_bad_arguments_other_entry_points():
    with pytest.raises(ValueError, match="length must be >= 1, got 0"):
        rainy_sequences(1, length=0)
    with pytest.raises(ValueError, match=r"image must be \[H, W, 3\]"):
        clip_with_angles(np.zeros((40, 40)), [0.0])
    with pytest.raises(ValueError, match="window leaves"):
        clip_with_angles("chelsea", [0.0, 0.0, 0.0], size=64, shift_px=(90.0, 0.0))
