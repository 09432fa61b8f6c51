"""The figures `reproduce` writes: grokking curves, stability trajectories, ReLU closed form vs Monte Carlo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iclr26_core.report import pyplot, save_figure


def _runs(grid: dict[str, dict[int, dict]]):
    """``(arm, colour, first, run)`` for every seed's run of every arm: one colour per arm, ``first`` for the
    legend entry."""
    for k, arm in enumerate(grid):
        for i, (_seed, run) in enumerate(sorted(grid[arm].items())):
            yield arm, f"C{k % 10}", i == 0, run


def grokking(path: Path, grid: dict[str, dict[int, dict]], target: float) -> str:
    """Train (dashed) and validation (solid) accuracy against step, one colour per arm, one line per seed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for arm, color, first, run in _runs(grid):
        steps = [p["step"] for p in run["curve"]]
        val = [p["val_acc"] for p in run["curve"]]
        ax.plot(steps, val, color=color, lw=1.4, label=f"{arm} (val)" if first else None)
        train = [p["train_acc"] for p in run["curve"]]
        ax.plot(steps, train, color=color, lw=0.8, ls="--", label=f"{arm} (train)" if first else None)
    ax.axhline(target, color="grey", lw=0.6)
    ax.set_xlabel("step")
    ax.set_ylabel("accuracy")
    ax.set_title("modular addition: train (dashed) and validation (solid) accuracy, every seed")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return save_figure(fig, path)


def stability(path: Path, grid: dict[str, dict[int, dict]], rho: float) -> str:
    """Normalised Stab_ρ (left) and the centred E⟨M(X), M(Y)⟩ − ‖E M‖² (right) against step."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, label in (
        (axes[0], "stability", f"normalised Stab_ρ (ρ = {rho})"),
        (axes[1], "centered", f"centred Stab_ρ − ‖E M‖² (ρ = {rho})"),
    ):
        for arm, color, first, run in _runs(grid):
            pts = [p for p in run["curve"] if key in p]
            x, y = [p["step"] for p in pts], [p[key] for p in pts]
            ax.plot(x, y, color=color, lw=1.2, label=arm if first else None)
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    axes[0].set_title("normalised (a flat output scores 1)", fontsize=9)
    axes[1].set_title("centred (a flat output scores 0)", fontsize=9)
    fig.suptitle("noise stability of the output distribution on validation inputs", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def relu(path: Path, c1: dict[str, Any]) -> str:
    import numpy as np

    from .stability import relu_stability

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    grid = np.linspace(-1, 1, 201)
    axes[0].plot(grid, [relu_stability(float(r)) for r in grid], label="closed form (Thm 5.1)")
    axes[0].plot(grid, 1 / (2 * np.pi) + grid / 4 + grid**2 / (4 * np.pi), ls=":", label="2nd-order Taylor")
    rhos = sorted(float(r) for r in c1["mc"])
    axes[0].plot(rhos, [c1["mc"][r] for r in rhos], "o", label="Monte Carlo")
    axes[0].set_xlabel("ρ")
    axes[0].set_ylabel("E[ReLU(X) ReLU(Y)]")
    axes[0].legend(fontsize=8)
    for start, _end in c1["ends"].items():
        from .stability import iterate_relu_map

        path_ = iterate_relu_map(float(start), 12)
        axes[1].plot(range(len(path_)), path_, "o-", ms=3, label=f"ρ₀ = {start}")
    axes[1].axhline(
        c1["fixed_point_exact"], color="grey", lw=0.8, label=f"s* = {c1['fixed_point_exact']:.5f}"
    )
    axes[1].axhline(c1["fixed_point_taylor"], color="grey", lw=0.8, ls=":", label="2/(3π)")
    axes[1].set_xlabel("depth")
    axes[1].set_ylabel("stability")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def influence(path: Path, influences: list[float], title: str) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(range(len(influences)), influences)
    ax.set_xlabel("position i")
    ax.set_ylabel("Inf_i")
    ax.set_title(title)
    fig.tight_layout()
    return save_figure(fig, path)
