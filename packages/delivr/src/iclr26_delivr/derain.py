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

MEMORY_FRACTION = 0.5  # untiled joint attention may use at most this share of the available memory


def available_memory(device: torch.device | str) -> int | None:
    """Bytes free for ``device``: CUDA's free memory, else the host's MemAvailable (Linux) or available pages;
    None when unknown."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import os

        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def auto_tile(model, height: int, width: int, batch_size: int, overlap: int, budget: int) -> int | None:
    """The tile for ``derain`` when the user gave none: None (untiled) when the whole frame's joint attention fits
    in ``budget`` bytes, else the largest multiple of p (> ``overlap``) whose tile fits; ValueError (one line)
    when not even the smallest tile fits."""
    need = model.memory_estimate(height, width, batch_size)
    if need <= budget:
        return None
    p = model.config.patch
    start = p * math.ceil(max(height, width) / p)
    for tile in range(start - p, overlap, -p):
        if model.memory_estimate(min(tile, height), min(tile, width), batch_size) <= budget:
            return tile
    smallest = p * (overlap // p + 1)
    gib = model.memory_estimate(min(smallest, height), min(smallest, width), batch_size) / 2**30
    raise ValueError(
        f"even a {smallest}x{smallest} tile (overlap {overlap}) needs about {gib:.2f} GiB per block, more than "
        f"the {budget / 2**30:.2f} GiB allowed ({MEMORY_FRACTION:.0%} of the available memory): lower "
        "--batch-size or --overlap"
    )


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
    angles: torch.Tensor | None = None,
    memory: int | None = None,
) -> torch.Tensor:
    """Restore every frame of ``video`` with ``model`` (a `DeLiVR`): [F, 3, H, W] float in [0, 1].

    Each frame is the centre of a T-frame window (edges replicated). With ``tile`` the frames are cut into
    overlapping ``tile``×``tile`` crops blended with linear ramps; ``progress`` wraps the window loop (tqdm-like).
    Without ``tile``, a frame whose joint attention would need more than half of the available memory (``memory``
    bytes; default: measured on the model's device) is tiled automatically with a warning that names the tile,
    and a ValueError says so in one line when not even the smallest tile fits; a given ``tile`` is always used.
    ``angles`` [F] (radians): per-frame rotations that replace the angle head's (the oracle arm of `reproduce`).
    """
    video = as_video(video)
    n, _, height, width = video.shape
    if tile is not None and tile < 1:
        raise ValueError(f"tile must be >= 1, got {tile}")
    if overlap < 0:
        raise ValueError(f"overlap must be >= 0, got {overlap}")
    if tile is not None and overlap >= tile:
        raise ValueError(f"overlap ({overlap}) must be smaller than the tile ({tile})")
    if angles is not None and tuple(angles.shape) != (n,):
        raise ValueError(f"angles must be [F] = [{n}], got shape {tuple(angles.shape)}")
    frames = model.config.frames
    device = next(model.parameters()).device
    if tile is None:
        free = available_memory(device) if memory is None else memory
        if free is not None:
            tile = auto_tile(model, height, width, batch_size, overlap, int(MEMORY_FRACTION * free))
            if tile is not None:
                gib = model.memory_estimate(height, width, batch_size) / 2**30
                warnings.warn(
                    f"joint attention over untiled {height}x{width} frames would need about {gib:.1f} GiB per "
                    f"block, more than {MEMORY_FRACTION:.0%} of the {free / 2**30:.1f} GiB available: tiling with "
                    f"tile={tile}, overlap={overlap} (CLI: --tile N chooses the tile)",
                    stacklevel=2,
                )
    was = model.training
    model.eval()
    tiles = blend_weights(height, width, tile, overlap) if tile else [(slice(None), slice(None), None)]
    out = torch.zeros(n, 3, height, width)
    windows = window_indices(n, frames)
    batches = range(math.ceil(n / batch_size))
    for b in progress(batches) if progress else batches:
        idx = list(range(b * batch_size, min((b + 1) * batch_size, n)))
        clip = torch.stack([video[windows[f]] for f in idx])  # [b, T, 3, H, W]
        given = None if angles is None else torch.stack([angles[windows[f]] for f in idx])
        for rows, cols, weight in tiles:
            y = model(clip[..., rows, cols].to(device), angles=given).restored.float().cpu()
            if weight is None:
                out[idx] = y
            else:
                out[idx, :, rows, cols] += y * weight.float()
    model.train(was)
    return out.clamp(0.0, 1.0)
