"""Frame folders on disk: read a video (a folder of images or an .npy), a paired training set, write PNGs.

Training layout: ``DIR/<sequence>/{rainy,clean}/*.png`` (any of png/jpg/jpeg/bmp/tif), sorted by name, the same
names in both folders. A video for `derain`: a folder of frames (sorted by name) or an ``.npy`` [F, H, W, 3].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from iclr26_core.errors import UserError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")


def frame_files(folder: Path) -> list[Path]:
    """The image files of ``folder`` sorted by name; a `UserError` when there are none."""
    if not folder.is_dir():
        raise UserError(f"{str(folder)!r} is not a directory")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise UserError(f"no image frames ({', '.join(IMAGE_SUFFIXES)}) in {str(folder)!r}")
    return files


def read_image(path: Path) -> np.ndarray:
    """An RGB image as float32 [H, W, 3] in [0, 1] (grey and RGBA converted)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            arr = np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0
    except (UnidentifiedImageError, OSError) as exc:
        raise UserError(f"cannot read image {str(path)!r}: {exc}") from None
    return arr


def read_frames(files: list[Path]) -> np.ndarray:
    """[F, H, W, 3] float32; all frames must have one size."""
    frames = [read_image(p) for p in files]
    shapes = {f.shape for f in frames}
    if len(shapes) > 1:
        raise UserError(f"frames in {str(files[0].parent)!r} differ in size: {sorted(shapes)}")
    return np.stack(frames)


def read_video(path: str | Path) -> tuple[np.ndarray, list[str]]:
    """A folder of frames or an .npy [F, H, W, 3] (uint8 or float in [0, 1]) -> (float32 video, frame names)."""
    path = Path(path)
    if path.suffix == ".npy" and path.is_file():
        try:
            arr = np.load(path, allow_pickle=False)
        except ValueError as exc:
            raise UserError(f"cannot read {str(path)!r}: {exc}") from None
        if arr.ndim != 4 or arr.shape[-1] != 3:
            raise UserError(f"{str(path)!r} must hold [F, H, W, 3] frames, got shape {arr.shape}")
        video = arr.astype(np.float32) / (255.0 if arr.dtype == np.uint8 else 1.0)
        return video, [f"frame_{i:05d}.png" for i in range(len(arr))]
    if not path.exists():
        raise UserError(f"input {str(path)!r} does not exist")
    files = frame_files(path)
    return read_frames(files), [p.stem + ".png" for p in files]


def write_png(path: Path, frame: np.ndarray) -> None:
    """Write [H, W, 3] float in [0, 1] as an 8-bit PNG."""
    from PIL import Image

    Image.fromarray(np.round(np.clip(frame, 0, 1) * 255).astype(np.uint8)).save(path)


@dataclass
class Sequence:
    name: str
    rainy: np.ndarray  # [F, H, W, 3] float32
    clean: np.ndarray
    names: list[str] = field(default_factory=list)  # frame names (stem + ".png"), as `derain` writes them


def read_pairs(root: str | Path) -> list[Sequence]:
    """All ``<sequence>/{rainy,clean}`` pairs under ``root``, checked for matching names and sizes."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"--data {str(root)!r} is not a directory")
    seqs = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        if not (d / "rainy").is_dir() or not (d / "clean").is_dir():
            raise UserError(f"sequence {str(d)!r} needs both rainy/ and clean/ folders")
        rf, cf = frame_files(d / "rainy"), frame_files(d / "clean")
        if [p.name for p in rf] != [p.name for p in cf]:
            missing = sorted({p.name for p in rf} ^ {p.name for p in cf})
            raise UserError(
                f"sequence {d.name!r}: rainy/ and clean/ frame names differ ({', '.join(missing[:3])})"
            )
        rainy, clean = read_frames(rf), read_frames(cf)
        if rainy.shape != clean.shape:
            raise UserError(
                f"sequence {d.name!r}: rainy frames {rainy.shape[1:3]} vs clean {clean.shape[1:3]}"
            )
        seqs.append(Sequence(d.name, rainy, clean, [p.stem + ".png" for p in rf]))
    if not seqs:
        raise UserError(f"no sequences under {str(root)!r}: expected {root}/<sequence>/rainy and .../clean")
    return seqs
