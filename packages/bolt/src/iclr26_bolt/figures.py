"""The figures of a reproduce run: the accuracy–cost frontier and the reliability diagrams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from iclr26_core.evaluation import calibration_bins
from iclr26_core.report import pyplot, save_figure

from .student import ARM_NAMES as NAMES


def frontier_figure(seeds: list[dict[str, Any]], path: Path) -> str:
    """Test accuracy against realised mean extra cost: router (τ sweep), random triggering at the router's cost,
    entropy-only threshold, always-on subsets; one panel per seed."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(seeds), figsize=(5 * len(seeds), 4), squeeze=False)
    for ax, s in zip(axes[0], seeds, strict=True):
        fr = s["route"]["frontier"]
        for key, style, label in (
            ("router", "o-", "bTTA router (Lagrangian)"),
            ("random", "s--", "random, same cost"),
            ("entropy", "^-.", "entropy-only threshold"),
        ):
            pts = sorted(fr[key])
            ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], style, ms=3, label=label)
        for name, cost, acc in fr["always_on"]:
            ax.scatter([cost], [100 * acc], marker="x", color="k")
            ax.annotate(name, (cost, 100 * acc), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.axvline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("mean extra cost (pass-1 = 1.0; budget B - 1 = 1.0)")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"seed {s['seed']}")
        ax.legend(fontsize=7, loc="lower right")
    return save_figure(fig, path)


def reliability_figure(seed: dict[str, Any], path: Path, n_bins: int = 15) -> str:
    """Per-bin accuracy against confidence of ODD, SFT and both token-KD readings on pass-1 test inputs (no
    temperature)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(NAMES), figsize=(4 * len(NAMES), 4))
    for ax, (arm, label) in zip(axes, NAMES.items(), strict=True):
        rel = seed["arms"][arm]["_reliability"]
        b = calibration_bins(np.asarray(rel["confidence"]), np.asarray(rel["correct"]), n_bins)
        centers = (b["edges"][:-1] + b["edges"][1:]) / 2
        ax.bar(centers, np.nan_to_num(b["accuracy"]), width=1 / n_bins, edgecolor="k", alpha=0.7)
        ax.plot([0, 1], [0, 1], "r--")
        ax.set_title(f"{label}: ECE-15 = {100 * seed['arms'][arm]['ece']:.2f}")
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
    return save_figure(fig, path)
