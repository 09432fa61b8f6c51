"""Synthetic shape-segmentation domains drawn with scikit-image (``skimage.draw`` shapes on ``skimage.filters``
Gaussian noise textures, ``skimage.color`` palettes).

Classes: 0 background, 1 disc, 2 square, 3 triangle, 4 bar (a 1:4 rectangle). Each image holds 3–6 shapes of size
8–20 px at uniform positions and random angles, painted in order (later on top; the label map follows). A shape's
colour is drawn from the domain's palette independently of its class: only geometry identifies the class.

A scene (shapes, label map, colour draws) depends on the seed only; the domain decides how it is rendered, so the
labels are identical across domains:

- ``source``: hues in [0°, 180°), saturation and value in [0.6, 0.9]; background: white noise filtered with a
  Gaussian of σ = 4 px, amplitude 0.1, around a darker colour of the palette;
- ``style``: hues in [180°, 360°), background texture σ = 1.5 px, amplitude 0.3;
- ``adverse``: the source rendering + Gaussian blur (σ = 1) + N(0, 0.1²) noise;
- ``fog``: the source rendering, then x ← 0.5·x + 0.5·0.75 plus a vertical haze gradient from 0 (bottom) to 0.2
  (top).
"""

from __future__ import annotations

import numpy as np

CLASSES = ("background", "disc", "square", "triangle", "bar")
DOMAINS = ("source", "style", "adverse", "fog")
TARGET_DOMAINS = ("style", "adverse", "fog")
IGNORE = 255


def _polygon(kind: int, centre: np.ndarray, size: float, angle: float) -> np.ndarray:
    """Vertices [V, 2] (row, col) of a square, triangle or 1:4 bar of extent ``size`` rotated by ``angle``."""
    if kind == 2:
        pts = np.array([[-1, -1], [-1, 1], [1, 1], [1, -1]]) * size / 2
    elif kind == 3:
        a = np.deg2rad([90, 210, 330])
        pts = np.stack([np.sin(a), np.cos(a)], 1) * size / 1.6
    else:
        pts = np.array([[-1, -0.25], [-1, 0.25], [1, 0.25], [1, -0.25]]) * size / 2
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return pts @ rot.T + centre


def draw_scene(rng: np.random.Generator, size: int = 64) -> dict:
    """A scene: label map [size, size] (uint8) and the shapes (class, pixel rows/cols, colour draw u ∈ [0,1]³)."""
    from skimage.draw import disk, polygon

    label = np.zeros((size, size), np.uint8)
    shapes = []
    for _ in range(int(rng.integers(3, 7))):
        kind = int(rng.integers(1, 5))
        extent = float(rng.uniform(8, 20)) * size / 64
        centre = rng.uniform(extent / 2, size - extent / 2, 2)
        if kind == 1:
            rr, cc = disk(tuple(centre), extent / 2, shape=label.shape)
        else:
            v = _polygon(kind, centre, extent, float(rng.uniform(0, np.pi)))
            rr, cc = polygon(v[:, 0], v[:, 1], shape=label.shape)
        if len(rr) == 0:
            continue
        label[rr, cc] = kind
        shapes.append((kind, rr, cc, rng.uniform(0, 1, 3)))
    return {
        "label": label,
        "shapes": shapes,
        "noise": rng.standard_normal((size, size)),
        "bg": rng.uniform(0, 1, 3),
        "pixel_noise": rng.standard_normal((size, size, 3)),
    }


def _colour(u: np.ndarray, hue0: float, s: tuple[float, float], v: tuple[float, float]) -> np.ndarray:
    import colorsys

    rgb = colorsys.hsv_to_rgb(
        (hue0 + 180 * u[0]) / 360, s[0] + (s[1] - s[0]) * u[1], v[0] + (v[1] - v[0]) * u[2]
    )
    return np.asarray(rgb)


def render(scene: dict, domain: str = "source") -> np.ndarray:
    """The scene's RGB image [H, W, 3] in [0, 1] under ``domain``."""
    from skimage.filters import gaussian

    if domain not in DOMAINS:
        from iclr26_core.errors import UserError

        raise UserError(f"unknown domain {domain!r}; one of {', '.join(DOMAINS)}")
    style = domain == "style"
    hue0 = 180.0 if style else 0.0
    sigma, amp = (1.5, 0.3) if style else (4.0, 0.1)
    tex = gaussian(scene["noise"], sigma=sigma)
    tex = tex / (tex.std() + 1e-8)
    bg = _colour(scene["bg"], hue0, (0.3, 0.6), (0.25, 0.45))
    img = np.clip(bg[None, None] + amp * tex[..., None], 0, 1)
    for _kind, rr, cc, u in scene["shapes"]:
        img[rr, cc] = _colour(u, hue0, (0.6, 0.9), (0.6, 0.9))
    if domain == "adverse":
        img = gaussian(img, sigma=1.0, channel_axis=-1) + 0.1 * scene["pixel_noise"]
    elif domain == "fog":
        haze = np.linspace(0.2, 0.0, img.shape[0])[:, None, None]
        img = 0.5 * img + 0.5 * 0.75 + haze
    return np.clip(img, 0, 1).astype(np.float32)


def shapes_domains(
    n: int, domains: tuple[str, ...] = DOMAINS, size: int = 64, seed: int = 0
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The same ``n`` scenes rendered in each of ``domains``: ({domain: uint8 [n, size, size, 3]}, labels
    [n, size, size] uint8); numpy, seeded."""
    rng = np.random.default_rng(seed)
    images = {d: np.empty((n, size, size, 3), np.uint8) for d in domains}
    labels = np.empty((n, size, size), np.uint8)
    for i in range(n):
        scene = draw_scene(rng, size)
        for d in domains:
            images[d][i] = np.round(render(scene, d) * 255).astype(np.uint8)
        labels[i] = scene["label"]
    return images, labels


def shapes_arrays(
    n: int, domain: str = "source", size: int = 64, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images [n, size, size, 3] uint8 and label maps [n, size, size] uint8 (numpy, seeded)."""
    images, labels = shapes_domains(n, (domain,), size, seed)
    return images[domain], labels


def shapes_dataset(n: int, domain: str = "source", size: int = 64, seed: int = 0):
    """A ``datasets.Dataset`` with columns ``image`` (uint8 [size, size, 3]) and ``label`` (uint8 [size, size])."""
    from datasets import Array2D, Array3D, Dataset, Features

    images, labels = shapes_arrays(n, domain, size, seed)
    features = Features({"image": Array3D((size, size, 3), "uint8"), "label": Array2D((size, size), "uint8")})
    return Dataset.from_dict({"image": images, "label": labels}, features=features).with_format("numpy")


def to_pixel_values(images: np.ndarray):
    """uint8 [B, H, W, 3] -> float tensor [B, 3, H, W] normalised to roughly zero mean, unit scale."""
    import torch

    x = torch.as_tensor(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float() / 255.0
    return (x - 0.5) / 0.25
