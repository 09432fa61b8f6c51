"""The report's figures: fields.png (truth / sensors / ICMR / Mid-Fusion), noise.png, subsets.png."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iclr26_core.report import pyplot, save_figure


def fields_figure(path: Path, st, icmr: dict | None, mid: dict | None) -> str:
    """Test sample 0 at horizon 0: one row per modality."""
    plt = pyplot()
    mods = st.modalities
    g = round(np.sqrt(st.grid.shape[0]))
    fig, axes = plt.subplots(len(mods), 4, figsize=(10, 2.6 * len(mods)), squeeze=False)
    for i, m in enumerate(mods):
        truth = st.targets[0, 0, i].numpy().reshape(g, g)
        vmin, vmax = truth.min(), truth.max()
        panels = [("truth", truth), ("ICMR", icmr), ("Mid-Fusion", mid)]
        for j, (name, arr) in enumerate(panels):
            ax = axes[i, [0, 2, 3][j]]
            if isinstance(arr, dict):
                arr = np.array(arr[m]).reshape(g, g)
            if arr is not None:
                ax.imshow(arr.T, origin="lower", vmin=vmin, vmax=vmax, cmap="viridis", extent=(0, 1, 0, 1))
            ax.set_title(f"{m}: {name}", fontsize=9)
        ax = axes[i, 1]
        xy = st.coords[i].numpy()
        ax.scatter(xy[:, 0], xy[:, 1], c=st.values[0, i].numpy(), s=12, vmin=vmin, vmax=vmax, cmap="viridis")
        ax.set_xlim(0, 1), ax.set_ylim(0, 1), ax.set_aspect("equal")
        ax.set_title(f"{m}: sensors", fontsize=9)
        for a in axes[i]:
            a.set_xticks([]), a.set_yticks([])
    return save_figure(fig, path)


def noise_figure(path: Path, m: dict, sigmas) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for arm, label in (("icmr_flex", "ICMR"), ("mid_flex", "Mid-Fusion")):
        curves = np.array([p[f"noise_T_{arm}"] for p in m["per_seed"]])
        ax.errorbar(
            sigmas, curves.mean(0), yerr=curves.std(0) if len(curves) > 1 else None, marker="o", label=label
        )
    ax.set_xlabel("test noise σ on H, W inputs (z-units)")
    ax.set_ylabel("RMSE of T (z-units)")
    ax.legend()
    return save_figure(fig, path)


def subsets_figure(path: Path, m: dict) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    keys = list(m["per_seed"][0]["subsets_icmr_flex"])
    x = np.arange(len(keys))
    for k, (arm, label) in enumerate((("icmr_flex", "ICMR-flex"), ("icmr_all", "ICMR-all"))):
        vals = np.array([[p[f"subsets_{arm}"][s] for s in keys] for p in m["per_seed"]]).mean(0)
        ax.bar(x + (k - 0.5) * 0.4, vals, 0.4, label=label)
    ax.set_xticks(x, ["{" + ",".join(s) + "}" for s in keys])
    ax.set_ylabel("RMSE, all targets (z-units)")
    ax.set_xlabel("input modalities")
    ax.legend()
    return save_figure(fig, path)
