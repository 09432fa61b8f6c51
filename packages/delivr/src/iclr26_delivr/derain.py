"""Restore a whole video: a sliding T-frame window with edge replication and seam-free spatial tiling.

Tiles overlap by ``overlap`` pixels; each tile's output is weighted by a separable linear ramp over the overlap
on every side that has a neighbour (flat 1 elsewhere) and the weighted outputs are divided by the summed weights,
so the blending weights sum to 1 at every pixel and no seam is visible (users asked for this: naive tiling
leaves block artefacts).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

MEMORY_WARN_BYTES = 4 * 2**30


def as_video(video: torch.Tensor | np.ndarray) -> torch.Tensor:
    """[F, 3, H, W] tensor, or [F, H, W, 3] array (uint8 or float in [0, 1]) -> float32 [F, 3, H, W]."""
    if isinstance(video, np.ndarray):
        arr = video
        if arr.ndim != 4 or arr.shape[-1] != 3:
            raise ValueError(f"a video array must be [F, H, W, 3], got shape {arr.shape}")
        scale = 255.0 if arr.dtype == np.uint8 else 1.0
        video = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32) / scale).permute(0, 3, 1, 2)
    if video.ndim != 4 or video.shape[1] != 3:
        raise ValueError(f"video must be [F, 3, H, W] with 3 channels, got shape {tuple(video.shape)}")
    if not bool(torch.isfinite(video).all()):
        raise ValueError("the video contains NaN or inf values")
    return video.float()


def window_indices(n_frames: int, frames: int) -> list[list[int]]:
    """For each frame f, the T indices f−c..f+c clamped to [0, F−1] (edge frames replicated)."""
    c = (frames - 1) // 2
    return [[min(max(f + d, 0), n_frames - 1) for d in range(-c, c + 1)] for f in range(n_frames)]


def tile_starts(size: int, tile: int, overlap: int) -> list[int]:
    """Start offsets covering [0, size) with tiles of ``tile`` and stride ``tile − overlap`` (last one flush)."""
    if tile >= size:
        return [0]
    stride = tile - overlap
    starts = list(range(0, size - tile, stride))
    return [*starts, size - tile]


def ramp(length: int, start: int, end: int, size: int, overlap: int) -> torch.Tensor:
    """1-D weight of a tile [start, end) of a side of ``size``: linear ramp up/down over the overlap at interior
    edges, 1 elsewhere (all positive)."""
    w = torch.ones(length, dtype=torch.float64)
    k = min(overlap, length)
    if k > 0:
        up = torch.arange(1, k + 1, dtype=torch.float64) / (k + 1)
        if start > 0:
            w[:k] = torch.minimum(w[:k], up)
        if end < size:
            w[-k:] = torch.minimum(w[-k:], up.flip(0))
    return w


def blend_weights(
    height: int, width: int, tile: int, overlap: int
) -> list[tuple[slice, slice, torch.Tensor]]:
    """Tiles as (rows, cols, weight [h, w]) with the weights normalised to sum to 1 at every pixel."""
    tiles = []
    total = torch.zeros(height, width, dtype=torch.float64)
    for y in tile_starts(height, tile, overlap):
        for x in tile_starts(width, tile, overlap):
            h, w = min(tile, height), min(tile, width)
            wy = ramp(h, y, y + h, height, overlap)
            wx = ramp(w, x, x + w, width, overlap)
            weight = wy[:, None] * wx[None, :]
            rows, cols = slice(y, y + h), slice(x, x + w)
            total[rows, cols] += weight
            tiles.append((rows, cols, weight))
    return [(r, c, w / total[r, c]) for r, c, w in tiles]


@torch.no_grad()
def derain(
    model,
    video: torch.Tensor | np.ndarray,
    *,
    tile: int | None = None,
    overlap: int = 32,
    batch_size: int = 1,
    progress=None,
) -> torch.Tensor:
    """Restore every frame of ``video`` with ``model`` (a `DeLiVR`): [F, 3, H, W] float in [0, 1].

    Each frame is the centre of a T-frame window (edges replicated). With ``tile`` the frames are cut into
    overlapping ``tile``×``tile`` crops blended with linear ramps; ``progress`` wraps the window loop (tqdm-like).
    """
    video = as_video(video)
    n, _, height, width = video.shape
    if tile is not None and tile < 1:
        raise ValueError(f"tile must be >= 1, got {tile}")
    if overlap < 0:
        raise ValueError(f"overlap must be >= 0, got {overlap}")
    if tile is not None and overlap >= tile:
        raise ValueError(f"overlap ({overlap}) must be smaller than the tile ({tile})")
    frames = model.config.frames
    if tile is None and model.memory_estimate(height, width, batch_size) > MEMORY_WARN_BYTES:
        gib = model.memory_estimate(height, width, batch_size) / 2**30
        warnings.warn(
            f"joint attention over {height}x{width} frames needs about {gib:.1f} GiB per block; "
            f"pass tile=256 (CLI: --tile 256) to bound it",
            stacklevel=2,
        )
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    tiles = blend_weights(height, width, tile, overlap) if tile else [(slice(None), slice(None), None)]
    out = torch.zeros(n, 3, height, width)
    windows = window_indices(n, frames)
    batches = range(math.ceil(n / batch_size))
    for b in progress(batches) if progress else batches:
        idx = list(range(b * batch_size, min((b + 1) * batch_size, n)))
        clip = torch.stack([video[windows[f]] for f in idx])  # [b, T, 3, H, W]
        for rows, cols, weight in tiles:
            y = model(clip[..., rows, cols].to(device)).restored.float().cpu()
            if weight is None:
                out[idx] = y
            else:
                out[idx, :, rows, cols] += y * weight.float()
    model.train(was)
    return out.clamp(0.0, 1.0)
