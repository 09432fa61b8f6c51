"""The figures of `reproduce`: PSNR curves, predicted vs true relative rotation, example frames."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from iclr26_core.report import pyplot, save_figure


def psnr_curves(path: Path, per_seed: list[dict[str, Any]], rainy_psnr: float) -> str:
    """Validation PSNR vs step for the full model and the ablation, one line per seed; ``rainy_psnr`` is the
    rainy input's PSNR on the same validation clips."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for k, s in enumerate(per_seed):
        for arm, style in (("delivr", "-"), ("ablation", "--")):
            curve = s[arm]["curve"]
            if curve:
                steps, vals = zip(*curve, strict=True)
                ax.plot(steps, vals, style, color=f"C{k}", marker="o", ms=3, label=f"{arm} seed {s['seed']}")
    ax.axhline(rainy_psnr, color="grey", lw=1, label="rainy input (same clips)")
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out PSNR (dB, RGB)")
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def angles(path: Path, per_seed: list[dict[str, Any]]) -> str:
    """Scatter of the oracle relative rotation φ_t − φ_c against the predicted θ_t − θ_c (degrees)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4, 4))
    for s in per_seed:
        f = s["delivr"]
        ax.scatter(f["angle_true_deg"], f["angle_pred_deg"], s=6, alpha=0.5, label=f"seed {s['seed']}")
    lim = max(1.0, *(abs(v) for s in per_seed for v in s["delivr"]["angle_true_deg"]))
    ax.plot([-lim, lim], [-lim, lim], color="grey", lw=1)
    ax.set_xlabel("oracle φ_t − φ_c (deg, CCW as displayed)")
    ax.set_ylabel("predicted θ_t − θ_c (deg)")
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def examples(path: Path, held, restored: dict[str, Any], centre: int) -> str:
    """Rainy / ablation / DeLiVR / clean centre frame of the first held-out clip (restored: arm -> [3, H, W])."""
    plt = pyplot()
    images = [
        ("rainy", held.rainy[0, centre]),
        ("ablation", restored["ablation"]),
        ("DeLiVR", restored["delivr"]),
        ("clean", held.clean[0, centre]),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(10, 2.8))
    for ax, (title, img) in zip(axes, images, strict=True):
        ax.imshow(np.clip(img.permute(1, 2, 0).numpy(), 0, 1))
        ax.set_title(title)
        ax.axis("off")
    return save_figure(fig, path)
