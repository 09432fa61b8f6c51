"""Figures: the energy-weighted µ histogram (SAE vs SAE-A) and the gap / retrieval bars per intervention."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iclr26_core.report import pyplot, save_figure


def mu_histogram(reports: dict[str, Any], path: str | Path, bins: int = 40, eps: float | None = None) -> str:
    """One panel per report: histogram of µ over live atoms, each atom weighted by its energy E_I + E_T."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(reports), figsize=(4.2 * len(reports), 3.2), squeeze=False)
    for ax, (name, rep) in zip(axes[0], reports.items()):
        live = rep.labels != 0
        mu = rep.mu[live].numpy()
        weight = (rep.e_img + rep.e_txt)[live].numpy()
        ax.hist(mu, bins=bins, range=(0, 1), weights=weight / max(weight.sum(), 1e-30), color="C0")
        e = rep.eps if eps is None else eps
        for x in (e, 1 - e):
            ax.axvline(x, color="grey", lw=0.8, ls="--")
        frac = rep.fractions
        ax.set_title(
            f"{name}: bimodal {frac['bimodal']:.2f}, image {frac['image']:.2f}, text {frac['text']:.2f}",
            fontsize=9,
        )
        ax.set_xlabel("µ = E_I / (E_I + E_T)   (0 text, 1 image)")
        ax.set_ylabel("energy fraction")
    fig.tight_layout()
    return save_figure(fig, path)


def gap_figure(rows: dict[str, dict[str, float]], path: str | Path, title: str = "") -> str:
    """Bars of DiM and recall@1 per embedding version (reconstructed, bimodal-only, unimodal-only, ...)."""
    plt = pyplot()
    names = list(rows)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for ax, key, label in (
        (axes[0], "dim", "DiM ‖mean(I) − mean(T)‖"),
        (axes[1], "recall@1", "recall@1 (256)"),
    ):
        ax.bar(range(len(names)), [rows[n][key] for n in names], color=[f"C{i}" for i in range(len(names))])
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(label)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)
