"""Calibration metrics: ECE with 20 equal-width bins over the whole test set (×100), reliability diagrams,
and a validation-fitted temperature (the label-using oracle baseline).

ECE is computed once from the accumulated (probabilities, labels) of every test image, never per sample or per
batch (Bala93/CLIPCalib #2). Bins are (lo, hi] as in `iclr26_core.evaluation.calibration_bins`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

N_BINS = 20


def ece20(probs: Any, labels: Any, n_bins: int = N_BINS) -> float:
    """ECE (×100) of probabilities [N, C] against labels [N], ``n_bins`` equal-width bins."""
    from iclr26_core.evaluation import ece

    return 100.0 * ece(np.asarray(probs, dtype=float), np.asarray(labels), n_bins=n_bins)


def accuracy(probs: Any, labels: Any) -> float:
    """Top-1 accuracy (×100)."""
    return 100.0 * float((np.asarray(probs).argmax(-1) == np.asarray(labels)).mean())


def fit_temperature(logits: Any, labels: Any) -> float:
    """The temperature T minimising the NLL of softmax(logits / T) (1-D search over log T)."""
    from scipy.optimize import minimize_scalar
    from scipy.special import log_softmax

    z = np.asarray(logits, dtype=float)
    y = np.asarray(labels)

    def nll(log_t: float) -> float:
        return float(-log_softmax(z / np.exp(log_t), axis=-1)[np.arange(len(y)), y].mean())

    return float(np.exp(minimize_scalar(nll, bounds=(-3.0, 3.0), method="bounded").x))


def reliability_figure(rows: dict[str, tuple[Any, Any]], n_bins: int = N_BINS):
    """One reliability diagram per method, side by side: {name: (probs [N, C], labels [N])}."""
    from iclr26_core.evaluation import calibration_bins
    from iclr26_core.report import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, len(rows), figsize=(3.2 * len(rows), 3.2), squeeze=False)
    for ax, (name, (probs, labels)) in zip(axes[0], rows.items(), strict=True):
        p = np.asarray(probs, dtype=float)
        conf, correct = p.max(-1), (p.argmax(-1) == np.asarray(labels)).astype(float)
        b = calibration_bins(conf, correct, n_bins)
        centers = (b["edges"][:-1] + b["edges"][1:]) / 2
        ax.bar(centers, np.nan_to_num(b["accuracy"]), width=1 / n_bins, edgecolor="k", alpha=0.7)
        ax.plot([0, 1], [0, 1], "r--")
        ax.set_title(f"{name}: ECE {ece20(p, labels, n_bins):.2f}")
        ax.set_xlabel("confidence")
    axes[0][0].set_ylabel("accuracy")
    fig.tight_layout()
    return fig
