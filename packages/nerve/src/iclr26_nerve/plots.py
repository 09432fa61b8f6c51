"""Figures: pre/post eigenspectra per layer, metrics by layer, metrics and held-out loss against step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

_METRICS = (("se", "spectral entropy"), ("pr", "participation ratio"), ("eee", "early enrichment"))


def _spectra_axes(eigenvalues: dict, title: str):
    from iclr26_core.report import pyplot

    plt = pyplot()
    layers = sorted(eigenvalues, key=int)
    fig, axes = plt.subplots(1, len(layers), figsize=(3.2 * len(layers), 3.0), squeeze=False, sharey=True)
    for ax, layer in zip(axes[0], layers, strict=True):
        for kind, color in (("pre", "tab:blue"), ("post", "tab:red")):
            ev = np.asarray(eigenvalues[layer][kind], dtype=float)
            ax.semilogy(np.arange(1, ev.size + 1), ev / ev.sum(), color=color, label=f"{kind}-act")
        ax.set_title(f"layer {layer}")
        ax.set_xlabel("eigenvalue rank")
    axes[0][0].set_ylabel("normalised eigenvalue λ̂")
    axes[0][0].legend()
    fig.suptitle(title, y=1.03)
    return fig


def plot_spectra(report: Any, path: str | Path, title: str = "") -> str:
    """Pre/post spectra of a `NerVEReport` (kept eigenvalues), one panel per layer, log scale."""
    from iclr26_core.report import save_figure

    if not report.eigenvalues:
        raise ValueError("the report kept no eigenvalues (analyze(..., keep_eigenvalues=True))")
    return save_figure(
        _spectra_axes(report.eigenvalues, title or f"NerVE spectra ({report.model_type})"), path
    )


def plot_spectra_dict(eigenvalues: dict, path: str | Path, title: str) -> str:
    from iclr26_core.report import save_figure

    return save_figure(_spectra_axes(eigenvalues, title), path)


def plot_metrics_by_layer(arms: dict[str, list[dict]], path: str | Path) -> str:
    """arms: {name: [layer dicts of the final checkpoint, averaged over seeds]} → 4 panels."""
    from iclr26_core.report import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.2))
    for (name, layers), color in zip(
        arms.items(), ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False
    ):
        x = [m["layer"] for m in layers]
        for ax, (key, label) in zip(axes[:3], _METRICS, strict=True):
            ax.plot(x, [m[f"{key}_pre"] for m in layers], "--o", color=color, label=f"{name} pre")
            ax.plot(x, [m[f"{key}_post"] for m in layers], "-o", color=color, label=f"{name} post")
            ax.set_title(label)
        axes[3].plot(x, [m["js"] for m in layers], "-o", color=color, label=name)
        axes[3].set_title("JS(pre, post)")
    for ax in axes:
        ax.set_xlabel("layer")
    axes[0].legend(fontsize=6)
    axes[3].legend(fontsize=7)
    return save_figure(fig, path)


def plot_trajectory(runs: dict[str, list[dict]], path: str | Path) -> str:
    """runs: {label: [{"step", "eval_loss", "layers": [...]}, ...]} → layer-mean metrics and loss vs step."""
    from iclr26_core.report import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.2))
    for label, traj in runs.items():
        steps = [p["step"] for p in traj]
        mean = lambda key, traj=traj: [float(np.mean([m[key] for m in p["layers"]])) for p in traj]  # noqa: E731
        axes[0].plot(steps, mean("se_pre"), label=label)
        axes[1].plot(steps, mean("pr_pre"), label=label)
        axes[2].plot(steps, mean("js"), label=label)
        pts = [(p["step"], p["eval_loss"]) for p in traj if np.isfinite(p["eval_loss"])]
        if pts:
            axes[3].plot(*zip(*pts, strict=True), "-o", ms=3, label=label)
    for ax, t in zip(
        axes, ("SE pre (layer mean)", "PR pre (layer mean)", "JS (layer mean)", "held-out loss"), strict=True
    ):
        ax.set_title(t)
        ax.set_xlabel("step")
    axes[3].legend(fontsize=6)
    return save_figure(fig, path)
