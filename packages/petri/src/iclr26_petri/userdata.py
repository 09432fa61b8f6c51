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


def _is_counts(x: np.ndarray) -> bool:
    return not (np.any(x < 0) or np.any(x != np.round(x)))


def read_counts(path: str, lognorm_ok: bool = False) -> tuple[np.ndarray, pd.DataFrame, str]:
    """The expression matrix (n, genes), its obs (cell ids in column ``cell_id``) and its kind: ``"counts"``
    from ``layers['counts']`` or an integer ``X``; with ``lognorm_ok`` a non-integer ``X`` (and no counts layer)
    is taken as log-normalised values, ``"lognorm"``. Otherwise `UserError` when nothing holds counts."""
    if not Path(path).exists():
        raise UserError(f"expression file not found: {path}")
    import anndata as ad

    a = ad.read_h5ad(path)
    x = a.layers.get("counts", a.X)
    x = x.toarray() if hasattr(x, "toarray") else np.asarray(x)
    x = x.astype(np.float64)
    kind = "counts"
    if "counts" not in a.layers and not _is_counts(x):
        if not lognorm_ok:
            raise UserError(
                f"{path}: no counts (no layers['counts'] and X is not non-negative integers); "
                "for log-normalised X use --likelihood mse"
            )
        if not np.isfinite(x).all():
            raise UserError(f"{path}: X holds NaN or infinite values")
        kind = "lognorm"
    obs = a.obs.copy()
    if "cell_id" not in obs.columns:
        obs.insert(0, "cell_id", a.obs_names.astype(str))
    return x.astype(np.float32), obs.reset_index(drop=True), kind
