"""The two figures: KL over decoding steps, and bytes per block over steps with the budget line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from iclr26_core.report import pyplot, save_figure


def kl_figure(curves: dict[str, Sequence[float]], path: str | Path, title: str = "") -> str:
    """One line per method: KL(FP ‖ method) per decoding step (log scale)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for name, kl in curves.items():
        ax.plot(range(1, len(kl) + 1), [max(float(v), 1e-12) for v in kl], label=name, lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("decoding step (cached tokens)")
    ax.set_ylabel("KL(FP ‖ quantised cache)")
    ax.set_title(title or "KL vs the full-precision cache, teacher-forced")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def memory_figure(
    traces: Sequence[Sequence[tuple[int, int, int]]],
    budgets: Sequence[float],
    path: str | Path,
    title: str = "",
) -> str:
    """Bytes of each block's main cache over cached tokens (bits annotated at each change), budgets dashed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, (trace, budget) in enumerate(zip(traces, budgets)):
        tokens = [t for t, _, _ in trace]
        color = f"C{i % 10}"
        ax.plot(tokens, [b / 1024 for _, _, b in trace], color=color, lw=1.2, label=f"block {i}")
        ax.axhline(budget / 1024, color=color, ls="--", lw=0.8)
        last = None
        for t, bits, b in trace:
            if bits != last:
                ax.annotate(f"{bits}b", (t, b / 1024), fontsize=7, color=color)
                last = bits
    ax.set_xlabel("cached tokens")
    ax.set_ylabel("main cache (KiB)")
    ax.set_title(title or "PM-KVQ memory per block (dashed: budget)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def bits_figure(
    traces: dict[str, Sequence[Sequence[tuple[int, int, int]]]], path: str | Path, title: str = ""
) -> str:
    """Bit-width of every block's main cache over cached tokens, one panel per run (rows: blocks)."""
    import numpy as np

    plt = pyplot()
    fig, axes = plt.subplots(1, len(traces), figsize=(5.5 * len(traces), 4.2), squeeze=False)
    levels = [16, 8, 4, 2]
    for ax, (name, trace) in zip(axes[0], traces.items()):
        n_tok = max(t for tr in trace for t, _, _ in tr)
        grid = np.full((len(trace), n_tok), np.nan)
        for i, tr in enumerate(trace):
            starts = [0] + [t for t, _, _ in tr[1:]]  # a prefill's tokens hold the bits of its first record
            for a, b, (_, bits, _) in zip(starts, [*starts[1:], n_tok], tr):
                grid[i, a:b] = levels.index(bits)
        im = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="viridis_r", vmin=0, vmax=3)
        ax.set_xlabel("cached tokens")
        ax.set_ylabel("block")
        ax.set_title(name, fontsize=9)
    cbar = fig.colorbar(im, ax=axes[0].tolist(), ticks=range(4))
    cbar.ax.set_yticklabels([f"{b} bit" for b in levels])
    fig.suptitle(title or "PM-KVQ bit-width per block while decoding")
    return save_figure(fig, path)
