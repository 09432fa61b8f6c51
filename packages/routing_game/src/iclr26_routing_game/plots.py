"""Heat-maps of a sweep: the provider's policy, the misalignment gap Δ_U, the throttling gain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from iclr26_core.report import pyplot, save_figure

from .grids import POLICIES


def _grid(df: Any, x: str, y: str, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs, ys = np.unique(df[x].to_numpy()), np.unique(df[y].to_numpy())
    z = df.pivot_table(index=y, columns=x, values=column, aggfunc="first").reindex(index=ys, columns=xs)
    return xs, ys, z.to_numpy()


def policy_map(df: Any, x: str, y: str, path: str | Path, title: str = "") -> str:
    """The provider's optimal policy per grid point (M1 / M2 / cascade / M1 with s > 0 and the user leaving)."""
    from matplotlib.colors import ListedColormap

    plt = pyplot()
    codes = df["policy"].map({p: k for k, p in enumerate(POLICIES)}).astype(float)
    xs, ys, z = _grid(df.assign(code=codes), x, y, "code")
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    cmap = ListedColormap(["#4c72b0", "#dd8452", "#c44e52", "#8172b3"])
    ax.pcolormesh(xs, ys, z, cmap=cmap, vmin=-0.5, vmax=3.5, shading="nearest")
    handles = [plt.Rectangle((0, 0), 1, 1, color=cmap(k)) for k in range(4)]
    ax.legend(handles, POLICIES, fontsize=7, loc="upper left", framealpha=0.8)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or "provider-optimal policy", fontsize=9)
    return save_figure(fig, path)


def value_map(
    df: Any, x: str, y: str, column: str, path: str | Path, title: str = "", label: str = ""
) -> str:
    """A continuous heat-map of ``column`` over the (x, y) grid."""
    plt = pyplot()
    xs, ys, z = _grid(df, x, y, column)
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    mesh = ax.pcolormesh(xs, ys, z, cmap="viridis", shading="nearest")
    fig.colorbar(mesh, ax=ax, label=label or column)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or column, fontsize=9)
    return save_figure(fig, path)
