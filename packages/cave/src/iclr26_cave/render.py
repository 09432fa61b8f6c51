"""Synthetic objects with exact ground truth: a small numpy point-splat renderer of textured ellipsoids.

Four classes, each a UV-sphere mesh (24 longitudes × 12 latitude rings + 2 poles = 290 vertices) scaled to an
ellipsoid, cut into 6 parts (k-means on vertex positions); every part carries one of 10 pool textures
(base colour × (0.8 + 0.2·stripe), stripes fixed in object coordinates) and each class uses 6 pool textures,
4 of them shared with the next class, so no texture identifies a class. A render: 4,000 surface points per mesh
tagged with their nearest vertex and part, a random rotation, ±2 px translation, orthographic projection with the
object spanning ≈70% of the image, a z-buffer (nearest point per pixel; holes filled from a 3×3 neighbourhood),
shading 0.6 + 0.4·n_z, a low-pass noise background. Ground truth: ``pix_to_vertex`` and ``part_mask`` (−1 off the
object or occluded), the pose and the object's box (the evaluation region Ω of the official inference). OOD:
occluder rectangles (``occlusion``; filled with part-pool textures, novel two-colour textures, background noise or
grey, ``occluder``) and colour shifts (``shift``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

AXES = ((1.0, 0.6, 0.4), (1.0, 1.0, 0.5), (0.8, 0.5, 0.5), (1.0, 0.8, 0.7))
N_PARTS = 6
N_POINTS = 4000
SPAN = 0.7  # the longest axis (2 units) spans this fraction of the image
OCCLUDERS = ("pool", "novel", "background", "grey")


@dataclass(frozen=True)
class Mesh:
    """One class's mesh: vertices [V,3], their part ids [V], surface points [P,3] with normals, vertex and part."""

    vertices: np.ndarray
    vertex_part: np.ndarray
    points: np.ndarray
    normals: np.ndarray
    point_vertex: np.ndarray
    point_part: np.ndarray
    textures: tuple[int, ...]  # pool texture of each part


def uv_sphere(n_lon: int = 24, n_lat: int = 12) -> np.ndarray:
    """Unit-sphere vertices: ``n_lat`` rings of ``n_lon`` points (poles excluded) plus the two poles."""
    theta = np.pi * (np.arange(n_lat) + 1) / (n_lat + 1)
    phi = 2 * np.pi * np.arange(n_lon) / n_lon
    t, p = np.meshgrid(theta, phi, indexing="ij")
    ring = np.stack([np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)], -1).reshape(-1, 3)
    return np.concatenate([ring, [[0, 0, 1.0], [0, 0, -1.0]]])


def _pool() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 10 pool textures: base colours [10,3], stripe directions [10,3] and frequencies [10]."""
    rng = np.random.default_rng(1234)
    hues = np.linspace(0, 1, 10, endpoint=False)
    import colorsys

    colours = np.array([colorsys.hsv_to_rgb(h, 0.75, 0.95) for h in hues])
    dirs = rng.normal(size=(10, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    freqs = np.array([3.0, 5.0, 8.0, 3.0, 5.0, 8.0, 4.0, 6.0, 0.0, 7.0])
    return colours, dirs, freqs


def texture_colour(texture: np.ndarray, coords: np.ndarray) -> np.ndarray:
    """Colour [n,3] of pool textures ``texture`` [n] at object (or image) coordinates [n,3]."""
    colours, dirs, freqs = _pool()
    stripe = (np.sin(freqs[texture] * np.pi * np.einsum("nd,nd->n", coords, dirs[texture])) > 0).astype(float)
    return colours[texture] * (0.8 + 0.2 * stripe)[:, None]


@cache
def class_mesh(cls: int) -> Mesh:
    """The mesh of class ``cls`` (deterministic)."""
    from sklearn.cluster import KMeans

    axes = np.array(AXES[cls])
    vertices = uv_sphere() * axes
    vertex_part = KMeans(N_PARTS, n_init=4, random_state=cls).fit_predict(vertices)
    rng = np.random.default_rng(100 + cls)
    u = rng.normal(size=(N_POINTS, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    points = u * axes
    normals = points / axes**2
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    d2 = ((points[:, None, :] - vertices[None]) ** 2).sum(-1)
    point_vertex = d2.argmin(1)
    textures = tuple((2 * cls + j) % 10 for j in range(N_PARTS))
    return Mesh(vertices, vertex_part, points, normals, point_vertex, vertex_part[point_vertex], textures)


def meshes(num_classes: int = 4) -> dict[int, np.ndarray]:
    """{class: vertices [V,3]} of the synthetic classes (what `CaveModel` takes as ``vertices``)."""
    return {c: class_mesh(c).vertices for c in range(num_classes)}


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    low = rng.uniform(0.2, 0.8, size=(3, 4, 4)) * rng.uniform(0.5, 1.0)
    rep = -(-size // 4)
    up = np.kron(low, np.ones((rep, rep)))[:, :size, :size]
    from scipy.ndimage import uniform_filter

    return uniform_filter(up, size=(1, rep, rep), mode="nearest")


def project(vertices: np.ndarray, pose: np.ndarray, size: int) -> np.ndarray:
    """Pixel coordinates (x = column, y = row) and depth [n,3] of object points under ``pose`` (12 numbers:
    rotation R row-major, translation tx, ty in pixels, scale in pixels per unit)."""
    rot = pose[:9].reshape(3, 3)
    cam = vertices @ rot.T
    scale = pose[11]
    x = size / 2 - 0.5 + pose[9] + scale * cam[:, 0]
    y = size / 2 - 0.5 + pose[10] - scale * cam[:, 1]
    return np.stack([x, y, cam[:, 2]], -1)


def render(cls: int, rng: np.random.Generator, size: int = 32) -> dict[str, np.ndarray]:
    """One clean render of class ``cls``: image [3,H,W] in [0,1], pix_to_vertex, part_mask [H,W], pose [12]."""
    from scipy.spatial.transform import Rotation

    mesh = class_mesh(cls)
    rot = Rotation.random(random_state=rng.integers(2**31)).as_matrix()
    pose = np.concatenate([rot.reshape(-1), rng.uniform(-2, 2, size=2), [SPAN * size / 2]])
    xyz = project(mesh.points, pose, size)
    n_z = (mesh.normals @ rot.T)[:, 2]
    front = n_z > -0.2
    px, py = np.round(xyz[:, 0]).astype(int), np.round(xyz[:, 1]).astype(int)
    inside = front & (px >= 0) & (px < size) & (py >= 0) & (py < size)
    idx = np.flatnonzero(inside)
    depth = np.full((size, size), -np.inf)
    winner = np.full((size, size), -1)
    order = idx[np.argsort(xyz[idx, 2])]  # far to near: the nearest point is written last
    depth[py[order], px[order]] = xyz[order, 2]
    winner[py[order], px[order]] = order
    winner = _fill_holes(winner, depth)
    obj = winner >= 0
    w = np.where(obj, winner, 0)
    shade = 0.6 + 0.4 * np.clip((mesh.normals[w] @ rot.T)[..., 2], 0, 1)
    colour = texture_colour(
        np.array(mesh.textures)[mesh.point_part[w]].reshape(-1), mesh.points[w].reshape(-1, 3)
    )
    colour = colour.reshape(size, size, 3) * shade[..., None]
    image = np.where(obj[None], colour.transpose(2, 0, 1), _background(rng, size))
    return {
        "image": image.astype(np.float32),
        "label": cls,
        "pix_to_vertex": np.where(obj, mesh.point_vertex[w], -1),
        "part_mask": np.where(obj, mesh.point_part[w], -1),
        "pose": pose.astype(np.float32),
        "box": object_box(obj),
    }


def object_box(obj: np.ndarray) -> np.ndarray:
    """The object's box (y0, y1, x0, x1) in image pixels, ends exclusive, of a boolean object mask [H,W]
    (the whole image when the mask is empty)."""
    ys, xs = np.nonzero(obj)
    if len(ys) == 0:
        return np.array([0, obj.shape[0], 0, obj.shape[1]], dtype=np.int64)
    return np.array([ys.min(), ys.max() + 1, xs.min(), xs.max() + 1], dtype=np.int64)


def _fill_holes(winner: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Empty pixels with ≥ 5 of 8 filled neighbours take the neighbour point nearest the camera."""
    size = winner.shape[0]
    pad_w = np.pad(winner, 1, constant_values=-1)
    pad_d = np.pad(depth, 1, constant_values=-np.inf)
    shifts = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0)]
    nd = np.stack([pad_d[1 + dy : 1 + dy + size, 1 + dx : 1 + dx + size] for dy, dx in shifts])
    nw = np.stack([pad_w[1 + dy : 1 + dy + size, 1 + dx : 1 + dx + size] for dy, dx in shifts])
    best = nd.argmax(0)
    fill = (winner < 0) & ((nw >= 0).sum(0) >= 5)
    out = winner.copy()
    out[fill] = np.take_along_axis(nw, best[None], 0)[0][fill]
    return out


def occluder_mask(sample: dict[str, np.ndarray], fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Rectangles inside the object's box (``sample["box"]``) covering ``fraction`` of it, drawn from ``rng``
    only (so every occluder kind of one seed covers the same pixels)."""
    y0, y1, x0, x1 = (int(v) for v in sample["box"])
    bh, bw = y1 - y0, x1 - x0
    size = sample["image"].shape[-1]
    mask = np.zeros((size, size), bool)
    target = fraction * bh * bw
    for _ in range(50):
        if mask[y0:y1, x0:x1].sum() >= target:
            break
        area = max(target - mask[y0:y1, x0:x1].sum(), 2.0)
        aspect = rng.uniform(0.5, 2.0)
        h = int(np.clip(round(np.sqrt(area * aspect)), 1, bh))
        w = int(np.clip(round(area / h), 1, bw))
        ty, tx = rng.integers(y0, y1 - h + 1), rng.integers(x0, x1 - w + 1)
        mask[ty : ty + h, tx : tx + w] = True
    return mask


def occluder_fill(
    occluder: str, yy: np.ndarray, xx: np.ndarray, size: int, rng: np.random.Generator
) -> np.ndarray:
    """Colours [3,n] of the occluder pixels (yy, xx): ``pool`` one part texture of the pool (the spec's: the material
    of the classes' own parts), ``novel`` two random colours in stripes of random period (2–6 px) and orientation
    (a texture no part carries), ``background`` the background noise texture, ``grey`` 0.5."""
    if occluder == "pool":
        tex = np.full(len(yy), rng.integers(10))
        coords = np.stack([xx / 8.0, yy / 8.0, np.zeros(len(yy))], -1)
        return texture_colour(tex, coords).T
    if occluder == "novel":
        c1, c2 = rng.uniform(0, 1, size=(2, 3))
        theta, period = rng.uniform(0, np.pi), rng.uniform(2, 6)
        stripe = np.sin(2 * np.pi * (xx * np.cos(theta) + yy * np.sin(theta)) / period) > 0
        return np.where(stripe[None], c1[:, None], c2[:, None])
    if occluder == "background":
        return _background(rng, size)[:, yy, xx]
    _check_occluder(occluder)
    return np.full((3, len(yy)), 0.5)


def _check_occluder(occluder: str) -> None:
    if occluder not in OCCLUDERS:
        raise ValueError(f"occluder must be one of {', '.join(OCCLUDERS)}, got {occluder!r}")


def occlude(
    sample: dict[str, np.ndarray],
    fraction: float,
    rng: np.random.Generator,
    occluder: str = "pool",
    fill_rng: np.random.Generator | None = None,
) -> dict[str, np.ndarray]:
    """Cover ``fraction`` of the object's box with rectangles (placed by ``rng``) filled as ``occluder`` says
    (`occluder_fill`; colours drawn from ``fill_rng``, default ``rng``); the covered pixels become −1 in
    ``pix_to_vertex`` and ``part_mask``. The box (Ω) stays the clean object's."""
    _check_occluder(occluder)
    if fraction <= 0:
        return sample
    mask = occluder_mask(sample, fraction, rng)
    yy, xx = np.nonzero(mask)
    out = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in sample.items()}
    fill = occluder_fill(occluder, yy, xx, sample["image"].shape[-1], rng if fill_rng is None else fill_rng)
    out["image"][:, yy, xx] = fill.astype(np.float32)
    out["pix_to_vertex"][mask] = -1
    out["part_mask"][mask] = -1
    return out


def colour_shift(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Hue ±0.1, brightness ±0.2 and N(0, 0.05²) noise."""
    from matplotlib.colors import hsv_to_rgb, rgb_to_hsv

    hsv = rgb_to_hsv(np.clip(image.transpose(1, 2, 0), 0, 1))
    hsv[..., 0] = (hsv[..., 0] + rng.uniform(-0.1, 0.1)) % 1.0
    rgb = hsv_to_rgb(hsv).transpose(2, 0, 1) * (1 + rng.uniform(-0.2, 0.2))
    return np.clip(rgb + rng.normal(0, 0.05, size=rgb.shape), 0, 1).astype(np.float32)


def render_arrays(
    n: int,
    split: str = "train",
    occlusion: float = 0.0,
    shift: bool = False,
    size: int = 32,
    seed: int = 0,
    num_classes: int = 4,
    occluder: str = "pool",
) -> dict[str, np.ndarray]:
    """``n`` renders (classes balanced, in turn) as stacked numpy arrays. ``split`` changes the random stream, so
    train and test renders of one seed differ; occluders and shifts come from streams of their own, so
    ``occlusion=0.4`` covers the same objects as ``occlusion=0``, with the same rectangles for every ``occluder``."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    rng = np.random.default_rng([seed, 0 if split == "train" else 1])
    rows = [render(i % num_classes, rng, size) for i in range(n)]
    clean = {k: np.stack([np.asarray(r[k]) for r in rows]) for k in rows[0]}
    out = occlude_arrays(clean, occlusion, split, seed, occluder)
    if shift:
        shift_rng = np.random.default_rng([seed, 6 if split == "train" else 7])
        out["image"] = np.stack([colour_shift(im, shift_rng) for im in out["image"]])
    return out


def occlude_arrays(
    clean: dict[str, np.ndarray], occlusion: float, split: str = "test", seed: int = 0, occluder: str = "pool"
) -> dict[str, np.ndarray]:
    """`render_arrays`' occlusion of already rendered arrays ``clean`` (the same rectangles as
    ``render_arrays(..., occlusion, occluder)`` of the same seed and split, without rendering again)."""
    _check_occluder(occluder)
    if occlusion <= 0:
        return clean
    s = 0 if split == "train" else 1
    occ_rng = np.random.default_rng([seed, 2 + s, round(occlusion * 100)])
    fill_rng = np.random.default_rng([seed, 4 + s, round(occlusion * 100), OCCLUDERS.index(occluder)])
    keys = list(clean)
    rows = [
        occlude({k: clean[k][i] for k in keys}, occlusion, occ_rng, occluder, fill_rng)
        for i in range(len(clean["image"]))
    ]
    return {k: np.stack([np.asarray(r[k]) for r in rows]) for k in keys}


def render_dataset(n: int, **kwargs: Any):
    """`render_arrays` (same arguments: ``split``, ``occlusion``, ``shift``, ``size``, ``seed`` ...) as a
    `datasets.Dataset` (image, label, pix_to_vertex, part_mask, pose, box), torch format."""
    import datasets

    arrays = render_arrays(n, **kwargs)
    ds = datasets.Dataset.from_dict({k: list(v) for k, v in arrays.items()})
    return ds.with_format("torch")
