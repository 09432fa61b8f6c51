"""Figures: the resonance curve, per-feature recovery histograms, firing frequencies against the TAF lines."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch


def plot_resonance(
    rows: Sequence[dict], path: str | Path, tau: float = 0.9, narrow: Sequence[dict] | None = None, labels=()
) -> str:
    """FRR@τ against p/f on a log axis (``narrow``: a second sweep, e.g. the heavy-superposition case)."""
    from iclr26_core.report import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    labels = list(labels) or ["", ""]
    ax.plot([r["ratio"] for r in rows], [r[f"frr@{tau:g}"] for r in rows], "o-", label=labels[0])
    if narrow:
        ax.plot([r["ratio"] for r in narrow], [r[f"frr@{tau:g}"] for r in narrow], "s--", label=labels[1])
        ax.legend(fontsize=7)
    ax.set_xscale("log")
    ratios = sorted({r["ratio"] for r in [*rows, *(narrow or [])]})
    ax.set_xticks(ratios, [f"1/{1 / r:g}" if r < 1 else f"{r:g}" for r in ratios])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.axvline(1.0, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("target frequency / feature frequency  (p/f)")
    ax.set_ylabel(f"FRR@{tau:g}")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("neuron resonance (BA, K = 1)")
    return save_figure(fig, path)


def plot_recovery(max_cos: Sequence[float], path: str | Path, title: str = "") -> str:
    """Histogram of max_m cos(d_m, v_i) over the true features i."""
    from iclr26_core.report import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.hist(list(max_cos), bins=20, range=(0.0, 1.0))
    for t in (0.8, 0.9):
        ax.axvline(t, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("best cosine of each true feature")
    ax.set_ylabel("features")
    ax.set_title(title)
    return save_figure(fig, path)


def plot_firing(
    freq: torch.Tensor,
    path: str | Path,
    groups: torch.Tensor | None = None,
    taf: torch.Tensor | None = None,
    title: str = "",
) -> str:
    """Neuron firing frequencies (log scale), by group, with each group's TAF as a line."""
    from iclr26_core.report import pyplot, save_figure

    plt = pyplot()
    freq = torch.as_tensor(freq).double()
    fig, ax = plt.subplots(figsize=(5.0, 3.2))
    floor = 0.5 / max(1, 8192)
    if groups is None:
        order = freq.argsort(descending=True)
        ax.plot(range(len(freq)), freq[order].clamp_min(floor), ".", ms=3)
        ax.set_xlabel("neuron (sorted by frequency)")
    else:
        k_max = int(groups.max()) + 1
        for k in range(k_max):
            f = freq[groups == k].clamp_min(floor)
            ax.plot([k + 0.6 * (i / max(1, len(f)) - 0.5) for i in range(len(f))], f, ".", ms=3)
            if taf is not None:
                ax.hlines(float(taf[k]), k - 0.4, k + 0.4, color="k", lw=1.2)
        ax.set_xticks(range(k_max))
        ax.set_xlabel("group (line: target activation frequency)")
    ax.set_yscale("log")
    ax.set_ylabel("firing frequency (dead at bottom)")
    ax.set_title(title)
    return save_figure(fig, path)
