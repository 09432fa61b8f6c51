"""Reading a user's data: image arrays (.npy/.zarr), obs CSVs, AnnData counts; one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from iclr26_core.errors import UserError


def read_images(path: str) -> np.ndarray:
    p = Path(path)
    if not p.exists():
        raise UserError(f"image file not found: {path}")
    if p.suffix == ".npy":
        x = np.load(p, allow_pickle=False)
    elif p.suffix == ".zarr":
        import zarr

        x = np.asarray(zarr.open(str(p), mode="r"))
    else:
        raise UserError(f"images must be .npy or .zarr, got {p.name}")
    if x.ndim != 4:
        raise UserError(f"images must have shape (n, C, H, W), got {x.shape}")
    return x.astype(np.float32)


def read_obs(path: str, columns: list[str | None], what: str) -> pd.DataFrame:
    if not Path(path).exists():
        raise UserError(f"{what} obs file not found: {path}")
    obs = pd.read_csv(path)
    for c in columns:
        if c is not None and c not in obs.columns:
            raise UserError(f"obs column {c!r} missing in {path} (columns: {list(obs.columns)})")
    return obs


def read_counts(path: str) -> tuple[np.ndarray, pd.DataFrame]:
    """Counts (n, genes) from ``layers['counts']`` or an integer ``X``; `UserError` when neither holds counts."""
    if not Path(path).exists():
        raise UserError(f"expression file not found: {path}")
    import anndata as ad

    a = ad.read_h5ad(path)
    x = a.layers.get("counts", a.X)
    x = x.toarray() if hasattr(x, "toarray") else np.asarray(x)
    x = x.astype(np.float64)
    if "counts" not in a.layers and (np.any(x < 0) or np.any(x != np.round(x))):
        raise UserError(f"{path}: no counts (no layers['counts'] and X is not non-negative integers)")
    return x.astype(np.float32), a.obs.reset_index(names="cell_id")
