"""The figures of ``reproduce``: BODIPY-test errors (matched vs mismatched) and ROC curves."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bodipy_figure(path: Path, petri: list, permuted: list) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for k, rs in enumerate((petri, permuted)):
        rs = [r["c1"] for r in rs if r["c1"]]
        for j, cond in enumerate(("mse_matched", "mse_mismatched")):
            vals = [r[cond] for r in rs]
            ax.bar(
                k * 3 + j,
                np.mean(vals) if vals else 0,
                yerr=np.std(vals) if vals else 0,
                color=["tab:blue", "tab:orange"][j],
                label=cond[4:] if k == 0 else None,
            )
    ax.set_xticks([0.5, 3.5], ["PETRI", "permuted"])
    ax.set_ylabel("masked lipid-channel MSE (z-scored)")
    ax.legend(frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def roc_figure(path: Path, petri_run: dict, late: dict) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    for m, x in petri_run["profiles"].items():
        ax.plot(x["roc"]["fpr"], x["roc"]["tpr"], label=f"PETRI {m} (AUC {x['auc']:.2f})")
    ax.plot(late["roc"]["fpr"], late["roc"]["tpr"], "k--", label=f"late-fusion PCA (AUC {late['auc']:.2f})")
    ax.axvline(0.05, color="grey", lw=0.5)
    ax.set_xlabel("FPR")
    ax.set_ylabel("TPR (same-pathway pairs)")
    ax.legend(frameon=False, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
