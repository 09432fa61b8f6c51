"""Figures: concept overlays for `explain`, the concept gallery and the 3D-C mesh hits of `reproduce`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from iclr26_core.report import pyplot, save_figure


def overlay(image: torch.Tensor, maps: torch.Tensor, titles: list[str], path: str | Path) -> str:
    """The image and, beside it, each map [K,H,W] over the image (red = concept score)."""
    plt = pyplot()
    k = len(maps)
    fig, axes = plt.subplots(1, k + 1, figsize=(2 * (k + 1), 2.2))
    img = image.permute(1, 2, 0).clamp(0, 1).numpy()
    axes = np.atleast_1d(axes)
    axes[0].imshow(img)
    axes[0].set_title("image", fontsize=8)
    for ax, m, title in zip(axes[1:], maps, titles, strict=True):
        ax.imshow(img * 0.5)
        ax.imshow(m.numpy(), cmap="Reds", alpha=0.6, vmin=0, vmax=max(float(m.max()), 1e-6))
        ax.set_title(title, fontsize=8)
    for ax in axes:
        ax.axis("off")
    return save_figure(fig, path)


def concept_gallery(
    images: torch.Tensor,
    maps: torch.Tensor,
    labels: torch.Tensor,
    classes: torch.Tensor,
    path: str | Path,
    per_concept: int = 5,
    n_concepts: int = 4,
) -> str:
    """Rows: the first ``n_concepts`` concepts of class 0 and 1; columns: the views where each is strongest."""
    plt = pyplot()
    rows = []
    for y in (0, 1):
        own = (classes == y).nonzero()[:, 0][:n_concepts].tolist()
        rows += [(y, t) for t in own]
    fig, axes = plt.subplots(len(rows), per_concept, figsize=(1.6 * per_concept, 1.6 * len(rows)))
    for r, (y, t) in enumerate(rows):
        sel = (labels == y).nonzero()[:, 0]
        strength = maps[sel, t].flatten(1).sum(1)
        best = sel[strength.argsort(descending=True)[:per_concept]]
        for c in range(per_concept):
            ax = axes[r, c]
            ax.axis("off")
            if c < len(best):
                i = int(best[c])
                ax.imshow(images[i].permute(1, 2, 0).clamp(0, 1).numpy() * 0.45)
                ax.imshow(maps[i, t].numpy(), cmap="Reds", alpha=0.65, vmin=0, vmax=1)
            if c == 0:
                ax.set_title(f"class {y} concept {t}", fontsize=7, loc="left")
    fig.tight_layout()
    fig.suptitle(
        f"CAVE concepts: the {per_concept} test views where each map is strongest (red = concept score s_u)",
        fontsize=8,
        y=1.0,
    )
    return save_figure(fig, path)


def mesh_hits(
    vertices: np.ndarray, hist_a: np.ndarray, hist_b: np.ndarray, names: tuple[str, str], path: str | Path
) -> str:
    """For one concept of each method (``names``: titles with its id and class): its per-image vertex histograms
    (each normalised to sum 1) summed over the images, on the mesh seen from above (x, y)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7.5, 3.2))
    for ax, h, name in zip(axes, (hist_a, hist_b), names, strict=True):
        ax.scatter(vertices[:, 0], vertices[:, 1], c="lightgrey", s=6)
        sc = ax.scatter(vertices[:, 0], vertices[:, 1], c=h, s=8 + 60 * h / max(h.max(), 1e-12), cmap="Reds")
        ax.set_title(name, fontsize=9)
        ax.set_aspect("equal")
        ax.axis("off")
        bar = fig.colorbar(sc, ax=ax, fraction=0.04)
        bar.set_label("attribution share, summed over images", fontsize=7)
        bar.ax.tick_params(labelsize=6)
    fig.suptitle("3D-C: where a concept's top-10% pixels land on the class mesh (top view)", fontsize=9)
    return save_figure(fig, path)
