"""Synthetic rainy clips with known in-plane camera rotation (numpy/scipy, seeded; no download).

Sources are RGB images bundled with scikit-image, float32 in [0, 1], downscaled x0.5 with anti-aliasing:
train on ``astronaut``, ``coffee``, ``rocket``, ``motorcycle_left``; hold out ``chelsea``.

Geometry (the one convention of this package). Image coordinates are ``x`` = column, ``y`` = row (pointing
*down*), pixel centres at integers. Output pixel (row i, column j) of a ``size x size`` window has the offset
``o = (u, v) = (j - (size-1)/2, i - (size-1)/2)`` from the window centre. Frame t samples the source (bilinear) at::

    p = c_t + R(phi_t) o,    R(phi) = [[cos phi, -sin phi], [sin phi, cos phi]],    c_t = (cx, cy) + (t - c) vel

with c = (T-1)/2 and vel the per-frame drift in px (x, y). Because y points down, frame t shows the source rotated
COUNTER-CLOCKWISE AS DISPLAYED by phi_t degrees about c_t, exactly like ``skimage.transform.rotate(img, +phi_t)``
(about c_t) followed by the central crop. A scene point seen at offset o_t in frame t is seen in frame s at::

    o_s = R(phi_t - phi_s) o_t + R(-phi_s) (c_t - c_s) = R(phi_t - phi_s) o_t - (s - t) R(-phi_s) vel

i.e. the content turns counter-clockwise as displayed by phi_s - phi_t (pure rotation) plus the centre shift.

Camera motion per clip: theta0 ~ U(-5, 5) deg, omega ~ U(-3, 3) deg/frame, vel ~ U(-1, 1)^2 px/frame,
phi_t = theta0 + (t - c) omega + N(0, 0.3^2) deg. The centre is uniform among positions that keep every sample of
every frame inside the image (margin 0.75 size + c |vel| + 1 px per axis: the central size^2 of a 1.5 size
region, whatever the angle).

Rain per frame: per clip alpha ~ U(-20, 20) deg from vertical and density d ~ U(0.5, 1.5); n ~ Poisson(0.004 H W d)
streaks with length U(5, 15) px, intensity a ~ U(0.6, 1.0), angle alpha + N(0, 2^2) deg, splatted bilinearly as
anti-aliased 1-px segments (sum), blurred (sigma 0.7), clipped to [0, 1] -> m (carrying a);
rainy = clip(clean + (1 - clean) 0.8 m + N(0, 0.01^2), 0, 1).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.ndimage import gaussian_filter

if TYPE_CHECKING:
    import torch

SOURCES_TRAIN = ("astronaut", "coffee", "rocket", "motorcycle_left")
SOURCES_HELDOUT = ("chelsea",)
_SPLITS = {"train": SOURCES_TRAIN, "heldout": SOURCES_HELDOUT}
_STREAM = {"train": 1, "heldout": 2}  # independent random streams per split for the same seed
_SAMPLES_PER_STREAK = 32  # points per streak: spacing <= 15/32 px


@functools.cache
def source_image(name: str) -> np.ndarray:
    """Bundled scikit-image picture ``name`` as a read-only float32 array [H, W, 3] in [0, 1], downscaled x0.5."""
    import skimage.data
    from skimage.transform import rescale

    if name not in SOURCES_TRAIN + SOURCES_HELDOUT:
        raise ValueError(f"unknown source {name!r}; valid: {', '.join(SOURCES_TRAIN + SOURCES_HELDOUT)}")
    raw = skimage.data.stereo_motorcycle()[0] if name == "motorcycle_left" else getattr(skimage.data, name)()
    img = rescale(raw.astype(np.float64) / 255.0, 0.5, anti_aliasing=True, channel_axis=2)
    out = np.ascontiguousarray(np.clip(img, 0.0, 1.0), dtype=np.float32)
    out.setflags(write=False)
    return out


def frame_coordinates(
    centre_xy: np.ndarray | Sequence[float], phi_deg: np.ndarray | float, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Source coordinates (xs, ys) of every output pixel; centre_xy [..., 2], phi_deg [...] -> two [..., size, size]."""
    centre = np.asarray(centre_xy, dtype=np.float64)
    phi = np.deg2rad(np.asarray(phi_deg, dtype=np.float64))[..., None, None]
    off = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    u, v = off[None, :], off[:, None]  # u along columns (x), v along rows (y)
    cos, sin = np.cos(phi), np.sin(phi)
    xs = centre[..., 0, None, None] + cos * u - sin * v
    ys = centre[..., 1, None, None] + sin * u + cos * v
    return xs, ys


def _render(
    image: np.ndarray, centres: np.ndarray, phi_deg: np.ndarray, size: int, chunk: int = 32
) -> np.ndarray:
    """Frames [N, 3, S, S] float32 of image [H, W, 3] for centres [N, 2], phi_deg [N]: bilinear lerps on flat
    channel planes, 32 frames at a time (cache friendly). Any sample outside the image -> ValueError."""
    h, w = image.shape[:2]
    planes = np.ascontiguousarray(np.moveaxis(image, 2, 0), dtype=np.float32).reshape(3, -1)
    out = np.empty((len(centres), 3, size, size), np.float32)
    for k in range(0, len(centres), chunk):
        x, y = frame_coordinates(centres[k : k + chunk], phi_deg[k : k + chunk], size)
        if x.min() < -1e-6 or y.min() < -1e-6 or x.max() > w - 1 + 1e-6 or y.max() > h - 1 + 1e-6:
            raise ValueError(f"window leaves the {h}x{w} image: use a smaller size or a more central centre")
        x, y = np.clip(x, 0, w - 1), np.clip(y, 0, h - 1)
        x0, y0 = np.minimum(x.astype(np.intp), w - 2), np.minimum(y.astype(np.intp), h - 2)
        fx, fy = (x - x0).astype(np.float32), (y - y0).astype(np.float32)
        i = y0 * w + x0
        for ch, p in enumerate(planes):
            a00, a01, a10, a11 = p[i], p[i + 1], p[i + w], p[i + w + 1]
            top = (a01 - a00) * fx + a00
            out[k : k + chunk, ch] = ((a11 - a10) * fx + a10 - top) * fy + top
    return out


def render_frame(image: np.ndarray, centre_xy: Sequence[float], phi_deg: float, size: int) -> np.ndarray:
    """One clean frame [size, size, 3] float32: ``image`` rotated CCW (as displayed) by phi_deg about centre_xy."""
    centre = np.asarray(centre_xy, dtype=np.float64).reshape(1, 2)
    frame = _render(np.asarray(image, dtype=np.float32), centre, np.array([phi_deg], dtype=np.float64), size)
    return frame[0].transpose(1, 2, 0)


def _rain_masks(
    rng: np.random.Generator, density: np.ndarray, alpha_deg: np.ndarray, frames: int, size: int
) -> np.ndarray:
    """Rain masks [n, frames, size, size] in [0, 1] (intensity a included) for per-clip density/alpha [n]."""
    n = len(density)
    nf, hw = n * frames, size * size
    counts = rng.poisson(0.004 * hw * np.repeat(np.asarray(density, dtype=np.float64), frames))
    frame_of = np.repeat(np.arange(nf), counts)
    k = len(frame_of)
    cx, cy = rng.uniform(0, size, k), rng.uniform(0, size, k)
    length, amp = rng.uniform(5, 15, k), rng.uniform(0.6, 1.0, k)
    beta = np.deg2rad(
        np.repeat(np.repeat(np.asarray(alpha_deg, dtype=np.float64), frames), counts) + rng.normal(0, 2, k)
    )
    s = ((np.arange(_SAMPLES_PER_STREAK) + 0.5) / _SAMPLES_PER_STREAK - 0.5)[None, :] * length[:, None]
    px, py = cx[:, None] + s * np.sin(beta)[:, None], cy[:, None] + s * np.cos(beta)[:, None]
    wgt = (amp * length / _SAMPLES_PER_STREAK)[:, None]  # a * unit mass per px of length
    # splat on a canvas padded by 1 px before and 2 after: points clipped to [-1, size] land in the pad, cropped
    px, py = np.clip(px, -1, size) + 1, np.clip(py, -1, size) + 1
    x0, y0 = px.astype(np.intp), py.astype(np.intp)
    fx, fy = px - x0, py - y0
    side = size + 3
    base = frame_of[:, None] * side * side + y0 * side + x0
    acc = np.zeros(nf * side * side)
    for off, cw in ((0, (1 - fx) * (1 - fy)), (1, fx * (1 - fy)), (side, (1 - fx) * fy), (side + 1, fx * fy)):
        acc += np.bincount((base + off).ravel(), (wgt * cw).ravel(), minlength=nf * side * side)
    acc = acc.reshape(nf, side, side)[:, 1 : size + 1, 1 : size + 1]
    mask = gaussian_filter(acc.astype(np.float32), sigma=(0, 0.7, 0.7), mode="constant")
    return np.clip(mask, 0.0, 1.0).reshape(n, frames, size, size)


def _add_rain(clean: np.ndarray, mask: np.ndarray, rng: np.random.Generator, chunk: int = 64) -> np.ndarray:
    """rainy = clip(clean + (1 - clean) 0.8 m + N(0, 0.01^2), 0, 1); clean [N, T, 3, H, W], mask [N, T, H, W]."""
    out = np.empty_like(clean)
    for k in range(0, len(clean), chunk):
        c, r = clean[k : k + chunk], out[k : k + chunk]
        rng.standard_normal(r.shape, dtype=np.float32, out=r)
        r *= 0.01
        r += c
        r += (1.0 - c) * (0.8 * mask[k : k + chunk, :, None])
        np.clip(r, 0.0, 1.0, out=r)
    return out


@dataclass
class RainClips:
    """Paired clips: rainy/clean [n, T, 3, H, W] float32 in [0, 1], phi_deg [n, T] float64 (true frame angles),
    source [n] (image of each clip), centre_xy [n, T, 2] (window centres, px), rain_mask [n, T, H, W]."""

    rainy: torch.Tensor
    clean: torch.Tensor
    phi_deg: torch.Tensor
    source: list[str]
    centre_xy: torch.Tensor | None = None
    rain_mask: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.rainy.shape[0])


def _check(n: int, size: int, frames: int, split: str, *, odd: bool, what: str = "frames") -> None:
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {sorted(_SPLITS)}, got {split!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if size < 8:
        raise ValueError(f"size must be >= 8, got {size}")
    if frames < 1:
        raise ValueError(f"{what} must be >= 1, got {frames}")
    if odd and frames % 2 == 0:
        raise ValueError(f"frames must be odd, got {frames}")


@dataclass(frozen=True)
class Motion:
    """Camera motion and rain of the generator (defaults: the spec's). omega_deg: per-clip angular velocity
    ω ~ U(−omega_deg, omega_deg) per frame; theta0_deg: initial roll θ₀ ~ U(−theta0_deg, theta0_deg); drift_px:
    v ~ U(−drift_px, drift_px)² px per frame; jitter_deg: σ of the per-frame angle noise; rain_density: factor on
    the streak density d."""

    omega_deg: float = 3.0
    theta0_deg: float = 5.0
    drift_px: float = 1.0
    jitter_deg: float = 0.3
    rain_density: float = 1.0

    def __post_init__(self):
        for key in ("omega_deg", "theta0_deg", "drift_px", "jitter_deg", "rain_density"):
            if not getattr(self, key) >= 0:
                raise ValueError(f"{key} must be >= 0, got {getattr(self, key)}")


def _generate(
    n: int, size: int, frames: int, split: str, seed: int, motion_scale: float, motion: Motion | None
) -> RainClips:
    """The clip generator shared by rainy_clips and rainy_sequences (see the module docstring)."""
    import torch

    m = motion or Motion()
    rng = np.random.default_rng([seed, _STREAM[split], frames])
    names = _SPLITS[split]
    src = [names[i] for i in rng.permutation(np.arange(n) % len(names))]
    c = (frames - 1) / 2.0
    dt = np.arange(frames) - c
    theta0 = rng.uniform(-1, 1, n) * m.theta0_deg
    omega = rng.uniform(-1, 1, n) * m.omega_deg
    vel = rng.uniform(-1, 1, (n, 2)) * m.drift_px * motion_scale
    jitter = rng.normal(0, 1, (n, frames)) * m.jitter_deg
    phi = motion_scale * (theta0[:, None] + dt[None, :] * omega[:, None] + jitter)
    margin = 0.75 * size + c * np.abs(vel) + 1.0  # [n, 2]: rotated window (any angle) + drift + 1 px
    unit = rng.uniform(0, 1, (n, 2))
    clean = np.empty((n, frames, 3, size, size), np.float32)
    centres = np.empty((n, frames, 2))
    for name in dict.fromkeys(src):
        idx = np.array([i for i, s in enumerate(src) if s == name])
        img = source_image(name)
        hi = np.array([img.shape[1] - 1, img.shape[0] - 1]) - margin[idx]
        if np.any(hi < margin[idx]):
            raise ValueError(f"size {size} too large for source {name!r} of shape {img.shape[:2]}")
        base = margin[idx] + unit[idx] * (hi - margin[idx])
        centres[idx] = base[:, None, :] + dt[None, :, None] * vel[idx][:, None, :]
        flat = _render(img, centres[idx].reshape(-1, 2), phi[idx].reshape(-1), size)  # raises if outside
        clean[idx] = flat.reshape(len(idx), frames, 3, size, size)
    density = rng.uniform(0.5, 1.5, n) * m.rain_density
    mask = _rain_masks(rng, density, rng.uniform(-20, 20, n), frames, size)
    rainy = _add_rain(clean, mask, rng)
    return RainClips(
        rainy=torch.from_numpy(rainy),
        clean=torch.from_numpy(clean),
        phi_deg=torch.from_numpy(phi),
        source=src,
        centre_xy=torch.from_numpy(centres),
        rain_mask=torch.from_numpy(mask),
    )


def rainy_clips(
    n: int,
    size: int = 64,
    frames: int = 5,
    split: str = "train",
    seed: int = 0,
    *,
    motion_scale: float = 1.0,
    motion: Motion | None = None,
) -> RainClips:
    """``n`` synthetic clips of ``frames`` (odd) size x size frames; split "train" (4 sources, balanced) or "heldout"
    (chelsea). Same arguments -> identical tensors. ``motion`` sets the camera motion and rain (default: the
    spec's); ``motion_scale=0`` freezes the camera (tests)."""
    _check(n, size, frames, split, odd=True)
    return _generate(n, size, frames, split, seed, motion_scale, motion)


def rainy_sequences(
    n: int,
    length: int = 9,
    size: int = 64,
    split: str = "heldout",
    seed: int = 0,
    *,
    motion_scale: float = 1.0,
    motion: Motion | None = None,
) -> RainClips:
    """``n`` evaluation sequences of ``length`` >= 1 frames (odd or even: c = (length-1)/2 may be a half
    integer), same generator as rainy_clips; fields as RainClips with T = length."""
    _check(n, size, length, split, odd=False, what="length")
    return _generate(n, size, length, split, seed, motion_scale, motion)


def clip_with_angles(
    image: np.ndarray | str,
    phi_deg: Sequence[float] | np.ndarray,
    size: int = 64,
    centre_xy: Sequence[float] | None = None,
    shift_px: Sequence[float] = (0.0, 0.0),
    rain: bool = False,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """A clip with GIVEN angles: frames [T, 3, size, size] float32 (frame t = image rotated CCW as displayed by
    phi_deg[t] about centre_xy + (t - c) shift_px; default centre = image centre) and phi_deg [T] float64."""
    img = source_image(image) if isinstance(image, str) else np.asarray(image, dtype=np.float32)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"image must be [H, W, 3], got shape {img.shape}")
    phi = np.asarray(phi_deg, dtype=np.float64).reshape(-1)
    if len(phi) < 1 or size < 8:
        raise ValueError(f"need >= 1 angle and size >= 8, got {len(phi)} angles and size {size}")
    h, w = img.shape[:2]
    centre = np.array([(w - 1) / 2, (h - 1) / 2] if centre_xy is None else centre_xy, dtype=np.float64)
    dt = np.arange(len(phi)) - (len(phi) - 1) / 2.0
    centres = centre[None, :] + dt[:, None] * np.asarray(shift_px, dtype=np.float64)[None, :]
    frames = _render(img, centres, phi, size)
    if rain:
        rng = np.random.default_rng(seed)
        mask = _rain_masks(rng, rng.uniform(0.5, 1.5, 1), rng.uniform(-20, 20, 1), len(phi), size)[0]
        frames = _add_rain(frames[None], mask[None], rng)[0]
    return frames, phi
