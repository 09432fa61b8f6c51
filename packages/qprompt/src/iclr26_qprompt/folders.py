"""Image and label folders of the ``train`` and ``segment`` verbs, checked before anything is written.

Layout: ``DIR/images/*.png`` (RGB) and ``DIR/labels/*.png`` (one channel, class ids, 255 = ignore), the same
file names in both. Every mistake is one `UserError` line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iclr26_core.errors import UserError

IGNORE = 255


def _pngs(directory: Path, what: str) -> list[Path]:
    if not directory.is_dir():
        raise UserError(f"{what} folder {str(directory)!r} does not exist")
    files = sorted(p for p in directory.iterdir() if p.suffix.lower() == ".png")
    if not files:
        raise UserError(f"no .png files in {what} folder {str(directory)!r}")
    return files


def read_images(directory: str | Path) -> tuple[list[str], np.ndarray]:
    """(names, uint8 [N, H, W, 3]) of a folder of PNGs of one size."""
    from PIL import Image

    files = _pngs(Path(directory), "images")
    arrays = []
    for f in files:
        try:
            arrays.append(np.asarray(Image.open(f).convert("RGB")))
        except OSError as exc:
            raise UserError(f"cannot read image {str(f)!r}: {exc}") from exc
    shapes = sorted({a.shape for a in arrays})
    if len(shapes) > 1:
        raise UserError(f"images in {str(directory)!r} differ in size: {shapes[:3]}")
    return [f.name for f in files], np.stack(arrays)


def read_labels(
    directory: str | Path, names: list[str], num_classes: int, shape: tuple[int, int]
) -> np.ndarray:
    """uint8 label maps [N, H, W] for ``names``; ids must lie in 0..num_classes-1 or be 255."""
    from PIL import Image

    directory = Path(directory)
    files = _pngs(directory, "labels")
    have = {f.name for f in files}
    missing, extra = sorted(set(names) - have), sorted(have - set(names))
    if missing or extra:
        raise UserError(
            f"image and label file names do not match: no label for {missing[:3]}, no image for {extra[:3]}"
        )
    labels = np.stack([np.asarray(Image.open(directory / n)) for n in names])
    if labels.ndim != 3 or labels.shape[1:] != tuple(shape):
        raise UserError(
            f"labels must be one-channel maps of the images' size {tuple(shape)}, got {labels.shape[1:]}"
        )
    ids = np.unique(labels)
    bad = [int(i) for i in ids if i >= num_classes and i != IGNORE]
    if bad:
        raise UserError(
            f"label ids {bad} are >= num_classes {num_classes} (only 0..{num_classes - 1} and 255 allowed)"
        )
    return labels.astype(np.uint8)


def read_dataset(directory: str | Path, num_classes: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(names, images, labels) of ``DIR/images`` and ``DIR/labels``."""
    directory = Path(directory)
    names, images = read_images(directory / "images")
    labels = read_labels(directory / "labels", names, num_classes, images.shape[1:3])
    return names, images, labels


def palette(num_classes: int) -> np.ndarray:
    """A fixed colour per class id (uint8 [C, 3]); 255 is drawn black."""
    rng = np.random.default_rng(7)
    base = np.array([[0, 0, 0], [230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200]], np.uint8)
    extra = rng.integers(0, 256, (max(num_classes - len(base), 0), 3)).astype(np.uint8)
    return np.concatenate([base, extra])[:num_classes]
